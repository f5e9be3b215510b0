// A client of etcd's v3 API, over gRPC (etcd_grpc.cc: the project's own definitions of
// the few RPCs it calls, etcd_rpc.proto) or over etcd's JSON gateway (etcd_client.cc:
// POST /v3/kv/range and the like, keys and values in base64, on the HTTP client the
// object stores use); `?api=` in the META-URL picks, gRPC by default. Measured on one
// machine (docs/benchmarks.md): the gateway costs about a millisecond a request more,
// since etcd serves it by calling its own gRPC service.
//
// Members: the URL names some or all of the cluster's members. A request goes to the
// member that answered last; one that refuses the connection, stalls past the request
// timeout, or answers Unavailable (no leader, leader changed, request timed out) sends it
// to the next, once around. Any member serves any request (a follower forwards writes to
// the leader, and reads are linearizable), so the client never has to find the leader; a
// member cut off in a minority answers no leader and is passed over.
//
// Errors (Status codes):
//   EAGAIN    no member served the request this time round (each one's reason is in the
//             message): the caller retries until its deadline.
//   ECONNREFUSED  every member refused the connection (nothing listens: a wrong URL, or
//             the whole cluster down).
//   ESTALE    the revision asked for was compacted away (or is in the future): the caller
//             starts its transaction again at a newer one.
//   EFBIG     the request exceeds the cluster's limits (--max-txn-ops,
//             --max-request-bytes): retrying cannot help; the message says which flag.
//   ENOSPC    the cluster's space quota is exhausted (an alarm; etcd needs compaction and
//             defragmentation, then `etcdctl alarm disarm`).
//   EACCES    authentication failed or the user lacks permission on the prefix.
//   ENOENT    a lease that expired.
//   EIO       anything else the server answered.
// A Txn that writes and whose request reached a member but got no answer (a stall, a
// reset connection, Unavailable after it was sent) may still be applied later: Txn says so
// through *maybe_applied, and the caller resolves it (etcd_engine.h: commit markers).
#pragma once

#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace tierfs::etcd {

struct Kv {
  std::string key, value;
  int64_t mod_revision = 0;
};

struct RangeReply {
  int64_t revision = 0;  // the store's revision the reply was read at
  std::vector<Kv> kvs;
  bool more = false;  // keys beyond the limit remain in the range
};

// A comparison of the mod revision of a key, or of every key in [key, range_end) when
// range_end is set (an empty range compares true): equal to, or less than, mod_revision.
// A missing key's mod revision is 0.
struct Compare {
  std::string key, range_end;
  bool less = false;
  int64_t mod_revision = 0;
};

struct Op {
  enum Kind { kRange, kPut, kDelete } kind = kRange;
  std::string key;
  std::string range_end;  // kRange, kDelete: [key, range_end) when set; "\0": every key >= key
  std::string value;      // kPut
  int64_t lease = 0;      // kPut: attached to this lease when non-zero
  int64_t revision = 0;   // kRange: read at this revision when non-zero
  int64_t limit = 0;      // kRange: at most this many keys when non-zero
};

struct TxnReply {
  bool succeeded = false;
  int64_t revision = 0;
  std::vector<RangeReply> ranges;  // the replies of the branch's kRange ops, in order
};

struct MemberInfo {
  std::string name;
  bool learner = false;  // a learner does not vote: it counts for no majority
};

// One message of a watch stream (Client::Watch).
struct WatchBatch {
  bool created = false;          // the stream is set up; revision: the store's at that moment
  int64_t compact_revision = 0;  // non-zero: the start revision was compacted; the stream ended
  int64_t revision = 0;          // the store's revision when the message was sent
  // Changes in commit order: each key with the revision of the commit that wrote it.
  std::vector<std::pair<std::string, int64_t>> changes;
};

// A watch of a key range on one member; Run reads it until it ends.
class WatchStream {
 public:
  virtual ~WatchStream() = default;
  // Calls on_batch for every message; returns why the stream ended (EAGAIN: the member
  // went away or lost its leader, ECANCELED: Cancel was called, ESTALE: compacted).
  virtual Status Run(const std::function<void(WatchBatch&&)>& on_batch) = 0;
  // Ends Run from any thread.
  virtual void Cancel() = 0;
};

struct ClientOptions {
  enum class Api { kGrpc, kJson } api = Api::kGrpc;
  std::vector<std::string> endpoints;  // "host:port"
  std::string user, password;          // etcd's own authentication, when user is set
  // TLS (etcds://): the members' certificates are checked against ca_file (PEM), or the
  // system's CAs when it is empty; cert_file and key_file (PEM) are the client's
  // certificate for a cluster started with --client-cert-auth.
  bool tls = false;
  std::string ca_file, cert_file, key_file;
  std::string describe;                // for messages: the URL without the password
  std::chrono::milliseconds request_timeout{3000};
};

class Client {
 public:
  virtual ~Client() = default;

  // serializable reads (with a revision) are served by the member asked, without a
  // round of the cluster; a member behind that revision answers ESTALE.
  virtual Result<RangeReply> Range(const Op& range, bool serializable = false) = 0;
  // maybe_applied (required when success or failure writes) is set when the outcome is
  // unknown (see above); it is left false on every error that proves nothing was applied.
  // serializable: every op is a read at a revision, served as above.
  virtual Result<TxnReply> Txn(const std::vector<Compare>& compare, const std::vector<Op>& success,
                               const std::vector<Op>& failure, bool* maybe_applied, bool serializable = false) = 0;
  // A lease of ttl seconds; its id.
  virtual Result<int64_t> GrantLease(int64_t ttl_s) = 0;
  // Drops the history before revision (what --auto-compaction does on a schedule).
  virtual Status Compact(int64_t revision) = 0;
  // The cluster's members, as the member asked knows them.
  virtual Result<std::vector<MemberInfo>> Members() = 0;

  // A watch of [key, range_end) from after_revision + 1 (0: from now), on member (an
  // index into the endpoints, taken modulo their number). The member cancels it when it
  // loses its leader, so a member cut off in a minority never serves a stale stream.
  // ENOTSUP from the JSON gateway's client.
  virtual Result<std::unique_ptr<WatchStream>> Watch(const std::string& key, const std::string& range_end,
                                                     int64_t after_revision, size_t member) {
    (void)key, (void)range_end, (void)after_revision, (void)member;
    return Status::Err(ENOTSUP, "etcd " + describe() + ": watching needs the gRPC API (?api=grpc)");
  }

  virtual const std::string& describe() const = 0;
};

// What both APIs share: the members asked in turn, from the one that answered last, once
// around (see above), each request with the cluster's auth token when a user is set.
class MemberRotation {
 public:
  // One member's answer to one request.
  struct Answer {
    enum Kind { kDone, kNext, kTokenExpired } kind = kDone;
    Status status;         // kDone: the result; kNext: why this member did not serve it
    bool refused = false;  // kNext: nothing reached the member (connection refused)
    bool sent = false;     // kNext: the request reached it and may still apply
  };
  // authenticate(i): a new token from member i. ask(i, token): one request to member i.
  // *sent is set when some member got the request without answering it.
  Status Ask(const ClientOptions& o, bool* sent, const std::function<Result<std::string>(size_t)>& authenticate,
             const std::function<Answer(size_t, const std::string&)>& ask);

  // How long one request may wait for its member: eight times the typical time of the
  // requests answered lately, at least 1 s, at most the URL's request timeout. A write
  // that reaches a follower just as the leader dies is forwarded to the dead leader and
  // hangs until this passes (the follower learns of the loss only after an election
  // timeout); waiting the whole request timeout (3 s) made every leader's loss cost 3 s
  // (docs/benchmarks.md). A cluster whose requests are slow keeps the whole timeout, and
  // so does a large request (over 64 KiB: a big batch may take its time to apply).
  std::chrono::milliseconds Budget(const ClientOptions& o, size_t request_bytes) const;
  // request_bytes for a request that gets the whole timeout whatever its size (compaction).
  static constexpr size_t kWholeTimeout = static_cast<size_t>(-1);

 private:
  std::atomic<int64_t> typical_us_{0};  // moving average of answered requests' durations
  std::atomic<size_t> current_{0};
  std::mutex mu_;
  std::string token_;  // guarded by mu_
};

// The deadline of the transaction the calling thread runs (EtcdEngine sets it for the
// duration of each transaction, DeadlineScope): no request waits past it, so a
// transaction never outlasts its ?timeout= by a request in flight (three members that
// stall cost three request timeouts otherwise).
class DeadlineScope {
 public:
  explicit DeadlineScope(std::chrono::steady_clock::time_point deadline);
  ~DeadlineScope();
  DeadlineScope(const DeadlineScope&) = delete;
  DeadlineScope& operator=(const DeadlineScope&) = delete;

 private:
  std::chrono::steady_clock::time_point saved_;
};

std::unique_ptr<Client> NewClient(const ClientOptions& options);
std::unique_ptr<Client> NewJsonClient(const ClientOptions& options);
std::unique_ptr<Client> NewGrpcClient(const ClientOptions& options);

// An error etcd answered (a gRPC status code and its message) as a Status (see above);
// OK for code 0. where: the member, for the message.
Status ServerError(int grpc_code, const std::string& message, const std::string& where);

}  // namespace tierfs::etcd
