// The PostgreSQL engine when connections break (a fault-injecting TCP proxy in front of the
// shared test server: all cut at random moments, or precisely around COMMIT) and when the
// server restarts under running transactions (a throwaway server of this test's own, initdb
// and pg_ctl as user postgres, which needs root; skipped otherwise). Nothing acknowledged
// is lost, nothing applied twice, and no commit marker is left behind.
#include "meta/postgres_test_util.h"

namespace tierfs {
namespace {

using namespace pg_test;  // NOLINT


// A TCP proxy in front of the test server (on 127.0.0.1) that breaks connections on
// demand: all at once at any moment, or precisely around the next COMMIT.
class FaultProxy {
 public:
  enum class Fault {
    kNone,
    // Forward the next COMMIT, drop its reply and cut: the transaction did commit.
    kDropCommitReply,
    // Hold back the next COMMIT, let the replies before it through, then cut: the
    // transaction id reached the client but COMMIT never reached the server.
    kWithholdCommit,
    // Forward the next COMMIT, then drop every reply (the commit marker's included) and
    // cut once COMMIT's own reply comes: the transaction did commit, and the client never
    // learned that its marker was set.
    kDropRepliesFromCommit,
    // Hold back the next COMMIT and drop every reply from there (the marker's included),
    // then cut: COMMIT never reached the server, and the client cannot tell from its
    // replies either.
    kWithholdCommitAndReplies,
    // Forward the next COMMIT, then drop every reply and keep the connection open: the
    // client gives up at its io-timeout while the server's side lives on, until the
    // client closes its end.
    kStallRepliesFromCommit,
  };

  explicit FaultProxy(int port) : target_port_(port) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        listen(listen_fd_, 64) != 0 ||
        getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      return;
    }
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { AcceptLoop(); });
  }
  ~FaultProxy() {
    stop_ = true;
    shutdown(listen_fd_, SHUT_RDWR);
    close(listen_fd_);
    if (acceptor_.joinable()) acceptor_.join();
    CutAll();
    std::vector<std::thread> pumps;
    {
      std::lock_guard<std::mutex> lock(mu_);
      pumps.swap(pumps_);
    }
    for (auto& t : pumps) t.join();
  }
  int port() const { return port_; }

  // Applies fault to the next COMMIT on any connection, once.
  void Arm(Fault fault) { fault_ = fault; }
  bool armed() const { return fault_.load() != Fault::kNone; }

  // Breaks every open connection in both directions at once.
  void CutAll() {
    std::lock_guard<std::mutex> lock(mu_);
    for (int fd : open_fds_) shutdown(fd, SHUT_RDWR);
  }

 private:
  void AcceptLoop() {
    while (!stop_) {
      int client = accept(listen_fd_, nullptr, nullptr);
      if (client < 0) continue;
      int server = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      addr.sin_port = htons(static_cast<uint16_t>(target_port_));
      if (connect(server, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
        close(client);
        close(server);
        continue;
      }
      std::lock_guard<std::mutex> lock(mu_);
      open_fds_.insert(client);
      open_fds_.insert(server);
      pumps_.emplace_back([this, client, server] { Pump(client, server); });
    }
  }

  // Position of needle in data, or npos. Messages this small arrive in one piece.
  static size_t Find(const char* data, size_t n, std::string_view needle) {
    return std::string_view(data, n).find(needle);
  }

  // Forwards between client a and server b until either side closes or a fault cuts.
  void Pump(int a, int b) {
    // The text of COMMIT in the client's Parse message, and the server's CommandComplete.
    static const std::string kCommitSql("COMMIT\0", 7);
    static const std::string kMarkStmt("tierfs_mark\0", 12);
    static const std::string kCommitReply(
        "C\0\0\0\x0b"
        "COMMIT\0",
        12);
    char buf[16384];
    bool withholding = false;  // dropping client data; cut at cut_at
    bool muting = false;       // dropping server data (kDropRepliesFromCommit, ...WithReplies)
    bool stalling = false;     // dropping server data, never cutting (kStallRepliesFromCommit)
    bool marked = false;       // the client sent a write transaction's marker, not yet its COMMIT
    Clock::time_point cut_at;
    for (;;) {
      pollfd fds[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
      if (poll(fds, 2, 20) < 0 && errno != EINTR) break;
      if (stop_ || (withholding && Clock::now() >= cut_at)) break;
      bool done = false;
      for (int i = 0; i < 2 && !done; ++i) {
        if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
        ssize_t n = read(fds[i].fd, buf, sizeof(buf));
        if (n <= 0) {
          done = true;
          break;
        }
        size_t forward = static_cast<size_t>(n);
        const bool from_client = i == 0;
        if (from_client && withholding) continue;
        if (!from_client && stalling) continue;
        if (!from_client && muting) {
          if (Find(buf, forward, kCommitReply) != std::string::npos) done = true;
          continue;
        }
        Fault fault = fault_.load();
        // The COMMIT of a write transaction: its marker update comes right before it, in
        // this read or the one before (a read-only transaction's COMMIT, sent without
        // waiting, may reach the proxy late, and a new connection plants its marker with
        // synchronous_commit = local).
        if (from_client) {
          if (Find(buf, forward, "synchronous_commit") != std::string::npos) {
            marked = false;
          } else if (Find(buf, forward, kMarkStmt) != std::string::npos) {
            marked = true;
          }
        }
        const bool write_commit = marked;
        if (from_client && (fault == Fault::kWithholdCommit ||
                            (fault == Fault::kWithholdCommitAndReplies && write_commit))) {
          size_t at = Find(buf, forward, kCommitSql);
          if (at != std::string::npos && fault_.compare_exchange_strong(fault, Fault::kNone)) {
            forward = at;  // the server gets a torn message and then nothing
            withholding = true;
            muting = fault == Fault::kWithholdCommitAndReplies;
            cut_at = Clock::now() + std::chrono::milliseconds(300);
          }
        }
        if (from_client && fault == Fault::kDropRepliesFromCommit && write_commit &&
            Find(buf, forward, kCommitSql) != std::string::npos &&
            fault_.compare_exchange_strong(fault, Fault::kNone)) {
          muting = true;  // COMMIT goes through; nothing comes back
        }
        if (from_client && fault == Fault::kStallRepliesFromCommit && write_commit &&
            Find(buf, forward, kCommitSql) != std::string::npos &&
            fault_.compare_exchange_strong(fault, Fault::kNone)) {
          stalling = true;
        }
        if (!from_client && fault == Fault::kDropCommitReply) {
          size_t at = Find(buf, forward, kCommitReply);
          if (at != std::string::npos && fault_.compare_exchange_strong(fault, Fault::kNone)) {
            forward = at;
            done = true;  // cut once the replies before it are through
          }
        }
        if (from_client && Find(buf, static_cast<size_t>(n), kCommitSql) != std::string::npos) marked = false;
        for (size_t off = 0; off < forward;) {
          ssize_t w = send(fds[1 - i].fd, buf + off, forward - off, MSG_NOSIGNAL);
          if (w <= 0) {
            done = true;
            break;
          }
          off += static_cast<size_t>(w);
        }
      }
      if (done) break;
    }
    std::lock_guard<std::mutex> lock(mu_);
    open_fds_.erase(a);
    open_fds_.erase(b);
    close(a);
    close(b);
  }

  int target_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<Fault> fault_{Fault::kNone};
  std::thread acceptor_;
  std::mutex mu_;
  std::set<int> open_fds_;          // guarded by mu_
  std::vector<std::thread> pumps_;  // guarded by mu_
};

// After writers were cut off or restarted: every acknowledged increment is in the
// counter, and at most the ambiguous ones more; every key an acknowledged writer wrote is
// present. Returns the counter and how many "w" keys are present.
std::pair<uint64_t, size_t> ExpectNoLostWrites(KvEngine& e, const std::vector<std::vector<std::string>>& written,
                                               uint64_t acknowledged, uint64_t ambiguous) {
  uint64_t counter = ReadCounter(e, "counter");
  EXPECT_GE(counter, acknowledged);
  EXPECT_LE(counter, acknowledged + ambiguous);
  std::set<std::string> present;
  EXPECT_TRUE(e.Txn(
                   [&](KvTxn& t) {
                     present.clear();
                     return t.Scan("w", PrefixEnd("w"), 0, [&](std::string_view k, auto) {
                       present.emplace(k);
                       return true;
                     });
                   },
                   true)
                  .ok());
  size_t lost = 0;
  for (const auto& keys : written) {
    for (const auto& k : keys) lost += present.count(k) == 0;
  }
  EXPECT_EQ(lost, 0u);
  return {counter, present.size()};
}

// Connections cut at random moments, many of them while a COMMIT is in flight: every
// transaction either succeeds exactly once or fails with the "may or may not" EIO, and
// nothing acknowledged is lost.
TEST(PostgresEngine, ConnectionsCutAtRandomMomentsLoseNothing) {
  const char* base = getenv("TIERFS_TEST_PG_URL");
  if (base == nullptr || *base == '\0') GTEST_SKIP() << "no test server: run through ctest";
  std::string url = base;  // postgres://user:pw@127.0.0.1:PORT
  size_t colon = url.rfind(':');
  int server_port = atoi(url.c_str() + colon + 1);
  FaultProxy proxy(server_port);
  ASSERT_NE(proxy.port(), 0);
  std::string own = EngineUrl();
  std::string proxied = url.substr(0, url.rfind('@') + 1) +
                        "127.0.0.1:" + std::to_string(proxy.port()) + own.substr(own.rfind('/'));
  const bool psql = HavePsql();
  auto markers = [&] {
    std::string n;
    Psql(DbUrl(kDb), std::string("SELECT count(*) FROM ") + kSchema + ".tierfs_commits", &n);
    return atoi(n.c_str());
  };
  const int markers_before = psql ? markers() : 0;
  auto e = MustOpen(proxied);
  ASSERT_NE(e, nullptr);
  ASSERT_TRUE(e->Reset().ok());

  constexpr int kWriters = 4;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> acknowledged{0}, ambiguous{0};
  std::atomic<int> failures{0};
  std::vector<std::vector<std::string>> written(kWriters);
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      for (int i = 0; !stop.load(); ++i) {
        std::string key = "w" + std::to_string(w) + "/" + std::to_string(i);
        Status st = e->Txn([&](KvTxn& t) -> Status {
          ASSIGN_OR_RETURN(auto v, t.Get("counter"));
          uint64_t n = v ? ByteReader(*v).U64() : 0;
          RETURN_IF_ERROR(t.Put(key, "v"));
          return t.Put("counter", EncodeU64(n + 1));
        });
        if (st.ok()) {
          acknowledged++;
          written[w].push_back(key);
        } else if (st.code() == EIO &&
                   st.message().find("may or may not have been applied") != std::string::npos) {
          ambiguous++;
        } else {
          failures++;
          ADD_FAILURE() << st.ToString();
        }
      }
    });
  }
  std::mt19937 rng(7);
  for (int cut = 0; cut < 40; ++cut) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20 + rng() % 100));
    proxy.CutAll();
  }
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);

  auto [counter, present] = ExpectNoLostWrites(*e, written, acknowledged.load(), ambiguous.load());
  // Each key is written by the same transaction as one increment.
  EXPECT_EQ(present, counter);
  std::cout << "cut test: " << acknowledged.load() << " acknowledged, " << ambiguous.load()
            << " ambiguous\n";
  // The commit markers of the connections cut are deleted through later connections, and
  // closing the engine deletes what is left with its own: none stays behind (before, a
  // deletion sent on a connection that was cut too was lost).
  e.reset();
  if (psql) {
    EXPECT_EQ(markers(), markers_before);
  }
}

// The connection breaks right around COMMIT, after the transaction id arrived: the
// engine asks the server what became of the transaction instead of guessing.
TEST(PostgresEngine, CommitOutcomeIsLookedUpAfterALostReply) {
  const char* base = getenv("TIERFS_TEST_PG_URL");
  if (base == nullptr || *base == '\0') GTEST_SKIP() << "no test server: run through ctest";
  std::string url = base;
  FaultProxy proxy(atoi(url.c_str() + url.rfind(':') + 1));
  ASSERT_NE(proxy.port(), 0);
  std::string own = EngineUrl();
  const std::string proxied = url.substr(0, url.rfind('@') + 1) + "127.0.0.1:" + std::to_string(proxy.port()) +
                              own.substr(own.rfind('/'));
  auto e = MustOpen(proxied);
  ASSERT_NE(e, nullptr);
  ASSERT_TRUE(e->Reset().ok());
  ASSERT_TRUE(Increment(*e, "n").ok());
  int runs = 0;
  auto increment = [&](KvTxn& t) -> Status {
    ++runs;
    ASSIGN_OR_RETURN(auto v, t.Get("n"));
    return t.Put("n", EncodeU64(ByteReader(*v).U64() + 1));
  };
  // One increment through `engine` with `fault` armed: it succeeds, its callback ran
  // want_runs times, and the counter reads want_n.
  auto outcome = [&](KvEngine& engine, FaultProxy::Fault fault, int want_runs, uint64_t want_n) {
    runs = 0;
    proxy.Arm(fault);
    Status st = engine.Txn(increment);
    EXPECT_FALSE(proxy.armed()) << "the fault never triggered";
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(runs, want_runs);
    EXPECT_EQ(ReadCounter(*e, "n"), want_n);
  };

  // COMMIT ran but its reply was lost: success, and the callback is not run again.
  outcome(*e, FaultProxy::Fault::kDropCommitReply, 1, 2);
  // COMMIT never reached the server: the transaction is run again, once.
  outcome(*e, FaultProxy::Fault::kWithholdCommit, 2, 3);
  // Neither the marker's reply nor COMMIT's came back, and COMMIT ran: once its backend is
  // gone the marker says so (before, an EIO "may or may not have been applied").
  outcome(*e, FaultProxy::Fault::kDropRepliesFromCommit, 1, 4);
  // No reply either, and COMMIT never arrived: run again, once.
  outcome(*e, FaultProxy::Fault::kWithholdCommitAndReplies, 2, 5);

  // COMMIT ran and then nothing came back on a connection that stays open: the client
  // gives up at its io-timeout, closes its end so that the backend ends, and reads the
  // marker once it has (before that close, the backend stayed, idle, until the timeout).
  // (io-timeout 3 s: a shorter one expires on a loaded machine before the fault, and the
  // transaction runs twice for that.)
  auto quick = MustOpen(WithQuery(proxied, "timeout=30&io-timeout=3"));
  ASSERT_NE(quick, nullptr);
  outcome(*quick, FaultProxy::Fault::kStallRepliesFromCommit, 1, 6);
}

// A PostgreSQL server of this test's own, in a temporary directory on a free port.
class OwnServer {
 public:
  // Empty error() when the server runs.
  OwnServer() {
    if (geteuid() != 0) {
      error_ = "needs root (runs initdb and pg_ctl as user postgres)";
      return;
    }
    if (getpwnam("postgres") == nullptr || !fs::exists(std::string(kPgBin) + "/initdb")) {
      error_ = std::string("needs PostgreSQL 15 server binaries in ") + kPgBin;
      return;
    }
    char templ[] = "/tmp/tierfs-pg-own-XXXXXX";
    if (mkdtemp(templ) == nullptr) {
      error_ = "mkdtemp failed";
      return;
    }
    dir_ = templ;
    port_ = FreePort();
    std::ofstream(dir_ + "/pw") << kPassword << "\n";
    std::string out;
    if (Run("chown -R postgres:postgres " + dir_ + " && runuser -u postgres -- " + kPgBin +
                "/initdb -D " + dir_ + "/data -U postgres --pwfile " + dir_ +
                "/pw -A scram-sha-256 -E UTF8 --locale=C.UTF-8 --no-sync",
            &out) != 0) {
      error_ = "initdb failed: " + out;
      return;
    }
    if (Run(PgCtl("start -o \"-p " + std::to_string(port_) + " -c listen_addresses=127.0.0.1 -k " +
                  dir_ + " -c fsync=off -c full_page_writes=off\""),
            &out) != 0) {
      error_ = "pg_ctl start failed: " + out;
      return;
    }
    started_ = true;
  }
  ~OwnServer() {
    if (started_) Run(PgCtl("-m immediate stop"));
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  OwnServer(const OwnServer&) = delete;
  OwnServer& operator=(const OwnServer&) = delete;

  const std::string& error() const { return error_; }
  std::string Url() const {
    return std::string("postgres://postgres:") + kPassword + "@127.0.0.1:" + std::to_string(port_) +
           "/postgres";
  }
  bool Restart(std::string* out) { return Run(PgCtl("-m fast restart"), out) == 0; }

 private:
  static constexpr char kPassword[] = "own-test-pw";
  std::string PgCtl(const std::string& args) const {
    return "runuser -u postgres -- " + std::string(kPgBin) + "/pg_ctl -D " + dir_ + "/data -l " +
           dir_ + "/pg.log -w " + args;
  }

  std::string dir_, error_;
  int port_ = 0;
  bool started_ = false;
};

// Transactions keep running while the server restarts twice: they reconnect and carry on,
// and nothing acknowledged is lost. A commit whose outcome cannot be learned is reported
// as EIO "may or may not have been applied"; the counter must then lie within the bounds.
TEST(PostgresEngine, ServerRestartWhileTransactionsRun) {
  OwnServer server;
  if (!server.error().empty()) GTEST_SKIP() << server.error();
  auto e = MustOpen(server.Url() + "?timeout=60");
  ASSERT_NE(e, nullptr);
  constexpr int kWriters = 4;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> acknowledged{0}, ambiguous{0}, reads{0};
  std::atomic<int> failures{0};
  std::vector<std::vector<std::string>> written(kWriters);
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      for (int i = 0; !stop.load(); ++i) {
        std::string key = "w" + std::to_string(w) + "/" + std::to_string(i);
        Status st = e->Txn([&](KvTxn& t) -> Status {
          ASSIGN_OR_RETURN(auto v, t.Get("counter"));
          uint64_t n = v ? ByteReader(*v).U64() : 0;
          RETURN_IF_ERROR(t.Put("counter", EncodeU64(n + 1)));
          return t.Put(key, "v");
        });
        if (st.ok()) {
          acknowledged++;
          written[w].push_back(key);
        } else if (st.code() == EIO &&
                   st.message().find("may or may not have been applied") != std::string::npos) {
          ambiguous++;
        } else {
          failures++;
          ADD_FAILURE() << st.ToString();
        }
      }
    });
  }
  threads.emplace_back([&] {
    while (!stop.load()) {
      Status st = e->Txn(
          [&](KvTxn& t) {
            return t.Scan("w", PrefixEnd("w"), 100, [](auto, auto) { return true; });
          },
          true);
      if (st.ok()) {
        reads++;
      } else {
        failures++;
        ADD_FAILURE() << st.ToString();
      }
    }
  });
  for (int restart = 0; restart < 2; ++restart) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    uint64_t before = acknowledged.load();
    std::string out;
    ASSERT_TRUE(server.Restart(&out)) << out;
    // Progress after the restart, not just before it.
    auto deadline = Clock::now() + std::chrono::seconds(30);
    while (acknowledged.load() < before + 20 && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_GE(acknowledged.load(), before + 20) << "no progress after restart " << restart;
  }
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GT(reads.load(), 0u);

  ExpectNoLostWrites(*e, written, acknowledged.load(), ambiguous.load());
  std::cout << "restart test: " << acknowledged.load() << " increments acknowledged, "
            << ambiguous.load() << " ambiguous, " << reads.load() << " read transactions\n";
}

// ---- Cost per operation (printed, not asserted: see docs/benchmarks.md conventions) ----

}  // namespace
}  // namespace tierfs
