// Tests only: a scripted HTTP/1.1 server on a loopback port, one connection at a time, for
// the retry and error behaviour of the HTTP stores (s3_store_test.cc, azure_store_test.cc).
// The handler gets the request's number (from 1), its request line and body size, and
// returns the whole response; an empty one holds the connection silent until the client
// hangs up.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tierfs {

class TinyServer {
 public:
  using Handler = std::function<std::string(int n, const std::string& request_line, size_t body_size)>;

  explicit TinyServer(Handler handler) : handler_(std::move(handler)) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (bind(fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 || listen(fd_, 16) != 0 ||
        getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      ADD_FAILURE() << "cannot listen: " << strerror(errno);
    }
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Loop(); });
  }
  ~TinyServer() {
    stop_ = true;
    thread_.join();
    close(fd_);
  }
  int port() const { return port_; }
  int requests() const { return count_; }
  std::vector<size_t> body_sizes() {
    std::lock_guard<std::mutex> lock(mu_);
    return body_sizes_;
  }

  static std::string Reply(int status, const std::string& reason, const std::string& body) {
    return "HTTP/1.1 " + std::to_string(status) + " " + reason + "\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
  }
  static std::string S3ErrorReply(int status, const std::string& code) {
    return Reply(status, "Error",
                 "<?xml version=\"1.0\"?><Error><Code>" + code + "</Code><Message>scripted</Message></Error>");
  }

 private:
  // Waits until fd is readable or the server stops; false when stopping.
  bool WaitReadable(int fd) {
    while (!stop_) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 50) > 0) return true;
    }
    return false;
  }

  void Loop() {
    while (WaitReadable(fd_)) {
      int conn = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (conn < 0) continue;
      Serve(conn);
      close(conn);
    }
  }

  void Serve(int conn) {
    std::string in;
    size_t header_end = std::string::npos;
    size_t body_size = 0;
    char buf[65536];
    while (true) {
      if (header_end == std::string::npos) {
        header_end = in.find("\r\n\r\n");
        if (header_end != std::string::npos) {
          std::string lower = in.substr(0, header_end);
          for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
          size_t cl = lower.find("content-length:");
          if (cl != std::string::npos) body_size = std::strtoull(lower.c_str() + cl + 15, nullptr, 10);
        }
      }
      if (header_end != std::string::npos && in.size() >= header_end + 4 + body_size) break;
      if (!WaitReadable(conn)) return;
      ssize_t n = recv(conn, buf, sizeof(buf), 0);
      if (n <= 0) return;
      in.append(buf, static_cast<size_t>(n));
    }
    int n = ++count_;
    {
      std::lock_guard<std::mutex> lock(mu_);
      body_sizes_.push_back(body_size);
    }
    std::string response = handler_(n, in.substr(0, in.find("\r\n")), body_size);
    if (response.empty()) {
      // Hold the connection, silent, until the client hangs up.
      while (WaitReadable(conn) && recv(conn, buf, sizeof(buf), 0) > 0) {
      }
      return;
    }
    size_t off = 0;
    while (off < response.size()) {
      ssize_t w = send(conn, response.data() + off, response.size() - off, MSG_NOSIGNAL);
      if (w <= 0) return;
      off += static_cast<size_t>(w);
    }
  }

  Handler handler_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> count_{0};
  std::mutex mu_;
  std::vector<size_t> body_sizes_;
  std::thread thread_;
};

}  // namespace tierfs
