// The trash: with `format --trash-days N` (N > 0), unlink, rmdir, rmr and a rename that
// replaces a file move the last link of what they remove into `.trash/YYYY-MM-DD-HH/`
// (UTC hour of the removal) as "PARENT-INO-NAME" instead of deleting it; its blocks stay
// until the hour is older than the retention, when the background cleaner (any client,
// every minute) deletes it. `.trash` (kTrashIno) is not an entry of the root: Lookup finds
// it by name, Readdir of the root does not list it. Entries are read-only, readable only
// by their owner and root, and count in no quota; `tierfs restore` puts them back.
#include <sys/stat.h>

#include <cstdio>
#include <ctime>

#include <spdlog/spdlog.h>

#include "common/clock.h"
#include "meta/meta.h"
#include "meta/meta_internal.h"

namespace tierfs {

using namespace internal;  // NOLINT: shared helpers of the meta*.cc files

namespace {

constexpr int64_t kHourNs = 3600ll * 1000000000;
constexpr size_t kExpireBatch = 256;

// Parses "YYYY-MM-DD-HH" into the hour's start (ns since the epoch).
bool ParseHour(const std::string& s, int64_t* ns) {
  int y, mo, d, h;
  char tail;
  if (std::sscanf(s.c_str(), "%4d-%2d-%2d-%2d%c", &y, &mo, &d, &h, &tail) != 4) return false;
  struct tm tm = {};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  *ns = static_cast<int64_t>(timegm(&tm)) * 1000000000;
  return true;
}

Attr NewTrashDir(int64_t now, Ino parent) {
  Attr a;
  a.mode = S_IFDIR | 0555;
  a.nlink = 2;
  a.length = 4096;
  a.atime_ns = a.mtime_ns = a.ctime_ns = now;
  a.parent = parent;
  return a;
}

}  // namespace

std::string Meta::TrashHourName(int64_t ns) {
  time_t secs = static_cast<time_t>(ns / 1000000000);
  struct tm tm;
  gmtime_r(&secs, &tm);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02d-%02d", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour);
  return buf;
}

bool Meta::ParseTrashName(const std::string& entry, Ino* parent, Ino* ino, std::string* name) {
  size_t a = entry.find('-');
  if (a == std::string::npos || a == 0) return false;
  size_t b = entry.find('-', a + 1);
  if (b == std::string::npos || b == a + 1 || b + 1 >= entry.size()) return false;
  char* end = nullptr;
  *parent = std::strtoull(entry.c_str(), &end, 10);
  if (end != entry.c_str() + a) return false;
  *ino = std::strtoull(entry.c_str() + a + 1, &end, 10);
  if (end != entry.c_str() + b) return false;
  *name = entry.substr(b + 1);
  return true;
}

Status Meta::TrashTx(KvTxn& t, Ino parent, const Attr& pa, const std::string& name, Ino ino, Attr* a, int64_t now,
                     Ino spare, bool* moved) {
  *moved = false;
  if (!TrashOn() || spare == 0 || parent == kTrashIno) return Status::OK();
  if (!a->IsDir() && a->nlink > 1) return Status::OK();  // not the last link
  if (a->flags & kAttrInTrash) return Status::OK();
  if (pa.parent == kTrashIno || (pa.flags & kAttrInTrash)) return Status::OK();  // removed from the trash

  // The trash and its hour directories are written only when they change: every removal
  // rewriting them made concurrent removals conflict on the same two keys.
  Attr trash;
  bool trash_changed = false, hour_changed = false;
  Status st = GetAttrTx(t, kTrashIno, &trash);
  if (st.code() == ENOENT) {
    trash = NewTrashDir(now, kRootIno);
    trash_changed = true;
  } else {
    RETURN_IF_ERROR(st);
  }
  const std::string hour_name = TrashHourName(now);
  Ino hour = 0;
  Attr ha;
  uint32_t type;
  st = GetDentryTx(t, kTrashIno, hour_name, &hour, &type);
  if (st.code() == ENOENT) {
    hour = spare;
    ha = NewTrashDir(now, kTrashIno);
    trash.nlink++;
    trash_changed = hour_changed = true;
    RETURN_IF_ERROR(t.Put(keys::Dentry(kTrashIno, hour_name), EncodeDentry(hour, ha.mode)));
  } else {
    RETURN_IF_ERROR(st);
    RETURN_IF_ERROR(GetAttrTx(t, hour, &ha));
  }
  std::string entry = std::to_string(parent) + "-" + std::to_string(ino) + "-" + name;
  if (entry.size() > kMaxName) entry.resize(kMaxName);
  RETURN_IF_ERROR(t.Put(keys::Dentry(hour, entry), EncodeDentry(ino, a->mode)));
  if (a->IsDir()) {
    ha.nlink++;
    hour_changed = true;
    a->nlink = 2;  // rmdir removes only empty directories
  } else {
    a->nlink = 1;
  }
  a->parent = hour;
  a->flags |= kAttrInTrash;
  a->ctime_ns = now;
  // An hour directory's times follow its entries to the second (nothing but TierFS
  // writes in it, and nothing reads them closer than that).
  if (hour_changed || now - ha.mtime_ns >= 1'000'000'000) {
    ha.mtime_ns = ha.ctime_ns = now;
    hour_changed = true;
  }
  RETURN_IF_ERROR(PutAttrTx(t, ino, *a));
  if (hour_changed) RETURN_IF_ERROR(PutAttrTx(t, hour, ha));
  if (trash_changed) RETURN_IF_ERROR(PutAttrTx(t, kTrashIno, trash));
  if ((a->IsRegular() || a->IsDir()) && IsOpen(ino)) {
    // Open here: for POSIX an unlinked open file, held as one (the session's `SO` record,
    // dropped at the last close) so that file handles of it stay valid until then, on
    // every client (Lookup of ".").
    {
      std::lock_guard<std::mutex> l(open_mu_);
      sustained_.insert(ino);  // harmless if this transaction is retried or fails
    }
    RETURN_IF_ERROR(t.Put(keys::Sustained(sid_, ino), ""));
  }
  *moved = true;
  return Status::OK();
}

Result<bool> Meta::HeldOpenTx(KvTxn& t, Ino ino) {
  std::vector<uint64_t> sids;
  const std::string prefix(keys::kSessionPrefix);
  RETURN_IF_ERROR(ScanPrefix(t, prefix, 0, [&](std::string_view k, std::string_view) {
    if (k.size() == prefix.size() + 8) sids.push_back(keys::DecodeU64(k.substr(prefix.size())));
    return true;
  }));
  for (uint64_t sid : sids) {
    ASSIGN_OR_RETURN(auto held, t.Get(keys::Sustained(sid, ino)));
    if (held) return true;
  }
  return false;
}

Status Meta::ExpireTrash(int64_t now_ns, int days) {
  if (opts_.read_only) return Status::OK();
  if (days < 0) {
    // The retention may have changed (`tierfs config --trash-days`): read it again.
    std::optional<std::string> rec;
    RETURN_IF_ERROR(engine_->Txn(
        [&](KvTxn& t) -> Status {
          ASSIGN_OR_RETURN(rec, t.Get(keys::Format()));
          return Status::OK();
        },
        true));
    if (rec) {
      auto f = FormatRecord::FromJson(*rec);
      if (f.ok()) trash_days_ = f->trash_days;
    }
    days = trash_days_;
  }
  std::vector<std::pair<std::string, Ino>> hours;
  RETURN_IF_ERROR(engine_->Txn(
      [&](KvTxn& t) {
        hours.clear();
        const std::string prefix = keys::DentryPrefix(kTrashIno);
        return ScanPrefix(t, prefix, 0, [&](std::string_view k, std::string_view v) {
          ByteReader r(v);
          hours.emplace_back(std::string(k.substr(prefix.size())), r.U64());
          return true;
        });
      },
      true));
  for (const auto& [hour_name, hour] : hours) {
    int64_t start = 0;
    if (!ParseHour(hour_name, &start)) continue;  // not ours (root may have made it): left alone
    // With the trash turned off (0 days), whatever it still holds goes.
    if (days > 0 && start + int64_t{days} * 24 * kHourNs + kHourNs > now_ns) continue;
    for (bool done = false; !done;) {
      int64_t usage = 0, inodes = 0;
      RETURN_IF_ERROR(ChargedTxn(&usage, &inodes, [&](KvTxn& t) -> Status {
        usage = inodes = 0;
        done = false;
        Attr ha;
        Status st = GetAttrTx(t, hour, &ha);
        if (st.code() == ENOENT) {
          done = true;
          return Status::OK();
        }
        RETURN_IF_ERROR(st);
        std::vector<std::pair<std::string, Ino>> entries;
        const std::string prefix = keys::DentryPrefix(hour);
        RETURN_IF_ERROR(ScanPrefix(t, prefix, kExpireBatch, [&](std::string_view k, std::string_view v) {
          ByteReader r(v);
          entries.emplace_back(std::string(k.substr(prefix.size())), r.U64());
          return true;
        }));
        int64_t now = NowNanos();
        size_t kept = 0;
        for (auto& [entry, ino] : entries) {
          Attr a;
          st = GetAttrTx(t, ino, &a);
          if (st.code() == ENOENT) {  // a dangling entry: drop it
            RETURN_IF_ERROR(t.Delete(keys::Dentry(hour, entry)));
            continue;
          }
          RETURN_IF_ERROR(st);
          if (a.IsDir()) {
            bool empty = true;
            RETURN_IF_ERROR(ScanPrefix(t, keys::DentryPrefix(ino), 1, [&](std::string_view, std::string_view) {
              empty = false;
              return false;
            }));
            if (!empty) {  // cannot happen (the trash is read-only); kept for fsck to report
              ++kept;
              continue;
            }
            ha.nlink--;
            a.nlink = 0;
            inodes--;
          }
          RETURN_IF_ERROR(t.Delete(keys::Dentry(hour, entry)));
          RETURN_IF_ERROR(DropLink(t, ino, &a, now));
          if (!a.IsDir() && a.nlink == 0 && !(a.IsRegular() && IsOpen(ino))) {
            usage -= ChargedBytes(a.IsRegular() ? a.length : 0);
            inodes--;
          }
        }
        if (entries.size() < kExpireBatch && kept == 0) {
          // The hour is empty: it goes too.
          Attr trash;
          RETURN_IF_ERROR(GetAttrTx(t, kTrashIno, &trash));
          trash.nlink--;
          RETURN_IF_ERROR(PutAttrTx(t, kTrashIno, trash));
          RETURN_IF_ERROR(t.Delete(keys::Dentry(kTrashIno, hour_name)));
          RETURN_IF_ERROR(t.Delete(keys::Inode(hour)));
          done = true;
          return Status::OK();
        }
        if (kept == entries.size()) done = true;  // nothing more can go
        return PutAttrTx(t, hour, ha);
      }));
    }
  }
  return Status::OK();
}

Status Meta::RestoreFromTrash(const Ctx& ctx, const std::string& hour_name, const std::string& entry) {
  if (opts_.read_only) return Status::Err(EROFS, "volume mounted read-only");
  Ino parent = 0, orig = 0;
  std::string name;
  if (!ParseTrashName(entry, &parent, &orig, &name)) {
    return Status::Err(EINVAL, "'" + entry + "' is not a trash entry name (PARENT-INO-NAME)");
  }
  Ino ino = 0;
  RETURN_IF_ERROR(ChargedTxn(nullptr, nullptr, [&](KvTxn& t) -> Status {
    Ino hour;
    uint32_t type;
    Status st = GetDentryTx(t, kTrashIno, hour_name, &hour, &type);
    if (st.code() == ENOENT) return Status::Err(ENOENT, "no hour '" + hour_name + "' in the trash");
    RETURN_IF_ERROR(st);
    st = GetDentryTx(t, hour, entry, &ino, &type);
    if (st.code() == ENOENT) return Status::Err(ENOENT, "no entry '" + entry + "' in trash hour " + hour_name);
    RETURN_IF_ERROR(st);
    Attr a, ha, pa;
    RETURN_IF_ERROR(GetAttrTx(t, ino, &a));
    if (ctx.uid != 0 && ctx.uid != a.uid) return Status::Err(EACCES, "only root and the owner may restore '" + entry + "'");
    RETURN_IF_ERROR(GetAttrTx(t, hour, &ha));
    st = GetAttrTx(t, parent, &pa);
    if (st.code() == ENOENT || (st.ok() && pa.nlink == 0)) {
      return Status::Err(ENOENT, "the directory of '" + name + "' (inode " + std::to_string(parent) + ") is gone");
    }
    RETURN_IF_ERROR(st);
    if (pa.parent == kTrashIno || (pa.flags & kAttrInTrash)) {
      return Status::Err(EAGAIN, "the directory of '" + name + "' is in the trash itself: restore it first");
    }
    auto existing = t.Get(keys::Dentry(parent, name));
    if (!existing.ok()) return existing.status();
    if (existing->has_value()) return Status::Err(EEXIST, "'" + name + "' exists again in its directory; not overwritten");
    int64_t now = NowNanos();
    RETURN_IF_ERROR(t.Delete(keys::Dentry(hour, entry)));
    RETURN_IF_ERROR(t.Put(keys::Dentry(parent, name), EncodeDentry(ino, a.mode)));
    a.parent = parent;
    a.flags &= ~kAttrInTrash;
    a.ctime_ns = now;
    if (a.IsDir()) {
      ha.nlink--;
      pa.nlink++;
    }
    pa.mtime_ns = pa.ctime_ns = now;
    RETURN_IF_ERROR(PutAttrTx(t, ino, a));
    RETURN_IF_ERROR(PutAttrTx(t, hour, ha));
    RETURN_IF_ERROR(PutAttrTx(t, parent, pa));
    // Back in the namespace, it counts in quotas again (not checked: restoring is repair).
    QuotaTx q(t);
    return q.ChargeIn(parent, a.uid, a.gid, QuotaBytes(a), 1, false);
  }));
  ForgetDir(parent);
  return Status::OK();
}

Result<Meta::TrashUsage> Meta::GetTrashUsage() {
  TrashUsage u;
  std::vector<Ino> hours;
  RETURN_IF_ERROR(engine_->Txn(
      [&](KvTxn& t) {
        hours.clear();
        u.first_expiry_ns = u.last_expiry_ns = 0;
        const std::string prefix = keys::DentryPrefix(kTrashIno);
        return ScanPrefix(t, prefix, 0, [&](std::string_view k, std::string_view v) {
          ByteReader r(v);
          hours.push_back(r.U64());
          int64_t start = 0;
          if (ParseHour(std::string(k.substr(prefix.size())), &start)) {
            // ExpireTrash's rule, with the retention it will use.
            const int64_t ends = start + int64_t{std::max(trash_days_.load(), 0)} * 24 * kHourNs + kHourNs;
            if (!u.first_expiry_ns || ends < u.first_expiry_ns) u.first_expiry_ns = ends;
            u.last_expiry_ns = std::max(u.last_expiry_ns, ends);
          }
          return true;
        });
      },
      true));
  u.hours = hours.size();
  Ctx root = Ctx::Root();
  for (Ino h : hours) {
    auto entries = Readdir(root, h, true);
    if (!entries.ok()) continue;  // expired meanwhile
    for (const DirEntry& e : *entries) {
      u.entries++;
      if (e.attr.IsRegular()) u.bytes += static_cast<uint64_t>(ChargedBytes(e.attr.length));
    }
  }
  return u;
}

}  // namespace tierfs
