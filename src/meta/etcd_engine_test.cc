// etcd engine specifics against the shared three-member test cluster named by
// TIERFS_TEST_ETCD_URL (prefixes etcd_test_*): URLs, foreign prefixes, an unreachable
// cluster, a snapshot compacted under a transaction, and what a commit compares: keys and
// ranges read, or one version for a read set larger than the cluster's --max-txn-ops.
// Losing members and leaders: tests/test_etcd_failover.py.
#include "meta/etcd_engine.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "common/url.h"
#include "meta/engine_for_test.h"
#include "meta/etcd_client.h"
#include "meta/etcd_options.h"
#include "meta/change_watch.h"
#include "meta/key_schema.h"
#include "meta/kv_engine.h"
#include "meta/meta_retry_timeout.h"
#include "meta/watch_collector_for_test.h"

namespace tierfs {
namespace {

using testing_engines::ServerUrl;

std::string Base() {
  const char* b = getenv("TIERFS_TEST_ETCD_URL");
  return b ? b : "";
}

etcd::Options OptionsOf(const std::string& url) {
  auto parsed = ParseUrl(url);
  EXPECT_TRUE(parsed.ok());
  auto o = etcd::ParseOptions(*parsed);
  EXPECT_TRUE(o.ok()) << o.status().ToString();
  return *o;
}

Status Put(KvEngine& e, const std::string& k, const std::string& v) {
  return e.Txn([&](KvTxn& t) { return t.Put(k, v); });
}

TEST(EtcdOptions, MembersPrefixAndOptions) {
  auto o = OptionsOf("etcd://u:secret@h1,h2:2381,h3:2383/vol?timeout=5s&max-txn-ops=1000");
  EXPECT_EQ(o.client.endpoints, (std::vector<std::string>{"h1:2379", "h2:2381", "h3:2383"}));
  EXPECT_EQ(o.prefix, "vol/");
  EXPECT_EQ(o.deadline, std::chrono::seconds(5));
  EXPECT_EQ(o.max_txn_ops, 1000u);
  EXPECT_EQ(o.client.user, "u");
  EXPECT_EQ(o.client.password, "secret");
  EXPECT_EQ(o.describe.find("secret"), std::string::npos);
  EXPECT_NE(o.describe.find("h3:2383/vol"), std::string::npos);
}

TEST(EtcdOptions, BadUrlsSayWhatIsExpected) {
  auto no_prefix = OpenKvEngine("etcd://127.0.0.1:1");
  ASSERT_FALSE(no_prefix.ok());
  EXPECT_EQ(no_prefix.status().code(), EINVAL);
  EXPECT_NE(no_prefix.status().message().find("PREFIX"), std::string::npos) << no_prefix.status().message();
  // TLS options belong to etcds://; their files must exist (tests/test_etcd_tls.py runs TLS).
  auto plain_ca = OpenKvEngine("etcd://127.0.0.1:1/v?ca=/etc/hostname");
  ASSERT_FALSE(plain_ca.ok());
  EXPECT_NE(plain_ca.status().message().find("use etcds://"), std::string::npos) << plain_ca.status().message();
  auto no_ca = OpenKvEngine("etcds://127.0.0.1:1/v?ca=/nonexistent/ca.pem");
  ASSERT_FALSE(no_ca.ok());
  EXPECT_EQ(no_ca.status().code(), ENOENT);
  auto opt = OpenKvEngine("etcd://127.0.0.1:1/v?retries=3");
  ASSERT_FALSE(opt.ok());
  EXPECT_NE(opt.status().message().find("timeout, request-timeout, max-txn-ops, api"), std::string::npos);
  auto user = OpenKvEngine("etcd://someone@127.0.0.1:1/v");
  ASSERT_FALSE(user.ok());
  EXPECT_NE(user.status().message().find("no password"), std::string::npos);
}

TEST(EtcdEngine, NothingListeningIsReportedAtOnceNamingEveryMember) {
  auto t0 = std::chrono::steady_clock::now();
  auto e = OpenKvEngine("etcd://127.0.0.1:1,127.0.0.1:2/v?timeout=20s");
  ASSERT_FALSE(e.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  EXPECT_NE(e.status().message().find("127.0.0.1:1"), std::string::npos) << e.status().message();
  EXPECT_NE(e.status().message().find("127.0.0.1:2"), std::string::npos) << e.status().message();
}

TEST(EtcdEngine, AForeignPrefixIsRefusedAndLeftAlone) {
  if (Base().empty()) GTEST_SKIP() << "no test cluster: run through ctest, which starts one";
  auto o = OptionsOf(Base() + "etcd_test_foreign");
  auto client = etcd::NewClient(o.client);
  etcd::Client& c = *client;
  etcd::Op put;
  put.kind = etcd::Op::kPut;
  put.key = "etcd_test_foreign/someone-elses";
  put.value = "data";
  bool maybe = false;
  ASSERT_TRUE(c.Txn({}, {put}, {}, &maybe).ok());
  auto e = OpenKvEngine(Base() + "etcd_test_foreign");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), EINVAL);
  EXPECT_NE(e.status().message().find("not a TierFS volume"), std::string::npos) << e.status().message();
  etcd::Op get;
  get.key = put.key;
  auto still = c.Range(get);
  ASSERT_TRUE(still.ok());
  ASSERT_EQ(still->kvs.size(), 1u);
  EXPECT_EQ(still->kvs[0].value, "data");
}

TEST(EtcdEngine, ASnapshotCompactedUnderATransactionStartsItAgain) {
  std::string url = ServerUrl("TIERFS_TEST_ETCD_URL", "etcd_test_compact");
  if (url.empty()) GTEST_SKIP() << "no test cluster: run through ctest, which starts one";
  auto a = OpenKvEngine(url), b = OpenKvEngine(url);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(Put(**a, "x", "1").ok());
  ASSERT_TRUE(Put(**a, "y", "1").ok());
  auto client = etcd::NewClient(OptionsOf(url).client);
  etcd::Client& c = *client;
  int attempts = 0;
  std::optional<std::string> x, y;
  ASSERT_TRUE((*a)->Txn(
                     [&](KvTxn& t) -> Status {
                       ++attempts;
                       ASSIGN_OR_RETURN(x, t.Get("x"));
                       if (attempts == 1) {
                         // Another client changes both, and the cluster drops the history
                         // this attempt's snapshot needs.
                         EXPECT_TRUE((*b)->Txn([](KvTxn& u) {
                                           RETURN_IF_ERROR(u.Put("x", "2"));
                                           return u.Put("y", "2");
                                         })
                                         .ok());
                         etcd::Op any;
                         any.key = "etcd_test_compact/";
                         auto now = c.Range(any);
                         EXPECT_TRUE(now.ok());
                         EXPECT_TRUE(c.Compact(now->revision).ok());
                       }
                       ASSIGN_OR_RETURN(y, t.Get("y"));
                       return Status::OK();
                     },
                     true)
                  .ok());
  EXPECT_EQ(attempts, 2);
  EXPECT_EQ(x, "2");  // one snapshot: never x from before and y from after
  EXPECT_EQ(y, "2");
}

// Runs a write transaction on `a` whose first attempt first calls meanwhile (another
// client's change); returns how many attempts it took.
int AttemptsWith(KvEngine& a, const std::function<Status(KvTxn&)>& body, const std::function<void()>& meanwhile) {
  int attempts = 0;
  EXPECT_TRUE(a.Txn([&](KvTxn& t) -> Status {
                 RETURN_IF_ERROR(body(t));
                 if (++attempts == 1) meanwhile();
                 return t.Put("result", std::to_string(attempts));
               })
                  .ok());
  return attempts;
}

TEST(EtcdEngine, ACommitComparesTheKeysAndRangesItRead) {
  std::string url = ServerUrl("TIERFS_TEST_ETCD_URL", "etcd_test_compare");
  if (url.empty()) GTEST_SKIP() << "no test cluster: run through ctest, which starts one";
  auto a = OpenKvEngine(url), b = OpenKvEngine(url);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(Put(**b, "d/1", "x").ok());
  ASSERT_TRUE(Put(**b, "k", "x").ok());
  auto scan = [](KvTxn& t) { return t.Scan("d/", "d0", 0, [](std::string_view, std::string_view) { return true; }); };
  auto get = [](KvTxn& t) { return t.Get("k").status(); };
  // Something the transaction did not read changes: no conflict.
  EXPECT_EQ(AttemptsWith(**a, scan, [&] { EXPECT_TRUE(Put(**b, "elsewhere", "1").ok()); }), 1);
  // A key created in the range scanned, a key scanned deleted, a key read changed: each a conflict.
  EXPECT_EQ(AttemptsWith(**a, scan, [&] { EXPECT_TRUE(Put(**b, "d/2", "new").ok()); }), 2);
  EXPECT_EQ(AttemptsWith(**a, scan, [&] {
              EXPECT_TRUE((*b)->Txn([](KvTxn& t) { return t.Delete("d/1"); }).ok());
            }),
            2);
  EXPECT_EQ(AttemptsWith(**a, get, [&] { EXPECT_TRUE(Put(**b, "k", "y").ok()); }), 2);
  // A scan that stopped early compares only what it covered.
  ASSERT_TRUE(Put(**b, "d/1", "x").ok());
  auto first = [](KvTxn& t) { return t.Scan("d/", "d0", 1, [](std::string_view, std::string_view) { return true; }); };
  EXPECT_EQ(AttemptsWith(**a, first, [&] { EXPECT_TRUE(Put(**b, "d/9", "after").ok()); }), 1);
}

TEST(EtcdEngine, AReadSetBeyondMaxTxnOpsComparesOneVersion) {
  std::string url = ServerUrl("TIERFS_TEST_ETCD_URL", "etcd_test_many");
  if (url.empty()) GTEST_SKIP() << "no test cluster: run through ctest, which starts one";
  auto b = OpenKvEngine(url);
  auto a = OpenKvEngine(url + "?max-txn-ops=128");
  ASSERT_TRUE(a.ok() && b.ok());
  auto read = [](int n) {
    return [n](KvTxn& t) -> Status {
      std::vector<std::string> keys;
      for (int i = 0; i < n; ++i) keys.push_back("r" + std::to_string(i));
      return t.GetMany(keys).status();
    };
  };
  auto unrelated = [&] { EXPECT_TRUE(Put(**b, "unrelated", "1").ok()); };
  EXPECT_EQ(AttemptsWith(**a, read(100), unrelated), 1);  // 100 compares: within the limit
  EXPECT_EQ(AttemptsWith(**a, read(200), unrelated), 2);  // one version: any commit conflicts
}

// A TCP proxy to one etcd member that loses a commit: the first `losses` requests that
// carry `needle` (a commit's: its marker key over gRPC; "request_put" in a Txn of the
// JSON gateway, whose keys travel in base64) are each either passed on and
// their answer dropped (kAfter: the commit applies, the client never hears of it), or
// dropped before they reach the member (kBefore: nothing applies); the connection is
// closed either way. libcurl sends a request again, once, by itself when a reused
// connection dies before any answer: one loss is that resend meeting the commit applied,
// two the engine left to find out.
class LosingProxy {
 public:
  enum Mode { kAfter, kBefore };
  LosingProxy(int upstream_port, Mode mode, int losses, std::string needle)
      : upstream_(upstream_port), mode_(mode), losses_(losses), needle_(std::move(needle)) {
    listen_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(listen_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    socklen_t len = sizeof(a);
    getsockname(listen_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    listen(listen_, 16);
    accept_ = std::thread([this] {
      for (;;) {
        int c = accept(listen_, nullptr, nullptr);
        if (c < 0) return;
        threads_.emplace_back([this, c] { Serve(c); });
      }
    });
  }
  ~LosingProxy() {
    shutdown(listen_, SHUT_RDWR);
    close(listen_);
    accept_.join();
    for (auto& t : threads_) t.join();
  }
  int port() const { return port_; }
  int lost() const { return lost_.load(); }

 private:
  void Serve(int c) {
    int u = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(upstream_);
    if (connect(u, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      close(c);
      close(u);
      return;
    }
    std::atomic<bool> cut{false};
    std::thread back([&] {  // answers, unless cut
      char buf[65536];
      for (;;) {
        ssize_t n = read(u, buf, sizeof(buf));
        if (n <= 0 || cut.load()) break;
        if (write(c, buf, n) != n) break;
      }
      shutdown(c, SHUT_RDWR);
    });
    char buf[65536];
    std::string seen;
    for (;;) {
      ssize_t n = read(c, buf, sizeof(buf));
      if (n <= 0) break;
      seen.append(buf, n);
      bool target = seen.find(needle_) != std::string::npos;
      if (target && lost_.fetch_add(1) < losses_) {
        cut.store(true);
        if (mode_ == kAfter) {
          EXPECT_EQ(write(u, buf, n), n);
          std::this_thread::sleep_for(std::chrono::milliseconds(200));  // applied by then
        }
        break;
      }
      if (write(u, buf, n) != n) break;
      if (seen.size() > (1 << 20)) seen.erase(0, seen.size() - 4096);
    }
    shutdown(u, SHUT_RDWR);
    shutdown(c, SHUT_RDWR);
    back.join();
    close(u);
    close(c);
  }

  int upstream_, port_ = 0, listen_ = -1;
  Mode mode_;
  int losses_;
  std::string needle_;
  std::atomic<int> lost_{0};
  std::thread accept_;
  std::vector<std::thread> threads_;
};

// A commit whose answer is lost applied once and is reported once (kAfter), or did not
// apply and is run again (kBefore): counted by an increment that must come out exact.
void LoseOneCommit(LosingProxy::Mode mode, int losses, int want_attempts) {
  for (const char* api : {"json", "grpc"}) {
    SCOPED_TRACE(api);
    std::string url = ServerUrl("TIERFS_TEST_ETCD_URL", "etcd_test_lost_" + std::to_string(mode) + "_" +
                                                            std::to_string(losses) + "_" + api);
    if (url.empty()) GTEST_SKIP() << "no test cluster: run through ctest, which starts one";
    auto o = OptionsOf(url);
    int member = std::stoi(o.client.endpoints[0].substr(o.client.endpoints[0].rfind(':') + 1));
    // JSON: a Txn that writes (resends included). gRPC: the commit marker's key, in the
    // commit and in the Txns that settle it.
    std::string needle = std::string(api) == "json" ? "request_put" : o.prefix + "x";
    LosingProxy proxy(member, mode, losses, needle);
    auto e = OpenKvEngine("etcd://127.0.0.1:" + std::to_string(proxy.port()) + "/" + o.prefix + "?api=" + api);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    int attempts = 0;
    Status st = (*e)->Txn([&](KvTxn& t) -> Status {
      ++attempts;
      ASSIGN_OR_RETURN(auto v, t.Get("n"));
      return t.Put("n", std::to_string(v ? std::stoi(*v) + 1 : 1));
    });
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_GE(proxy.lost(), losses);
    EXPECT_EQ(attempts, want_attempts);
    auto direct = OpenKvEngine(url);
    ASSERT_TRUE(direct.ok());
    std::optional<std::string> n;
    ASSERT_TRUE((*direct)->Txn([&](KvTxn& t) -> Status {
                           ASSIGN_OR_RETURN(n, t.Get("n"));
                           return Status::OK();
                         },
                         true)
                    .ok());
    EXPECT_EQ(n, "1");  // never twice
  }
}

TEST(EtcdEngine, ACommitSentAgainAfterItAppliedIsReportedOnce) { LoseOneCommit(LosingProxy::kAfter, 1, 1); }

TEST(EtcdEngine, ACommitWhoseAnswerWasLostIsReportedOnce) { LoseOneCommit(LosingProxy::kAfter, 2, 1); }

TEST(EtcdEngine, ACommitLostOnTheWayIsRunAgain) { LoseOneCommit(LosingProxy::kBefore, 2, 2); }

using testing_engines::Collected;

TEST(EtcdEngine, AWatchReportsOtherClientsCommitsOnceEachButNotItsOwn) {
  std::string url = ServerUrl("TIERFS_TEST_ETCD_URL", "etcd_test_watch");
  if (url.empty()) GTEST_SKIP() << "no test cluster: run through ctest, which starts one";
  auto a = OpenKvEngine(url), b = OpenKvEngine(url);
  ASSERT_TRUE(a.ok() && b.ok());
  Collected got;
  ASSERT_TRUE((*a)->Watch(got.Fn()).ok());
  EXPECT_EQ((*a)->Watch(got.Fn()).code(), EBUSY);
  // Every commit after Watch returned is reported: no wait for the stream to be set up.
  ASSERT_TRUE(Put(**b, "theirs", "1").ok());
  ASSERT_TRUE(Put(**a, "mine", "1").ok());
  ASSERT_TRUE((*b)->Txn([](KvTxn& t) {
                  RETURN_IF_ERROR(t.Put("t2", "2"));
                  return t.Delete("theirs");
                })
                  .ok());
  EXPECT_TRUE(got.WaitFor({"theirs"}));
  EXPECT_TRUE(got.WaitFor({"t2", "theirs"}));  // one commit, one call, in the commit's order
  ASSERT_TRUE(Put(**b, "last", "1").ok());
  EXPECT_TRUE(got.WaitFor({"last"}));
  EXPECT_FALSE(got.Mentions("mine"));
  {
    std::lock_guard<std::mutex> l(got.mu);
    EXPECT_EQ(got.batches.size(), 3u);
    EXPECT_EQ(got.alls, 0);
  }
  // Stopped: nothing more is reported, and a new watch may start.
  ASSERT_TRUE((*a)->Watch(nullptr).ok());
  ASSERT_TRUE(Put(**b, "after", "1").ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(got.Mentions("after"));
  Collected again;
  EXPECT_TRUE((*a)->Watch(again.Fn()).ok());
  EXPECT_TRUE((*a)->Watch(nullptr).ok());  // before `again` goes
}

TEST(EtcdEngine, AWatchSaysWhichInodesAndNamesChanged) {
  std::string url = ServerUrl("TIERFS_TEST_ETCD_URL", "etcd_test_watch_meta");
  if (url.empty()) GTEST_SKIP() << "no test cluster: run through ctest, which starts one";
  auto a = OpenKvEngine(url), b = OpenKvEngine(url);
  ASSERT_TRUE(a.ok() && b.ok());
  testing_engines::ExpectWatchSaysWhichInodesAndNamesChanged(a->get(), b->get());
}

TEST(EtcdEngine, ABudgetScopeBoundsATransactionThatKeepsConflicting) {
  std::string url = ServerUrl("TIERFS_TEST_ETCD_URL", "etcd_test_budget");
  if (url.empty()) GTEST_SKIP() << "no test cluster: run through ctest, which starts one";
  auto a = OpenKvEngine(url + "?timeout=60s"), b = OpenKvEngine(url);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(Put(**a, "hot", "0").ok());
  int attempts = 0;
  auto t0 = std::chrono::steady_clock::now();
  Status st;
  {
    TxnBudgetScope budget(std::chrono::milliseconds(500));
    TxnBudgetScope outer_is_longer(std::chrono::seconds(30));  // nested: the shortest wins
    st = (*a)->Txn([&](KvTxn& t) -> Status {
      ++attempts;
      ASSIGN_OR_RETURN(auto v, t.Get("hot"));
      EXPECT_TRUE(Put(**b, "hot", std::to_string(attempts)).ok());  // every attempt loses
      return t.Put("hot", "mine");
    });
  }
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(st.code(), EIO) << st.ToString();
  EXPECT_NE(st.message().find("still conflicted"), std::string::npos) << st.message();
  EXPECT_GT(attempts, 1);
  // Bounded by the scope, not by the URL's 60 s.
  EXPECT_LT(took, std::chrono::seconds(20));
  EXPECT_EQ(TxnBudgetScope::Cap(std::chrono::seconds(60)), std::chrono::seconds(60));  // scopes gone
}

TEST(EtcdEngine, AWatchNeedsTheGrpcApi) {
  std::string url = ServerUrl("TIERFS_TEST_ETCD_URL", "etcd_test_watch_json");
  if (url.empty()) GTEST_SKIP() << "no test cluster: run through ctest, which starts one";
  auto a = OpenKvEngine(url + (url.find('?') == std::string::npos ? "?" : "&") + "api=json");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  Status st = (*a)->Watch([](const std::vector<std::string>&, bool) {});
  EXPECT_EQ(st.code(), ENOTSUP);
  EXPECT_NE(st.message().find("api=grpc"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace tierfs
