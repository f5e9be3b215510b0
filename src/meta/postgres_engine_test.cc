// PostgreSQL engine specifics, against real servers: the shared test server named by
// $TIERFS_TEST_PG_URL (started by ctest, tests/servers.py; tests that write use a schema of
// their own in database tierfs_kv_test), a fault-injecting TCP proxy in front of it for
// broken connections, and for the restart test a throwaway server of its own (initdb and
// pg_ctl as user postgres, which needs root; skipped otherwise). psql runs the few SQL
// statements the engine has no call for. The engine-independent contract is tested by
// kv_engine_test and meta_test.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "common/encoding.h"
#include "meta/kv_engine.h"
#include "meta/engine_for_test.h"

namespace tierfs {
namespace {

using testing_engines::EncodeU64;
using testing_engines::Increment;
using testing_engines::ReadCounter;
using testing_engines::ServerUrl;

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr char kPgBin[] = "/usr/lib/postgresql/15/bin";

// The database this binary shares with kv_engine_test; the tests that write use a schema of
// their own in it (see EngineUrl), so that ctest may run both binaries at once.
constexpr char kDb[] = "tierfs_kv_test";
constexpr char kSchema[] = "tierfs_pg_engine_test";

// The shared server's URL for database db, or "" when the tests run without servers.
std::string DbUrl(const std::string& db) {
  const char* base = getenv("TIERFS_TEST_PG_URL");
  if (base == nullptr || *base == '\0') return "";
  return std::string(base) + "/" + db;
}

// url with one more query parameter.
std::string WithQuery(const std::string& url, const std::string& param) {
  return url + (url.find('?') == std::string::npos ? "?" : "&") + param;
}

#define SKIP_WITHOUT_SERVER(url)                                                              \
  do {                                                                                        \
    if ((url).empty()) GTEST_SKIP() << "no test server: run through ctest, which starts one"; \
  } while (0)

// postgres://user:PASSWORD@host:port/... -> PASSWORD
std::string PasswordOf(const std::string& url) {
  size_t start = url.find("://") + 3;
  size_t at = url.find('@', start);
  size_t colon = url.find(':', start);
  if (at == std::string::npos || colon == std::string::npos || colon > at) return "";
  return url.substr(colon + 1, at - colon - 1);
}

std::string WithPassword(const std::string& url, const std::string& password) {
  size_t start = url.find("://") + 3;
  size_t at = url.find('@', start);
  size_t colon = url.find(':', start);
  std::string user = url.substr(start, colon - start);
  return url.substr(0, start) + user + (password.empty() ? "" : ":" + password) + url.substr(at);
}

// Runs a shell command, returning its exit status and (in *out) what it printed.
int Run(const std::string& cmd, std::string* out = nullptr) {
  FILE* f = popen((cmd + " 2>&1").c_str(), "r");
  if (f == nullptr) return -1;
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, n);
  int rc = pclose(f);
  if (out != nullptr) *out = text;
  return rc;
}

// A TCP port on 127.0.0.1 that nothing listens on (at the time of the call).
int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return 0;
  }
  close(fd);
  return ntohs(addr.sin_port);
}

// Runs SQL on the shared server through psql (the engine runs no arbitrary SQL).
bool Psql(const std::string& url, const std::string& sql, std::string* out = nullptr) {
  std::string text;
  int rc = Run("psql -X -q -t -A -v ON_ERROR_STOP=1 '" + url + "' -c \"" + sql + "\"", &text);
  if (out != nullptr) *out = text;
  if (rc != 0) ADD_FAILURE() << "psql failed: " << text;
  return rc == 0;
}

bool HavePsql() { return Run("psql --version") == 0; }

// The URL of this binary's key space on the shared server (extra: more query parameters),
// or "" when the tests run without servers.
std::string EngineUrl(const std::string& extra = "") {
  std::string url = DbUrl(kDb);
  if (url.empty()) return "";
  static const bool have_schema =
      HavePsql() && Psql(url, std::string("CREATE SCHEMA IF NOT EXISTS ") + kSchema);
  if (have_schema) url = WithQuery(url, std::string("options=-csearch_path%3D") + kSchema);
  return extra.empty() ? url : WithQuery(url, extra);
}

std::unique_ptr<KvEngine> MustOpen(const std::string& url) {
  auto e = OpenKvEngine(url);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? std::move(e).value() : nullptr;
}

// Removes an environment variable for the life of the object, restoring it afterwards.
class EnvOverride {
 public:
  EnvOverride(const char* name, const char* value) : name_(name) {
    const char* old = getenv(name);
    if (old != nullptr) old_ = old;
    had_ = old != nullptr;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~EnvOverride() {
    if (had_) {
      setenv(name_.c_str(), old_.c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

// ---- Opening: errors and URL handling ----

TEST(PostgresEngine, WrongPasswordIsEaccesAndHidesPasswords) {
  std::string url = DbUrl(kDb);
  SKIP_WITHOUT_SERVER(url);
  std::string real = PasswordOf(url);
  auto e = OpenKvEngine(WithPassword(url, "not-the-pw-4711"));
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), EACCES) << e.status().ToString();
  EXPECT_NE(e.status().message().find("authentication failed"), std::string::npos)
      << e.status().message();
  EXPECT_EQ(e.status().message().find("not-the-pw-4711"), std::string::npos)
      << e.status().message();
  EXPECT_EQ(e.status().message().find(real), std::string::npos) << e.status().message();
}

TEST(PostgresEngine, PasswordFromEnvironmentOrFile) {
  std::string url = EngineUrl();
  SKIP_WITHOUT_SERVER(url);
  std::string real = PasswordOf(url);
  std::string bare = WithPassword(url, "");
  // Keep libpq's own password sources out of the way.
  EnvOverride no_pgpassword("PGPASSWORD", nullptr);
  EnvOverride no_pgpass("PGPASSFILE", "/nonexistent/pgpass");
  {
    EnvOverride no_env("TIERFS_META_PASSWORD", nullptr);
    EnvOverride no_file("TIERFS_META_PASSWORD_FILE", nullptr);
    auto e = OpenKvEngine(bare);
    ASSERT_FALSE(e.ok());
    EXPECT_EQ(e.status().code(), EACCES) << e.status().ToString();
    EXPECT_NE(e.status().message().find("TIERFS_META_PASSWORD"), std::string::npos)
        << e.status().message();
  }
  {
    EnvOverride env("TIERFS_META_PASSWORD", real.c_str());
    auto e = OpenKvEngine(bare);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    EXPECT_EQ((*e)->Describe(), bare);
  }
  {
    std::string file = fs::temp_directory_path() / ("tierfs-pg-pw-" + std::to_string(getpid()));
    std::ofstream(file) << real << "\n";
    EnvOverride no_env("TIERFS_META_PASSWORD", nullptr);
    EnvOverride env("TIERFS_META_PASSWORD_FILE", file.c_str());
    auto e = OpenKvEngine(bare);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    fs::remove(file);
  }
}

TEST(PostgresEngine, UnreachableServerNamesHostAndPort) {
  int port = FreePort();
  ASSERT_NE(port, 0);
  std::string where = "127.0.0.1:" + std::to_string(port);
  auto start = Clock::now();
  auto e = OpenKvEngine("postgres://postgres:secret-xyz@" + where + "/db");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), ECONNREFUSED) << e.status().ToString();
  EXPECT_NE(e.status().message().find(where), std::string::npos) << e.status().message();
  EXPECT_NE(e.status().message().find("refused"), std::string::npos) << e.status().message();
  EXPECT_EQ(e.status().message().find("secret-xyz"), std::string::npos) << e.status().message();
  // Opening does not wait out the retry timeout on a server that is not there.
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
}

TEST(PostgresEngine, MissingDatabaseIsEnoentNamingIt) {
  std::string url = DbUrl("tierfs_no_such_db_" + std::to_string(getpid()));
  SKIP_WITHOUT_SERVER(url);
  auto e = OpenKvEngine(url);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), ENOENT) << e.status().ToString();
  EXPECT_NE(e.status().message().find("tierfs_no_such_db_" + std::to_string(getpid())),
            std::string::npos)
      << e.status().message();
  EXPECT_NE(e.status().message().find("does not exist"), std::string::npos) << e.status().message();
}

TEST(PostgresEngine, DescribeRedactsThePassword) {
  std::string url = EngineUrl();
  SKIP_WITHOUT_SERVER(url);
  auto e = MustOpen(url);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->Describe(), WithPassword(url, "****"));
  EXPECT_EQ(e->Describe().find(PasswordOf(url)), std::string::npos);
}

TEST(PostgresEngine, SchemeAliasAndQueryParameters) {
  std::string url = EngineUrl();
  SKIP_WITHOUT_SERVER(url);
  std::string alias = "postgresql" + url.substr(url.find("://"));
  auto e = MustOpen(WithQuery(alias, "sslmode=disable&application_name=tierfs-test&timeout=5s"));
  ASSERT_NE(e, nullptr);
  ASSERT_TRUE(e->Txn([](KvTxn& t) { return t.Put("alias", "1"); }).ok());

  auto bad = OpenKvEngine(WithQuery(url, "no_such_option=1"));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), EINVAL) << bad.status().ToString();
  EXPECT_NE(bad.status().message().find("no_such_option"), std::string::npos)
      << bad.status().message();

  auto bad_timeout = OpenKvEngine(WithQuery(url, "timeout=soon"));
  ASSERT_FALSE(bad_timeout.ok());
  EXPECT_EQ(bad_timeout.status().code(), EINVAL);
  EXPECT_NE(bad_timeout.status().message().find("timeout"), std::string::npos);
}

// A volume can live in its own schema (search_path), and a table of the same name that is
// not ours is refused rather than written to.
TEST(PostgresEngine, SchemaViaSearchPathAndForeignTableRefused) {
  std::string url = DbUrl(kDb);
  SKIP_WITHOUT_SERVER(url);
  if (!HavePsql()) GTEST_SKIP() << "psql not installed";
  const std::string own = "tierfs_own_" + std::to_string(getpid());
  const std::string foreign = "tierfs_foreign_" + std::to_string(getpid());
  ASSERT_TRUE(Psql(url, "DROP SCHEMA IF EXISTS " + own + " CASCADE; DROP SCHEMA IF EXISTS " +
                            foreign + " CASCADE; CREATE SCHEMA " + own + "; CREATE SCHEMA " +
                            foreign + "; CREATE TABLE " + foreign +
                            ".tierfs_kv(k text PRIMARY KEY, n int)"));
  {
    auto e = MustOpen(url + "?options=-csearch_path%3D" + own);
    ASSERT_NE(e, nullptr);
    ASSERT_TRUE(e->Txn([](KvTxn& t) { return t.Put("in-schema", "1"); }).ok());
    std::string count;
    ASSERT_TRUE(Psql(url, "SELECT count(*) FROM " + own + ".tierfs_kv", &count));
    EXPECT_EQ(count, "1\n");

    auto f = OpenKvEngine(url + "?options=-csearch_path%3D" + foreign);
    ASSERT_FALSE(f.ok());
    EXPECT_EQ(f.status().code(), EINVAL) << f.status().ToString();
    EXPECT_NE(f.status().message().find("not a TierFS metadata table"), std::string::npos)
        << f.status().message();
  }
  Psql(url, "DROP SCHEMA " + own + " CASCADE; DROP SCHEMA " + foreign + " CASCADE");
}

// PostgreSQL's B-tree index limits a key to about 2.7 kB: such a Put fails the transaction
// with EFBIG (at commit, since writes are sent with COMMIT) and leaves nothing behind.
TEST(PostgresEngine, OversizedKeyIsEfbig) {
  std::string url = EngineUrl();
  SKIP_WITHOUT_SERVER(url);
  auto e = MustOpen(url);
  ASSERT_NE(e, nullptr);
  std::mt19937 rng(1);
  std::string key(8000, '\0');
  for (char& c : key) c = static_cast<char>(rng());  // incompressible
  Status st = e->Txn([&](KvTxn& t) -> Status {
    RETURN_IF_ERROR(t.Put("fine", "1"));
    return t.Put(key, "v");
  });
  EXPECT_EQ(st.code(), EFBIG) << st.ToString();
  EXPECT_NE(st.message().find("too large"), std::string::npos) << st.message();
  std::optional<std::string> got;
  ASSERT_TRUE(e->Txn([&](KvTxn& t) -> Status {
                 ASSIGN_OR_RETURN(got, t.Get("fine"));
                 return Status::OK();
               }).ok());
  EXPECT_EQ(got, std::nullopt);
}

// ---- Concurrency between clients ----

TEST(PostgresEngine, TwoEnginesIncrementOneCounterExactly) {
  std::string url = EngineUrl();
  SKIP_WITHOUT_SERVER(url);
  auto a = MustOpen(url), b = MustOpen(url);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->Reset().ok());
  constexpr int kThreadsPerEngine = 8, kPerThread = 100;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (KvEngine* e : {a.get(), b.get()}) {
    for (int i = 0; i < kThreadsPerEngine; ++i) {
      threads.emplace_back([&, e] {
        for (int j = 0; j < kPerThread; ++j) {
          Status st = Increment(*e, "counter");
          if (!st.ok()) {
            failures++;
            ADD_FAILURE() << st.ToString();
          }
        }
      });
    }
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(ReadCounter(*a, "counter"), static_cast<uint64_t>(2 * kThreadsPerEngine * kPerThread));
}

// "Check that a range is empty, then insert into it" from several clients at once: the
// range read must be protected against phantoms, so exactly one insert per range commits.
TEST(PostgresEngine, ScanThenInsertLetsExactlyOneWin) {
  std::string url = EngineUrl();
  SKIP_WITHOUT_SERVER(url);
  auto a = MustOpen(url), b = MustOpen(url);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->Reset().ok());
  constexpr int kThreadsPerEngine = 3, kRounds = 40;
  constexpr int kThreads = 2 * kThreadsPerEngine;
  std::barrier sync(kThreads);
  std::atomic<int> wins{0}, failures{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    KvEngine* e = i % 2 == 0 ? a.get() : b.get();
    threads.emplace_back([&, e, i] {
      for (int round = 0; round < kRounds; ++round) {
        char prefix[32];
        snprintf(prefix, sizeof(prefix), "slot/%04d/", round);
        std::string begin = prefix, end = PrefixEnd(prefix);
        sync.arrive_and_wait();
        bool inserted = false;
        Status st = e->Txn([&](KvTxn& t) -> Status {
          inserted = false;  // the callback may run again after a conflict
          bool empty = true;
          RETURN_IF_ERROR(t.Scan(begin, end, 1, [&](std::string_view, std::string_view) {
            empty = false;
            return false;
          }));
          if (!empty) return Status::OK();
          inserted = true;
          return t.Put(begin + "client-" + std::to_string(i), "x");
        });
        if (!st.ok()) {
          failures++;
          ADD_FAILURE() << st.ToString();
        }
        if (st.ok() && inserted) wins++;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(wins.load(), kRounds);
  for (int round = 0; round < kRounds; ++round) {
    char prefix[32];
    snprintf(prefix, sizeof(prefix), "slot/%04d/", round);
    int keys = 0;
    ASSERT_TRUE(a->Txn(
                     [&](KvTxn& t) {
                       keys = 0;
                       return t.Scan(
                           prefix, PrefixEnd(prefix), 0,
                           [&](std::string_view, std::string_view) { return ++keys > 0; });
                     },
                     true)
                    .ok());
    EXPECT_EQ(keys, 1) << prefix;
  }
}

// Writers of different keys in a small table do not conflict: the statements use the key
// index, whose predicate locks cover what was read, not the whole table.
TEST(PostgresEngine, WritersOfDifferentKeysRarelyConflict) {
  std::string url = EngineUrl();
  SKIP_WITHOUT_SERVER(url);
  auto e = MustOpen(url);
  ASSERT_NE(e, nullptr);
  ASSERT_TRUE(e->Reset().ok());
  constexpr int kThreads = 4, kPerThread = 200;
  for (int i = 0; i < kThreads; ++i) ASSERT_TRUE(Increment(*e, "key" + std::to_string(i)).ok());
  // Statistics that say "tiny table" are what tempt the planner into sequential scans.
  if (HavePsql()) Psql(url, "ANALYZE tierfs_kv");
  std::atomic<int> runs{0}, failures{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      std::string key = "key" + std::to_string(i);
      for (int j = 0; j < kPerThread; ++j) {
        Status st = e->Txn([&](KvTxn& t) -> Status {
          runs++;
          ASSIGN_OR_RETURN(auto v, t.Get(key));
          return t.Put(key, EncodeU64(ByteReader(*v).U64() + 1));
        });
        if (!st.ok()) failures++;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  int retries = runs.load() - kThreads * kPerThread;
  std::cout << "disjoint writers: " << retries << " retries in " << kThreads * kPerThread
            << " transactions\n";
  EXPECT_LT(retries, kThreads * kPerThread / 50);
}

// ---- Broken connections ----

// The server ends the session (pg_terminate_backend) in the middle of a transaction: the
// transaction runs again on a new connection and commits once.
TEST(PostgresEngine, KilledConnectionMidTransactionIsRetried) {
  std::string url = DbUrl(kDb);  // for psql
  SKIP_WITHOUT_SERVER(url);
  if (!HavePsql()) GTEST_SKIP() << "psql not installed";
  const std::string app = "tierfs-kill-" + std::to_string(getpid());
  auto e = MustOpen(EngineUrl("application_name=" + app));
  ASSERT_NE(e, nullptr);
  ASSERT_TRUE(e->Reset().ok());
  ASSERT_TRUE(Increment(*e, "n").ok());
  int runs = 0;
  Status st = e->Txn([&](KvTxn& t) -> Status {
    ++runs;
    ASSIGN_OR_RETURN(auto v, t.Get("n"));
    if (runs == 1) {
      // With a timeout, pg_terminate_backend returns only once the backend is gone, and the
      // read below then fails for sure, before the commit. (Writes are pipelined: a loss
      // noticed only while committing leaves the commit's fate unknown, and such a
      // transaction is rightly not run again; other tests cover that case.)
      Psql(url,
           "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE application_name = '" +
               app + "'");
      ASSIGN_OR_RETURN(v, t.Get("n"));
    }
    RETURN_IF_ERROR(t.Put("n", EncodeU64(ByteReader(*v).U64() + 1)));
    return t.Put("written-in-run-" + std::to_string(runs), "");
  });
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(runs, 2);
  EXPECT_EQ(ReadCounter(*e, "n"), 2u);
  // Idle pooled connections killed too: the next transactions reconnect by themselves.
  Psql(url, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '" +
                app + "'");
  EXPECT_TRUE(Increment(*e, "n").ok());
  EXPECT_EQ(ReadCounter(*e, "n"), 3u);
}

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
    static const std::string kCommitReply(
        "C\0\0\0\x0b"
        "COMMIT\0",
        12);
    char buf[16384];
    bool withholding = false;  // dropping client data; cut at cut_at
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
        Fault fault = fault_.load();
        if (from_client && fault == Fault::kWithholdCommit) {
          size_t at = Find(buf, forward, kCommitSql);
          if (at != std::string::npos && fault_.compare_exchange_strong(fault, Fault::kNone)) {
            forward = at;  // the server gets a torn message and then nothing
            withholding = true;
            cut_at = Clock::now() + std::chrono::milliseconds(300);
          }
        }
        if (!from_client && fault == Fault::kDropCommitReply) {
          size_t at = Find(buf, forward, kCommitReply);
          if (at != std::string::npos && fault_.compare_exchange_strong(fault, Fault::kNone)) {
            forward = at;
            done = true;  // cut once the replies before it are through
          }
        }
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

  uint64_t counter = ReadCounter(*e, "counter");
  EXPECT_GE(counter, acknowledged.load());
  EXPECT_LE(counter, acknowledged.load() + ambiguous.load());
  std::set<std::string> present;
  ASSERT_TRUE(e->Txn(
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
  // Each key is written by the same transaction as one increment.
  EXPECT_EQ(present.size(), counter);
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
  auto e = MustOpen(url.substr(0, url.rfind('@') + 1) +
                    "127.0.0.1:" + std::to_string(proxy.port()) + own.substr(own.rfind('/')));
  ASSERT_NE(e, nullptr);
  ASSERT_TRUE(e->Reset().ok());
  ASSERT_TRUE(Increment(*e, "n").ok());
  int runs = 0;
  auto increment = [&](KvTxn& t) -> Status {
    ++runs;
    ASSIGN_OR_RETURN(auto v, t.Get("n"));
    return t.Put("n", EncodeU64(ByteReader(*v).U64() + 1));
  };

  // COMMIT ran but its reply was lost: success, and the callback is not run again.
  proxy.Arm(FaultProxy::Fault::kDropCommitReply);
  Status st = e->Txn(increment);
  EXPECT_FALSE(proxy.armed()) << "the fault never triggered";
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(ReadCounter(*e, "n"), 2u);

  // COMMIT never reached the server: the transaction is run again, once.
  runs = 0;
  proxy.Arm(FaultProxy::Fault::kWithholdCommit);
  st = e->Txn(increment);
  EXPECT_FALSE(proxy.armed()) << "the fault never triggered";
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(runs, 2);
  EXPECT_EQ(ReadCounter(*e, "n"), 3u);
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

  uint64_t counter = ReadCounter(*e, "counter");
  EXPECT_GE(counter, acknowledged.load());
  EXPECT_LE(counter, acknowledged.load() + ambiguous.load());
  std::set<std::string> present;
  ASSERT_TRUE(e->Txn(
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
  std::cout << "restart test: " << acknowledged.load() << " increments acknowledged, "
            << ambiguous.load() << " ambiguous, " << reads.load() << " read transactions\n";
}

// ---- Cost per operation (printed, not asserted: see docs/benchmarks.md conventions) ----

TEST(PostgresEngine, LatencyPerOperation) {
  std::string url = EngineUrl();
  SKIP_WITHOUT_SERVER(url);
  auto e = MustOpen(url);
  ASSERT_NE(e, nullptr);
  ASSERT_TRUE(e->Reset().ok());
  ASSERT_TRUE(e->Txn([](KvTxn& t) { return t.Put("k", "v"); }).ok());
  constexpr int kOps = 500;
  auto measure = [&](const char* what, const std::function<Status()>& op) {
    std::vector<int64_t> us;
    for (int i = 0; i < kOps; ++i) {
      auto start = Clock::now();
      ASSERT_TRUE(op().ok()) << what;
      us.push_back(
          std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count());
    }
    std::sort(us.begin(), us.end());
    std::cout << "  " << what << ": median " << us[us.size() / 2] << " us, p90 "
              << us[us.size() * 9 / 10] << " us\n";
  };
  std::cout << "latency per transaction (one client, " << url.substr(url.find('@') + 1) << "):\n";
  measure("read-only Get",
          [&] { return e->Txn([](KvTxn& t) { return t.Get("k").status(); }, true); });
  measure("Put", [&] { return e->Txn([](KvTxn& t) { return t.Put("k", "v"); }); });
  measure("write txn with one Get",
          [&] { return e->Txn([](KvTxn& t) { return t.Get("k").status(); }); });
  measure("Get x + Put y", [&] {
    return e->Txn([](KvTxn& t) -> Status {
      RETURN_IF_ERROR(t.Get("x").status());
      return t.Put("y", "v2");
    });
  });
  measure("Get + Put", [&] {
    return e->Txn([](KvTxn& t) -> Status {
      RETURN_IF_ERROR(t.Get("k").status());
      return t.Put("k", "v2");
    });
  });
  measure("3 Gets + 3 Puts", [&] {
    return e->Txn([](KvTxn& t) -> Status {
      for (const char* k : {"a", "b", "k"}) RETURN_IF_ERROR(t.Get(k).status());
      for (const char* k : {"a", "b", "k"}) RETURN_IF_ERROR(t.Put(k, "v3"));
      return Status::OK();
    });
  });
  measure("read-only Scan of 10", [&] {
    return e->Txn([](KvTxn& t) { return t.Scan("", "", 10, [](auto, auto) { return true; }); },
                  true);
  });
}

}  // namespace
}  // namespace tierfs
