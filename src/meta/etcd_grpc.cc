// The etcd client over gRPC (etcd_client.h has the contract; etcd_rpc.proto the RPCs).
// One channel per member, made at first use, reconnecting within a second once a member
// is back (gRPC's default backoff grows to two minutes); calls fail fast while a member is
// unreachable, so the next member is asked at once.
#include <grpc/support/log.h>
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cerrno>
#include <fstream>
#include <iterator>
#include <mutex>

#include "meta/etcd_client.h"
#include "meta/etcd_rpc.grpc.pb.h"  // generated (src/meta/CMakeLists.txt)

namespace tierfs::etcd {

namespace {

namespace pb = ::etcdserverpb;

RangeReply FromPb(const pb::RangeResponse& r) {
  RangeReply out;
  out.revision = r.header().revision();
  out.more = r.more();
  out.kvs.reserve(r.kvs_size());
  for (const auto& kv : r.kvs()) out.kvs.push_back(Kv{kv.key(), kv.value(), kv.mod_revision()});
  return out;
}

void ToPb(const Op& op, bool serializable, pb::RequestOp* out) {
  switch (op.kind) {
    case Op::kRange: {
      auto* r = out->mutable_request_range();
      r->set_key(op.key);
      r->set_range_end(op.range_end);
      r->set_limit(op.limit);
      r->set_revision(op.revision);
      r->set_serializable(serializable);
      break;
    }
    case Op::kPut: {
      auto* p = out->mutable_request_put();
      p->set_key(op.key);
      p->set_value(op.value);
      p->set_lease(op.lease);
      break;
    }
    case Op::kDelete: {
      auto* d = out->mutable_request_delete_range();
      d->set_key(op.key);
      d->set_range_end(op.range_end);
      break;
    }
  }
}

struct Member {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::KV::Stub> kv;
  std::unique_ptr<pb::Lease::Stub> lease;
  std::unique_ptr<pb::Auth::Stub> auth;
  std::unique_ptr<pb::Cluster::Stub> cluster;
  std::unique_ptr<pb::Watch::Stub> watch;
};

// A watch on one member's channel: the create request is written at once, then Run reads
// the replies until the stream ends.
class GrpcWatch final : public WatchStream {
 public:
  GrpcWatch(pb::Watch::Stub* stub, const std::string& token, const std::string& where) : where_(where) {
    // etcd cancels a stream so marked when its member loses the leader (the metadata name
    // etcd's own client sends, rpctypes.MetadataRequireLeaderKey).
    ctx_.AddMetadata("hasleader", "true");
    if (!token.empty()) ctx_.AddMetadata("token", token);
    stream_ = stub->Watch(&ctx_);
  }

  Status Start(const std::string& key, const std::string& range_end, int64_t after_revision) {
    pb::WatchRequest req;
    auto* c = req.mutable_create_request();
    c->set_key(key);
    c->set_range_end(range_end);
    c->set_start_revision(after_revision > 0 ? after_revision + 1 : 0);
    if (!stream_->Write(req)) return Finish();
    return Status::OK();
  }

  Status Run(const std::function<void(WatchBatch&&)>& on_batch) override {
    pb::WatchResponse resp;
    while (stream_->Read(&resp)) {
      WatchBatch b;
      b.created = resp.created();
      b.compact_revision = resp.compact_revision();
      b.revision = resp.header().revision();
      b.changes.reserve(resp.events_size());
      for (const auto& e : resp.events()) b.changes.emplace_back(e.kv().key(), e.kv().mod_revision());
      const bool canceled = resp.canceled();
      const std::string reason = resp.cancel_reason();
      on_batch(std::move(b));
      if (resp.compact_revision() != 0) {
        ctx_.TryCancel();
        return Status::Err(ESTALE, "etcd " + where_ + ": the watch's start was compacted away");
      }
      if (canceled) {
        ctx_.TryCancel();
        return Status::Err(EAGAIN, "etcd " + where_ + " canceled the watch: " + reason);
      }
    }
    return Finish();
  }

  void Cancel() override {
    cancelled_ = true;
    ctx_.TryCancel();
  }

 private:
  Status Finish() {
    grpc::Status st = stream_->Finish();
    if (cancelled_) return Status::Err(ECANCELED, "watch canceled");
    if (st.ok()) return Status::Err(EAGAIN, "etcd " + where_ + " ended the watch");
    Status err = ServerError(st.error_code(), st.error_message(), where_);
    // Lost leader, member gone, deadline: another member may serve it.
    return err.code() == EACCES || err.code() == EIO ? err : Status::Err(EAGAIN, err.message());
  }

  std::string where_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<pb::WatchRequest, pb::WatchResponse>> stream_;
  std::atomic<bool> cancelled_{false};
};

class GrpcClient final : public Client {
 public:
  explicit GrpcClient(ClientOptions options) : o_(std::move(options)), members_(o_.endpoints.size()) {}

  Result<RangeReply> Range(const Op& range, bool serializable) override {
    pb::RangeRequest req;
    req.set_key(range.key);
    req.set_range_end(range.range_end);
    req.set_limit(range.limit);
    req.set_revision(range.revision);
    req.set_serializable(serializable);
    pb::RangeResponse resp;
    bool sent = false;
    RETURN_IF_ERROR(Call([&](Member& m, grpc::ClientContext* ctx) { return m.kv->Range(ctx, req, &resp); }, &sent));
    return FromPb(resp);
  }

  Result<TxnReply> Txn(const std::vector<Compare>& compare, const std::vector<Op>& success,
                       const std::vector<Op>& failure, bool* maybe_applied, bool serializable) override {
    pb::TxnRequest req;
    bool writes = false;
    for (const auto& c : compare) {
      auto* pc = req.add_compare();
      pc->set_result(c.less ? pb::Compare::LESS : pb::Compare::EQUAL);
      pc->set_target(pb::Compare::MOD);
      pc->set_key(c.key);
      pc->set_mod_revision(c.mod_revision);
      if (!c.range_end.empty()) pc->set_range_end(c.range_end);
    }
    for (const auto& op : success) {
      writes |= op.kind != Op::kRange;
      ToPb(op, serializable, req.add_success());
    }
    for (const auto& op : failure) {
      writes |= op.kind != Op::kRange;
      ToPb(op, serializable, req.add_failure());
    }
    pb::TxnResponse resp;
    bool sent = false;
    Status st = Call([&](Member& m, grpc::ClientContext* ctx) { return m.kv->Txn(ctx, req, &resp); }, &sent,
                     req.ByteSizeLong());
    if (!st.ok()) {
      if (writes && sent && maybe_applied) *maybe_applied = true;
      return st;
    }
    TxnReply out;
    out.revision = resp.header().revision();
    out.succeeded = resp.succeeded();
    for (const auto& r : resp.responses()) {
      if (r.has_response_range()) out.ranges.push_back(FromPb(r.response_range()));
    }
    return out;
  }

  Result<int64_t> GrantLease(int64_t ttl_s) override {
    pb::LeaseGrantRequest req;
    req.set_ttl(ttl_s);
    pb::LeaseGrantResponse resp;
    bool sent = false;
    RETURN_IF_ERROR(
        Call([&](Member& m, grpc::ClientContext* ctx) { return m.lease->LeaseGrant(ctx, req, &resp); }, &sent));
    if (resp.id() == 0) {
      return Status::Err(EIO, "etcd " + o_.describe + ": lease grant answered no lease: " + resp.error());
    }
    return resp.id();
  }

  Status Compact(int64_t revision) override {
    pb::CompactionRequest req;
    req.set_revision(revision);
    req.set_physical(true);
    pb::CompactionResponse resp;
    bool sent = false;
    // Physical compaction takes what it takes: the whole request timeout, never the budget.
    return Call([&](Member& m, grpc::ClientContext* ctx) { return m.kv->Compact(ctx, req, &resp); }, &sent,
                MemberRotation::kWholeTimeout);
  }

  Result<std::vector<MemberInfo>> Members() override {
    pb::MemberListRequest req;
    pb::MemberListResponse resp;
    bool sent = false;
    RETURN_IF_ERROR(
        Call([&](Member& m, grpc::ClientContext* ctx) { return m.cluster->MemberList(ctx, req, &resp); }, &sent));
    std::vector<MemberInfo> out;
    for (const auto& m : resp.members()) out.push_back(MemberInfo{m.name(), m.islearner()});
    return out;
  }

  Result<std::unique_ptr<WatchStream>> Watch(const std::string& key, const std::string& range_end,
                                             int64_t after_revision, size_t member) override {
    const size_t i = member % o_.endpoints.size();
    Member& m = MemberAt(i);
    std::string token;
    if (!o_.user.empty()) {
      ASSIGN_OR_RETURN(token, Authenticate(m, o_.endpoints[i]));
    }
    auto w = std::make_unique<GrpcWatch>(m.watch.get(), token, o_.endpoints[i]);
    RETURN_IF_ERROR(w->Start(key, range_end, after_revision));
    return std::unique_ptr<WatchStream>(std::move(w));
  }

  const std::string& describe() const override { return o_.describe; }

 private:
  Member& MemberAt(size_t i) {
    std::lock_guard<std::mutex> l(mu_);
    Member& m = members_[i];
    if (!m.channel) {
      grpc::ChannelArguments args;
      args.SetMaxReceiveMessageSize(-1);
      args.SetMaxSendMessageSize(-1);
      args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
      args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
      args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
      // A watch stream waits for the server as long as nothing changes: pings (every 10 s
      // while a call is open; etcd accepts one every 5 s) notice a member that hangs.
      args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10'000);
      args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5'000);
      m.channel = grpc::CreateCustomChannel(o_.endpoints[i], Credentials(), args);
      m.kv = pb::KV::NewStub(m.channel);
      m.lease = pb::Lease::NewStub(m.channel);
      m.auth = pb::Auth::NewStub(m.channel);
      m.cluster = pb::Cluster::NewStub(m.channel);
      m.watch = pb::Watch::NewStub(m.channel);
    }
    return m;
  }

  // gRPC's own log goes to standard error unasked (a failed TLS handshake prints several
  // lines there); it is sent to this program's log at debug level instead, since every
  // failure it reports also comes back as a call's status, which the engine reports.
  static void QuietGrpcLog() {
    static std::once_flag once;
    std::call_once(once, [] {
      gpr_set_log_function([](gpr_log_func_args* a) { spdlog::debug("grpc {}:{}: {}", a->file, a->line, a->message); });
    });
  }

  std::shared_ptr<grpc::ChannelCredentials> Credentials() {
    QuietGrpcLog();
    if (!o_.tls) return grpc::InsecureChannelCredentials();
    // The files were checked readable when the URL was parsed.
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = ReadAll(o_.ca_file);
    ssl.pem_cert_chain = ReadAll(o_.cert_file);
    ssl.pem_private_key = ReadAll(o_.key_file);
    return grpc::SslCredentials(ssl);
  }

  static std::string ReadAll(const std::string& path) {
    if (path.empty()) return "";
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }

  void SetUp(grpc::ClientContext* ctx, const std::string& token, size_t request_bytes = 0) {
    ctx->set_deadline(std::chrono::system_clock::now() + rotation_.Budget(o_, request_bytes));
    if (!token.empty()) ctx->AddMetadata("token", token);
  }

  Result<std::string> Authenticate(Member& m, const std::string& endpoint) {
    pb::AuthenticateRequest req;
    req.set_name(o_.user);
    req.set_password(o_.password);
    pb::AuthenticateResponse resp;
    grpc::ClientContext ctx;
    SetUp(&ctx, "");
    grpc::Status st = m.auth->Authenticate(&ctx, req, &resp);
    if (!st.ok()) {
      Status err = ServerError(st.error_code(), st.error_message(), endpoint);
      return Refused(st) ? Status::Err(ECONNREFUSED, err.message()) : err;
    }
    return resp.token();
  }

  static bool Refused(const grpc::Status& st) {
    const std::string& msg = st.error_message();
    return st.error_code() == grpc::StatusCode::UNAVAILABLE &&
           (msg.find("Connection refused") != std::string::npos || msg.find("failed to connect") != std::string::npos);
  }

  // Calls rpc on one member after another until one answers (etcd_client.h).
  template <typename Rpc>
  Status Call(Rpc&& rpc, bool* sent, size_t request_bytes = 0) {
    using Answer = MemberRotation::Answer;
    auto authenticate = [&](size_t i) { return Authenticate(MemberAt(i), o_.endpoints[i]); };
    return rotation_.Ask(o_, sent, authenticate, [&](size_t i, const std::string& token) -> Answer {
      grpc::ClientContext ctx;
      SetUp(&ctx, token, request_bytes);
      grpc::Status st = rpc(MemberAt(i), &ctx);
      if (st.ok()) return Answer{Answer::kDone, Status::OK()};
      Status err = ServerError(st.error_code(), st.error_message(), o_.endpoints[i]);
      if (st.error_code() == grpc::StatusCode::UNAUTHENTICATED) return Answer{Answer::kTokenExpired, err};
      if (st.error_code() == grpc::StatusCode::UNAVAILABLE || st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
          st.error_code() == grpc::StatusCode::CANCELLED) {
        bool refused = Refused(st);
        return Answer{Answer::kNext, Status::Err(EAGAIN, st.error_message()), refused, !refused};
      }
      return Answer{Answer::kDone, err};
    });
  }

  ClientOptions o_;
  std::mutex mu_;  // guards members_
  std::vector<Member> members_;
  MemberRotation rotation_;
};

}  // namespace

std::unique_ptr<Client> NewGrpcClient(const ClientOptions& options) { return std::make_unique<GrpcClient>(options); }

}  // namespace tierfs::etcd
