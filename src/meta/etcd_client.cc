#include "meta/etcd_client.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <mutex>

#include <nlohmann/json.hpp>

#include "common/base64.h"
#include "object/http_client.h"

namespace tierfs::etcd {

namespace {

using json = nlohmann::json;

// gRPC status codes etcd's gateway answers with.
constexpr int kInvalidArgument = 3, kDeadlineExceeded = 4, kNotFound = 5, kPermissionDenied = 7,
              kResourceExhausted = 8, kOutOfRange = 11, kUnavailable = 14, kUnauthenticated = 16;

int64_t Int(const json& j, const char* field) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return 0;
  if (it->is_string()) return std::stoll(it->get<std::string>());
  return it->get<int64_t>();
}

std::string Bytes(const json& j, const char* field) {
  auto it = j.find(field);
  if (it == j.end() || !it->is_string()) return "";
  auto v = Base64Decode(it->get<std::string>());
  return v ? *v : "";
}

json RangeJson(const Op& r) {
  json j{{"key", Base64Encode(r.key)}};
  if (!r.range_end.empty()) j["range_end"] = Base64Encode(r.range_end);
  if (r.limit) j["limit"] = std::to_string(r.limit);
  if (r.revision) j["revision"] = std::to_string(r.revision);
  return j;
}

json OpJson(const Op& op) {
  switch (op.kind) {
    case Op::kRange:
      return json{{"request_range", RangeJson(op)}};
    case Op::kPut: {
      json p{{"key", Base64Encode(op.key)}, {"value", Base64Encode(op.value)}};
      if (op.lease) p["lease"] = std::to_string(op.lease);
      return json{{"request_put", p}};
    }
    case Op::kDelete: {
      json d{{"key", Base64Encode(op.key)}};
      if (!op.range_end.empty()) d["range_end"] = Base64Encode(op.range_end);
      return json{{"request_delete_range", d}};
    }
  }
  return json::object();
}

RangeReply ParseRange(const json& j) {
  RangeReply r;
  if (auto h = j.find("header"); h != j.end()) r.revision = Int(*h, "revision");
  if (auto kvs = j.find("kvs"); kvs != j.end() && kvs->is_array()) {
    r.kvs.reserve(kvs->size());
    for (const auto& kv : *kvs) r.kvs.push_back(Kv{Bytes(kv, "key"), Bytes(kv, "value"), Int(kv, "mod_revision")});
  }
  auto more = j.find("more");
  r.more = more != j.end() && more->is_boolean() && more->get<bool>();
  return r;
}

// The error an answer of etcd's gateway carries, as a Status; OK when it carries none.
Status JsonError(const json& j, const std::string& where) {
  auto c = j.find("code");
  if (c == j.end() || !c->is_number()) return Status::OK();
  int code = c->get<int>();
  return ServerError(code, j.value("error", j.value("message", std::string("error code ") + std::to_string(code))),
                     where);
}

class JsonClient final : public Client {
 public:
  explicit JsonClient(ClientOptions options);
  Result<RangeReply> Range(const Op& range, bool serializable) override;
  Result<TxnReply> Txn(const std::vector<Compare>& compare, const std::vector<Op>& success,
                       const std::vector<Op>& failure, bool* maybe_applied, bool serializable) override;
  Result<int64_t> GrantLease(int64_t ttl_s) override;
  Status Compact(int64_t revision) override;
  Result<std::vector<MemberInfo>> Members() override;
  const std::string& describe() const override { return o_.describe; }

 private:
  // Posts body to path on one member after another; the reply's JSON text. sent is set
  // once a request reached a member without an answer that proves it was not applied.
  // budget_bytes: what the request budget counts (MemberRotation::Budget); the body's size
  // when left 0.
  Result<std::string> Post(const std::string& path, const std::string& body, bool* sent, size_t budget_bytes = 0);
  Result<std::string> Authenticate(const std::string& endpoint);

  ClientOptions o_;
  std::unique_ptr<HttpClient> http_;
  MemberRotation members_;
};

}  // namespace

Status ServerError(int code, const std::string& msg, const std::string& where) {
  if (code == 0) return Status::OK();
  std::string said = "etcd " + where + ": " + msg;
  // A wrong user or password comes as InvalidArgument; it is a matter of access.
  if (msg.find("authentication failed") != std::string::npos) {
    return Status::Err(EACCES, said + " (check the user and password in the META-URL or $TIERFS_META_PASSWORD)");
  }
  switch (code) {
    case kOutOfRange:
      return Status::Err(ESTALE, said);
    case kInvalidArgument:
      if (msg.find("too many operations") != std::string::npos) {
        return Status::Err(EFBIG, said + " (one metadata operation needs more keys in a transaction than the "
                                         "cluster allows: start every member with a larger --max-txn-ops)");
      }
      if (msg.find("too large") != std::string::npos) {
        return Status::Err(EFBIG, said + " (start every member with a larger --max-request-bytes)");
      }
      return Status::Err(EINVAL, said);
    case kResourceExhausted:
      if (msg.find("space") != std::string::npos) {
        return Status::Err(ENOSPC, said + " (the cluster's --quota-backend-bytes is used up: compact, "
                                          "defragment, then `etcdctl alarm disarm`)");
      }
      return Status::Err(EFBIG, said + " (start every member with a larger --max-request-bytes)");
    case kPermissionDenied:
    case kUnauthenticated:
      return Status::Err(EACCES, said);
    case kNotFound:
      return Status::Err(ENOENT, said);
    case kUnavailable:
    case kDeadlineExceeded:
      return Status::Err(EAGAIN, said);
    default:
      return Status::Err(EIO, said);
  }
}


JsonClient::JsonClient(ClientOptions options) : o_(std::move(options)) {
  HttpClientOptions h;
  h.connect_timeout_ms = std::min<long>(1000, o_.request_timeout.count());
  h.io_timeout_s = std::max<long>(1, (o_.request_timeout.count() + 999) / 1000);
  h.total_timeout_ms = o_.request_timeout.count();
  h.max_idle_handles = 16;
  h.tls = {o_.ca_file, o_.cert_file, o_.key_file};
  http_ = std::make_unique<HttpClient>(h);
}

Status MemberRotation::Ask(const ClientOptions& o, bool* sent,
                           const std::function<Result<std::string>(size_t)>& authenticate,
                           const std::function<Answer(size_t, const std::string&)>& ask) {
  std::string reasons;
  bool all_refused = true;
  const size_t n = o.endpoints.size();
  const size_t start = current_.load();
  for (size_t i = 0; i < n; ++i) {
    const size_t idx = (start + i) % n;
    auto next = [&](const std::string& why, bool refused) {
      reasons += (reasons.empty() ? "" : "; ") + o.endpoints[idx] + ": " + why;
      all_refused &= refused;
    };
    for (int auth_try = 0; auth_try < 2; ++auth_try) {
      std::string token;
      if (!o.user.empty()) {
        {
          std::lock_guard<std::mutex> l(mu_);
          token = token_;
        }
        if (token.empty()) {
          auto got = authenticate(idx);
          // Refused credentials, or a TLS set-up the member rejects: no member will differ.
          if (!got.ok() && (got.status().code() == EACCES || got.status().code() == EINVAL)) return got.status();
          if (!got.ok()) {
            next(got.status().message(), got.status().code() == ECONNREFUSED);
            break;
          }
          token = *got;
          std::lock_guard<std::mutex> l(mu_);
          token_ = token;
        }
      }
      auto t0 = std::chrono::steady_clock::now();
      Answer a = ask(idx, token);
      if (a.kind == Answer::kDone && a.status.ok()) {
        int64_t took = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count();
        int64_t was = typical_us_.load();
        typical_us_.store(was == 0 ? took : (7 * was + took) / 8);
      }
      if (a.kind == Answer::kTokenExpired && !o.user.empty() && auth_try == 0) {
        std::lock_guard<std::mutex> l(mu_);
        token_.clear();  // authenticate again
        continue;
      }
      if (a.kind == Answer::kNext) {
        *sent |= a.sent;
        next(a.status.message(), a.refused);
        break;
      }
      if (a.status.ok()) current_.store(idx);
      return a.status;  // kDone, or an expired token twice: its error
    }
  }
  current_.store((start + 1) % n);
  std::string hint = all_refused && o.tls ? "; over TLS a refused handshake looks the same: check that the members "
                                            "speak TLS, that ca= names the CA that signed their certificates, and "
                                            "give cert= and key= if they require a client certificate"
                                          : "";
  return Status::Err(all_refused ? ECONNREFUSED : EAGAIN,
                     "etcd " + o.describe + ": no member served the request (" + reasons + ")" + hint);
}

namespace {
thread_local std::chrono::steady_clock::time_point t_deadline = std::chrono::steady_clock::time_point::max();
}  // namespace

DeadlineScope::DeadlineScope(std::chrono::steady_clock::time_point deadline) : saved_(t_deadline) {
  t_deadline = std::min(deadline, saved_);
}

DeadlineScope::~DeadlineScope() { t_deadline = saved_; }

std::chrono::milliseconds MemberRotation::Budget(const ClientOptions& o, size_t request_bytes) const {
  using std::chrono::milliseconds;
  milliseconds budget = o.request_timeout;
  if (request_bytes <= (64 << 10)) {
    budget = std::clamp(milliseconds(8 * typical_us_.load() / 1000), std::min(milliseconds(1000), o.request_timeout),
                        o.request_timeout);
  }
  if (t_deadline != std::chrono::steady_clock::time_point::max()) {
    auto left = std::chrono::duration_cast<milliseconds>(t_deadline - std::chrono::steady_clock::now());
    budget = std::min(budget, std::max(left, milliseconds(50)));
  }
  return budget;
}

Result<std::string> JsonClient::Authenticate(const std::string& endpoint) {
  HttpRequest req;
  req.method = "POST";
  req.url = (o_.tls ? "https://" : "http://") + endpoint + "/v3/auth/authenticate";
  std::string body = json{{"name", o_.user}, {"password", o_.password}}.dump();
  req.headers = {{"Content-Type", "application/json"}};
  req.body = {body};
  auto got = http_->Perform(req);
  if (!got.ok()) {
    // Over TLS, a handshake the member refused (a certificate it does not accept) will not
    // succeed by asking again: report it at once.
    const std::string& m = got.status().message();
    if (o_.tls && (m.find("SSL") != std::string::npos || m.find("certificate") != std::string::npos)) {
      return Status::Err(EINVAL, "etcd " + endpoint + ": " + m +
                                     " (the member refused this client's TLS handshake: check ca=, cert= and key=)");
    }
    return got.status();
  }
  HttpResponse& resp = *got;
  json j = json::parse(resp.body, nullptr, false);
  if (j.is_discarded()) {
    return Status::Err(EIO, "etcd " + endpoint + ": unreadable answer to authentication (HTTP " +
                                std::to_string(resp.status) + ": \"" + resp.body.substr(0, 200) + "\")");
  }
  RETURN_IF_ERROR(JsonError(j, endpoint));
  return j.value("token", "");
}

Result<std::string> JsonClient::Post(const std::string& path, const std::string& body, bool* sent,
                                     size_t budget_bytes) {
  using Answer = MemberRotation::Answer;
  std::string out;
  auto authenticate = [&](size_t i) { return Authenticate(o_.endpoints[i]); };
  RETURN_IF_ERROR(members_.Ask(o_, sent, authenticate, [&](size_t i, const std::string& token) -> Answer {
    const std::string& ep = o_.endpoints[i];
    HttpRequest req;
    req.method = "POST";
    req.url = (o_.tls ? "https://" : "http://") + ep + path;
    req.headers = {{"Content-Type", "application/json"}};
    if (!token.empty()) req.headers.emplace_back("Authorization", token);
    req.body = {body};
    req.total_timeout_ms = members_.Budget(o_, budget_bytes != 0 ? budget_bytes : body.size()).count();
    auto resp = http_->Perform(req);
    if (!resp.ok()) {
      // A certificate refused, or TLS spoken to a plain server: asking again will not help.
      if (resp.status().code() == EINVAL) {
        return Answer{Answer::kDone, Status::Err(EINVAL, "etcd " + ep + ": " + resp.status().message() +
                                                             " (check etcds:// against etcd:// and the ca=, cert= "
                                                             "and key= files)")};
      }
      // Refused: nothing reached the member. Anything else may have.
      bool refused = resp.status().code() == ECONNREFUSED;
      return Answer{Answer::kNext, resp.status(), refused, !refused};
    }
    json j = json::parse(resp->body, nullptr, false);
    if (j.is_discarded()) {
      return Answer{Answer::kDone, Status::Err(EIO, "etcd " + ep + ": unreadable answer (HTTP " +
                                                        std::to_string(resp->status) + "): " + resp->body.substr(0, 200))};
    }
    Status st = JsonError(j, ep);
    if (st.code() == EACCES && st.message().find("token") != std::string::npos) {
      return Answer{Answer::kTokenExpired, st};
    }
    if (st.code() == EAGAIN) return Answer{Answer::kNext, st, false, true};
    if (st.ok() && resp->status != 200) {
      st = Status::Err(EIO, "etcd " + ep + ": HTTP " + std::to_string(resp->status) + ": " + resp->body.substr(0, 200));
    }
    if (st.ok()) out = std::move(resp->body);
    return Answer{Answer::kDone, st};
  }));
  return out;
}

Result<RangeReply> JsonClient::Range(const Op& range, bool serializable) {
  bool sent = false;
  json j = RangeJson(range);
  if (serializable) j["serializable"] = true;
  ASSIGN_OR_RETURN(auto body, Post("/v3/kv/range", j.dump(), &sent));
  return ParseRange(json::parse(body));
}

Result<TxnReply> JsonClient::Txn(const std::vector<Compare>& compare, const std::vector<Op>& success,
                                 const std::vector<Op>& failure, bool* maybe_applied, bool serializable) {
  json j = json::object();
  json cmp = json::array();
  for (const auto& c : compare) {
    json e{{"key", Base64Encode(c.key)}, {"target", "MOD"}, {"result", c.less ? "LESS" : "EQUAL"},
           {"mod_revision", std::to_string(c.mod_revision)}};
    if (!c.range_end.empty()) e["range_end"] = Base64Encode(c.range_end);
    cmp.push_back(std::move(e));
  }
  bool writes = false;
  auto ops = [&](const std::vector<Op>& in) {
    json a = json::array();
    for (const auto& op : in) {
      writes |= op.kind != Op::kRange;
      json one = OpJson(op);
      if (serializable && op.kind == Op::kRange) one["request_range"]["serializable"] = true;
      a.push_back(std::move(one));
    }
    return a;
  };
  j["compare"] = std::move(cmp);
  j["success"] = ops(success);
  j["failure"] = ops(failure);
  bool sent = false;
  auto body = Post("/v3/kv/txn", j.dump(), &sent);
  if (!body.ok()) {
    if (writes && sent && maybe_applied) *maybe_applied = true;
    return body.status();
  }
  json r = json::parse(*body);
  TxnReply out;
  if (auto h = r.find("header"); h != r.end()) out.revision = Int(*h, "revision");
  auto s = r.find("succeeded");
  out.succeeded = s != r.end() && s->is_boolean() && s->get<bool>();
  if (auto rs = r.find("responses"); rs != r.end() && rs->is_array()) {
    for (const auto& one : *rs) {
      if (auto rr = one.find("response_range"); rr != one.end()) out.ranges.push_back(ParseRange(*rr));
    }
  }
  return out;
}

Result<int64_t> JsonClient::GrantLease(int64_t ttl_s) {
  bool sent = false;
  ASSIGN_OR_RETURN(auto body, Post("/v3/lease/grant", json{{"TTL", std::to_string(ttl_s)}}.dump(), &sent));
  json r = json::parse(body);
  int64_t id = Int(r, "ID");
  if (id == 0) return Status::Err(EIO, "etcd " + o_.describe + ": lease grant answered no lease: " + body.substr(0, 200));
  return id;
}

Status JsonClient::Compact(int64_t revision) {
  bool sent = false;
  return Post("/v3/kv/compaction", json{{"revision", std::to_string(revision)}, {"physical", true}}.dump(), &sent,
              MemberRotation::kWholeTimeout)
      .status();
}

Result<std::vector<MemberInfo>> JsonClient::Members() {
  bool sent = false;
  ASSIGN_OR_RETURN(auto body, Post("/v3/cluster/member/list", "{}", &sent));
  json r = json::parse(body);
  std::vector<MemberInfo> out;
  if (auto ms = r.find("members"); ms != r.end() && ms->is_array()) {
    for (const auto& m : *ms) out.push_back(MemberInfo{m.value("name", ""), m.value("isLearner", false)});
  }
  return out;
}

std::unique_ptr<Client> NewJsonClient(const ClientOptions& options) {
  return std::make_unique<JsonClient>(options);
}

std::unique_ptr<Client> NewClient(const ClientOptions& options) {
  return options.api == ClientOptions::Api::kJson ? NewJsonClient(options) : NewGrpcClient(options);
}

}  // namespace tierfs::etcd
