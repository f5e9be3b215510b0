// Test helpers for the Redis engine's tests: a free port, a raw client for looking behind
// the engine's back, and a throwaway redis-server child process.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "common/free_port_for_test.h"

namespace tierfs::redis_test {

namespace fs = std::filesystem;

// A raw hiredis connection for looking behind the engine's back.
class RawClient {
 public:
  RawClient(int port, int db, const std::string& password = "") {
    timeval tv{2, 0};
    ctx_ = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (ctx_ == nullptr || ctx_->err != 0) {
      ADD_FAILURE() << "cannot connect to 127.0.0.1:" << port;
      return;
    }
    if (!password.empty()) Command({"AUTH", password});
    Command({"SELECT", std::to_string(db)});
  }
  ~RawClient() {
    if (ctx_ != nullptr) redisFree(ctx_);
  }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  // Returns the reply as text: strings and statuses verbatim, integers in decimal,
  // "(nil)", "(error) ...", or array elements joined by ",".
  std::string Command(const std::vector<std::string>& args) {
    if (ctx_ == nullptr || ctx_->err != 0) return "(no connection)";
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    auto* r = static_cast<redisReply*>(
        redisCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(), lens.data()));
    if (r == nullptr) return "(no connection)";
    std::string out = Text(r);
    freeReplyObject(r);
    return out;
  }

 private:
  static std::string Text(const redisReply* r) {
    switch (r->type) {
      case REDIS_REPLY_STRING:
      case REDIS_REPLY_STATUS:
        return std::string(r->str, r->len);
      case REDIS_REPLY_ERROR:
        return "(error) " + std::string(r->str, r->len);
      case REDIS_REPLY_INTEGER:
        return std::to_string(r->integer);
      case REDIS_REPLY_NIL:
        return "(nil)";
      default: {
        std::string out;
        for (size_t i = 0; i < r->elements; ++i) out += (i ? "," : "") + Text(r->element[i]);
        return out;
      }
    }
  }
  redisContext* ctx_ = nullptr;
};

// A redis-server child process on a free port with its data in a temporary directory.
// Acknowledged writes survive SIGKILL (appendfsync always).
class ThrowawayRedis {
 public:
  explicit ThrowawayRedis(std::string password = "") : password_(std::move(password)) {
    char templ[] = "/tmp/tierfs-redis-test-XXXXXX";
    const char* made = mkdtemp(templ);
    if (made == nullptr) {
      ADD_FAILURE() << "mkdtemp failed";
      return;
    }
    dir_ = made;
    port_ = FreePort();
    Start();
  }
  ~ThrowawayRedis() {
    Kill();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  ThrowawayRedis(const ThrowawayRedis&) = delete;
  ThrowawayRedis& operator=(const ThrowawayRedis&) = delete;

  int port() const { return port_; }
  bool ok() const { return pid_ > 0; }
  std::string Url(int db, const std::string& userinfo = "") const {
    return "redis://" + userinfo + "127.0.0.1:" + std::to_string(port_) + "/" + std::to_string(db);
  }

  void Start() {
    std::vector<std::string> args = {"redis-server", "--port",    std::to_string(port_),
                                     "--bind",       "127.0.0.1", "--dir",
                                     dir_,           "--save",    "",
                                     "--appendonly", "yes",       "--appendfsync",
                                     "always",       "--logfile", dir_ + "/redis.log"};
    if (!password_.empty()) {
      args.push_back("--requirepass");
      args.push_back(password_);
    }
    pid_t pid = fork();
    if (pid == 0) {
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      int null = open("/dev/null", O_RDWR);
      dup2(null, 1);
      dup2(null, 2);
      execvp("redis-server", argv.data());
      _exit(127);
    }
    ASSERT_GT(pid, 0);
    pid_ = pid;
    // Ready when it answers (NOAUTH counts: it is up) and has loaded its data.
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < until) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = 0;
        FAIL() << "redis-server exited early (is it on PATH?), status " << status;
      }
      timeval tv{1, 0};
      redisContext* c = redisConnectWithTimeout("127.0.0.1", port_, tv);
      if (c != nullptr && c->err == 0) {
        auto* r = static_cast<redisReply*>(redisCommand(c, "PING"));
        bool up = r != nullptr && (r->type == REDIS_REPLY_STATUS ||
                                   std::string(r->str, r->len).rfind("NOAUTH", 0) == 0);
        if (r != nullptr) freeReplyObject(r);
        redisFree(c);
        if (up) return;
      } else if (c != nullptr) {
        redisFree(c);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    FAIL() << "redis-server on port " << port_ << " did not come up";
  }

  // A crash: no shutdown, no final save.
  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = 0;
  }

 private:
  std::string password_;
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = 0;
};

}  // namespace tierfs::redis_test
