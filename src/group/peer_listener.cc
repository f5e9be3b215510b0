#include "group/peer_listener.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>

#include "common/clock.h"
#include "common/thread_pool.h"

namespace tierfs::group {
namespace {

constexpr int64_t kMs = 1000000;
// How often the event thread looks for connections past their deadline.
constexpr int kSweepMs = 100;

struct Conn {
  int fd = -1;
  std::string peer;
  std::string buf;  // bytes received and not yet consumed
  bool got_first_byte = false;
  int64_t deadline_ns = 0;
};

std::string PeerAddress(const sockaddr_storage& a) {
  char buf[INET6_ADDRSTRLEN] = "?";
  if (a.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&a)->sin_addr, buf, sizeof buf);
  } else if (a.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&a)->sin6_addr, buf, sizeof buf);
  }
  return buf;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

bool PercentDecode(const std::string& in, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out->push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size() || !std::isxdigit(static_cast<unsigned char>(in[i + 1])) ||
        !std::isxdigit(static_cast<unsigned char>(in[i + 2]))) {
      return false;
    }
    out->push_back(static_cast<char>(std::stoi(in.substr(i + 1, 2), nullptr, 16)));
    i += 2;
  }
  return true;
}

// Parses the head (request line and headers, without the blank line). False: malformed.
bool ParseHead(const std::string& head, ListenerRequest* req, bool* keep_alive) {
  size_t eol = head.find("\r\n");
  std::string line = head.substr(0, eol);
  size_t sp1 = line.find(' ');
  size_t sp2 = sp1 == std::string::npos ? std::string::npos : line.find(' ', sp1 + 1);
  if (sp2 == std::string::npos) return false;
  req->method = line.substr(0, sp1);
  std::string target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string version = line.substr(sp2 + 1);
  if (version != "HTTP/1.1" && version != "HTTP/1.0") return false;
  size_t q = target.find('?');
  if (!PercentDecode(target.substr(0, q), &req->path)) return false;
  if (q != std::string::npos) {
    std::string query = target.substr(q + 1);
    size_t pos = 0;
    while (pos <= query.size()) {
      size_t amp = query.find('&', pos);
      if (amp == std::string::npos) amp = query.size();
      std::string pair = query.substr(pos, amp - pos);
      if (!pair.empty()) {
        size_t eq = pair.find('=');
        std::string name, value;
        if (!PercentDecode(pair.substr(0, eq), &name) ||
            !PercentDecode(eq == std::string::npos ? "" : pair.substr(eq + 1), &value)) {
          return false;
        }
        req->params[name] = value;
      }
      pos = amp + 1;
    }
  }
  while (eol != std::string::npos) {
    size_t start = eol + 2;
    eol = head.find("\r\n", start);
    std::string h = head.substr(start, eol == std::string::npos ? std::string::npos : eol - start);
    if (h.empty()) continue;
    if (h[0] == ' ' || h[0] == '\t') return false;  // obsolete line folding
    size_t colon = h.find(':');
    if (colon == std::string::npos || colon == 0) return false;
    req->headers[Lower(h.substr(0, colon))] = Trim(h.substr(colon + 1));
  }
  // Only requests without a body are served.
  auto cl = req->headers.find("content-length");
  if ((cl != req->headers.end() && cl->second != "0") || req->headers.count("transfer-encoding")) return false;
  std::string conn = Lower(req->headers.count("connection") ? req->headers["connection"] : "");
  *keep_alive = version == "HTTP/1.1" ? conn != "close" : conn == "keep-alive";
  return true;
}

const char* Reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Unknown";
  }
}

// Sends everything in iov (modified) before deadline_ns; false on an error or timeout.
bool SendAll(int fd, std::vector<iovec> iov, int64_t deadline_ns) {
  size_t i = 0;
  while (i < iov.size()) {
    if (iov[i].iov_len == 0) {
      ++i;
      continue;
    }
    msghdr m{};
    m.msg_iov = iov.data() + i;
    m.msg_iovlen = std::min<size_t>(iov.size() - i, IOV_MAX);
    ssize_t n = sendmsg(fd, &m, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN) return false;
      int64_t left = (deadline_ns - MonoNanos()) / kMs;
      if (left <= 0) return false;
      pollfd p{fd, POLLOUT, 0};
      if (poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000))) < 0 && errno != EINTR) return false;
      continue;
    }
    size_t left = static_cast<size_t>(n);
    while (left > 0 && i < iov.size()) {
      size_t take = std::min(left, iov[i].iov_len);
      iov[i].iov_base = static_cast<char*>(iov[i].iov_base) + take;
      iov[i].iov_len -= take;
      left -= take;
      if (iov[i].iov_len == 0) ++i;
    }
  }
  return true;
}

}  // namespace

void ListenerReply::SetText(int code, std::string text) {
  status = code;
  content_type = "text/plain";
  body = {std::make_shared<const std::string>(std::move(text) + "\n")};
}

struct PeerListener::Impl {
  ListenerOptions o;
  Handler handler;
  int listen_fd = -1, epoll_fd = -1, wake_fd = -1;
  std::thread loop;
  std::unique_ptr<ThreadPool> workers;
  std::atomic<bool> stopping{false};

  std::mutex mu;  // guards what follows
  std::vector<std::unique_ptr<Conn>> returned;  // keep-alive connections back from workers
  std::map<std::string, int> per_address;
  std::set<int> busy;  // descriptors a worker answers on
  int open = 0;

  std::unordered_map<int, std::unique_ptr<Conn>> conns;  // the event thread's (reading or idle)
  std::atomic<uint64_t> accepted{0}, refused{0}, timed_out{0}, bad{0}, busy_replies{0};

  void Close(std::unique_ptr<Conn> c) {
    close(c->fd);
    std::lock_guard<std::mutex> l(mu);
    if (--per_address[c->peer] <= 0) per_address.erase(c->peer);
    --open;
  }

  void Wake() {
    uint64_t one = 1;
    if (write(wake_fd, &one, sizeof one) < 0) {
      // The counter is already non-zero: the loop wakes anyway.
    }
  }

  // An immediate short answer from the event thread (best effort), then the connection goes.
  void Refuse(std::unique_ptr<Conn> c, int status, const std::string& why) {
    std::string msg = "HTTP/1.1 " + std::to_string(status) + " " + Reason(status) +
                      "\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: " +
                      std::to_string(why.size() + 1) + "\r\n\r\n" + why + "\n";
    ssize_t n = send(c->fd, msg.data(), msg.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)n;
    Close(std::move(c));
  }

  void Accept() {
    for (;;) {
      sockaddr_storage addr{};
      socklen_t len = sizeof addr;
      int fd = accept4(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) spdlog::warn("cache group listener: accept: {}", strerror(errno));
        return;
      }
      auto c = std::make_unique<Conn>();
      c->fd = fd;
      c->peer = PeerAddress(addr);
      bool over;
      {
        std::lock_guard<std::mutex> l(mu);
        int& mine = per_address[c->peer];
        over = open >= o.max_connections || mine >= o.max_per_address;
        ++mine;
        ++open;
      }
      if (over) {
        refused++;
        Close(std::move(c));
        continue;
      }
      accepted++;
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      Watch(std::move(c));
    }
  }

  // Waits for the connection's next request (new, or after a reply).
  void Watch(std::unique_ptr<Conn> c) {
    c->got_first_byte = !c->buf.empty();
    c->deadline_ns = MonoNanos() + (c->got_first_byte ? o.header_timeout_ms : o.idle_timeout_ms) * kMs;
    int fd = c->fd;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd;
    if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) {
      Close(std::move(c));
      return;
    }
    conns[fd] = std::move(c);
    // A pipelined request may already be complete.
    if (conns[fd]->buf.find("\r\n\r\n") != std::string::npos) Readable(fd);
  }

  void Readable(int fd) {
    auto it = conns.find(fd);
    if (it == conns.end()) return;
    Conn* c = it->second.get();
    char buf[4096];
    bool eof = false;
    while (c->buf.size() <= o.max_header_bytes) {
      ssize_t n = recv(fd, buf, sizeof buf, 0);
      if (n > 0) {
        if (!c->got_first_byte) {
          c->got_first_byte = true;
          c->deadline_ns = MonoNanos() + o.header_timeout_ms * kMs;
        }
        c->buf.append(buf, static_cast<size_t>(n));
        continue;
      }
      if (n == 0) eof = true;
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) eof = true;
      break;
    }
    size_t end = c->buf.find("\r\n\r\n");
    if (end == std::string::npos) {
      if (c->buf.size() > o.max_header_bytes) {
        bad++;
        return Take(fd, [&](std::unique_ptr<Conn> t) { Refuse(std::move(t), 400, "request head too large"); });
      }
      if (eof) Take(fd, [&](std::unique_ptr<Conn> t) { Close(std::move(t)); });
      return;
    }
    auto req = std::make_shared<ListenerRequest>();
    bool keep_alive = false;
    if (end > o.max_header_bytes || !ParseHead(c->buf.substr(0, end), req.get(), &keep_alive)) {
      bad++;
      return Take(fd, [&](std::unique_ptr<Conn> t) { Refuse(std::move(t), 400, "malformed request"); });
    }
    c->buf.erase(0, end + 4);
    req->peer = c->peer;
    Take(fd, [&](std::unique_ptr<Conn> t) { Dispatch(std::move(t), std::move(req), keep_alive && !eof); });
  }

  // Removes fd from the event thread's watch and hands its connection to f.
  template <class F>
  void Take(int fd, F f) {
    auto it = conns.find(fd);
    std::unique_ptr<Conn> c = std::move(it->second);
    conns.erase(it);
    epoll_ctl(epoll_fd, EPOLL_CTL_DEL, fd, nullptr);
    f(std::move(c));
  }

  void Dispatch(std::unique_ptr<Conn> c, std::shared_ptr<ListenerRequest> req, bool keep_alive) {
    int fd = c->fd;
    {
      std::lock_guard<std::mutex> l(mu);
      busy.insert(fd);
    }
    // The connection is owned by the task from here (a shared_ptr: std::function copies).
    auto owned = std::make_shared<std::unique_ptr<Conn>>(std::move(c));
    bool queued = workers->TrySubmit([this, owned, req, keep_alive] { Answer(std::move(*owned), *req, keep_alive); });
    if (!queued) {
      {
        std::lock_guard<std::mutex> l(mu);
        busy.erase(fd);
      }
      busy_replies++;
      Refuse(std::move(*owned), 503, "busy");
    }
  }

  void Answer(std::unique_ptr<Conn> c, const ListenerRequest& req, bool keep_alive) {
    ListenerReply reply;
    if (stopping) {
      reply.SetText(503, "stopping");
      keep_alive = false;
    } else {
      try {
        handler(req, &reply);
      } catch (const std::exception& e) {
        reply = ListenerReply();
        reply.SetText(500, std::string("internal error: ") + e.what());
      }
    }
    size_t length = 0;
    for (const auto& part : reply.body) length += part ? part->size() : 0;
    std::string head = "HTTP/1.1 " + std::to_string(reply.status) + " " + Reason(reply.status) +
                       "\r\nContent-Type: " + reply.content_type + "\r\nContent-Length: " + std::to_string(length) +
                       (keep_alive ? "\r\n" : "\r\nConnection: close\r\n");
    for (const auto& [name, value] : reply.headers) head += name + ": " + value + "\r\n";
    head += "\r\n";
    std::vector<iovec> iov{{head.data(), head.size()}};
    for (const auto& part : reply.body) {
      if (part && !part->empty()) iov.push_back({const_cast<char*>(part->data()), part->size()});
    }
    bool sent = SendAll(c->fd, std::move(iov), MonoNanos() + o.reply_timeout_ms * kMs);
    if (!sent) timed_out++;
    {
      std::lock_guard<std::mutex> l(mu);
      busy.erase(c->fd);
      if (sent && keep_alive && !stopping) {
        returned.push_back(std::move(c));
      }
    }
    if (c) {
      Close(std::move(c));
    } else {
      Wake();
    }
  }

  void Sweep() {
    int64_t now = MonoNanos();
    std::vector<int> expired;
    for (const auto& [fd, c] : conns) {
      if (now >= c->deadline_ns) expired.push_back(fd);
    }
    for (int fd : expired) {
      if (conns[fd]->got_first_byte) timed_out++;
      Take(fd, [&](std::unique_ptr<Conn> t) { Close(std::move(t)); });
    }
  }

  void Loop() {
    epoll_event events[64];
    int64_t next_sweep = MonoNanos() + kSweepMs * kMs;
    while (!stopping) {
      int n = epoll_wait(epoll_fd, events, 64, kSweepMs);
      for (int i = 0; i < n && !stopping; ++i) {
        int fd = events[i].data.fd;
        if (fd == listen_fd) {
          Accept();
        } else if (fd == wake_fd) {
          uint64_t v;
          if (read(wake_fd, &v, sizeof v) < 0) {
            // Nothing to read: another wake-up took it.
          }
          std::vector<std::unique_ptr<Conn>> back;
          {
            std::lock_guard<std::mutex> l(mu);
            back.swap(returned);
          }
          for (auto& c : back) Watch(std::move(c));
        } else {
          Readable(fd);
        }
      }
      if (MonoNanos() >= next_sweep) {
        Sweep();
        next_sweep = MonoNanos() + kSweepMs * kMs;
      }
    }
    std::vector<int> fds;
    for (const auto& [fd, c] : conns) fds.push_back(fd);
    for (int fd : fds) Take(fd, [&](std::unique_ptr<Conn> t) { Close(std::move(t)); });
  }
};

PeerListener::PeerListener(ListenerOptions options, Handler handler) : impl_(std::make_unique<Impl>()) {
  impl_->o = std::move(options);
  impl_->handler = std::move(handler);
}

PeerListener::~PeerListener() { Stop(); }

Status PeerListener::Start() {
  Impl& m = *impl_;
  std::string where = m.o.host + ":" + std::to_string(m.o.port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(m.o.host.empty() ? nullptr : m.o.host.c_str(), std::to_string(m.o.port).c_str(), &hints, &res);
  if (rc != 0) return Status::Err(EADDRNOTAVAIL, "cannot listen on " + where + ": " + gai_strerror(rc));
  int err = EADDRNOTAVAIL;
  for (addrinfo* a = res; a && m.listen_fd < 0; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    // Not SO_REUSEPORT: a second member on this host given the same address must fail to
    // start instead of sharing the port.
    int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, SOMAXCONN) != 0) {
      err = errno;
      close(fd);
      continue;
    }
    m.listen_fd = fd;
  }
  freeaddrinfo(res);
  if (m.listen_fd < 0) {
    return Status::Err(err == EADDRINUSE ? EADDRINUSE : EADDRNOTAVAIL,
                       "cannot listen on " + where + ": " + strerror(err) + " (in use, or not an address of this host)");
  }
  sockaddr_storage addr{};
  socklen_t alen = sizeof addr;
  getsockname(m.listen_fd, reinterpret_cast<sockaddr*>(&addr), &alen);
  port_ = addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                     : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  m.epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  m.wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (m.epoll_fd < 0 || m.wake_fd < 0) return Status::Err(errno, std::string("cache group listener: ") + strerror(errno));
  for (int fd : {m.listen_fd, m.wake_fd}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    epoll_ctl(m.epoll_fd, EPOLL_CTL_ADD, fd, &ev);
  }
  int threads = std::max(1, m.o.threads);
  m.workers = std::make_unique<ThreadPool>("tierfs-peer", threads, static_cast<size_t>(threads));
  m.loop = std::thread([&m] {
    pthread_setname_np(pthread_self(), "tierfs-peerloop");
    m.Loop();
  });
  return Status::OK();
}

void PeerListener::Stop() {
  Impl& m = *impl_;
  if (!m.loop.joinable()) return;
  m.stopping = true;
  m.Wake();
  m.loop.join();
  {
    // Replies on their way are cut short: nobody waits for them any more.
    std::lock_guard<std::mutex> l(m.mu);
    for (int fd : m.busy) shutdown(fd, SHUT_RDWR);
  }
  m.workers.reset();
  for (auto& c : m.returned) m.Close(std::move(c));
  m.returned.clear();
  for (int* fd : {&m.listen_fd, &m.epoll_fd, &m.wake_fd}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
}

ListenerStats PeerListener::stats() const {
  const Impl& m = *impl_;
  ListenerStats s;
  {
    std::lock_guard<std::mutex> l(const_cast<std::mutex&>(m.mu));
    s.connections = static_cast<uint64_t>(m.open);
  }
  s.accepted = m.accepted;
  s.refused = m.refused;
  s.timed_out = m.timed_out;
  s.bad_requests = m.bad;
  s.busy = m.busy_replies;
  return s;
}

}  // namespace tierfs::group
