// The cache group's listener against raw sockets: requests and keep-alive, connections
// that send slowly (they hold no worker and are closed after the header timeout), the
// limit per address, and requests with a body.
#include "group/peer_listener.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <vector>

namespace tierfs::group {
namespace {

int Connect(int port, const char* from = nullptr) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (from) {
    sockaddr_in src{};
    src.sin_family = AF_INET;
    inet_pton(AF_INET, from, &src.sin_addr);
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof src), 0);
  }
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  return fd;
}

void Send(int fd, const std::string& s) { ASSERT_EQ(send(fd, s.data(), s.size(), MSG_NOSIGNAL), ssize_t(s.size())); }

// Reads until the peer closes or `want` bytes of a reply arrived (at most 10 s).
std::string ReadSome(int fd, size_t want = 1 << 20) {
  std::string out;
  char buf[4096];
  while (out.size() < want) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 10000) <= 0) break;
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// True when the server closed the connection (within 10 s).
bool Closed(int fd) {
  char c;
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 10000) <= 0) return false;
  return recv(fd, &c, 1, 0) <= 0;
}

class PeerListenerTest : public ::testing::Test {
 protected:
  void Start(ListenerOptions o) {
    o.host = "127.0.0.1";
    listener_ = std::make_unique<PeerListener>(o, [this](const ListenerRequest& req, ListenerReply* res) {
      handled_++;
      res->SetText(200, req.path + "?" + (req.params.count("key") ? req.params.at("key") : "") + " from " + req.peer);
    });
    ASSERT_TRUE(listener_->Start().ok());
  }
  std::unique_ptr<PeerListener> listener_;
  std::atomic<int> handled_{0};
};

TEST_F(PeerListenerTest, ServesRequestsOnAKeptAliveConnection) {
  Start({});
  int fd = Connect(listener_->port());
  Send(fd, "GET /a?key=x%2Fy HTTP/1.1\r\nHost: h\r\n\r\n");
  std::string r1 = ReadSome(fd, 60);
  EXPECT_NE(r1.find("HTTP/1.1 200 OK"), std::string::npos) << r1;
  EXPECT_NE(r1.find("/a?x/y from 127.0.0.1"), std::string::npos) << r1;
  Send(fd, "GET /b HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
  std::string r2 = ReadSome(fd);
  EXPECT_NE(r2.find("/b? from"), std::string::npos) << r2;
  EXPECT_NE(r2.find("Connection: close"), std::string::npos) << r2;
  close(fd);
  EXPECT_EQ(handled_.load(), 2);
}

TEST_F(PeerListenerTest, SlowSendersHoldNoWorkerAndAreClosed) {
  ListenerOptions o;
  o.threads = 2;
  o.header_timeout_ms = 500;
  o.max_per_address = 100;
  Start(o);
  std::vector<int> slow;
  for (int i = 0; i < 20; ++i) {
    slow.push_back(Connect(listener_->port()));
    Send(slow.back(), "GET /slow HTTP/1.1\r\nHo");  // never finished
  }
  // A real request is answered meanwhile: the slow ones hold no worker.
  int fd = Connect(listener_->port());
  Send(fd, "GET /real HTTP/1.1\r\nConnection: close\r\n\r\n");
  EXPECT_NE(ReadSome(fd).find("/real?"), std::string::npos);
  close(fd);
  // And each slow one is closed once its head has taken the header timeout.
  for (int s : slow) {
    EXPECT_TRUE(Closed(s));
    close(s);
  }
  EXPECT_EQ(listener_->stats().timed_out, 20u);
  EXPECT_EQ(handled_.load(), 1);
}

TEST_F(PeerListenerTest, ConnectionsPerAddressAreLimited) {
  ListenerOptions o;
  o.max_per_address = 3;
  Start(o);
  std::vector<int> held;
  for (int i = 0; i < 3; ++i) held.push_back(Connect(listener_->port(), "127.0.0.7"));
  int over = Connect(listener_->port(), "127.0.0.7");
  EXPECT_TRUE(Closed(over)) << "a fourth connection from one address is closed at once";
  close(over);
  // Another address is served.
  int fd = Connect(listener_->port(), "127.0.0.8");
  Send(fd, "GET /other HTTP/1.1\r\nConnection: close\r\n\r\n");
  EXPECT_NE(ReadSome(fd).find("/other?"), std::string::npos);
  close(fd);
  for (int h : held) close(h);
  EXPECT_GE(listener_->stats().refused, 1u);
}

TEST_F(PeerListenerTest, RequestsWithABodyOrTooLargeAHeadAreRefused) {
  ListenerOptions o;
  o.max_header_bytes = 1024;
  Start(o);
  int fd = Connect(listener_->port());
  Send(fd, "PUT /x HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello");
  EXPECT_NE(ReadSome(fd).find("400 Bad Request"), std::string::npos);
  close(fd);
  fd = Connect(listener_->port());
  Send(fd, "GET /x HTTP/1.1\r\nX-Big: " + std::string(4000, 'a'));
  EXPECT_NE(ReadSome(fd).find("400 Bad Request"), std::string::npos);
  close(fd);
  EXPECT_EQ(handled_.load(), 0);
  EXPECT_EQ(listener_->stats().bad_requests, 2u);
}

}  // namespace
}  // namespace tierfs::group
