// Opening engines from URLs (errors that name what is wrong, files left untouched) and what
// one engine does that the typed contract in kv_engine_test.cc does not cover.
#include "meta/kv_engine.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <thread>
#include <vector>

#include "common/encoding.h"
#include "common/url.h"
#include "meta/engine_for_test.h"
#include "meta/kv_engine_test_util.h"

namespace tierfs {
namespace {

using namespace kv_test;  // NOLINT

// ---- PrefixEnd ----

TEST(PrefixEnd, IncrementsLastByte) {
  EXPECT_EQ(PrefixEnd("abc"), "abd");
  EXPECT_EQ(PrefixEnd(std::string("a\0", 2)), "a\x01");
  EXPECT_EQ(PrefixEnd("a\x7f"), "a\x80");
  EXPECT_EQ(PrefixEnd("a\xfe"), "a\xff");
}

TEST(PrefixEnd, DropsTrailingFF) {
  EXPECT_EQ(PrefixEnd("a\xff"), "b");
  EXPECT_EQ(PrefixEnd("a\xff\xff"), "b");
  EXPECT_EQ(PrefixEnd("\x01\xff"), "\x02");
}

TEST(PrefixEnd, NoUpperBound) {
  EXPECT_EQ(PrefixEnd(""), "");
  EXPECT_EQ(PrefixEnd("\xff"), "");
  EXPECT_EQ(PrefixEnd("\xff\xff\xff"), "");
}

// ---- mem:// specifics ----

TEST(MemEngine, DifferentNamesAreIsolated) {
  std::string base = "mem://isolation-" + std::to_string(getpid());
  auto a = OpenKvEngine(base + "-a");
  auto b = OpenKvEngine(base + "-b");
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(PutCommitted(**a, "k", "a").ok());
  EXPECT_EQ(GetCommitted(**b, "k"), std::nullopt);
}

TEST(MemEngine, DataOutlivesTheEngineObject) {
  std::string url = "mem://outlive-" + std::to_string(getpid());
  {
    auto a = OpenKvEngine(url);
    ASSERT_TRUE(a.ok());
    ASSERT_TRUE(PutCommitted(**a, "k", "v").ok());
  }
  auto b = OpenKvEngine(url);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(GetCommitted(**b, "k"), "v");
}

// ---- sqlite3:// specifics ----

TEST(SqliteEngine, ReopenKeepsData) {
  TempDir dir;
  std::string url = "sqlite3://" + dir.path() + "/meta.db";
  {
    auto e = OpenKvEngine(url);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    ASSERT_TRUE(PutCommitted(**e, std::string("k\0\xff", 3), std::string("v\0", 2)).ok());
    ASSERT_TRUE(Increment(**e, "c").ok());
  }
  auto e = OpenKvEngine(url);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(GetCommitted(**e, std::string("k\0\xff", 3)), std::string("v\0", 2));
  EXPECT_EQ(ReadCounter(**e, "c"), 1u);
}

// Which files Sync makes durable is checked through a mount (test_crash.py, under strace).
TEST(SqliteEngine, SyncAfterCommits) {
  TempDir dir;
  auto e = OpenKvEngine("sqlite3://" + dir.path() + "/meta.db");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_TRUE((*e)->Sync().ok());
  ASSERT_TRUE(PutCommitted(**e, "k", "v").ok());
  Status st = (*e)->Sync();
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(GetCommitted(**e, "k"), "v");
}

TEST(SqliteEngine, RelativePathIsResolvedAgainstTheCurrentDirectory) {
  TempDir dir;
  std::string old_cwd = fs::current_path().string();
  ASSERT_EQ(chdir(dir.path().c_str()), 0);
  auto e = OpenKvEngine("sqlite3://vol.db");
  // Connections opened later must still find the file after the cwd changes.
  ASSERT_EQ(chdir(old_cwd.c_str()), 0);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ((*e)->Describe(), "sqlite3://vol.db");
  EXPECT_TRUE(fs::exists(dir.path() + "/vol.db"));
  // Force a second connection by running two transactions at once.
  std::atomic<int> ok{0};
  std::thread t1([&] { ok += PutCommitted(**e, "a", "1").ok(); });
  std::thread t2([&] { ok += ScanCommitted(**e, "", "").size() <= 1; });
  t1.join();
  t2.join();
  EXPECT_EQ(ok.load(), 2);
  EXPECT_FALSE(fs::exists(old_cwd + "/vol.db"));
}

TEST(SqliteEngine, TwoInstancesOnOneFileIncrementExactly) {
  TempDir dir;
  std::string url = "sqlite3://" + dir.path() + "/shared.db";
  auto a = OpenKvEngine(url);
  auto b = OpenKvEngine(url);
  ASSERT_TRUE(a.ok() && b.ok());
  constexpr int kThreadsPerEngine = 4, kPerThread = 250;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (KvEngine* e : {a->get(), b->get()}) {
    for (int i = 0; i < kThreadsPerEngine; ++i) {
      threads.emplace_back([&, e] {
        for (int j = 0; j < kPerThread; ++j) failures += !Increment(*e, "counter").ok();
      });
    }
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(ReadCounter(**a, "counter"), static_cast<uint64_t>(2 * kThreadsPerEngine * kPerThread));
}

// Real processes sharing the file. The parent closes its engine before forking so no
// child inherits open SQLite connections (SQLite forbids using them across fork()).
TEST(SqliteEngine, ProcessesSharingOneFileIncrementExactly) {
  TempDir dir;
  std::string url = "sqlite3://" + dir.path() + "/shared.db";
  {
    auto e = OpenKvEngine(url);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
  }
  constexpr int kChildren = 3, kPerProcess = 400;
  std::vector<pid_t> pids;
  for (int c = 0; c < kChildren; ++c) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int code = 0;
      auto e = OpenKvEngine(url);
      if (!e.ok()) {
        fprintf(stderr, "child: %s\n", e.status().ToString().c_str());
        _exit(2);
      }
      // Two threads per process: in-process queueing plus cross-process retries.
      std::atomic<int> failures{0};
      std::thread t([&] {
        for (int i = 0; i < kPerProcess / 2; ++i) failures += !Increment(**e, "counter").ok();
      });
      for (int i = 0; i < kPerProcess / 2; ++i) failures += !Increment(**e, "counter").ok();
      t.join();
      if (failures.load() != 0) code = 3;
      _exit(code);
    }
    pids.push_back(pid);
  }
  auto e = OpenKvEngine(url);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  int failures = 0;
  for (int i = 0; i < kPerProcess; ++i) failures += !Increment(**e, "counter").ok();
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  }
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(ReadCounter(**e, "counter"), static_cast<uint64_t>((kChildren + 1) * kPerProcess));
}

// ---- OpenKvEngine errors ----

TEST(OpenKvEngine, MalformedUrl) {
  auto e = OpenKvEngine("just-a-path.db");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), EINVAL);
  EXPECT_NE(e.status().message().find("sqlite3://"), std::string::npos) << e.status().message();
}

TEST(OpenKvEngine, UnknownScheme) {
  auto e = OpenKvEngine("tikv://pd:2379/vol");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), EINVAL);
  EXPECT_NE(e.status().message().find("tikv"), std::string::npos) << e.status().message();
  EXPECT_NE(e.status().message().find("sqlite3://"), std::string::npos) << e.status().message();
}

TEST(OpenKvEngine, UnknownSchemeMessageHidesPassword) {
  auto e = OpenKvEngine("foo://user:hunter2@host:1/x");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().message().find("hunter2"), std::string::npos) << e.status().message();
}

TEST(OpenKvEngine, UnreachableServersNameTheAddressButNotThePassword) {
  for (std::string url : {"redis://127.0.0.1:1/1", "redis://:secret@127.0.0.1:1/2",
                          "postgres://u:secret@127.0.0.1:1/db", "postgresql://u:secret@127.0.0.1:1/db?sslmode=disable"}) {
    auto e = OpenKvEngine(url);
    // Engines may connect lazily; then the first transaction fails instead.
    Status st = e.ok() ? (*e)->Txn([](KvTxn& t) { return t.Get("x").status(); }, true) : e.status();
    ASSERT_FALSE(st.ok()) << url;
    EXPECT_NE(st.message().find("127.0.0.1"), std::string::npos) << st.message();
    EXPECT_EQ(st.message().find("secret"), std::string::npos) << st.message();
  }
}

TEST(OpenKvEngine, SqliteWithoutPath) {
  auto e = OpenKvEngine("sqlite3://");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), EINVAL);
}

TEST(OpenKvEngine, SqliteMissingParentDirectory) {
  TempDir dir;
  std::string missing = dir.path() + "/no/such/dir";
  auto e = OpenKvEngine("sqlite3://" + missing + "/meta.db");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), ENOENT);
  EXPECT_NE(e.status().message().find("does not exist"), std::string::npos) << e.status().message();
  EXPECT_NE(e.status().message().find(missing), std::string::npos) << e.status().message();
  EXPECT_FALSE(fs::exists(dir.path() + "/no"));
}

TEST(OpenKvEngine, SqliteGarbageFileIsRejectedAndUntouched) {
  TempDir dir;
  std::string path = dir.path() + "/garbage.db";
  std::string garbage;
  for (int i = 0; i < 10000; ++i) garbage.push_back(static_cast<char>((i * 131) ^ 0x5a));
  WriteFile(path, garbage);
  for (const std::string& content : {garbage, std::string("short")}) {
    WriteFile(path, content);
    auto e = OpenKvEngine("sqlite3://" + path);
    ASSERT_FALSE(e.ok());
    EXPECT_EQ(e.status().code(), EINVAL);
    EXPECT_NE(e.status().message().find("not a TierFS metadata database"), std::string::npos)
        << e.status().message();
    EXPECT_EQ(ReadFile(path), content);
    EXPECT_FALSE(fs::exists(path + "-wal"));
    EXPECT_FALSE(fs::exists(path + "-shm"));
    EXPECT_FALSE(fs::exists(path + "-journal"));
  }
}

TEST(OpenKvEngine, SqliteDatabaseOfAnotherApplicationIsRejectedAndUntouched) {
  TempDir dir;
  std::string path = dir.path() + "/other.db";
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "CREATE TABLE photos(id INTEGER PRIMARY KEY, name TEXT); INSERT INTO "
                         "photos VALUES(1, 'x');",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  std::string before = ReadFile(path);
  auto e = OpenKvEngine("sqlite3://" + path);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), EINVAL);
  EXPECT_NE(e.status().message().find("not a TierFS metadata database"), std::string::npos)
      << e.status().message();
  EXPECT_NE(e.status().message().find("photos"), std::string::npos) << e.status().message();
  EXPECT_EQ(ReadFile(path), before);
  EXPECT_FALSE(fs::exists(path + "-wal"));
}

namespace {

// Rows of a table of the database at path, counted by a connection of its own.
int64_t CountRows(const std::string& path, const std::string& where) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* s = nullptr;
  int64_t n = -1;
  if (sqlite3_prepare_v2(db, ("SELECT count(*) FROM " + where).c_str(), -1, &s, nullptr) == SQLITE_OK &&
      sqlite3_step(s) == SQLITE_ROW) {
    n = sqlite3_column_int64(s, 0);
  }
  sqlite3_finalize(s);
  sqlite3_close(db);
  return n;
}

std::string LogKeyForTest(uint64_t seq) {
  std::string k = "H";
  PutU64(&k, seq);
  return k;
}

}  // namespace

// The change log's records are appended to a rowid table, not the WITHOUT ROWID kv table
// whose right-edge splits would leave its pages half empty (sqlite_txn.h).
TEST(SqliteEngine, ChangeLogKeysLiveInTheirOwnTable) {
  TempDir dir;
  std::string path = dir.path() + "/vol.db";
  auto e = OpenKvEngine("sqlite3://" + path);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  for (uint64_t seq = 1; seq <= 50; ++seq) ASSERT_TRUE(PutCommitted(**e, LogKeyForTest(seq), "record").ok());
  ASSERT_TRUE(PutCommitted(**e, "Ha", "not a record").ok());
  EXPECT_EQ(CountRows(path, "log"), 50);
  EXPECT_EQ(CountRows(path, "kv WHERE k >= x'48' AND k < x'49'"), 1);
  EXPECT_EQ(ScanCommitted(**e, "H", "I").size(), 51u);
}

// A database written before the log had its table: opening it moves the records there,
// once, and every key still reads back.
TEST(SqliteEngine, RecordsOfAnOlderDatabaseMoveToTheLogTable) {
  TempDir dir;
  std::string path = dir.path() + "/old.db";
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "CREATE TABLE kv(k BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID; "
                         "PRAGMA application_id=1413893425;",  // "TFM1"
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  KvList rows = {{"A1", "inode"}, {LogKeyForTest(7), "r7"}, {LogKeyForTest(8), "r8"}, {"Ha", "other"}, {"Z", "z"}};
  sqlite3_stmt* ins = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "INSERT INTO kv VALUES(?1, ?2)", -1, &ins, nullptr), SQLITE_OK);
  for (const auto& [k, v] : rows) {
    sqlite3_bind_blob(ins, 1, k.data(), static_cast<int>(k.size()), SQLITE_TRANSIENT);
    sqlite3_bind_blob(ins, 2, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    ASSERT_EQ(sqlite3_step(ins), SQLITE_DONE);
    sqlite3_reset(ins);
  }
  sqlite3_finalize(ins);
  sqlite3_close(db);
  auto e = OpenKvEngine("sqlite3://" + path);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  std::sort(rows.begin(), rows.end());
  EXPECT_EQ(ScanCommitted(**e, "", ""), rows);
  EXPECT_EQ(CountRows(path, "log"), 2);
  EXPECT_EQ(CountRows(path, "kv"), 3);
  e->reset();
  auto again = OpenKvEngine("sqlite3://" + path);  // nothing left to move
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(ScanCommitted(**again, "", ""), rows);
}

TEST(OpenKvEngine, SqlitePathIsADirectory) {
  TempDir dir;
  auto e = OpenKvEngine("sqlite3://" + dir.path());
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), EISDIR);
}

TEST(OpenKvEngine, SqliteUnreadableFile) {
  TempDir dir;
  std::string path = dir.path() + "/locked.db";
  WriteFile(path, "");
  ASSERT_EQ(chmod(path.c_str(), 0), 0);
  if (geteuid() != 0) {
    auto e = OpenKvEngine("sqlite3://" + path);
    ASSERT_FALSE(e.ok());
    EXPECT_EQ(e.status().code(), EACCES);
    return;
  }
  // Root reads any file: the open is tried by a child that became another user (nobody),
  // which reports the error code it got as its exit status.
  ASSERT_EQ(chmod(dir.path().c_str(), 0755), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(100);
    auto e = OpenKvEngine("sqlite3://" + path);
    _exit(e.ok() ? 0 : e.status().code());
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), EACCES) << "0: opened; 100: could not become nobody";
}

TEST(OpenKvEngine, SqliteEmptyFileIsANewDatabase) {
  TempDir dir;
  std::string path = dir.path() + "/empty.db";
  WriteFile(path, "");
  auto e = OpenKvEngine("sqlite3://" + path);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  ASSERT_TRUE(PutCommitted(**e, "k", "v").ok());
}

// Not a pass/fail test: prints the small-write-transaction rate on tmpfs for the report.
TEST(SqliteThroughput, SmallWriteTxnsOnDevShm) {
  if (!fs::is_directory("/dev/shm")) GTEST_SKIP() << "no /dev/shm";
  TempDir dir("/dev/shm");
  auto opened = OpenKvEngine("sqlite3://" + dir.path() + "/bench.db");
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  KvEngine& e = **opened;
  using Clock = std::chrono::steady_clock;
  constexpr auto kDuration = std::chrono::milliseconds(1000);
  std::string value(100, 'v');
  for (int threads : {1, 4}) {
    std::atomic<int64_t> done{0}, failed{0};
    std::atomic<bool> stop{false};
    std::vector<std::thread> workers;
    auto start = Clock::now();
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        for (int64_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
          std::string key = "bench/" + std::to_string(threads) + "/" + std::to_string(t) + "/" +
                            std::to_string(i);
          Status st = e.Txn([&](KvTxn& txn) -> Status {
            ASSIGN_OR_RETURN(auto old, txn.Get(key));
            (void)old;
            return txn.Put(key, value);
          });
          (st.ok() ? done : failed)++;
        }
      });
    }
    std::this_thread::sleep_for(kDuration);
    stop = true;
    for (auto& w : workers) w.join();
    double secs = std::chrono::duration<double>(Clock::now() - start).count();
    printf(
        "[ SQLITE   ] %d thread(s): %.0f write txns/s (get+put of a %zu-byte value), %lld failed\n",
        threads, static_cast<double>(done.load()) / secs, value.size(),
        static_cast<long long>(failed.load()));
    EXPECT_EQ(failed.load(), 0);
  }
  std::atomic<int64_t> reads{0};
  auto start = Clock::now();
  while (Clock::now() - start < kDuration) {
    ASSERT_TRUE(e.Txn([&](KvTxn& txn) { return txn.Get("bench/1/0/1").status(); }, true).ok());
    reads++;
  }
  printf("[ SQLITE   ] 1 thread: %.0f read-only txns/s\n",
         static_cast<double>(reads.load()) /
             std::chrono::duration<double>(Clock::now() - start).count());
}

}  // namespace
}  // namespace tierfs
