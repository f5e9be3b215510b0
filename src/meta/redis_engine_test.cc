// Redis engine specifics against real servers: the shared test server named by
// TIERFS_TEST_REDIS_URL (databases 3 and 4), and throwaway servers this test starts itself
// (redis-server on PATH) for passwords, foreign data, restarts and killed connections.
#include "meta/redis_engine.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "common/encoding.h"
#include "meta/key_schema.h"
#include "meta/kv_engine.h"
#include "meta/engine_for_test.h"
#include "meta/redis_test_util.h"

namespace tierfs {
namespace {

using testing_engines::EncodeU64;
using testing_engines::Increment;
using testing_engines::ReadCounter;
using testing_engines::ServerUrl;
using redis_test::RawClient;
using redis_test::ThrowawayRedis;

namespace fs = std::filesystem;
using KvList = std::vector<std::pair<std::string, std::string>>;

std::string SharedUrl(int db) {
  const char* base = getenv("TIERFS_TEST_REDIS_URL");
  if (base == nullptr || *base == '\0') return "";
  return std::string(base) + "/" + std::to_string(db);
}

std::unique_ptr<KvEngine> MustOpen(const std::string& url) {
  auto e = OpenKvEngine(url);
  EXPECT_TRUE(e.ok()) << url << ": " << e.status().ToString();
  return e.ok() ? std::move(e).value() : nullptr;
}

KvList ScanAll(KvEngine& engine, std::string_view begin, std::string_view end, size_t limit = 0) {
  KvList out;
  Status st = engine.Txn(
      [&](KvTxn& t) {
        out.clear();
        return t.Scan(begin, end, limit, [&](std::string_view k, std::string_view v) {
          out.emplace_back(k, v);
          return true;
        });
      },
      true);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out;
}

// ---- URLs, passwords and refusals ----

TEST(RedisEngine, PasswordsAndDescribe) {
  const std::string pw = "pw-Zq81-correct";
  ThrowawayRedis server(pw);
  ASSERT_TRUE(server.ok());
  unsetenv("TIERFS_META_PASSWORD");
  unsetenv("TIERFS_META_PASSWORD_FILE");

  const std::string wrong = "pw-not-it-5521";
  auto e = OpenKvEngine(server.Url(0, ":" + wrong + "@"));
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), EACCES) << e.status().ToString();
  EXPECT_NE(e.status().message().find("authentication failed"), std::string::npos)
      << e.status().message();
  EXPECT_EQ(e.status().message().find(wrong), std::string::npos) << e.status().message();

  e = OpenKvEngine(server.Url(0));
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), EACCES) << e.status().ToString();
  EXPECT_NE(e.status().message().find("requires a password"), std::string::npos)
      << e.status().message();

  auto good = MustOpen(server.Url(0, ":" + pw + "@"));
  ASSERT_NE(good, nullptr);
  EXPECT_EQ(good->Describe(), server.Url(0, ":****@"));
  EXPECT_TRUE(good->Txn([](KvTxn& t) { return t.Put("k", "v"); }).ok());

  // From the environment, and from a file named by the environment.
  setenv("TIERFS_META_PASSWORD", pw.c_str(), 1);
  auto from_env = MustOpen(server.Url(0));
  ASSERT_NE(from_env, nullptr);
  EXPECT_EQ(from_env->Describe(), server.Url(0));
  unsetenv("TIERFS_META_PASSWORD");
  std::string file = fs::temp_directory_path() / ("tierfs-redis-pw-" + std::to_string(getpid()));
  std::ofstream(file) << pw << "\n";
  setenv("TIERFS_META_PASSWORD_FILE", file.c_str(), 1);
  auto from_file = MustOpen(server.Url(0));
  EXPECT_NE(from_file, nullptr);
  unsetenv("TIERFS_META_PASSWORD_FILE");
  fs::remove(file);
}

TEST(RedisEngine, UnreachableServerNamesHostAndReason) {
  int port = FreePort();
  std::string url = "redis://127.0.0.1:" + std::to_string(port) + "/0";
  auto e = OpenKvEngine(url);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), ECONNREFUSED) << e.status().ToString();
  EXPECT_NE(e.status().message().find("127.0.0.1:" + std::to_string(port)), std::string::npos)
      << e.status().message();
  EXPECT_NE(e.status().message().find("refused"), std::string::npos) << e.status().message();
}

TEST(RedisEngine, BadUrls) {
  ThrowawayRedis server;
  ASSERT_TRUE(server.ok());
  std::string base = "redis://127.0.0.1:" + std::to_string(server.port());
  for (const std::string& url :
       {base + "/abc", base + "/-1", base + "/99", base + "/0?pool=3", base + "/0?timeout=soon"}) {
    auto e = OpenKvEngine(url);
    ASSERT_FALSE(e.ok()) << url;
    EXPECT_EQ(e.status().code(), EINVAL) << url << ": " << e.status().ToString();
  }
  auto tls = OpenKvEngine("rediss://127.0.0.1:" + std::to_string(server.port()) + "/0");
  ASSERT_FALSE(tls.ok());
  EXPECT_EQ(tls.status().code(), EPROTONOSUPPORT);
  // No database number means 0; a timeout is accepted.
  EXPECT_NE(MustOpen(base), nullptr);
  EXPECT_NE(MustOpen(base + "/2?timeout=5s"), nullptr);
}

TEST(RedisEngine, ForeignDatabaseIsRefusedAndUntouched) {
  ThrowawayRedis server;
  ASSERT_TRUE(server.ok());
  RawClient raw(server.port(), 3);
  ASSERT_EQ(raw.Command({"SET", "user:1", "alice"}), "OK");
  ASSERT_EQ(raw.Command({"HSET", "cart:1", "apples", "3"}), "1");
  auto e = OpenKvEngine(server.Url(3));
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), EINVAL);
  EXPECT_EQ(e.status().message(),
            server.Url(3) +
                " holds keys that are not a TierFS volume; refusing to use it "
                "(choose another database number or server)");
  EXPECT_EQ(raw.Command({"DBSIZE"}), "2");
  EXPECT_EQ(raw.Command({"GET", "user:1"}), "alice");
  EXPECT_EQ(raw.Command({"HGET", "cart:1", "apples"}), "3");

  // An empty database becomes a volume, and Reset keeps it one.
  auto ours = MustOpen(server.Url(4));
  ASSERT_NE(ours, nullptr);
  ASSERT_TRUE(ours->Txn([](KvTxn& t) { return t.Put("a", "1"); }).ok());
  ASSERT_TRUE(ours->Reset().ok());
  EXPECT_TRUE(ScanAll(*ours, "", "").empty());
  EXPECT_NE(MustOpen(server.Url(4)), nullptr);
  // A volume whose marker vanished is not emptied blindly.
  RawClient raw4(server.port(), 4);
  ASSERT_TRUE(ours->Txn([](KvTxn& t) { return t.Put("a", "1"); }).ok());
  raw4.Command({"DEL", "tierfs"});
  EXPECT_EQ(ours->Reset().code(), EINVAL);
  EXPECT_NE(raw4.Command({"DBSIZE"}), "0");
}

// ---- Concurrency on the shared server ----

class RedisShared : public ::testing::Test {
 protected:
  void SetUp() override {
    url_ = SharedUrl(3);
    if (url_.empty()) GTEST_SKIP() << "no test server: run through ctest, which starts one";
    a_ = MustOpen(url_);
    b_ = MustOpen(url_);
    ASSERT_TRUE(a_ && b_);
    ASSERT_TRUE(a_->Reset().ok());
  }
  std::string url_;
  std::unique_ptr<KvEngine> a_, b_;
};

TEST_F(RedisShared, TwoEnginesIncrementExactly) {
  constexpr int kThreadsPerEngine = 8, kPerThread = 200;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (KvEngine* e : {a_.get(), b_.get()}) {
    for (int i = 0; i < kThreadsPerEngine; ++i) {
      threads.emplace_back([&, e] {
        for (int j = 0; j < kPerThread; ++j) failures += !Increment(*e, "counter").ok();
      });
    }
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(ReadCounter(*a_, "counter"), static_cast<uint64_t>(2 * kThreadsPerEngine * kPerThread));
}

// Two transactions each check that a range is empty and then claim it: serializability
// means exactly one claim per round, even though the range holds no key to WATCH.
TEST_F(RedisShared, ScanThenInsertHasOneWinner) {
  constexpr int kRounds = 60;
  for (int round = 0; round < kRounds; ++round) {
    // A real inode-shaped prefix (one scan group) and, every other round, a plain one.
    std::string prefix =
        round % 2 == 0 ? keys::DentryPrefix(1000 + round) : "lock/" + std::to_string(round) + "/";
    std::atomic<int> ready{0}, failures{0};
    auto claim = [&](KvEngine* e, const std::string& who) {
      bool first = true;
      Status st = e->Txn([&](KvTxn& t) -> Status {
        bool empty = true;
        RETURN_IF_ERROR(
            t.Scan(prefix, PrefixEnd(prefix), 1, [&](std::string_view, std::string_view) {
              empty = false;
              return false;
            }));
        if (first) {  // make both first attempts overlap
          first = false;
          ready++;
          while (ready.load() < 2) std::this_thread::yield();
        }
        if (!empty) return Status::OK();
        return t.Put(prefix + who, who);
      });
      failures += !st.ok();
    };
    std::thread t1(claim, a_.get(), "a");
    std::thread t2(claim, b_.get(), "b");
    t1.join();
    t2.join();
    EXPECT_EQ(failures.load(), 0);
    KvList got = ScanAll(*a_, prefix, PrefixEnd(prefix));
    ASSERT_EQ(got.size(), 1u) << "round " << round;
  }
}

// Scans that cross groups, including groups that nest (keys shorter than their natural
// group), against a model.
TEST_F(RedisShared, CrossGroupScansMatchAModel) {
  std::map<std::string, std::string> model;
  std::vector<std::string> keys = {"",  "A",    "AB", "S",  "SE", "SO", "SOx",
                                   "V", "\xff", "X",  "Xa", "Y",  "SH", "\xff\xff"};
  std::mt19937 rng(7);
  for (int i = 0; i < 300; ++i) {
    std::string k = "A";
    for (int j = 0; j < 9 + static_cast<int>(rng() % 6); ++j) k.push_back("\0\1AB\xff"[rng() % 5]);
    keys.push_back(k);
    std::string s = rng() % 2 ? "SO" : "SE";
    for (int j = 0; j < static_cast<int>(rng() % 12); ++j) s.push_back("\0\1AB"[rng() % 4]);
    keys.push_back(s);
  }
  ASSERT_TRUE(a_->Txn([&](KvTxn& t) -> Status {
                  for (const auto& k : keys) {
                    model[k] = "v" + k;
                    RETURN_IF_ERROR(t.Put(k, "v" + k));
                  }
                  return Status::OK();
                }).ok());
  auto expect = [&](const std::string& b, const std::string& e, size_t limit) {
    KvList want;
    for (auto it = model.lower_bound(b); it != model.end() && (e.empty() || it->first < e); ++it) {
      if (limit != 0 && want.size() == limit) break;
      want.emplace_back(*it);
    }
    EXPECT_EQ(ScanAll(*b_, b, e, limit), want)
        << "range [" << b << ", " << e << ") limit " << limit;
  };
  expect("", "", 0);
  for (size_t limit : {1, 2, 5, 50, 333}) expect("", "", limit);
  const std::vector<std::string> begins = {"A", "AB", "S", "SO", "SE\1", "A\1", "B"};
  const std::vector<std::string> ends = {"", "B", "SP", "T", "\xff"};
  for (const std::string& b : begins) {
    for (const std::string& e : ends) expect(b, e, 0), expect(b, e, 3);
  }
  // Walk the whole "A" range in batches the way fsck does.
  std::vector<std::string> walked;
  std::string from = "A";
  for (;;) {
    KvList batch = ScanAll(*b_, from, PrefixEnd("A"), 17);
    for (auto& kv : batch) walked.push_back(kv.first);
    if (batch.size() < 17) break;
    from = batch.back().first + std::string(1, '\0');
  }
  std::vector<std::string> want;
  for (auto it = model.lower_bound("A"); it != model.end() && it->first < "B"; ++it)
    want.push_back(it->first);
  EXPECT_EQ(walked, want);
  // Deleting everything removes every group and index.
  ASSERT_TRUE(a_->Txn([&](KvTxn& t) -> Status {
                  for (const auto& [k, v] : model) RETURN_IF_ERROR(t.Delete(k));
                  return Status::OK();
                }).ok());
  EXPECT_TRUE(ScanAll(*b_, "", "").empty());
  const char* base = getenv("TIERFS_TEST_REDIS_URL");
  int port = atoi(strrchr(base, ':') + 1);
  RawClient raw(port, 3);
  EXPECT_EQ(raw.Command({"ZCARD", "G"}), "0");
  // Left: the volume marker, the global version and commit markers ("x...") that expire.
  std::string left;
  for (const std::string& k : {std::string("tierfs"), std::string("W")}) {
    EXPECT_EQ(raw.Command({"EXISTS", k}), "1") << k;
  }
  std::string all = raw.Command({"KEYS", "*"});
  size_t start = 0;
  while (start <= all.size()) {
    size_t comma = all.find(',', start);
    std::string k =
        all.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!k.empty() && k != "tierfs" && k != "W" && k[0] != 'x') left += k + " ";
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  EXPECT_EQ(left, "");
}

// Not a pass/fail test: prints per-transaction latency against the shared server.
TEST_F(RedisShared, PrintsLatencies) {
  using Clock = std::chrono::steady_clock;
  KvEngine& e = *a_;
  ASSERT_TRUE(e.Txn([](KvTxn& t) -> Status {
                 for (int i = 0; i < 100; ++i)
                   RETURN_IF_ERROR(t.Put(keys::Dentry(7, "f" + std::to_string(i)), "v"));
                 return t.Put(keys::Inode(7), std::string(80, 'a'));
               }).ok());
  auto measure = [&](const char* what, const std::function<Status()>& op) {
    constexpr int kOps = 2000;
    for (int i = 0; i < 50; ++i) ASSERT_TRUE(op().ok());  // warm the pool
    auto start = Clock::now();
    for (int i = 0; i < kOps; ++i) ASSERT_TRUE(op().ok());
    double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count() / kOps;
    printf("[ REDIS    ] %-44s %7.1f us/txn\n", what, us);
  };
  measure("read-only Get (getattr)",
          [&] { return e.Txn([](KvTxn& t) { return t.Get(keys::Inode(7)).status(); }, true); });
  measure("read-only Get + Get (lookup, validated)", [&] {
    return e.Txn(
        [](KvTxn& t) {
          RETURN_IF_ERROR(t.Get(keys::Dentry(7, "f1")).status());
          return t.Get(keys::Inode(7)).status();
        },
        true);
  });
  measure("Get + Put (setattr)", [&] {
    return e.Txn([](KvTxn& t) {
      RETURN_IF_ERROR(t.Get(keys::Inode(7)).status());
      return t.Put(keys::Inode(7), std::string(80, 'b'));
    });
  });
  int n = 0;
  measure("Get + Get + 3 Puts (create)", [&] {
    return e.Txn([&](KvTxn& t) {
      RETURN_IF_ERROR(t.Get(keys::Inode(7)).status());
      std::string name = "new" + std::to_string(n++);
      RETURN_IF_ERROR(t.Get(keys::Dentry(7, name)).status());
      RETURN_IF_ERROR(t.Put(keys::Dentry(7, name), "x"));
      RETURN_IF_ERROR(t.Put(keys::Inode(100000 + n), std::string(80, 'c')));
      return t.Put(keys::Inode(7), std::string(80, 'b'));
    });
  });
  measure("read-only scan of 100 dentries (readdir)", [&] {
    return e.Txn(
        [](KvTxn& t) {
          return t.Scan(keys::DentryPrefix(7), PrefixEnd(keys::DentryPrefix(7)), 100,
                        [](std::string_view, std::string_view) { return true; });
        },
        true);
  });
}

// ---- Failures ----

// The server is killed (SIGKILL) and restarted while transactions run: every transaction
// either succeeds and stays committed, or fails; none is applied twice or lost.
TEST(RedisEngine, ServerRestartWhileTransactionsRun) {
  ThrowawayRedis server;
  ASSERT_TRUE(server.ok());
  auto a = MustOpen(server.Url(0));
  auto b = MustOpen(server.Url(0));
  ASSERT_TRUE(a && b);
  constexpr int kThreads = 4;
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::vector<std::vector<uint64_t>> acked(kThreads);  // counter values each thread committed
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      KvEngine& e = i % 2 ? *b : *a;
      while (!stop.load()) {
        uint64_t got = 0;
        Status st = e.Txn([&](KvTxn& t) -> Status {
          ASSIGN_OR_RETURN(auto cur, t.Get("counter"));
          got = (cur ? ByteReader(*cur).U64() : 0) + 1;
          RETURN_IF_ERROR(t.Put("seen/" + EncodeU64(got), std::to_string(i)));
          return t.Put("counter", EncodeU64(got));
        });
        if (st.ok()) {
          acked[i].push_back(got);
        } else {
          failures++;
          ADD_FAILURE() << st.ToString();
        }
      }
    });
  }
  for (int restart = 0; restart < 3; ++restart) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    server.Kill();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    server.Start();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  std::set<uint64_t> all;
  for (const auto& v : acked) {
    for (uint64_t n : v)
      EXPECT_TRUE(all.insert(n).second) << "value " << n << " acknowledged twice";
  }
  ASSERT_FALSE(all.empty());
  // The counter is exactly the number of acknowledged commits, and each left its key.
  EXPECT_EQ(ReadCounter(*a, "counter"), all.size());
  EXPECT_EQ(*all.rbegin(), all.size());
  KvList seen = ScanAll(*a, "seen/", PrefixEnd("seen/"));
  EXPECT_EQ(seen.size(), all.size());
}

// Connections are killed by the server at random moments, many of them between EXEC and
// its reply: lost replies are resolved through the commit marker, so no increment is
// applied twice or reported wrongly.
TEST(RedisEngine, KilledConnectionsNeverDoubleApply) {
  ThrowawayRedis server;
  ASSERT_TRUE(server.ok());
  auto e = MustOpen(server.Url(0));
  ASSERT_NE(e, nullptr);
  std::atomic<bool> stop{false};
  std::thread killer([&] {
    RawClient raw(server.port(), 0);
    std::mt19937 rng(1);
    while (!stop.load()) {
      raw.Command({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"});
      std::this_thread::sleep_for(std::chrono::microseconds(1000 + rng() % 4000));
    }
  });
  constexpr int kThreads = 4, kPerThread = 250;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      for (int j = 0; j < kPerThread; ++j) {
        Status st = Increment(*e, "counter");
        if (!st.ok()) {
          failures++;
          ADD_FAILURE() << st.ToString();
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  stop = true;
  killer.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(ReadCounter(*e, "counter"), static_cast<uint64_t>(kThreads * kPerThread));
}

TEST(RedisEngine, GivesUpAfterTheDeadlineWhenTheServerIsGone) {
  ThrowawayRedis server;
  ASSERT_TRUE(server.ok());
  auto e = MustOpen(server.Url(0) + "?timeout=1s");
  ASSERT_NE(e, nullptr);
  server.Kill();
  auto start = std::chrono::steady_clock::now();
  Status st = e->Txn([](KvTxn& t) { return t.Put("k", "v"); });
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(st.code(), EIO) << st.ToString();
  EXPECT_NE(st.message().find("127.0.0.1:" + std::to_string(server.port())), std::string::npos)
      << st.message();
  EXPECT_LT(took, std::chrono::seconds(5));
}

}  // namespace
}  // namespace tierfs
