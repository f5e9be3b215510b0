// S3Store against a real radosgw (TIERFS_TEST_S3_ENDPOINT, ..._ACCESS_KEY, ..._SECRET_KEY;
// skipped when unset), and retry behaviour against a tiny scripted HTTP server
// (tiny_server_test.h; the URL and XML helpers: s3_parse_test.cc).
#include "object/s3_store.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "common/buffer_pool.h"
#include "common/clock.h"
#include "common/hash.h"
#include "common/io_budget.h"
#include "object/http_client.h"
#include "object/s3_xml.h"
#include "object/tiny_server_test.h"

namespace tierfs {
namespace {

using Clock = std::chrono::steady_clock;

std::string RandomData(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

std::string RandomName() {
  std::random_device rd;
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%08x%08x", rd(), rd());
  return buf;
}

bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// ---------------------------------------------------------------- URL parsing


std::unique_ptr<ObjectStore> StoreAt(const std::string& url, const std::string& secret = "sk") {
  auto store = NewS3Store(StorageSpec{"s3", url, "ak", secret, "", ""});
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return store.ok() ? std::move(*store) : nullptr;
}

TEST(S3Retry, ServerErrorsAreRetried) {
  TinyServer server([](int n, const std::string& line, size_t) {
    EXPECT_TRUE(line.starts_with("GET /b/some/key ")) << line;
    if (n <= 2) return TinyServer::S3ErrorReply(503, "SlowDown");
    return TinyServer::Reply(200, "OK", "hello");
  });
  auto store = StoreAt("http://127.0.0.1:" + std::to_string(server.port()) + "/b");
  auto got = store->Get("some/key");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, "hello");
  EXPECT_EQ(server.requests(), 3);
}

// A body of known length is received into the thread's scoped pool (ReceiveInto): a cold
// read writes into recycled, already mapped memory.
TEST(S3Receive, ABodyLandsInTheScopedPoolsBuffer) {
  const std::string payload(300'000, 'p');
  TinyServer server([&](int, const std::string&, size_t) { return TinyServer::Reply(200, "OK", payload); });
  auto store = StoreAt("http://127.0.0.1:" + std::to_string(server.port()) + "/b");
  auto pool = BufferPool::Create(4 << 20);
  std::string recycled = pool->Take(payload.size());
  const char* mem = recycled.data();
  pool->Give(std::move(recycled));
  ReceiveInto scope(pool.get());
  auto got = store->Get("k");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, payload);
  EXPECT_EQ(got->data(), mem);
}

TEST(S3Retry, RetriedPutResendsTheWholeBody) {
  TinyServer server([](int n, const std::string&, size_t) {
    if (n == 1) return TinyServer::S3ErrorReply(500, "InternalError");
    if (n == 2) return TinyServer::S3ErrorReply(400, "RequestTimeout");
    return TinyServer::Reply(200, "OK", "");
  });
  auto store = StoreAt("http://127.0.0.1:" + std::to_string(server.port()) + "/b");
  std::string a = RandomData(70000, 1), b = RandomData(50000, 2);
  ASSERT_TRUE(store->PutParts("k", {a, b}).ok());
  EXPECT_EQ(server.requests(), 3);
  EXPECT_EQ(server.body_sizes(), (std::vector<size_t>{120000, 120000, 120000}));
}

TEST(S3Retry, ClientErrorsAreNotRetried) {
  TinyServer server([](int n, const std::string&, size_t) {
    if (n == 1) return TinyServer::S3ErrorReply(400, "InvalidArgument");
    return TinyServer::S3ErrorReply(404, "NoSuchKey");
  });
  auto store = StoreAt("http://127.0.0.1:" + std::to_string(server.port()) + "/b");
  Status st = store->Put("k", "v");
  EXPECT_EQ(st.code(), EINVAL) << st.ToString();
  EXPECT_EQ(server.requests(), 1);
  auto got = store->Get("missing/key");
  EXPECT_EQ(got.status().code(), ENOENT);
  EXPECT_EQ(got.status().message(), "object missing/key not found in s3://127.0.0.1:" +
                                        std::to_string(server.port()) + "/b/");
  EXPECT_EQ(server.requests(), 2);
}

TEST(S3Retry, GivesUpAfterTries) {
  TinyServer server([](int, const std::string&, size_t) { return TinyServer::S3ErrorReply(503, "SlowDown"); });
  auto store = StoreAt("http://127.0.0.1:" + std::to_string(server.port()) + "/b?tries=3");
  Status st = store->Put("k", "v");
  EXPECT_EQ(st.code(), EIO);
  EXPECT_TRUE(Contains(st.message(), "cannot write object k in s3://127.0.0.1:")) << st.message();
  EXPECT_TRUE(Contains(st.message(), "S3 error SlowDown (HTTP 503): scripted (gave up after 3 tries)"))
      << st.message();
  EXPECT_EQ(server.requests(), 3);
}

TEST(S3Retry, UnreachableEndpointFailsQuickly) {
  // Bounded retries, then an error (a hang would be caught by ctest's timeout; no
  // wall-clock threshold here).
  auto store = StoreAt("http://127.0.0.1:1/bucket?tries=3");
  auto got = store->Get("k");
  EXPECT_EQ(got.status().code(), EIO);
  EXPECT_TRUE(Contains(got.status().message(), "cannot reach http://127.0.0.1:1: Connection refused"))
      << got.status().message();
  EXPECT_EQ(store->Init().code(), EIO);
}

// A slow answer is still an answer: only a stall of `timeout` seconds fails a request, never
// its total time (a 64 ms limit once crept in through positional options and made every busy
// request fail and retry).
TEST(S3Retry, SlowAnswersAreNotRetried) {
  TinyServer server([](int, const std::string&, size_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    return TinyServer::Reply(200, "OK", "slow");
  });
  auto store = StoreAt("http://127.0.0.1:" + std::to_string(server.port()) + "/b");
  auto got = store->Get("k");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, "slow");
  EXPECT_EQ(server.requests(), 1);
}

TEST(S3Retry, SilentServerTimesOut) {
  TinyServer server([](int, const std::string&, size_t) { return std::string(); });
  auto store = StoreAt("http://127.0.0.1:" + std::to_string(server.port()) + "/b?tries=2&timeout=1");
  auto got = store->Get("k");
  EXPECT_EQ(got.status().code(), EIO);
  EXPECT_TRUE(Contains(got.status().message(), "no timely answer from http://127.0.0.1:")) << got.status().message();
  EXPECT_EQ(server.requests(), 2);
}

// A hung server costs the request's deadline (StorageSpec::io_timeout_s), not tries x
// timeout: each attempt's stall limit shrinks to the time left, and no attempt starts after
// it. Here a 2 s deadline against 30 s stall limits: one attempt, then the error.
TEST(S3Retry, SilentServerCostsTheDeadlineNotTriesTimesTimeout) {
  TinyServer server([](int, const std::string&, size_t) { return std::string(); });
  StorageSpec spec{"s3", "http://127.0.0.1:" + std::to_string(server.port()) + "/b?tries=10&timeout=30", "ak", "sk",
                   "", ""};
  spec.io_timeout_s = 2;
  auto store = NewS3Store(spec);
  ASSERT_TRUE(store.ok());
  auto got = (*store)->Get("k");
  EXPECT_EQ(got.status().code(), EIO);
  EXPECT_TRUE(Contains(got.status().message(), "no timely answer from http://127.0.0.1:")) << got.status().message();
  EXPECT_EQ(server.requests(), 1);
}

// The calling request's budget (common/io_budget.h) narrows the store's own: a budget of
// one attempt (write-back's uploads, which retry themselves) makes one request, and a
// budget already spent makes none.
TEST(S3Retry, TheRequestBudgetLimitsTriesAndTime) {
  TinyServer server([](int, const std::string&, size_t) { return TinyServer::S3ErrorReply(503, "SlowDown"); });
  auto store = StoreAt("http://127.0.0.1:" + std::to_string(server.port()) + "/b");
  {
    ScopedIoBudget once(IoBudget{0, 1});
    EXPECT_EQ(store->Put("k", "v").code(), EIO);
  }
  EXPECT_EQ(server.requests(), 1);
  {
    ScopedIoBudget spent(IoBudget{MonoNanos() - 1, 0});
    Status st = store->Put("k", "v");
    EXPECT_EQ(st.code(), EIO);
    EXPECT_TRUE(Contains(st.message(), "no time left")) << st.message();
  }
  EXPECT_EQ(server.requests(), 1);
  {
    // Narrowing only: an inner scope cannot give more tries than the outer one.
    ScopedIoBudget once(IoBudget{0, 1});
    ScopedIoBudget more(IoBudget{0, 5});
    EXPECT_EQ(CurrentIoBudget().max_tries, 1);
  }
  EXPECT_EQ(CurrentIoBudget().max_tries, 0);
}

// ---------------------------------------------------------------- radosgw

struct S3Env {
  std::string endpoint, access_key, secret_key;
};

std::optional<S3Env> TestEnv() {
  const char* ep = std::getenv("TIERFS_TEST_S3_ENDPOINT");
  const char* ak = std::getenv("TIERFS_TEST_S3_ACCESS_KEY");
  const char* sk = std::getenv("TIERFS_TEST_S3_SECRET_KEY");
  if (ep == nullptr || *ep == '\0') return std::nullopt;
  return S3Env{ep, ak ? ak : "", sk ? sk : ""};
}

// One bucket per run of the test binary, shared by the tests; emptied at the end.
class S3StoreTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    env_ = TestEnv();
    if (env_) bucket_ = "tierfs-test-" + RandomName();
  }
  static void TearDownTestSuite() {
    if (!env_) return;
    auto store = NewS3Store(Spec(env_->endpoint + "/" + bucket_));
    if (!store.ok()) return;
    auto all = (*store)->List("", "", 0);
    if (!all.ok()) return;
    for (const auto& info : *all) EXPECT_TRUE((*store)->Delete(info.key).ok()) << info.key;
  }
  void SetUp() override {
    if (!env_) GTEST_SKIP() << "TIERFS_TEST_S3_ENDPOINT is not set";
    url_ = env_->endpoint + "/" + bucket_;
    auto store = NewS3Store(Spec(url_));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
    Status st = store_->Init();
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  static StorageSpec Spec(const std::string& url) {
    return StorageSpec{"s3", url, env_->access_key, env_->secret_key, "", ""};
  }

  static inline std::optional<S3Env> env_;
  static inline std::string bucket_;
  std::string url_;
  std::unique_ptr<ObjectStore> store_;
};

TEST_F(S3StoreTest, PutGetHeadDelete) {
  EXPECT_EQ(store_->Describe(), "s3://" + env_->endpoint.substr(7) + "/" + bucket_ + "/");
  ASSERT_TRUE(store_->Init().ok());  // idempotent
  int64_t before = NowNanos();
  for (const std::string key : {"basic/one", "basic/a b+c=d&e?f#g%h é", "basic/dots/./x/../y", "basic/empty"}) {
    std::string data = key == "basic/empty" ? "" : RandomData(1000 + key.size(), 7) + key;
    Status st = store_->Put(key, data);
    ASSERT_TRUE(st.ok()) << key << ": " << st.ToString();
    auto got = store_->Get(key);
    ASSERT_TRUE(got.ok()) << key << ": " << got.status().ToString();
    EXPECT_EQ(*got, data) << key;
    auto head = store_->Head(key);
    ASSERT_TRUE(head.ok()) << key << ": " << head.status().ToString();
    EXPECT_EQ(head->key, key);
    EXPECT_EQ(head->size, data.size());
    // Last-Modified has a resolution of one second.
    EXPECT_GE(head->mtime_ns, before - 2000000000LL);
    EXPECT_LE(head->mtime_ns, NowNanos() + 2000000000LL);
  }
  auto list = store_->List("basic/", "", 0);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  std::vector<std::string> keys;
  for (const auto& info : *list) keys.push_back(info.key);
  EXPECT_EQ(keys, (std::vector<std::string>{"basic/a b+c=d&e?f#g%h é", "basic/dots/./x/../y", "basic/empty",
                                            "basic/one"}));

  ASSERT_TRUE(store_->Put("basic/one", "replaced").ok());
  EXPECT_EQ(*store_->Get("basic/one"), "replaced");
  for (const auto& k : keys) ASSERT_TRUE(store_->Delete(k).ok()) << k;
  auto gone = store_->Get("basic/one");
  EXPECT_EQ(gone.status().code(), ENOENT);
  EXPECT_EQ(gone.status().message(), "object basic/one not found in " + store_->Describe());
  EXPECT_EQ(store_->Head("basic/one").status().code(), ENOENT);
  EXPECT_EQ(store_->Get("basic/one", 5, 0).status().code(), ENOENT);
  EXPECT_TRUE(store_->Delete("basic/one").ok());  // already gone
  EXPECT_EQ(store_->Put("", "x").code(), EINVAL);
}

TEST_F(S3StoreTest, RangedReads) {
  const uint64_t size = 1 << 20;
  std::string data = RandomData(size, 42);
  ASSERT_TRUE(store_->Put("ranged", data).ok());
  struct Case {
    uint64_t off;
    int64_t len;
  };
  for (const Case& c : std::vector<Case>{{0, 1},
                                         {0, 10},
                                         {1, 65536},
                                         {12345, -1},
                                         {size - 1, 1},
                                         {size - 1, -1},
                                         {size - 10, 100},
                                         {0, static_cast<int64_t>(size)},
                                         {0, static_cast<int64_t>(size + 1000)},
                                         {size, 10},
                                         {size, -1},
                                         {size + 5, -1},
                                         {size * 10, 1},
                                         {10, 0}}) {
    auto got = store_->Get("ranged", c.off, c.len);
    ASSERT_TRUE(got.ok()) << c.off << "+" << c.len << ": " << got.status().ToString();
    std::string want = c.off >= size ? "" : data.substr(c.off, c.len < 0 ? std::string::npos : c.len);
    EXPECT_EQ(*got, want) << c.off << "+" << c.len;
  }
  ASSERT_TRUE(store_->Put("ranged-empty", "").ok());
  EXPECT_EQ(*store_->Get("ranged-empty", 0, 10), "");
  EXPECT_EQ(*store_->Get("ranged-empty", 3, -1), "");
  EXPECT_EQ(store_->Get("ranged-missing", 3, 10).status().code(), ENOENT);
}

TEST_F(S3StoreTest, PutPartsSendsTheConcatenation) {
  std::vector<std::string> pieces = {"header:", "", RandomData(300000, 3), "tail"};
  std::vector<std::string_view> views(pieces.begin(), pieces.end());
  ASSERT_TRUE(store_->PutParts("parts/obj", views).ok());
  EXPECT_EQ(*store_->Get("parts/obj"), pieces[0] + pieces[2] + pieces[3]);
  ASSERT_TRUE(store_->PutParts("parts/none", {}).ok());
  EXPECT_EQ(store_->Head("parts/none")->size, 0u);
}

TEST_F(S3StoreTest, ListAcrossPages) {
  constexpr int kKeys = 1100;
  auto key = [](int i) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "list/k%05d", i);
    return std::string(buf);
  };
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = t; i < kKeys; i += 8) {
        if (!store_->Put(key(i), std::string(static_cast<size_t>(i % 7), 'x')).ok()) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_EQ(failures, 0);
  ASSERT_TRUE(store_->Put("lisz", "after the prefix").ok());
  ASSERT_TRUE(store_->Put("lisa", "before the prefix").ok());

  auto all = store_->List("list/", "", 0);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), static_cast<size_t>(kKeys));
  for (int i = 0; i < kKeys; ++i) {
    EXPECT_EQ((*all)[i].key, key(i));
    EXPECT_EQ((*all)[i].size, static_cast<uint64_t>(i % 7));
    EXPECT_GT((*all)[i].mtime_ns, 0);
  }
  auto limited = store_->List("list/", "", 1050);  // one full page and a continuation
  ASSERT_TRUE(limited.ok());
  ASSERT_EQ(limited->size(), 1050u);
  EXPECT_EQ(limited->back().key, key(1049));
  auto after = store_->List("list/", key(500), 700);
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after->size(), 599u);
  EXPECT_EQ(after->front().key, key(501));
  EXPECT_EQ(store_->List("list/", key(kKeys - 1), 10)->size(), 0u);
  // Paging the way callers do: start after the last key seen until an empty page.
  std::vector<std::string> paged;
  std::string last;
  while (true) {
    auto page = store_->List("list/", last, 300);
    ASSERT_TRUE(page.ok());
    if (page->empty()) break;
    for (const auto& info : *page) paged.push_back(info.key);
    last = paged.back();
  }
  ASSERT_EQ(paged.size(), static_cast<size_t>(kKeys));
  EXPECT_EQ(paged.back(), key(kKeys - 1));
  auto whole = store_->List("", "", 0);
  ASSERT_TRUE(whole.ok());
  EXPECT_GE(whole->size(), static_cast<size_t>(kKeys + 2));
  EXPECT_TRUE(std::is_sorted(whole->begin(), whole->end(),
                             [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; }));
}

TEST_F(S3StoreTest, Multipart12MiB) {
  constexpr size_t kPart = 5 << 20;
  std::string data = RandomData(12 << 20, 12);
  auto id = store_->CreateMultipart("mp/big");
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  std::string_view v(data);
  // Out of order, and part 1 twice: the last upload of a part wins.
  ASSERT_TRUE(store_->UploadPart("mp/big", *id, 3, v.substr(2 * kPart)).ok());
  ASSERT_TRUE(store_->UploadPart("mp/big", *id, 1, RandomData(kPart, 99)).ok());
  ASSERT_TRUE(store_->UploadPart("mp/big", *id, 2, v.substr(kPart, kPart)).ok());
  ASSERT_TRUE(store_->UploadPart("mp/big", *id, 1, v.substr(0, kPart)).ok());
  Status st = store_->CompleteMultipart("mp/big", *id, 3);
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto got = store_->Get("mp/big");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(*got == data) << "multipart object differs";
  EXPECT_EQ(store_->Head("mp/big")->size, data.size());
  EXPECT_EQ(*store_->Get("mp/big", kPart - 3, 10), data.substr(kPart - 3, 10));
  EXPECT_EQ(store_->CompleteMultipart("mp/big", *id, 3).code(), ENOENT);
}

TEST_F(S3StoreTest, MultipartCompletedByAnotherInstance) {
  std::string p1 = RandomData(5 << 20, 1), p2 = RandomData(1000, 2);
  auto id = store_->CreateMultipart("mp/other");
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(store_->UploadPart("mp/other", *id, 1, p1).ok());
  ASSERT_TRUE(store_->UploadPart("mp/other", *id, 2, p2).ok());
  // A fresh store knows no ETags and must ask S3 for them.
  auto other = NewS3Store(Spec(url_));
  ASSERT_TRUE(other.ok());
  EXPECT_EQ((*other)->CompleteMultipart("mp/other", *id, 3).code(), EINVAL);  // part 3 never uploaded
  Status st = (*other)->CompleteMultipart("mp/other", *id, 2);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(*store_->Get("mp/other") == p1 + p2);
}

TEST_F(S3StoreTest, MultipartAbortAndErrors) {
  auto id = store_->CreateMultipart("mp/aborted");
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(store_->UploadPart("mp/aborted", *id, 1, "x").ok());
  ASSERT_TRUE(store_->AbortMultipart("mp/aborted", *id).ok());
  ASSERT_TRUE(store_->AbortMultipart("mp/aborted", *id).ok());  // already gone
  EXPECT_EQ(store_->CompleteMultipart("mp/aborted", *id, 1).code(), ENOENT);
  EXPECT_EQ(store_->UploadPart("mp/aborted", *id, 2, "y").code(), ENOENT);
  EXPECT_EQ(store_->Head("mp/aborted").status().code(), ENOENT);
  EXPECT_EQ(store_->UploadPart("mp/aborted", *id, 0, "y").code(), EINVAL);

  // Parts but the last must be 5 MiB at least.
  auto small = store_->CreateMultipart("mp/small");
  ASSERT_TRUE(small.ok());
  ASSERT_TRUE(store_->UploadPart("mp/small", *small, 1, "tiny").ok());
  ASSERT_TRUE(store_->UploadPart("mp/small", *small, 2, "tiny").ok());
  Status st = store_->CompleteMultipart("mp/small", *small, 2);
  EXPECT_EQ(st.code(), EINVAL) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "at least 5 MiB")) << st.message();
  EXPECT_TRUE(store_->AbortMultipart("mp/small", *small).ok());
}

TEST_F(S3StoreTest, ConcurrentPutsAndGets) {
  constexpr int kThreads = 8, kObjects = 12;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kObjects; ++i) {
        std::string key = "conc/" + std::to_string(t) + "/" + std::to_string(i);
        std::string data = RandomData(static_cast<size_t>(100000 + 777 * i), static_cast<uint32_t>(t * 100 + i));
        Status st = store_->Put(key, data);
        if (!st.ok()) {
          ADD_FAILURE() << key << ": " << st.ToString();
          ++failures;
          continue;
        }
        auto got = store_->Get(key);
        if (!got.ok() || *got != data) {
          ADD_FAILURE() << key << " read back wrong";
          ++failures;
        }
        auto part = store_->Get(key, 5000, 100);
        if (!part.ok() || *part != data.substr(5000, 100)) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(store_->List("conc/", "", 0)->size(), static_cast<size_t>(kThreads * kObjects));
}

TEST_F(S3StoreTest, WrongKeysAreAccessDenied) {
  const std::string wrong_secret = "not-the-secret-KEY-0123456789";
  StorageSpec spec = Spec(url_);
  spec.secret_key = wrong_secret;
  auto bad = NewS3Store(spec);
  ASSERT_TRUE(bad.ok());
  Status st = (*bad)->Put("denied", "x");
  EXPECT_EQ(st.code(), EACCES);
  std::string endpoint = env_->endpoint;
  EXPECT_TRUE(Contains(st.message(), "cannot write object denied in " + store_->Describe() + ": access denied by " +
                                         endpoint + ": check the access key and secret key (S3 said: "
                                         "SignatureDoesNotMatch)"))
      << st.message();
  for (Status s : {st, (*bad)->Init(), (*bad)->Get("x").status(), (*bad)->List("", "", 1).status()}) {
    EXPECT_EQ(s.code(), EACCES) << s.ToString();
    EXPECT_FALSE(Contains(s.message(), wrong_secret)) << s.message();
    EXPECT_FALSE(Contains(s.message(), env_->secret_key)) << s.message();
  }
  // HEAD replies have no body, so the S3 error code is unknown.
  EXPECT_EQ((*bad)->Head("x").status().code(), EACCES);

  spec = Spec(url_);
  spec.access_key = "NOSUCHACCESSKEY";
  auto unknown = NewS3Store(spec);
  ASSERT_TRUE(unknown.ok());
  st = (*unknown)->Put("denied", "x");
  EXPECT_EQ(st.code(), EACCES);
  EXPECT_TRUE(Contains(st.message(), "(S3 said: InvalidAccessKeyId)")) << st.message();

  auto anonymous = NewS3Store(StorageSpec{"s3", url_, "", "", "", ""});
  ASSERT_TRUE(anonymous.ok());
  st = (*anonymous)->Put("denied", "x");
  EXPECT_EQ(st.code(), EACCES);
  EXPECT_TRUE(Contains(st.message(), "no access key was given")) << st.message();
  EXPECT_EQ(store_->Head("denied").status().code(), ENOENT);
}

TEST_F(S3StoreTest, MissingBucket) {
  std::string missing = "tierfs-missing-" + RandomName();
  auto store = NewS3Store(Spec(env_->endpoint + "/" + missing));  // no Init: nothing creates it
  ASSERT_TRUE(store.ok());
  for (Status st : {(*store)->Put("k", "v"), (*store)->Get("k").status(), (*store)->List("", "", 0).status(),
                    (*store)->Delete("k"), (*store)->CreateMultipart("k").status()}) {
    EXPECT_EQ(st.code(), ENOENT) << st.ToString();
    EXPECT_TRUE(Contains(st.message(), "bucket " + missing + " does not exist at " + env_->endpoint))
        << st.message();
  }
}

TEST_F(S3StoreTest, VirtualHostedBucket) {
  // radosgw runs with "rgw dns name = localhost", and libcurl resolves *.localhost to the
  // loopback address itself (RFC 6761), so BUCKET.localhost reaches the same server.
  std::string endpoint = env_->endpoint;
  const std::string host = "127.0.0.1";
  size_t pos = endpoint.find(host);
  if (pos == std::string::npos) GTEST_SKIP() << "endpoint " << endpoint << " is not on 127.0.0.1";
  endpoint.replace(pos, host.size(), bucket_ + ".localhost");
  auto vstore = NewS3Store(Spec(endpoint));
  ASSERT_TRUE(vstore.ok()) << vstore.status().ToString();
  EXPECT_EQ((*vstore)->Describe(), "s3://" + endpoint.substr(7) + "/");
  Status st = (*vstore)->Init();
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_TRUE((*vstore)->Put("vhost/a b", "virtual").ok());
  EXPECT_EQ(*store_->Get("vhost/a b"), "virtual");  // the same bucket, path-style
  EXPECT_EQ(*(*vstore)->Get("vhost/a b", 1, 3), "irt");
  auto list = (*vstore)->List("vhost/", "", 0);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ(list->at(0).key, "vhost/a b");
  auto id = (*vstore)->CreateMultipart("vhost/mp");
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  ASSERT_TRUE((*vstore)->UploadPart("vhost/mp", *id, 1, "one part").ok());
  ASSERT_TRUE((*vstore)->CompleteMultipart("vhost/mp", *id, 1).ok());
  EXPECT_EQ(*store_->Get("vhost/mp"), "one part");
}

TEST_F(S3StoreTest, ObjectMetaTravelsWithEveryRead) {
  ASSERT_TRUE(store_->HasObjectMeta());
  std::string data = RandomData(200000, 8);
  const std::string meta = "VEZCMQAB+/9=" + std::string(1300, 'A');
  ASSERT_TRUE(store_->PutWithMeta("meta/obj", data, meta).ok());
  std::string got_meta;
  EXPECT_EQ(*store_->GetWithMeta("meta/obj", 0, -1, &got_meta), data);
  EXPECT_EQ(got_meta, meta);
  got_meta.clear();
  EXPECT_EQ(*store_->GetWithMeta("meta/obj", 65536, 100, &got_meta), data.substr(65536, 100));
  EXPECT_EQ(got_meta, meta);
  EXPECT_EQ(store_->Head("meta/obj")->size, data.size());
  ASSERT_TRUE(store_->Put("meta/plain", "x").ok());
  EXPECT_EQ(*store_->GetWithMeta("meta/plain", 0, -1, &got_meta), "x");
  EXPECT_EQ(got_meta, "");
  EXPECT_EQ(store_->PutWithMeta("meta/long", "x", std::string(kMaxObjectMeta + 1, 'A')).code(), EINVAL);
  EXPECT_EQ(store_->GetWithMeta("meta/missing", 0, -1, &got_meta).status().code(), ENOENT);
}

TEST_F(S3StoreTest, ThroughCreateObjectStoreWithChecksums) {
  std::string data = RandomData(300000, 5);
  for (bool in_meta : {false, true}) {
    StorageSpec spec = Spec(url_);
    spec.checksums_in_meta = in_meta;
    auto store = CreateObjectStore(spec);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE((*store)->Init().ok());
    std::string key = in_meta ? "cs/meta" : "cs/inline";
    ASSERT_TRUE((*store)->Put(key, data).ok());
    EXPECT_EQ(*(*store)->Get(key), data);
    EXPECT_EQ(*(*store)->Get(key, 70000, 100), data.substr(70000, 100));
    EXPECT_EQ(*(*store)->Get(key, 299990, 100), data.substr(299990));
    EXPECT_EQ(*(*store)->Get(key, 300000, 100), "");
    EXPECT_EQ((*store)->Head(key)->size, data.size());
    if (in_meta) {
      EXPECT_EQ(store_->Head(key)->size, data.size());  // the object is exactly its data
      std::string meta;
      ASSERT_TRUE(store_->GetWithMeta(key, 0, 1, &meta).ok());
      EXPECT_FALSE(meta.empty());
    } else {
      EXPECT_GT(store_->Head(key)->size, data.size());  // stored with a checksum header
    }
  }
  StorageSpec spec = Spec(url_);
  spec.checksums_in_meta = true;
  auto store = CreateObjectStore(spec);
  ASSERT_TRUE((*store)->Put("cs/empty", "").ok());
  EXPECT_EQ(*(*store)->Get("cs/empty"), "");
  EXPECT_EQ(*(*store)->Get("cs/empty", 0, 10), "");
  // A whole read over HTTP is hashed as it arrives (SegmentHasher): the table it hands on
  // is the data's.
  std::vector<uint32_t> sums;
  ASSERT_TRUE((*store)->GetVerified("cs/meta", &sums).ok());
  std::vector<uint32_t> want;
  for (size_t off = 0; off < data.size(); off += kVerifiedSegment) {
    want.push_back(Checksum32(std::string_view(data).substr(off, kVerifiedSegment)));
  }
  EXPECT_EQ(sums, want);
  // Damage the data behind the checksums' back: the read fails, it never returns it.
  std::string meta;
  ASSERT_TRUE(store_->GetWithMeta("cs/meta", 0, 1, &meta).ok());
  std::string bad = data;
  bad[123456] ^= 1;
  ASSERT_TRUE(store_->PutWithMeta("cs/meta", bad, meta).ok());
  EXPECT_EQ((*store)->Get("cs/meta").status().code(), EIO);
  EXPECT_EQ((*store)->Get("cs/meta", 123450, 10).status().code(), EIO);
  EXPECT_EQ(*(*store)->Get("cs/meta", 0, 10), data.substr(0, 10));
}

// Not a check: prints MiB/s for 4 MiB objects (run with --gtest_also_run_disabled_tests).
TEST_F(S3StoreTest, DISABLED_Throughput) {
  constexpr size_t kSize = 4 << 20;
  constexpr int kThreads = 8, kPerThread = 8;
  std::string data = RandomData(kSize, 1);
  auto run = [&](const char* what, const std::function<void(const std::string&)>& op) {
    auto start = Clock::now();
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kPerThread; ++i) op("bench/" + std::to_string(t) + "/" + std::to_string(i));
      });
    }
    for (auto& th : threads) th.join();
    double secs = std::chrono::duration<double>(Clock::now() - start).count();
    std::printf("%s: %d x 4 MiB, %d threads: %.1f MiB/s\n", what, kThreads * kPerThread, kThreads,
                kThreads * kPerThread * 4.0 / secs);
  };
  run("put", [&](const std::string& k) { EXPECT_TRUE(store_->Put(k, data).ok()); });
  run("get", [&](const std::string& k) { EXPECT_EQ(store_->Get(k)->size(), kSize); });
  auto start = Clock::now();
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(store_->Put("bench/serial", data).ok());
  std::printf("put, 1 thread: %.1f MiB/s\n", 32.0 / std::chrono::duration<double>(Clock::now() - start).count());
  start = Clock::now();
  for (int i = 0; i < 8; ++i) EXPECT_EQ(store_->Get("bench/serial")->size(), kSize);
  std::printf("get, 1 thread: %.1f MiB/s\n", 32.0 / std::chrono::duration<double>(Clock::now() - start).count());
}

}  // namespace
}  // namespace tierfs
