#include "meta/etcd_engine.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>

#include "common/backoff.h"
#include "meta/engine_retry.h"
#include "meta/etcd_client.h"
#include "meta/etcd_options.h"
#include "meta/etcd_txn.h"
#include "meta/etcd_watch.h"
#include "meta/meta_retry_timeout.h"
#include "meta/txn_nesting.h"

namespace tierfs {

namespace {

using etcd::Compare;
using etcd::Op;
using Clock = std::chrono::steady_clock;

// Identifies the layout described in etcd_engine.h; a different one is refused.
constexpr char kMarkerValue[] = "TierFS metadata, etcd layout 1";
constexpr char kCommitted[] = "1";
constexpr char kLost[] = "lost";
constexpr std::chrono::seconds kMarkerSlack(120), kMinLease(600);

// Worth another attempt: the cluster may serve it in a moment.
bool Retryable(const Status& st) { return st.code() == EAGAIN || st.code() == ECONNREFUSED; }

class EtcdEngine final : public KvEngine {
 public:
  explicit EtcdEngine(etcd::Options options) : o_(std::move(options)), client_(etcd::NewClient(o_.client)), c_(*client_) {}

  Status Init() {
    auto deadline = Clock::now() + o_.deadline;
    etcd::DeadlineScope bounded(deadline);
    return RetryAttempts(Describe(), "opening the volume", deadline, [&]() {
      Status st = CheckVolume();
      // Every member refusing the connection (ECONNREFUSED) is nearly always a wrong URL:
      // said at once. A cluster without a leader is waited for.
      if (st.ok() || st.code() != EAGAIN) return Attempt::Done(st);
      return Attempt::Unavailable(st);
    });
  }

  std::string Describe() const override { return o_.describe; }

  Status Txn(const std::function<Status(KvTxn&)>& fn, bool read_only) override {
    if (TxnNesting::Inside(this)) {
      return Status::Err(EDEADLK, "nested transaction on metadata engine " + Describe() + " (programming error)");
    }
    TxnNesting::Mark mark(this);
    auto deadline = Clock::now() + TxnBudgetScope::Cap(o_.deadline);
    etcd::DeadlineScope bounded(deadline);
    return RetryAttempts(Describe(), read_only ? "a read transaction" : "a write transaction", deadline,
                         [&]() { return RunOnce(fn, read_only, deadline); });
  }

  Status Watch(WatchFn on_change) override {
    std::lock_guard<std::mutex> l(watch_mu_);
    if (!on_change) {
      watcher_.reset();  // joins the watch thread
      watching_ = false;
      return Status::OK();
    }
    if (o_.client.api != etcd::ClientOptions::Api::kGrpc) {
      return Status::Err(ENOTSUP, "etcd " + Describe() + ": watching needs the gRPC API (?api=grpc)");
    }
    if (watcher_) return Status::Err(EBUSY, "etcd " + Describe() + " is already watched");
    // From the store's revision now, so that every commit after this call is reported.
    etcd::DeadlineScope bounded(Clock::now() + o_.deadline);
    Op now;
    now.key = etcd::EtcdTxn::VersionKey(o_);
    watching_ = true;  // before the start revision is read: every later commit is recorded
    auto r = c_.Range(now);
    if (!r.ok()) {
      watching_ = false;
      return r.status();
    }
    watcher_ = std::make_unique<etcd::Watcher>(c_, o_.client.endpoints.size(), o_.prefix,
                                               etcd::EtcdTxn::ValueKey(o_, ""), CommitMarkerKey(""), r->revision,
                                               &own_commits_, std::move(on_change));
    return Status::OK();
  }

  // A commit is on a majority of the voting members: safe once there are three or more
  // (two lose nothing, but the loss of either stops writes).
  Result<DurabilityReport> Durability() override {
    ASSIGN_OR_RETURN(auto members, c_.Members());
    size_t voting = 0;
    for (const auto& m : members) voting += m.learner ? 0 : 1;
    DurabilityReport d;
    d.summary = "etcd, " + std::to_string(members.size()) + " member(s), " + std::to_string(voting) + " voting";
    if (voting <= 1) {
      d.risks.push_back("one voting member: its disk is the only copy, and its loss loses the volume (run three)");
    } else if (voting == 2) {
      d.risks.push_back("two voting members: a commit is on both, but the loss of either stops every write "
                        "(run three)");
    }
    d.safe = voting >= 3;
    return d;
  }

  Status Reset() override {
    auto deadline = Clock::now() + o_.deadline;
    etcd::DeadlineScope bounded(deadline);
    return RetryAttempts(Describe(), "emptying the volume", deadline, [&]() {
      Op get;
      get.key = MarkerKey();
      auto marker = c_.Range(get);
      if (!marker.ok()) return Retryable(marker.status()) ? Attempt::Unavailable(marker.status())
                                                          : Attempt::Done(marker.status());
      if (marker->kvs.empty() || marker->kvs[0].value != kMarkerValue) {
        return Attempt::Done(Status::Err(EINVAL, Describe() + " is not a TierFS volume any more (its marker key "
                                                              "is gone or changed); refusing to empty it"));
      }
      // Everything but the marker (etcd refuses a delete range holding a key the same
      // transaction puts).
      Op below, above;
      below.kind = above.kind = Op::kDelete;
      below.key = o_.prefix;
      below.range_end = MarkerKey();
      above.key = MarkerKey() + std::string(1, '\0');
      above.range_end = PrefixEnd(o_.prefix);
      // Emptying is idempotent: a lost answer is simply tried again.
      bool maybe = false;
      auto done = c_.Txn({}, {below, above}, {}, &maybe);
      if (done.ok()) return Attempt::Done(Status::OK());
      return Retryable(done.status()) ? Attempt::Unavailable(done.status()) : Attempt::Done(done.status());
    });
  }

 private:
  std::string MarkerKey() const { return o_.prefix + "tierfs"; }
  std::string CommitMarkerKey(const std::string& id) const { return o_.prefix + "x" + id; }

  // Refuses a prefix that holds keys of something else; marks an empty one as ours.
  Status CheckVolume() {
    Op get;
    get.key = MarkerKey();
    ASSIGN_OR_RETURN(auto marker, c_.Range(get));
    if (!marker.kvs.empty()) {
      if (marker.kvs[0].value == kMarkerValue) return Status::OK();
      return Status::Err(EINVAL, Describe() + " holds a TierFS volume of another layout ('" +
                                     marker.kvs[0].value + "'); this build reads '" + kMarkerValue + "'");
    }
    Op any;
    any.key = o_.prefix;
    any.range_end = PrefixEnd(o_.prefix);
    any.limit = 1;
    ASSIGN_OR_RETURN(auto keys, c_.Range(any));
    if (!keys.kvs.empty()) {
      return Status::Err(EINVAL, Describe() + " holds keys under '" + o_.prefix +
                                     "' but is not a TierFS volume; refusing to use it (pick another prefix)");
    }
    Op mark;
    mark.kind = Op::kPut;
    mark.key = MarkerKey();
    mark.value = kMarkerValue;
    bool maybe = false;
    ASSIGN_OR_RETURN(auto r, c_.Txn({Compare{MarkerKey(), "", false, 0}}, {mark}, {}, &maybe));
    (void)r;  // lost the race to another client marking it: the same marker
    return Status::OK();
  }

  // The lease commit markers are put on: a new one once the current is half way.
  Result<int64_t> Lease() {
    std::lock_guard<std::mutex> l(lease_mu_);
    auto ttl = std::max<std::chrono::seconds>(
        kMinLease, std::chrono::duration_cast<std::chrono::seconds>(2 * o_.deadline) + kMarkerSlack);
    if (lease_ == 0 || Clock::now() - lease_granted_ > ttl / 2) {
      ASSIGN_OR_RETURN(lease_, c_.GrantLease(ttl.count()));
      lease_granted_ = Clock::now();
    }
    return lease_;
  }

  void ForgetLease() {
    std::lock_guard<std::mutex> l(lease_mu_);
    lease_ = 0;
  }

  // Whether a Txn's failure branch read the commit marker as set by the commit itself.
  static bool Applied(const etcd::TxnReply& r) {
    return !r.ranges.empty() && !r.ranges[0].kvs.empty() && r.ranges[0].kvs[0].value == kCommitted;
  }

  static std::string NewMarker() {
    char buf[40];
    snprintf(buf, sizeof(buf), "%016llx%016llx", static_cast<unsigned long long>(ThreadRng()()),
             static_cast<unsigned long long>(ThreadRng()()));
    return buf;
  }

  Attempt RunOnce(const std::function<Status(KvTxn&)>& fn, bool read_only, Clock::time_point deadline) {
    etcd::EtcdTxn txn(c_, o_, read_only);
    Status st = fn(txn);
    const Status& read_error = txn.error();
    if (!read_error.ok()) {
      if (read_error.code() == ESTALE) return Attempt::Conflict();  // compacted: a newer snapshot
      if (Retryable(read_error)) return Attempt::Unavailable(read_error);
      return Attempt::Done(read_error);
    }
    if (!st.ok() || !txn.has_writes()) return Attempt::Done(st);
    auto lease = Lease();
    if (!lease.ok()) return Retryable(lease.status()) ? Attempt::Unavailable(lease.status()) : Attempt::Done(lease.status());
    std::string marker = CommitMarkerKey(NewMarker());
    std::vector<Compare> compares = txn.Compares();
    compares.push_back(Compare{marker, "", false, 0});
    std::vector<Op> ops = txn.WriteOps();
    Op put_marker;
    put_marker.kind = Op::kPut;
    put_marker.key = marker;
    put_marker.value = kCommitted;
    put_marker.lease = *lease;
    ops.push_back(std::move(put_marker));
    // On a failed compare, the marker is read back: present, it is this very commit, sent
    // again (libcurl resends a request once by itself when a reused connection dies before
    // any answer) after an earlier copy applied.
    Op read_marker;
    read_marker.key = marker;
    bool maybe = false;
    // Before sending: the watch may report the commit before its answer.
    if (watching_.load(std::memory_order_relaxed)) own_commits_.Add(marker);
    auto r = c_.Txn(compares, ops, {read_marker}, &maybe);
    if (r.ok()) {
      if (r->succeeded || Applied(*r)) return Attempt::Done(Status::OK());
      return Attempt::Conflict();
    }
    if (maybe) return Resolve(marker, r.status(), deadline);
    if (r.status().code() == ENOENT) {  // the lease expired (a process stopped for long)
      ForgetLease();
      return Attempt::Unavailable(r.status());
    }
    return Retryable(r.status()) ? Attempt::Unavailable(r.status()) : Attempt::Done(r.status());
  }

  // Finds out whether the commit that writes marker applied, making sure that if it has
  // not, it never will. Applied: done. Not: the attempt is rerun.
  Attempt Resolve(const std::string& marker, const Status& why, Clock::time_point deadline) {
    Status last = why;
    for (int attempt = 0;; ++attempt) {
      auto lease = Lease();
      if (lease.ok()) {
        Op lost;
        lost.kind = Op::kPut;
        lost.key = marker;
        lost.value = kLost;
        lost.lease = *lease;
        Op read;
        read.key = marker;
        bool maybe = false;
        auto r = c_.Txn({Compare{marker, "", false, 0}}, {lost}, {read}, &maybe);
        if (r.ok()) {
          if (r->succeeded) return Attempt::Unavailable(why);  // planted "lost": never applies
          if (Applied(*r)) {
            spdlog::debug("metadata engine {}: a commit whose answer was lost had applied", Describe());
            return Attempt::Done(Status::OK());
          }
          return Attempt::Unavailable(why);
        }
        last = r.status();
        if (last.code() == ENOENT) ForgetLease();
      } else {
        last = lease.status();
      }
      auto wait = JitteredBackoff(attempt, std::chrono::milliseconds(10), std::chrono::seconds(1));
      if (Clock::now() + wait > deadline) break;
      std::this_thread::sleep_for(wait);
    }
    return Attempt::Done(Status::Err(EIO, "metadata engine " + Describe() +
                                              ": the outcome of a commit is unknown (its answer was lost and the "
                                              "cluster could not be asked in time: " +
                                              last.message() + ")"));
  }

  etcd::Options o_;
  std::unique_ptr<etcd::Client> client_;
  etcd::Client& c_;
  std::mutex lease_mu_;
  int64_t lease_ = 0;
  Clock::time_point lease_granted_;
  OwnCommits own_commits_;  // recorded only while watched
  std::atomic<bool> watching_{false};
  std::mutex watch_mu_;
  std::unique_ptr<etcd::Watcher> watcher_;  // guarded by watch_mu_; declared last: stopped first
};

}  // namespace

Result<std::unique_ptr<KvEngine>> OpenEtcdEngine(const Url& url) {
  ASSIGN_OR_RETURN(auto options, etcd::ParseOptions(url));
  auto engine = std::make_unique<EtcdEngine>(std::move(options));
  RETURN_IF_ERROR(engine->Init());
  return std::unique_ptr<KvEngine>(std::move(engine));
}

}  // namespace tierfs
