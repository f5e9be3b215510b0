// PostgreSQL engine specifics, against real servers: the shared test server named by
// $TIERFS_TEST_PG_URL (started by ctest, tests/servers.py; tests that write use a schema of
// their own in database tierfs_kv_test): opening and its errors, URLs, conflicts, a
// connection killed mid-transaction, the cost per operation. Connections cut by a proxy and
// a server restarted: postgres_faults_test.cc. The engine-independent contract is tested
// by kv_engine_test and meta_test.
#include "meta/postgres_test_util.h"

namespace tierfs {
namespace {

using namespace pg_test;  // NOLINT

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
