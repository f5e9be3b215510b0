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
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "common/encoding.h"
#include "common/url.h"
#include "meta/engine_for_test.h"
#include "meta/key_schema.h"
#include "meta/kv_engine_test_util.h"

namespace tierfs {
namespace {

using namespace kv_test;  // NOLINT

// ---- Engine kinds for the typed tests ----

struct MemKind {
  static std::string Url(const TempDir&) {
    static std::atomic<int> counter{0};
    return "mem://kv-engine-test-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
  }
};

struct SqliteKind {
  static std::string Url(const TempDir& dir) { return "sqlite3://" + dir.path() + "/meta.db"; }
};

struct RedisKind {
  // Database 2 of the test server; meta_test uses database 1.
  static std::string Url(const TempDir&) { return ServerUrl("TIERFS_TEST_REDIS_URL", "/2"); }
};

struct PostgresKind {
  static std::string Url(const TempDir&) { return ServerUrl("TIERFS_TEST_PG_URL", "/tierfs_kv_test"); }
};

struct EtcdKind {
  static std::string Url(const TempDir&) { return ServerUrl("TIERFS_TEST_ETCD_URL", "kv_test"); }
};

struct RedisSentinelKind {
  // A master found through three Sentinels, each commit waiting for the replica.
  static std::string Url(const TempDir&) {
    return ServerUrl("TIERFS_TEST_REDIS_SENTINEL_URL", "/2?wait-replicas=1");
  }
};

class KindNames {
 public:
  template <typename T>
  static std::string GetName(int) {
    if (std::is_same_v<T, MemKind>) return "Mem";
    if (std::is_same_v<T, RedisKind>) return "Redis";
    if (std::is_same_v<T, PostgresKind>) return "Postgres";
    if (std::is_same_v<T, EtcdKind>) return "Etcd";
    if (std::is_same_v<T, RedisSentinelKind>) return "RedisSentinel";
    return "Sqlite";
  }
};

template <typename Kind>
class KvEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    url_ = Kind::Url(dir_);
    if (url_.empty()) GTEST_SKIP() << "no test server: run through ctest, which starts one";
    auto e = OpenKvEngine(url_);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    engine_ = std::move(e).value();
  }

  std::unique_ptr<KvEngine> OpenAnother() {
    auto e = OpenKvEngine(url_);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return e.ok() ? std::move(e).value() : nullptr;
  }

  TempDir dir_;
  std::string url_;
  std::unique_ptr<KvEngine> engine_;
};

using EngineKinds = ::testing::Types<MemKind, SqliteKind, RedisKind, PostgresKind, EtcdKind, RedisSentinelKind>;
TYPED_TEST_SUITE(KvEngineTest, EngineKinds, KindNames);

TYPED_TEST(KvEngineTest, DescribeIsTheUrlWithoutPassword) {
  auto url = ParseUrl(this->url_);
  ASSERT_TRUE(url.ok());
  EXPECT_EQ(this->engine_->Describe(), url->Redacted());
}

TYPED_TEST(KvEngineTest, GetIndirectFollowsTheLastValue) {
  KvEngine& e = *this->engine_;
  ASSERT_TRUE(PutCommitted(e, "Pa", "parent").ok());
  ASSERT_TRUE(PutCommitted(e, "Dn", "12345678tail").ok());
  ASSERT_TRUE(PutCommitted(e, "Ds", "123").ok());
  ASSERT_TRUE(PutCommitted(e, "A12345678I", "child").ok());
  using Vals = std::vector<std::optional<std::string>>;
  auto read = [&](std::vector<std::string> direct) {
    Vals got;
    EXPECT_TRUE(e.Txn(
                     [&](KvTxn& t) -> Status {
                       ASSIGN_OR_RETURN(got, t.GetIndirect(direct, "A", 8, "I"));
                       return Status::OK();
                     },
                     true)
                    .ok());
    return got;
  };
  EXPECT_EQ(read({"Pa", "Dn"}), (Vals{"parent", "12345678tail", "child"}));
  EXPECT_EQ(read({"Pa", "Dmissing"}), (Vals{"parent", std::nullopt, std::nullopt}));
  EXPECT_EQ(read({"Ds"}), (Vals{"123", std::nullopt}));  // too short to name a key
  EXPECT_EQ(read({"Pmissing", "Dn"}), (Vals{std::nullopt, "12345678tail", "child"}));
  // Inside a write transaction it sees the transaction's own writes.
  Vals got;
  ASSERT_TRUE(e.Txn([&](KvTxn& t) -> Status {
                 RETURN_IF_ERROR(t.Put("Dn", "87654321"));
                 RETURN_IF_ERROR(t.Put("A87654321I", "other"));
                 ASSIGN_OR_RETURN(got, t.GetIndirect({"Dn"}, "A", 8, "I"));
                 return Status::OK();
               }).ok());
  EXPECT_EQ(got, (Vals{"87654321", "other"}));
}

TYPED_TEST(KvEngineTest, PutGetDelete) {
  KvEngine& e = *this->engine_;
  EXPECT_EQ(GetCommitted(e, "a"), std::nullopt);
  ASSERT_TRUE(PutCommitted(e, "a", "1").ok());
  EXPECT_EQ(GetCommitted(e, "a"), "1");
  ASSERT_TRUE(PutCommitted(e, "a", "22").ok());
  EXPECT_EQ(GetCommitted(e, "a"), "22");
  ASSERT_TRUE(e.Txn([](KvTxn& t) { return t.Delete("a"); }).ok());
  EXPECT_EQ(GetCommitted(e, "a"), std::nullopt);
  // Deleting a missing key is not an error.
  ASSERT_TRUE(e.Txn([](KvTxn& t) { return t.Delete("never-written"); }).ok());
}

TYPED_TEST(KvEngineTest, EmptyKeyAndEmptyValue) {
  KvEngine& e = *this->engine_;
  ASSERT_TRUE(PutCommitted(e, "", "root").ok());
  ASSERT_TRUE(PutCommitted(e, "k", "").ok());
  EXPECT_EQ(GetCommitted(e, ""), "root");
  // An empty value is present, not missing.
  EXPECT_EQ(GetCommitted(e, "k"), std::string());
  EXPECT_EQ(ScanCommitted(e, "", ""), (KvList{{"", "root"}, {"k", ""}}));
}

TYPED_TEST(KvEngineTest, BinaryValuesRoundTrip) {
  KvEngine& e = *this->engine_;
  std::string value;
  for (int i = 0; i < 4096; ++i) value.push_back(static_cast<char>(i * 7));
  std::string big(4 << 20, '\0');
  for (size_t i = 0; i < big.size(); i += 4093) big[i] = static_cast<char>(i);
  ASSERT_TRUE(PutCommitted(e, std::string("v\0\xff", 3), value).ok());
  ASSERT_TRUE(PutCommitted(e, "big", big).ok());
  EXPECT_EQ(GetCommitted(e, std::string("v\0\xff", 3)), value);
  EXPECT_EQ(GetCommitted(e, "big"), big);
}

TYPED_TEST(KvEngineTest, ReadsSeeOwnWrites) {
  KvEngine& e = *this->engine_;
  ASSERT_TRUE(PutCommitted(e, "x", "old").ok());
  Status st = e.Txn([](KvTxn& t) -> Status {
    ASSIGN_OR_RETURN(auto v, t.Get("x"));
    EXPECT_EQ(v, "old");
    RETURN_IF_ERROR(t.Put("x", "new"));
    RETURN_IF_ERROR(t.Put("y", "fresh"));
    ASSIGN_OR_RETURN(v, t.Get("x"));
    EXPECT_EQ(v, "new");
    ASSIGN_OR_RETURN(v, t.Get("y"));
    EXPECT_EQ(v, "fresh");
    RETURN_IF_ERROR(t.Delete("x"));
    ASSIGN_OR_RETURN(v, t.Get("x"));
    EXPECT_EQ(v, std::nullopt);
    KvList seen;
    RETURN_IF_ERROR(t.Scan("", "", 0, [&](std::string_view k, std::string_view val) {
      seen.emplace_back(k, val);
      return true;
    }));
    EXPECT_EQ(seen, (KvList{{"y", "fresh"}}));
    return Status::OK();
  });
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(ScanCommitted(e, "", ""), (KvList{{"y", "fresh"}}));
}

TYPED_TEST(KvEngineTest, GetManyReadsWhatGetReads) {
  KvEngine& e = *this->engine_;
  // 1,100 keys cross every engine's batch; some are missing, some repeat, some are binary
  // or empty, and the transaction's own writes are seen.
  ASSERT_TRUE(e.Txn([](KvTxn& t) -> Status {
                 for (int i = 0; i < 1000; i += 2) RETURN_IF_ERROR(t.Put("m" + std::to_string(i), "v" + std::to_string(i)));
                 RETURN_IF_ERROR(t.Put(std::string("b\0\xff", 3), std::string("\0\x01", 2)));
                 RETURN_IF_ERROR(t.Put("empty", ""));
                 return t.Put("gone", "soon");
               }).ok());
  std::vector<std::string> ks = {"m0", "m0", "m2", "m1", "m2"};  // repeats within one batch
  for (int i = 0; i < 1100; ++i) ks.push_back("m" + std::to_string((i * 7919) % 1000));
  for (int i = 0; i < 50; ++i) ks.push_back("m" + std::to_string(i));  // repeats
  ks.push_back(std::string("b\0\xff", 3));
  ks.push_back("empty");
  ks.push_back("");
  ks.push_back("gone");
  ks.push_back("new");
  for (bool read_only : {true, false}) {
    Status st = e.Txn(
        [&](KvTxn& t) -> Status {
          if (!read_only) {
            RETURN_IF_ERROR(t.Delete("gone"));
            RETURN_IF_ERROR(t.Put("new", "n"));
            RETURN_IF_ERROR(t.Put("m1", "odd"));
          }
          ASSIGN_OR_RETURN(auto many, t.GetMany(ks));
          EXPECT_EQ(many.size(), ks.size());
          for (size_t i = 0; i < ks.size() && i < many.size(); ++i) {
            ASSIGN_OR_RETURN(auto one, t.Get(ks[i]));
            EXPECT_EQ(many[i], one) << "key " << i << " '" << ks[i] << "' read_only " << read_only;
          }
          ASSIGN_OR_RETURN(auto few, t.GetMany({"m2", "m3"}));
          EXPECT_EQ(few, (std::vector<std::optional<std::string>>{"v2", std::nullopt}));
          ASSIGN_OR_RETURN(auto none, t.GetMany({}));
          EXPECT_TRUE(none.empty());
          if (!read_only) {
            ASSIGN_OR_RETURN(auto w, t.GetMany({"gone", "new", "m1", "m0", "x", "y", "gone"}));
            EXPECT_EQ(w, (std::vector<std::optional<std::string>>{std::nullopt, "n", "odd", "v0", std::nullopt,
                                                                  std::nullopt, std::nullopt}));
          }
          return Status::OK();
        },
        read_only);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  // The reads were checked against Get of the same transaction; check a few against what
  // was written, so that both cannot be wrong alike.
  EXPECT_EQ(GetCommitted(e, "m998"), "v998");
  ASSERT_TRUE(e.Txn([](KvTxn& t) -> Status {
                 ASSIGN_OR_RETURN(auto v, t.GetMany({"m998", "m997", "m0", "m2", "m4", "m5"}));
                 EXPECT_EQ(v, (std::vector<std::optional<std::string>>{"v998", std::nullopt, "v0", "v2", "v4",
                                                                       std::nullopt}));
                 return Status::OK();
               },
               true)
                  .ok());
}

// Prefetch is a hint: the reads after it see exactly what they would without it, the
// transaction's own writes included, also past the first batch of a long prefix (300
// chunk records; Redis prefetches 128, PostgreSQL 256) and for prefixes and keys that hold
// nothing.
TYPED_TEST(KvEngineTest, PrefetchChangesNothingTheReadsSee) {
  KvEngine& e = *this->engine_;
  ASSERT_TRUE(e.Txn([](KvTxn& t) {
                 RETURN_IF_ERROR(t.Put(keys::Inode(5), "attr5"));
                 for (uint64_t seq = 1; seq <= 300; ++seq) {
                   RETURN_IF_ERROR(t.Put(keys::ChunkRecord(5, 0, seq), "slice" + std::to_string(seq)));
                 }
                 return t.Put(keys::ChunkRecord(5, 1, 1), "next chunk");
               })
                  .ok());
  auto scan = [](KvTxn& t, const std::string& prefix, KvList* out) {
    out->clear();
    return t.Scan(prefix, PrefixEnd(prefix), 0, [&](std::string_view k, std::string_view v) {
      out->emplace_back(k, v);
      return true;
    });
  };
  for (bool own_writes : {false, true}) {
    KvList plain, hinted, plain_empty, hinted_empty;
    std::optional<std::string> plain_attr, hinted_attr, plain_missing, hinted_missing;
    auto read = [&](bool hint, KvList* chunk, KvList* empty, std::optional<std::string>* attr,
                    std::optional<std::string>* missing) {
      return [&, hint, chunk, empty, attr, missing](KvTxn& t) -> Status {
        if (own_writes) {
          RETURN_IF_ERROR(t.Put(keys::ChunkRecord(5, 0, 150), "rewritten"));
          RETURN_IF_ERROR(t.Delete(keys::ChunkRecord(5, 0, 2)));
          RETURN_IF_ERROR(t.Put(keys::Inode(5), "attr5 changed"));
        }
        if (hint) {
          RETURN_IF_ERROR(t.Prefetch({keys::Inode(5), keys::Inode(6)},
                                     {keys::ChunkPrefix(5, 0), keys::ChunkPrefix(6, 0), keys::TruncRulesPrefix(5)}));
        }
        ASSIGN_OR_RETURN(*attr, t.Get(keys::Inode(5)));
        ASSIGN_OR_RETURN(*missing, t.Get(keys::Inode(6)));
        RETURN_IF_ERROR(scan(t, keys::ChunkPrefix(5, 0), chunk));
        return scan(t, keys::ChunkPrefix(6, 0), empty);
      };
    };
    // Read-only when nothing is written: the path where Redis answers in one round trip.
    ASSERT_TRUE(e.Txn(read(false, &plain, &plain_empty, &plain_attr, &plain_missing), !own_writes).ok());
    ASSERT_TRUE(e.Txn(read(true, &hinted, &hinted_empty, &hinted_attr, &hinted_missing), !own_writes).ok());
    EXPECT_EQ(hinted, plain);
    EXPECT_EQ(hinted.size(), own_writes ? 299u : 300u);
    EXPECT_EQ(hinted_attr, plain_attr);
    EXPECT_EQ(hinted_attr, std::optional<std::string>(own_writes ? "attr5 changed" : "attr5"));
    EXPECT_FALSE(hinted_missing.has_value());
    EXPECT_TRUE(hinted_empty.empty());
    EXPECT_TRUE(plain_empty.empty());
  }
  // A scan with a limit stops at it, from a prefetched batch too.
  auto first3 = [&](bool hint) {
    KvList out;
    EXPECT_TRUE(e.Txn(
                     [&](KvTxn& t) -> Status {
                       std::string p = keys::ChunkPrefix(5, 0);
                       if (hint) RETURN_IF_ERROR(t.Prefetch({}, {p}));
                       out.clear();
                       return t.Scan(p, PrefixEnd(p), 3, [&](std::string_view k, std::string_view v) {
                         out.emplace_back(k, v);
                         return true;
                       });
                     },
                     true)
                    .ok());
    return out;
  };
  KvList hinted3 = first3(true);
  EXPECT_EQ(hinted3.size(), 3u);
  EXPECT_EQ(hinted3, first3(false));
}

TYPED_TEST(KvEngineTest, GetManyOfKeysFarApart) {
  KvEngine& e = *this->engine_;
  // Dense runs and sparse stretches in one call: engines that scan between the keys must
  // stop and fall back where the keys lie far apart, and find every value still.
  ASSERT_TRUE(e.Txn([](KvTxn& t) -> Status {
                 for (int i = 0; i < 6000; ++i) {
                   char k[16];
                   snprintf(k, sizeof k, "s%06d", i);
                   RETURN_IF_ERROR(t.Put(k, std::to_string(i)));
                 }
                 return Status::OK();
               }).ok());
  std::vector<std::string> ks;
  std::vector<std::optional<std::string>> want;
  auto ask = [&](int i) {
    char k[16];
    snprintf(k, sizeof k, "s%06d", i);
    ks.push_back(k);
    want.push_back(i < 6000 ? std::optional<std::string>(std::to_string(i)) : std::nullopt);
  };
  for (int i = 0; i < 40; ++i) ask(i);                 // dense
  for (int i = 40; i < 6000; i += 97) ask(i);          // sparse
  for (int i = 5000; i < 5030; ++i) ask(i);            // dense again, out of order with the rest
  for (int i = 6000; i < 6010; ++i) ask(i);            // missing, past the end
  ASSERT_TRUE(e.Txn([&](KvTxn& t) -> Status {
                 ASSIGN_OR_RETURN(auto got, t.GetMany(ks));
                 EXPECT_EQ(got, want);
                 return Status::OK();
               },
               true)
                  .ok());
}

TYPED_TEST(KvEngineTest, FailedCallbackRollsBackEverything) {
  KvEngine& e = *this->engine_;
  ASSERT_TRUE(PutCommitted(e, "keep", "v1").ok());
  ASSERT_TRUE(PutCommitted(e, "gone", "v1").ok());
  Status st = e.Txn([](KvTxn& t) -> Status {
    RETURN_IF_ERROR(t.Put("keep", "v2"));
    RETURN_IF_ERROR(t.Put("new", "v"));
    RETURN_IF_ERROR(t.Delete("gone"));
    return Status::Err(EEXIST, "callback failed on purpose");
  });
  EXPECT_EQ(st.code(), EEXIST);
  EXPECT_EQ(st.message(), "callback failed on purpose");
  EXPECT_EQ(ScanCommitted(e, "", ""), (KvList{{"gone", "v1"}, {"keep", "v1"}}));
}

TYPED_TEST(KvEngineTest, ReadOnlyTxnRefusesWrites) {
  KvEngine& e = *this->engine_;
  Status put_status;
  Status st = e.Txn(
      [&](KvTxn& t) {
        put_status = t.Put("k", "v");
        return Status::OK();  // ignores the failure: the txn must still fail
      },
      /*read_only=*/true);
  EXPECT_EQ(put_status.code(), EROFS);
  EXPECT_EQ(st.code(), EROFS);
  st = e.Txn([](KvTxn& t) { return t.Delete("k"); }, /*read_only=*/true);
  EXPECT_EQ(st.code(), EROFS);
  EXPECT_EQ(GetCommitted(e, "k"), std::nullopt);
}

TYPED_TEST(KvEngineTest, NestedTxnIsRejected) {
  KvEngine& e = *this->engine_;
  Status inner;
  Status st = e.Txn([&](KvTxn& t) {
    inner = e.Txn([](KvTxn&) { return Status::OK(); }, /*read_only=*/true);
    return t.Put("a", "b");
  });
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(inner.code(), EDEADLK);
}

TYPED_TEST(KvEngineTest, ScanOrdersBinaryKeysAsUnsignedBytes) {
  KvEngine& e = *this->engine_;
  // In unsigned byte order: 0x7f and 0x80 sort after the letters, 0xff last.
  std::vector<std::string> keys = {
      std::string(),           std::string(1, '\0'), std::string(2, '\0'),
      std::string("\x01"),     std::string("a"),     std::string("a\0", 2),
      std::string("a\x01"),    std::string("ab"),    std::string("a\xff"),
      std::string("b"),        std::string("\x7f"),  std::string("\x80"),
      std::string("\xfe\xff"), std::string("\xff"),  std::string("\xff\x00", 2),
      std::string("\xff\xff"),
  };
  std::vector<std::string> shuffled = keys;
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(42));
  ASSERT_TRUE(e.Txn([&](KvTxn& t) -> Status {
                 for (const auto& k : shuffled) RETURN_IF_ERROR(t.Put(k, "v" + k));
                 return Status::OK();
               }).ok());
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));
  KvList all = ScanCommitted(e, "", "");
  EXPECT_EQ(Keys(all), keys);
  for (const auto& [k, v] : all) EXPECT_EQ(v, "v" + k);

  EXPECT_EQ(Keys(ScanCommitted(e, "a", PrefixEnd("a"))),
            (std::vector<std::string>{"a", std::string("a\0", 2), "a\x01", "ab", "a\xff"}));
  // Prefix "\xff" has no end key: scan to the end.
  EXPECT_EQ(Keys(ScanCommitted(e, "\xff", PrefixEnd("\xff"))),
            (std::vector<std::string>{"\xff", std::string("\xff\x00", 2), "\xff\xff"}));
  // Half-open range: begin included, end excluded.
  EXPECT_EQ(Keys(ScanCommitted(e, std::string(1, '\0'), "a")),
            (std::vector<std::string>{std::string(1, '\0'), std::string(2, '\0'), "\x01"}));
  EXPECT_EQ(Keys(ScanCommitted(e, "b", "\xff")),
            (std::vector<std::string>{"b", "\x7f", "\x80", "\xfe\xff"}));
  // Empty and inverted ranges.
  EXPECT_TRUE(ScanCommitted(e, "b", "b").empty());
  EXPECT_TRUE(ScanCommitted(e, "c", "b").empty());
}

// The change log's keys ("H" + u64) are kept apart by the SQLite engine (sqlite_txn.h);
// one key space must still come out, in order, with any key near them, across batches.
TYPED_TEST(KvEngineTest, ChangeLogKeysAreOneKeySpaceWithTheRest) {
  KvEngine& e = *this->engine_;
  auto log_key = [](uint64_t seq) {
    std::string k = "H";
    PutU64(&k, seq);
    return k;
  };
  std::map<std::string, std::string> want;
  for (uint64_t seq = 1; seq <= 700; ++seq) want[log_key(seq)] = "r" + std::to_string(seq);
  // Keys of the kv side in and around the log's range: shorter, longer and top-bit ones.
  for (uint64_t seq : {0ULL, 5ULL, 256ULL, 300ULL, 699ULL, 700ULL}) {
    want[log_key(seq) + std::string(1, '\0')] = "longer";
    want[log_key(seq) + "x"] = "longer";
  }
  for (std::string k : {std::string("G"), std::string("H"), std::string("H\x00", 2), std::string("Ha"),
                        std::string("I"), std::string("H\x7f\xff\xff\xff\xff\xff\xff\xfe", 9),
                        std::string("H\x7f\xff\xff\xff\xff\xff\xff\xff", 9), std::string("H\x80", 2),
                        std::string("H\xff\xff\xff\xff\xff\xff\xff\xff", 9),
                        std::string("H\xff\xff\xff\xff\xff\xff\xff\xff\x01", 10)}) {
    want[k] = "edge";
  }
  ASSERT_TRUE(e.Txn([&](KvTxn& t) -> Status {
                 for (const auto& [k, v] : want) RETURN_IF_ERROR(t.Put(k, v));
                 return Status::OK();
               }).ok());
  auto hex = [](const std::string& s) {
    std::string out;
    for (unsigned char c : s) out += "0123456789abcdef"[c >> 4], out += "0123456789abcdef"[c & 15];
    return out;
  };
  auto expect_range = [&](const std::string& begin, const std::string& end, size_t limit) {
    KvList got = ScanCommitted(e, begin, end, limit);
    KvList exp;
    for (auto it = want.lower_bound(begin); it != want.end() && (end.empty() || it->first < end); ++it) {
      if (limit && exp.size() == limit) break;
      exp.emplace_back(it->first, it->second);
    }
    EXPECT_EQ(got, exp) << "range [" << hex(begin) << ", " << hex(end) << ") limit " << limit;
  };
  for (size_t limit : {0, 1, 255, 256, 257, 1000}) {
    expect_range("", "", limit);
    expect_range("H", PrefixEnd("H"), limit);
    expect_range(log_key(5), log_key(600), limit);
    expect_range(log_key(5) + "x", log_key(600) + std::string(1, '\0'), limit);
    expect_range("H\x01", "I", limit);
    expect_range("G", log_key(1), limit);
  }
  // Reads and deletes by key reach the same place.
  EXPECT_EQ(GetCommitted(e, log_key(300)), "r300");
  EXPECT_EQ(GetCommitted(e, log_key(300) + "x"), "longer");
  ASSERT_TRUE(e.Txn([&](KvTxn& t) -> Status {
                 RETURN_IF_ERROR(t.Delete(log_key(300)));
                 RETURN_IF_ERROR(t.Delete("H"));
                 ASSIGN_OR_RETURN(auto many, t.GetMany({log_key(299), log_key(300), log_key(301), "Ha"}));
                 EXPECT_EQ(many[0], "r299");
                 EXPECT_FALSE(many[1].has_value());
                 EXPECT_EQ(many[2], "r301");
                 EXPECT_EQ(many[3], "edge");
                 return Status::OK();
               }).ok());
  want.erase(log_key(300));
  want.erase("H");
  expect_range("", "", 0);
  ASSERT_TRUE(e.Reset().ok());
  EXPECT_TRUE(ScanCommitted(e, "", "").empty());
}

TYPED_TEST(KvEngineTest, ScanLimitAndEarlyStop) {
  KvEngine& e = *this->engine_;
  constexpr int kKeys = 1000;  // several SQLite scan batches
  ASSERT_TRUE(e.Txn([&](KvTxn& t) -> Status {
                 for (int i = 0; i < kKeys; ++i)
                   RETURN_IF_ERROR(t.Put(NumKey(i), std::to_string(i)));
                 return t.Put("o/after", "x");
               }).ok());
  std::string begin = "n/", end = PrefixEnd("n/");
  EXPECT_EQ(ScanCommitted(e, begin, end).size(), static_cast<size_t>(kKeys));
  for (size_t limit : {1, 255, 256, 257, 300, 512, 999, 1000, 5000}) {
    KvList got = ScanCommitted(e, begin, end, limit);
    ASSERT_EQ(got.size(), std::min<size_t>(limit, kKeys)) << "limit " << limit;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i].first, NumKey(static_cast<int>(i)));
      ASSERT_EQ(got[i].second, std::to_string(i));
    }
  }
  // Unbounded end sees the key after the prefix too.
  EXPECT_EQ(ScanCommitted(e, begin, "").size(), static_cast<size_t>(kKeys + 1));

  for (int stop_after : {1, 10, 256, 600}) {
    int calls = 0;
    ASSERT_TRUE(e.Txn(
                     [&](KvTxn& t) {
                       calls = 0;
                       return t.Scan(begin, end, 0, [&](std::string_view, std::string_view) {
                         return ++calls < stop_after;
                       });
                     },
                     true)
                    .ok());
    EXPECT_EQ(calls, stop_after);
  }
}

TYPED_TEST(KvEngineTest, ScanCallbackMayUseTheTxn) {
  KvEngine& e = *this->engine_;
  constexpr int kKeys = 700;
  ASSERT_TRUE(e.Txn([&](KvTxn& t) -> Status {
                 for (int i = 0; i < kKeys; ++i)
                   RETURN_IF_ERROR(t.Put(NumKey(i), std::to_string(i)));
                 return Status::OK();
               }).ok());
  int visited = 0;
  Status st = e.Txn([&](KvTxn& t) -> Status {
    Status inner;
    RETURN_IF_ERROR(t.Scan("n/", PrefixEnd("n/"), 0, [&](std::string_view k, std::string_view v) {
      ++visited;
      std::string key(k), value(v);
      auto got = t.Get(key);
      if (!got.ok() || *got != value) {
        inner = Status::Err(EIO, "Get inside scan disagreed for " + key);
        return false;
      }
      inner = t.Put("copy/" + key, value);
      if (inner.ok()) inner = t.Delete(key);
      return inner.ok();
    }));
    return inner;
  });
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(visited, kKeys);
  EXPECT_TRUE(ScanCommitted(e, "n/", PrefixEnd("n/")).empty());
  KvList copies = ScanCommitted(e, "copy/", PrefixEnd("copy/"));
  ASSERT_EQ(copies.size(), static_cast<size_t>(kKeys));
  EXPECT_EQ(copies[123], (std::pair<std::string, std::string>{"copy/" + NumKey(123), "123"}));
}

TYPED_TEST(KvEngineTest, ScanMergesUncommittedWrites) {
  KvEngine& e = *this->engine_;
  ASSERT_TRUE(e.Txn([](KvTxn& t) -> Status {
                 RETURN_IF_ERROR(t.Put("a1", "1"));
                 RETURN_IF_ERROR(t.Put("a3", "3"));
                 RETURN_IF_ERROR(t.Put("a5", "5"));
                 return t.Put("b", "b");
               }).ok());
  KvList seen;
  Status st = e.Txn([&](KvTxn& t) -> Status {
    RETURN_IF_ERROR(t.Delete("a3"));
    RETURN_IF_ERROR(t.Put("a2", "2"));
    RETURN_IF_ERROR(t.Put("a5", "five"));
    RETURN_IF_ERROR(t.Put("a6", "6"));
    RETURN_IF_ERROR(t.Put("a0", "0"));
    RETURN_IF_ERROR(t.Delete("a6"));
    return t.Scan("a", "b", 0, [&](std::string_view k, std::string_view v) {
      seen.emplace_back(k, v);
      return true;
    });
  });
  ASSERT_TRUE(st.ok()) << st.ToString();
  KvList want = {{"a0", "0"}, {"a1", "1"}, {"a2", "2"}, {"a5", "five"}};
  EXPECT_EQ(seen, want);
  EXPECT_EQ(ScanCommitted(e, "a", "b"), want);
}

TYPED_TEST(KvEngineTest, ResetRemovesEverything) {
  KvEngine& e = *this->engine_;
  ASSERT_TRUE(e.Txn([](KvTxn& t) -> Status {
                 for (int i = 0; i < 300; ++i) RETURN_IF_ERROR(t.Put(NumKey(i), "x"));
                 return t.Put("\xff\xff", "y");
               }).ok());
  ASSERT_TRUE(e.Reset().ok());
  EXPECT_TRUE(ScanCommitted(e, "", "").empty());
  ASSERT_TRUE(PutCommitted(e, "after", "reset").ok());
  EXPECT_EQ(GetCommitted(e, "after"), "reset");
}

TYPED_TEST(KvEngineTest, ConcurrentIncrementsAreExact) {
  KvEngine& e = *this->engine_;
  constexpr int kThreads = 8, kPerThread = 500;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      for (int j = 0; j < kPerThread; ++j) {
        if (!Increment(e, "counter").ok()) failures++;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(ReadCounter(e, "counter"), static_cast<uint64_t>(kThreads * kPerThread));
}

// Writers move amounts between two accounts; every read-only transaction must see a
// consistent snapshot (the sum never changes).
TYPED_TEST(KvEngineTest, ReadOnlyTxnsSeeConsistentSnapshots) {
  KvEngine& e = *this->engine_;
  constexpr uint64_t kTotal = 1000000;
  ASSERT_TRUE(e.Txn([&](KvTxn& t) -> Status {
                 RETURN_IF_ERROR(t.Put("acct/a", EncodeU64(kTotal / 2)));
                 return t.Put("acct/b", EncodeU64(kTotal / 2));
               }).ok());
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0}, errors{0}, reads{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      std::mt19937 rng(w);
      // Keep writing until the readers have overlapped with the writers for a while.
      for (int i = 0; i < 400 || reads.load() < 50; ++i) {
        uint64_t amount = rng() % 100;
        Status st = e.Txn([&](KvTxn& t) -> Status {
          ASSIGN_OR_RETURN(auto a, t.Get("acct/a"));
          ASSIGN_OR_RETURN(auto b, t.Get("acct/b"));
          uint64_t va = ByteReader(*a).U64(), vb = ByteReader(*b).U64();
          if (va < amount) return Status::OK();
          RETURN_IF_ERROR(t.Put("acct/a", EncodeU64(va - amount)));
          return t.Put("acct/b", EncodeU64(vb + amount));
        });
        if (!st.ok()) errors++;
      }
    });
  }
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&] {
      while (!stop.load()) {
        Status st = e.Txn(
            [&](KvTxn& t) -> Status {
              uint64_t sum = 0;
              RETURN_IF_ERROR(
                  t.Scan("acct/", PrefixEnd("acct/"), 0, [&](std::string_view, std::string_view v) {
                    sum += ByteReader(v).U64();
                    return true;
                  }));
              if (sum != kTotal) bad++;
              return Status::OK();
            },
            true);
        if (!st.ok()) errors++;
        reads++;
      }
    });
  }
  threads[0].join();
  threads[1].join();
  stop = true;
  for (size_t i = 2; i < threads.size(); ++i) threads[i].join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(errors.load(), 0);
  EXPECT_GT(reads.load(), 0);
}

TYPED_TEST(KvEngineTest, InstancesOfOneUrlShareData) {
  KvEngine& e = *this->engine_;
  auto other = this->OpenAnother();
  ASSERT_NE(other, nullptr);
  ASSERT_TRUE(PutCommitted(e, "from-first", "1").ok());
  EXPECT_EQ(GetCommitted(*other, "from-first"), "1");
  ASSERT_TRUE(PutCommitted(*other, "from-second", "2").ok());
  EXPECT_EQ(GetCommitted(e, "from-second"), "2");
}

}  // namespace
}  // namespace tierfs
