#include "meta/kv_engine.h"

#include <algorithm>

#include <atomic>
#include <cerrno>

#include "common/url.h"
#include "meta/etcd_engine.h"
#include "meta/mem_engine.h"
#include "meta/meta_retry_timeout.h"
#include "meta/postgres_engine.h"
#include "meta/redis_engine.h"
#include "meta/sqlite_engine.h"

namespace tierfs {

namespace {

constexpr char kExpectedForms[] =
    "expected sqlite3://PATH (for example sqlite3:///var/lib/tierfs/vol.db), "
    "redis://[USER:PASSWORD@]HOST:PORT/DB, postgres://USER:PASSWORD@HOST:PORT/DB, "
    "etcd://[USER:PASSWORD@]HOST1:2379,HOST2:2379,.../PREFIX or mem://NAME";

std::atomic<int64_t> g_retry_timeout_ms{0};

}  // namespace

void SetMetaRetryTimeout(std::chrono::milliseconds bound) { g_retry_timeout_ms = bound.count(); }

std::chrono::milliseconds MetaRetryTimeout() { return std::chrono::milliseconds(g_retry_timeout_ms.load()); }

namespace {
thread_local std::chrono::milliseconds t_budget{0};  // 0: no scope
}  // namespace

TxnBudgetScope::TxnBudgetScope(std::chrono::milliseconds budget) : saved_(t_budget) {
  t_budget = saved_.count() > 0 ? std::min(saved_, budget) : budget;
}
TxnBudgetScope::~TxnBudgetScope() { t_budget = saved_; }
std::chrono::milliseconds TxnBudgetScope::Cap(std::chrono::milliseconds d) {
  return t_budget.count() > 0 ? std::min(d, t_budget) : d;
}

Result<std::unique_ptr<KvEngine>> OpenKvEngine(const std::string& meta_url, MissingDatabase missing) {
  auto parsed = ParseUrl(meta_url);
  if (!parsed.ok()) {
    return Status::Err(EINVAL, parsed.status().message() + "; " + kExpectedForms);
  }
  Url& url = *parsed;
  if (int64_t ms = g_retry_timeout_ms.load(); ms > 0) url.query["timeout"] = std::to_string(ms) + "ms";

  if (url.scheme == "mem") {
    return std::unique_ptr<KvEngine>(std::make_unique<MemEngine>(url.path));
  }
  if (url.scheme == "sqlite3") {
    if (url.path.empty()) {
      return Status::Err(
          EINVAL, "metadata URL '" + url.original + "' has no database path; " + kExpectedForms);
    }
    ASSIGN_OR_RETURN(auto engine, SqliteEngine::Open(url.path, missing == MissingDatabase::kCreate));
    return std::unique_ptr<KvEngine>(std::move(engine));
  }
  if (url.scheme == "redis" || url.scheme == "rediss") return OpenRedisEngine(url);
  if (url.scheme == "postgres" || url.scheme == "postgresql") return OpenPostgresEngine(url);
  if (url.scheme == "etcd" || url.scheme == "etcds") return OpenEtcdEngine(url);
  // Redacted: the URL may carry a password, and this message ends up in logs.
  return Status::Err(EINVAL, "unknown metadata engine '" + url.scheme + "' in '" + url.Redacted() +
                                 "'; " + kExpectedForms);
}

Result<std::vector<std::optional<std::string>>> KvTxn::GetIndirect(const std::vector<std::string>& direct,
                                                                   std::string_view indirect_prefix, size_t n,
                                                                   std::string_view indirect_suffix) {
  // The direct keys in one GetMany: one round trip on the engines that batch reads.
  ASSIGN_OR_RETURN(auto out, GetMany(direct));
  const std::optional<std::string>& last = out.empty() ? std::nullopt : out.back();
  if (last && last->size() >= n) {
    std::string key(indirect_prefix);
    key.append(*last, 0, n).append(indirect_suffix);
    ASSIGN_OR_RETURN(auto v, Get(key));
    out.push_back(std::move(v));
  } else {
    out.emplace_back();
  }
  return out;
}

Result<std::vector<std::optional<std::string>>> KvTxn::GetMany(const std::vector<std::string>& keys) {
  std::vector<std::optional<std::string>> out;
  out.reserve(keys.size());
  for (const auto& k : keys) {
    ASSIGN_OR_RETURN(auto v, Get(k));
    out.push_back(std::move(v));
  }
  return out;
}

std::string PrefixEnd(std::string_view prefix) {
  std::string end(prefix);
  // Trailing 0xff bytes cannot be incremented; dropping them and incrementing the byte
  // before gives the smallest key above every extension of prefix.
  while (!end.empty() && static_cast<unsigned char>(end.back()) == 0xff) end.pop_back();
  if (end.empty()) return end;
  end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
  return end;
}

}  // namespace tierfs
