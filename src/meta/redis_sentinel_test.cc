// Sentinel URLs and wait-replicas of the Redis engine, against real redis-server processes.
// The Sentinel is a fake here (a thread that answers SENTINEL get-master-addr-by-name the
// way it is told), so that a test can point it at a replica, at nothing, or make it hang;
// tests/test_redis_failover.py runs real Sentinels through real failovers.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/url.h"
#include "meta/kv_engine.h"
#include "meta/redis_options.h"
#include "meta/redis_sentinel.h"
#include "meta/redis_test_util.h"

namespace tierfs {
namespace {

using redis_test::RawClient;
using redis_test::ThrowawayRedis;
using Clock = std::chrono::steady_clock;

// A listening socket on 127.0.0.1 and a free port; its descriptor.
int ListenOnLoopback(int* port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  *port = ntohs(addr.sin_port);
  listen(fd, 16);
  return fd;
}

// Answers every SENTINEL command with the address it holds (nil when empty), or never
// answers (hang). Connections are served one after another on one thread.
class FakeSentinel {
 public:
  FakeSentinel() : fd_(ListenOnLoopback(&port_)) {
    thread_ = std::thread([this] { Serve(); });
  }
  ~FakeSentinel() {
    stop_ = true;
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
  }
  int port() const { return port_; }
  void Name(const std::string& host, int port) {
    std::lock_guard<std::mutex> lock(mu_);
    answer_ = "*2\r\n$" + std::to_string(host.size()) + "\r\n" + host + "\r\n$" +
              std::to_string(std::to_string(port).size()) + "\r\n" + std::to_string(port) + "\r\n";
  }
  void Unknown() {
    std::lock_guard<std::mutex> lock(mu_);
    answer_ = "$-1\r\n";
  }
  std::atomic<int> asked{0};

 private:
  void Serve() {
    while (!stop_) {
      int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      std::string buf;
      char tmp[512];
      // A command of three arguments is complete after seven CRLFs.
      for (;;) {
        size_t crlf = 0;
        for (size_t i = 0; i + 1 < buf.size(); ++i) crlf += buf[i] == '\r' && buf[i + 1] == '\n';
        if (crlf >= 7) {
          ++asked;
          std::string a;
          {
            std::lock_guard<std::mutex> lock(mu_);
            a = answer_;
          }
          if (send(c, a.data(), a.size(), MSG_NOSIGNAL) < 0) break;
          buf.clear();
        }
        ssize_t n = recv(c, tmp, sizeof(tmp), 0);
        if (n <= 0) break;
        buf.append(tmp, n);
      }
      close(c);
    }
  }
  int port_ = 0;  // before fd_: its initializer sets port_
  int fd_ = -1;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::string answer_ = "$-1\r\n";
  std::thread thread_;
};

// Accepts connections (the kernel's backlog does) and never answers.
class HungSentinel {
 public:
  HungSentinel() : fd_(ListenOnLoopback(&port_)) {}
  ~HungSentinel() { close(fd_); }
  int port() const { return port_; }

 private:
  int port_ = 0;  // before fd_: its initializer sets port_
  int fd_ = -1;
};

std::string SentinelUrl(const std::vector<int>& ports, const std::string& query = "", const std::string& db = "0") {
  std::string url = "redis://tierfs";
  for (int p : ports) url += ",127.0.0.1:" + std::to_string(p);
  return url + "/" + db + (query.empty() ? "" : "?" + query);
}

Status Put(KvEngine& e, const std::string& k, const std::string& v) {
  return e.Txn([&](KvTxn& t) { return t.Put(k, v); });
}

TEST(RedisSentinel, UrlsName) {
  auto u = ParseUrl("redis://:pw@mymaster,10.0.0.1,10.0.0.2:26380,[::1]:26381/3?wait-replicas=2&timeout=5s");
  ASSERT_TRUE(u.ok());
  auto o = redis::ParseOptions(*u);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->master_name, "mymaster");
  ASSERT_EQ(o->sentinels.size(), 3u);
  EXPECT_EQ(o->sentinels[0], std::make_pair(std::string("10.0.0.1"), 26379));
  EXPECT_EQ(o->sentinels[1], std::make_pair(std::string("10.0.0.2"), 26380));
  EXPECT_EQ(o->sentinels[2], std::make_pair(std::string("::1"), 26381));
  EXPECT_EQ(o->conn.db, 3);
  EXPECT_EQ(o->wait_replicas, 2);
  EXPECT_EQ(o->conn.password, "pw");
  EXPECT_EQ(o->describe.find("pw"), std::string::npos) << o->describe;

  // The last Sentinel may go without a port, like any other.
  auto last = ParseUrl("redis://m,h1:26390,h2/0");
  ASSERT_TRUE(last.ok()) << last.status().ToString();
  auto lo = redis::ParseOptions(*last);
  ASSERT_TRUE(lo.ok()) << lo.status().ToString();
  EXPECT_EQ(lo->sentinels[0], std::make_pair(std::string("h1"), 26390));
  EXPECT_EQ(lo->sentinels[1], std::make_pair(std::string("h2"), 26379));

  for (const char* bad : {"redis://h1:26379,h2/0", "redis://m,,h2/0", "redis://m,h1:99999/0",
                          "redis://m,h1/0?wait-replicas=x", "redis://m,h1/0?wait-replicas=-1",
                          "redis://h1/0?wait-replicas=1000"}) {
    auto bu = ParseUrl(bad);
    if (!bu.ok()) {  // a port out of range is the URL parser's to refuse
      EXPECT_EQ(bu.status().code(), EINVAL) << bad;
      continue;
    }
    auto bo = redis::ParseOptions(*bu);
    ASSERT_FALSE(bo.ok()) << bad;
    EXPECT_EQ(bo.status().code(), EINVAL) << bad;
    EXPECT_NE(bo.status().message().find("expected"), std::string::npos) << bo.status().message();
  }
}

TEST(RedisSentinel, FirstAnswerWinsOverDeadAndHungSentinels) {
  FakeSentinel live;
  live.Name("127.0.0.1", 6999);
  HungSentinel hung;
  int dead = FreePort();
  auto timeout = std::chrono::milliseconds(3000);
  auto t0 = Clock::now();
  auto addr = redis::AskSentinels("tierfs", {{"127.0.0.1", dead}, {"127.0.0.1", hung.port()}, {"127.0.0.1", live.port()}},
                                  timeout);
  ASSERT_TRUE(addr.ok()) << addr.status().ToString();
  EXPECT_EQ(addr->host, "127.0.0.1");
  EXPECT_EQ(addr->port, 6999);
  // Asked one after another, the hung Sentinel alone would cost the whole timeout.
  EXPECT_LT(Clock::now() - t0, timeout);

  // All refused: ECONNREFUSED naming each; a name none monitors: EINVAL.
  auto none = redis::AskSentinels("tierfs", {{"127.0.0.1", dead}, {"127.0.0.1", FreePort()}}, timeout);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), ECONNREFUSED) << none.status().ToString();
  EXPECT_NE(none.status().message().find("127.0.0.1:" + std::to_string(dead)), std::string::npos);
  live.Unknown();
  auto unknown = redis::AskSentinels("tierfs", {{"127.0.0.1", dead}, {"127.0.0.1", live.port()}}, timeout);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), EINVAL) << unknown.status().ToString();
  EXPECT_NE(unknown.status().message().find("monitors no master named 'tierfs'"), std::string::npos);
}

TEST(RedisSentinel, FollowsTheMasterAndRefusesAReplica) {
  ThrowawayRedis a, b;
  ASSERT_TRUE(a.ok() && b.ok());
  RawClient ra(a.port(), 0), rb(b.port(), 0);
  for (RawClient* c : {&ra, &rb}) c->Command({"CONFIG", "SET", "repl-diskless-sync-delay", "0"});
  EXPECT_EQ(rb.Command({"REPLICAOF", "127.0.0.1", std::to_string(a.port())}), "OK");
  FakeSentinel s;
  // Named a replica, the client never uses it: it waits for a master until its timeout.
  s.Name("127.0.0.1", b.port());
  auto e = OpenKvEngine(SentinelUrl({s.port()}, "timeout=1s"));
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), EIO) << e.status().ToString();
  EXPECT_NE(e.status().message().find("is not a master"), std::string::npos) << e.status().message();

  s.Name("127.0.0.1", a.port());
  auto opened = OpenKvEngine(SentinelUrl({s.port()}, "timeout=10s"));
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  auto& engine = **opened;
  ASSERT_TRUE(Put(engine, "before", "1").ok());
  auto synced = Clock::now() + std::chrono::seconds(20);
  while (rb.Command({"GET", "kbefore"}) != "1" && Clock::now() < synced) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }

  // A failover: b promoted, a demoted under the engine's pooled connection (its next
  // write gets READONLY), the Sentinel names b. The engine asks again and goes on.
  EXPECT_EQ(rb.Command({"REPLICAOF", "NO", "ONE"}), "OK");
  EXPECT_EQ(ra.Command({"REPLICAOF", "127.0.0.1", std::to_string(b.port())}), "OK");
  s.Name("127.0.0.1", b.port());
  int asked = s.asked;
  Status st = Put(engine, "after", "2");
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_GT(s.asked.load(), asked);
  EXPECT_EQ(rb.Command({"GET", "kafter"}), "2");
  std::string v;
  ASSERT_TRUE(engine.Txn([&](KvTxn& t) -> Status {
                      ASSIGN_OR_RETURN(auto got, t.Get("before"));
                      v = got.value_or("");
                      return Status::OK();
                    }, true).ok());
  EXPECT_EQ(v, "1");
}

TEST(RedisSentinel, WaitReplicasHoldsTheAcknowledgementUntilAReplicaHasTheCommit) {
  ThrowawayRedis a, b;
  ASSERT_TRUE(a.ok() && b.ok());
  // No replica: the commit applies on the master but is not acknowledged.
  auto lone = OpenKvEngine(a.Url(0) + "?wait-replicas=1&timeout=1s");
  ASSERT_TRUE(lone.ok()) << lone.status().ToString();
  Status st = Put(**lone, "k1", "v1");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), EIO);
  EXPECT_NE(st.message().find("only 0 of the 1 replicas"), std::string::npos) << st.message();

  RawClient ra(a.port(), 0), rb(b.port(), 0);
  ra.Command({"CONFIG", "SET", "repl-diskless-sync-delay", "0"});
  EXPECT_EQ(rb.Command({"REPLICAOF", "127.0.0.1", std::to_string(a.port())}), "OK");
  auto deadline = Clock::now() + std::chrono::seconds(20);
  while (rb.Command({"GET", "kk1"}) != "v1" && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  auto waiting = OpenKvEngine(a.Url(0) + "?wait-replicas=1&timeout=10s");
  ASSERT_TRUE(waiting.ok()) << waiting.status().ToString();
  for (int i = 0; i < 50; ++i) {
    std::string k = "w" + std::to_string(i);
    ASSERT_TRUE(Put(**waiting, k, "x").ok());
    // Acknowledged only once the replica has it: it is there the moment Put returns.
    EXPECT_EQ(rb.Command({"GET", "k" + k}), "x") << k;
  }
}

}  // namespace
}  // namespace tierfs
