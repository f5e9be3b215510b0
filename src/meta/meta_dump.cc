#include "meta/meta_dump.h"

#include <cerrno>
#include <istream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <set>
#include <vector>

#include "common/base64.h"
#include "common/encoding.h"
#include "meta/attr.h"
#include "meta/dump_check.h"
#include "meta/key_schema.h"
#include "meta/quota_tx.h"
#include "meta/record_check.h"

namespace tierfs {

using nlohmann::json;
using internal::DecodeQuota;
using internal::EncodeQuota;
using internal::EncodeQuotaList;
using internal::QuotaKey;
using internal::QuotaListKey;

namespace {

constexpr int kDumpVersion = 1;
constexpr size_t kBatch = 4096;
const std::string kEnd("\xff", 1);  // above every key of the schema

// Valid UTF-8 exactly as the JSON writer judges it (it throws on anything else).
bool IsUtf8(std::string_view s) {
  try {
    (void)json(std::string(s)).dump();
    return true;
  } catch (const json::type_error&) {
    return false;
  }
}

// Names and targets stay readable when they are UTF-8; other bytes go in base64.
void PutBytes(json& j, const char* field, std::string_view v) {
  if (IsUtf8(v)) {
    j[field] = std::string(v);
  } else {
    j[std::string(field) + "_b64"] = Base64Encode(v);
  }
}

Result<std::string> GetBytes(const json& j, const char* field) {
  if (j.contains(field)) return j.at(field).get<std::string>();
  std::string b = std::string(field) + "_b64";
  if (j.contains(b)) {
    auto d = Base64Decode(j.at(b).get<std::string>());
    if (d) return *d;
  }
  return Status::Err(EINVAL, std::string("dump: missing or malformed field ") + field);
}

Ino KeyIno(std::string_view key) { return keys::DecodeU64(key.substr(1, 8)); }

json AttrJson(Ino ino, const Attr& a) {
  return {{"ino", ino},           {"mode", a.mode},         {"uid", a.uid},          {"gid", a.gid},
          {"nlink", a.nlink},     {"length", a.length},     {"rdev", a.rdev},        {"atime_ns", a.atime_ns},
          {"mtime_ns", a.mtime_ns}, {"ctime_ns", a.ctime_ns}, {"parent", a.parent},  {"flags", a.flags}, {"allocated", a.allocated},
          {"seq", a.seq}};
}

// Collects the keys of one inode (they are contiguous in key order) into one object. A key
// that cannot be decoded, or holds values the file system never writes, is reported to
// `damaged` and left out; with `writing` off nothing more is written (a dump that found
// damage and may not skip it stops its document short, so that no load takes it).
class InodeWriter {
 public:
  using DamageFn = std::function<void(std::string_view key, std::string what)>;
  InodeWriter(std::ostream& out, DumpStats* stats, DamageFn damaged)
      : out_(out), stats_(stats), damaged_(std::move(damaged)) {}

  void set_writing(bool on) { writing_ = on; }
  // Inodes that had keys but no attributes (not necessarily damage: a file deleted while
  // the dump ran; the caller looks again).
  const std::vector<std::pair<Ino, std::string>>& without_attr() const { return without_attr_; }

  void Add(std::string_view k, std::string_view v) {
    if (k.size() < 10) return damaged_(k, "a key too short for an inode record");
    Ino ino = KeyIno(k);
    if (ino != cur_) Flush();
    cur_ = ino;
    char kind = k[9];
    std::string_view rest = k.substr(10);
    if (kind != 'F' && kind != 'P' && first_key_.empty()) first_key_.assign(k);
    switch (kind) {
      case 'I': {
        Attr a;
        if (k.size() != 10) return damaged_(k, "an attribute key of " + std::to_string(k.size()) + " bytes");
        // Without attributes the inode cannot be written: its entries, data and xattrs go too.
        if (!DecodeAttr(v, &a)) {
          return damaged_(k, "attributes that cannot be decoded (" + Size(v) + "); the whole inode is left out");
        }
        if (std::string bad = record_check::Attributes(a); !bad.empty()) {
          return damaged_(k, "attributes with " + bad + "; the whole inode is left out");
        }
        has_attr_ = true;
        nlink_ = a.nlink;
        json base = AttrJson(ino, a);
        base.update(obj_);
        obj_ = std::move(base);
        break;
      }
      case 'D': {
        Ino child = 0;
        uint32_t type = 0;
        if (std::string bad = record_check::EntryName(rest); !bad.empty()) return damaged_(k, bad);
        if (std::string bad = record_check::EntryValue(v, &child, &type); !bad.empty()) return damaged_(k, bad);
        json e;
        PutBytes(e, "name", rest);
        e["ino"] = child;
        e["type"] = type;
        obj_["entries"].push_back(std::move(e));
        stats_->entries++;
        break;
      }
      case 'C': {
        uint32_t index = 0;
        uint64_t seq = 0;
        SliceRecord s;
        if (!keys::ParseChunkRecordKey(k, &index, &seq)) return damaged_(k, "a chunk record key that cannot be parsed");
        if (!DecodeSliceRecord(v, &s)) return damaged_(k, "a chunk record that cannot be decoded (" + Size(v) + ")");
        if (std::string bad = record_check::ChunkRecord(s); !bad.empty()) return damaged_(k, bad);
        json c = {{"index", index}, {"seq", seq}, {"pos", s.pos}, {"id", s.id},
                  {"size", s.size}, {"off", s.off}, {"len", s.len}};
        if (s.flags) c["flags"] = s.flags;
        obj_["chunks"].push_back(std::move(c));
        stats_->slices++;
        break;
      }
      case 'T':
        if (rest.size() != 8 || v.size() != 8) return damaged_(k, "a truncation mask that cannot be decoded");
        if (keys::DecodeU64(v) > kMaxFileSize) return damaged_(k, "a truncation mask beyond the file size limit");
        obj_["truncs"].push_back({{"seq", keys::DecodeU64(rest)}, {"length", keys::DecodeU64(v)}});
        break;
      case 'X': {
        if (std::string bad = record_check::XattrName(rest); !bad.empty()) return damaged_(k, bad);
        if (std::string bad = record_check::XattrValue(v); !bad.empty()) return damaged_(k, bad);
        json x;
        PutBytes(x, "name", rest);
        x["value_b64"] = Base64Encode(v);
        obj_["xattrs"].push_back(std::move(x));
        break;
      }
      case 'S':
        if (!rest.empty()) return damaged_(k, "a symlink key of " + std::to_string(k.size()) + " bytes");
        if (std::string bad = record_check::SymlinkTarget(v); !bad.empty()) return damaged_(k, bad);
        PutBytes(obj_, "symlink", v);
        break;
      case 'F':
      case 'P':  // locks of live clients
        break;
      default:
        return damaged_(k, std::string("an inode record of unknown kind '") + keys::Quote(std::string_view(&kind, 1)) + "'");
    }
  }

  void Flush() {
    if (cur_ != 0 && has_attr_ && nlink_ > 0 && writing_) {
      out_ << (first_ ? "\n  " : ",\n  ") << obj_.dump();
      first_ = false;
      stats_->inodes++;
    }
    if (cur_ != 0 && !has_attr_ && !first_key_.empty()) without_attr_.emplace_back(cur_, first_key_);
    obj_ = json::object();
    has_attr_ = false;
    nlink_ = 0;
    cur_ = 0;
    first_key_.clear();
  }

 private:
  static std::string Size(std::string_view v) { return std::to_string(v.size()) + " bytes"; }

  std::ostream& out_;
  DumpStats* stats_;
  DamageFn damaged_;
  json obj_ = json::object();
  Ino cur_ = 0;
  bool has_attr_ = false;
  uint32_t nlink_ = 0;
  bool first_ = true;
  bool writing_ = true;
  std::string first_key_;  // the current inode's first key other than locks
  std::vector<std::pair<Ino, std::string>> without_attr_;
};

// Visits [begin, kEnd) in batches of read-only transactions.
Status ScanAll(KvEngine* engine, std::string_view begin, std::string_view end,
               const std::function<void(std::string_view, std::string_view)>& fn, DumpStats* stats) {
  std::string from(begin);
  for (;;) {
    std::vector<std::pair<std::string, std::string>> batch;
    RETURN_IF_ERROR(engine->Txn(
        [&](KvTxn& t) {
          batch.clear();
          return t.Scan(from, end, kBatch, [&](std::string_view k, std::string_view v) {
            batch.emplace_back(std::string(k), std::string(v));
            return true;
          });
        },
        true));
    for (auto& [k, v] : batch) fn(k, v);
    stats->keys += batch.size();
    if (batch.size() < kBatch) return Status::OK();
    from = batch.back().first;
    from.push_back('\0');  // the next key after the last one seen
  }
}

}  // namespace

namespace {

// Inodes that had records but no attributes while the dump read them: damage, unless the
// file was being deleted (its "L" key, then nothing left) or was created meanwhile. Looked
// at again, each in a transaction of its own.
Status CheckWithoutAttributes(KvEngine* engine, const std::vector<std::pair<Ino, std::string>>& inos,
                              const std::function<void(std::string_view, std::string)>& damaged) {
  for (const auto& [ino, first_key] : inos) {
    bool damage = false;
    RETURN_IF_ERROR(engine->Txn(
        [&](KvTxn& t) {
          damage = false;
          ASSIGN_OR_RETURN(auto attr, t.Get(keys::Inode(ino)));
          ASSIGN_OR_RETURN(auto pending, t.Get(keys::PendingFile(ino)));
          if (attr || pending) return Status::OK();
          return t.Scan(keys::InodePrefix(ino), PrefixEnd(keys::InodePrefix(ino)), 0,
                        [&](std::string_view k, std::string_view) {
                          char kind = k.size() > 9 ? k[9] : 0;
                          if (kind != 'F' && kind != 'P') damage = true;
                          return !damage;
                        });
        },
        true));
    if (damage) damaged(first_key, "a record of inode " + std::to_string(ino) + ", which has no attributes");
  }
  return Status::OK();
}

// Every damaged record named, at most 20 (the rest counted).
std::string DamageList(const std::vector<DamagedRecord>& damaged) {
  std::string s;
  for (size_t i = 0; i < damaged.size() && i < 20; ++i) s += "\n  " + keys::Describe(damaged[i].key) + ": " + damaged[i].what;
  if (damaged.size() > 20) s += "\n  ... and " + std::to_string(damaged.size() - 20) + " more";
  return s;
}

}  // namespace

Status DumpVolume(KvEngine* engine, std::ostream& out, bool keep_secrets, const DumpProgress& progress,
                  DumpStats* stats, bool skip_damaged) {
  DumpStats local;
  if (stats == nullptr) stats = &local;
  std::optional<std::string> fmt;
  RETURN_IF_ERROR(engine->Txn(
      [&](KvTxn& t) {
        ASSIGN_OR_RETURN(fmt, t.Get(keys::Format()));
        return Status::OK();
      },
      true));
  if (!fmt) return Status::Err(ENOENT, "no TierFS volume in " + engine->Describe());
  json format = json::parse(*fmt, nullptr, false);
  if (format.is_discarded()) return Status::Err(EIO, "the volume's format record is not valid JSON");
  if (!keep_secrets) {
    format.erase("secret_key");
    format.erase("session_token");
    format.erase("group_secret");
  }
  // A damaged record is named; without skip_damaged the document ends there (unfinished, so
  // that no load takes it), and the rest is only read to name every damaged record.
  bool writing = true;
  InodeWriter* inodes_ptr = nullptr;
  auto damaged = [&](std::string_view key, std::string what) {
    if (stats->damaged.size() < 100000) stats->damaged.push_back(DamagedRecord{std::string(key), std::move(what)});
    if (!skip_damaged && writing) {
      writing = false;
      if (inodes_ptr) inodes_ptr->set_writing(false);
    }
  };
  out << "{\n\"tierfs_dump\": " << kDumpVersion << ",\n\"format\": " << format.dump() << ",\n\"inodes\": [";
  InodeWriter inodes(out, stats, damaged);
  inodes_ptr = &inodes;
  uint64_t last_report = 0;
  RETURN_IF_ERROR(ScanAll(
      engine, "A", "B",
      [&](std::string_view k, std::string_view v) {
        inodes.Add(k, v);
        if (progress && stats->keys / 100000 != last_report) {
          last_report = stats->keys / 100000;
          progress(*stats);
        }
      },
      stats));
  inodes.Flush();
  if (writing) out << "\n],\n";

  json counters = json::object(), refs = json::array(), pending_files = json::array(),
       pending_truncs = json::array(), pending_slices = json::array(), pack_members = json::array(),
       pending_packs = json::array(), quotas = json::array(), gateway_users = json::array();
  // A session's usage slots ("CU") go into the volume's counters: the loaded volume has no
  // sessions.
  int64_t slot_bytes = 0, slot_inodes = 0;
  RETURN_IF_ERROR(ScanAll(
      engine, "B", kEnd,
      [&](std::string_view k, std::string_view v) {
        uint64_t id = 0;
        uint32_t size = 0;
        switch (k[0]) {
          case 'C':
            if (k.starts_with(keys::kUsageShardPrefix)) {
              if (v.size() != 16) return damaged(k, "a usage share of " + std::to_string(v.size()) + " bytes (16)");
              ByteReader r(v);
              slot_bytes += static_cast<int64_t>(r.U64());
              slot_inodes += static_cast<int64_t>(r.U64());
            } else {
              if (v.size() != 8) return damaged(k, "a counter of " + std::to_string(v.size()) + " bytes (8)");
              counters[std::string(k.substr(1))] = keys::DecodeU64(v);
            }
            break;
          case 'P': {
            uint64_t pack = 0;
            uint32_t len = 0;
            if (k.starts_with(keys::kPackMemberPrefix)) {
              ByteReader r(v);
              uint32_t pack_len = r.U32(), off = r.U32(), sz = r.U32();
              if (!keys::ParsePackMemberKey(k, &pack, &id) || !r.ok() || !r.empty() ||
                  uint64_t{off} + sz > pack_len) {
                return damaged(k, "a pack member record that cannot be decoded");
              }
              pack_members.push_back({pack, id, pack_len, off, sz});
            } else if (k.starts_with(keys::kPendingPackPrefix)) {
              if (!keys::ParsePendingPackKey(k, &pack, &len) || v.size() != 8) {
                return damaged(k, "a dead pack record that cannot be decoded");
              }
              pending_packs.push_back({pack, len, keys::DecodeU64(v)});
            }
            break;  // "PL" keys are rebuilt from the members
          }
          case 'K':
            if (!keys::ParseSliceKey(k, &id, &size) || v.size() != 8) {
              return damaged(k, "a slice reference count that cannot be decoded");
            }
            refs.push_back({id, size, keys::DecodeU64(v)});
            break;
          case 'Q':  // "QR" records; the "QC" list is rebuilt from them
            if (k.starts_with("QR")) {
              Quota q;
              if (k.size() != 11 || !DecodeQuota(v, &q) || (k[2] != 'D' && k[2] != 'U' && k[2] != 'G')) {
                return damaged(k, "a quota record that cannot be decoded");
              }
              quotas.push_back({std::string(1, k[2]), keys::DecodeU64(k.substr(3)), q.max_bytes, q.max_inodes,
                                q.used_bytes, q.used_inodes});
            }
            break;
          case 'X':
            // Old clients wrote no deletion time: due at once.
            if (!keys::ParseSliceKey(k, &id, &size) || (v.size() != 8 && !v.empty())) {
              return damaged(k, "a pending slice deletion that cannot be decoded");
            }
            pending_slices.push_back({id, size, keys::DecodeU64(v)});
            break;
          case 'L':
            if (k.size() != 9 || v.size() != 8) return damaged(k, "a pending file deletion that cannot be decoded");
            pending_files.push_back({KeyIno(k), keys::DecodeU64(v)});
            break;
          case 'T':
            if (k.size() != 17) return damaged(k, "a pending truncation that cannot be decoded");
            pending_truncs.push_back({KeyIno(k), keys::DecodeU64(k.substr(9))});
            break;
          case 'G':
            if (k.starts_with(keys::kGatewayUserPrefix)) {
              json u = json::parse(v, nullptr, false);
              if (!u.is_object() || !u.contains("access_key") || !u["access_key"].is_string() ||
                  u["access_key"].get<std::string>() != k.substr(keys::kGatewayUserPrefix.size())) {
                return damaged(k, "a gateway user record that cannot be decoded");
              }
              gateway_users.push_back(std::move(u));
            }
            break;
          default:  // 'V' (written above), 'S*' sessions of live clients, 'W' staged marks, 'BK'
            break;
        }
      },
      stats));
  RETURN_IF_ERROR(CheckWithoutAttributes(engine, inodes.without_attr(), damaged));
  for (const char* name : {"usedSpace", "totalInodes"}) {
    int64_t base = counters.contains(name) ? static_cast<int64_t>(counters[name].get<uint64_t>()) : 0;
    int64_t add = std::string_view(name) == "usedSpace" ? slot_bytes : slot_inodes;
    if (add != 0) counters[name] = static_cast<uint64_t>(std::max<int64_t>(0, base + add));
  }
  if (writing) {
    out << "\"quotas\": " << quotas.dump() << ",\n";
    out << "\"gateway_users\": " << gateway_users.dump() << ",\n";
    out << "\"pack_members\": " << pack_members.dump() << ",\n\"pending_packs\": " << pending_packs.dump() << ",\n";
    out << "\"counters\": " << counters.dump() << ",\n\"slice_refs\": " << refs.dump()
        << ",\n\"pending_slices\": " << pending_slices.dump() << ",\n\"pending_files\": " << pending_files.dump()
        << ",\n\"pending_truncs\": " << pending_truncs.dump() << "\n}\n";
  }
  out.flush();
  if (!out) return Status::Err(EIO, "cannot write the dump");
  stats->finished = true;
  if (progress) progress(*stats);
  if (!stats->damaged.empty()) {
    return Status::Err(EIO, std::to_string(stats->damaged.size()) + " metadata record(s) of " + engine->Describe() +
                                " cannot be read" + (skip_damaged ? " and were left out of the dump:" : ":") +
                                DamageList(stats->damaged));
  }
  return Status::OK();
}

namespace {

class BatchWriter {
 public:
  BatchWriter(KvEngine* engine, DumpStats* stats) : engine_(engine), stats_(stats) {}
  Status Put(std::string k, std::string v) {
    batch_.emplace_back(std::move(k), std::move(v));
    if (batch_.size() >= kBatch) return Flush();
    return Status::OK();
  }
  Status Flush() {
    if (batch_.empty()) return Status::OK();
    RETURN_IF_ERROR(engine_->Txn([&](KvTxn& t) {
      for (auto& [k, v] : batch_) RETURN_IF_ERROR(t.Put(k, v));
      return Status::OK();
    }));
    stats_->keys += batch_.size();
    batch_.clear();
    return Status::OK();
  }

 private:
  KvEngine* engine_;
  DumpStats* stats_;
  std::vector<std::pair<std::string, std::string>> batch_;
};

Status LoadInode(const json& j, BatchWriter& w, DumpStats* stats) {
  Ino ino = j.at("ino").get<Ino>();
  Attr a;
  a.mode = j.at("mode");
  a.uid = j.at("uid");
  a.gid = j.at("gid");
  a.nlink = j.at("nlink");
  a.length = j.at("length");
  a.rdev = j.at("rdev");
  a.atime_ns = j.at("atime_ns");
  a.mtime_ns = j.at("mtime_ns");
  a.ctime_ns = j.at("ctime_ns");
  a.parent = j.at("parent");
  a.flags = j.at("flags");
  a.seq = j.at("seq");
  // Dumps made before st_blocks followed the data count a file as fully allocated.
  a.allocated = j.value("allocated", (a.length + 4095) / 4096 * 4096);
  RETURN_IF_ERROR(w.Put(keys::Inode(ino), EncodeAttr(a)));
  stats->inodes++;
  if (j.contains("entries")) {
    for (const auto& e : j["entries"]) {
      ASSIGN_OR_RETURN(std::string name, GetBytes(e, "name"));
      std::string v;
      PutU64(&v, e.at("ino").get<uint64_t>());
      PutU8(&v, e.at("type").get<uint8_t>());
      RETURN_IF_ERROR(w.Put(keys::Dentry(ino, name), std::move(v)));
      stats->entries++;
    }
  }
  if (j.contains("chunks")) {
    for (const auto& c : j["chunks"]) {
      SliceRecord s;
      s.pos = c.at("pos");
      s.id = c.at("id");
      s.size = c.at("size");
      s.off = c.at("off");
      s.len = c.at("len");
      s.flags = c.value("flags", 0);
      RETURN_IF_ERROR(w.Put(keys::ChunkRecord(ino, c.at("index"), c.at("seq")), EncodeSliceRecord(s)));
      stats->slices++;
    }
  }
  if (j.contains("truncs")) {
    for (const auto& t : j["truncs"]) {
      RETURN_IF_ERROR(w.Put(keys::TruncRule(ino, t.at("seq")), keys::EncodeU64(t.at("length"))));
    }
  }
  if (j.contains("xattrs")) {
    for (const auto& x : j["xattrs"]) {
      auto v = Base64Decode(x.at("value_b64").get<std::string>());
      if (!v) return Status::Err(EINVAL, "dump: malformed xattr value of inode " + std::to_string(ino));
      ASSIGN_OR_RETURN(std::string name, GetBytes(x, "name"));
      RETURN_IF_ERROR(w.Put(keys::Xattr(ino, name), *v));
    }
  }
  if (j.contains("symlink") || j.contains("symlink_b64")) {
    ASSIGN_OR_RETURN(std::string target, GetBytes(j, "symlink"));
    RETURN_IF_ERROR(w.Put(keys::Symlink(ino), target));
  }
  return Status::OK();
}

Status LoadDoc(KvEngine* engine, const json& doc, const DumpProgress& progress, DumpStats* stats) {
  if (!doc.is_object() || doc.value("tierfs_dump", 0) != kDumpVersion) {
    return Status::Err(EINVAL, "not a TierFS dump (version " + std::to_string(kDumpVersion) + ")");
  }
  bool empty = true;
  RETURN_IF_ERROR(engine->Txn(
      [&](KvTxn& t) {
        empty = true;
        return t.Scan("", kEnd, 1, [&](std::string_view, std::string_view) {
          empty = false;
          return false;
        });
      },
      true));
  if (!empty) {
    return Status::Err(EEXIST, engine->Describe() +
                                   " is not empty; load needs an empty engine (erase it with `tierfs load --force`)");
  }
  // Every field of every record, before anything is written.
  RETURN_IF_ERROR(internal::CheckDumpDocument(doc));
  BatchWriter w(engine, stats);
  uint64_t n = 0;
  for (const auto& ino : doc.at("inodes")) {
    RETURN_IF_ERROR(LoadInode(ino, w, stats));
    if (progress && ++n % 10000 == 0) progress(*stats);
  }
  for (const auto& [name, v] : doc.at("counters").items()) {
    RETURN_IF_ERROR(w.Put(keys::Counter(name), keys::EncodeU64(v.get<uint64_t>())));
  }
  for (const auto& r : doc.at("slice_refs")) {
    RETURN_IF_ERROR(w.Put(keys::SliceRef(r[0], r[1]), keys::EncodeU64(r[2])));
  }
  for (const auto& r : doc.at("pending_slices")) {
    RETURN_IF_ERROR(w.Put(keys::PendingSlice(r[0], r[1]), keys::EncodeU64(r[2])));
  }
  if (doc.contains("pack_members")) {
    for (const auto& r : doc.at("pack_members")) {
      uint64_t pack = r[0], id = r[1];
      uint32_t pack_len = r[2], off = r[3], size = r[4];
      RETURN_IF_ERROR(w.Put(keys::PackLocation(id), EncodePackLocation(pack, pack_len, off)));
      RETURN_IF_ERROR(w.Put(keys::PackMember(pack, id), EncodePackMember(pack_len, off, size)));
    }
    for (const auto& r : doc.at("pending_packs")) {
      RETURN_IF_ERROR(w.Put(keys::PendingPack(r[0], r[1]), keys::EncodeU64(r[2])));
    }
  }
  if (doc.contains("gateway_users")) {
    for (const auto& u : doc.at("gateway_users")) {
      RETURN_IF_ERROR(w.Put(std::string(keys::kGatewayUserPrefix) + u.at("access_key").get<std::string>(), u.dump()));
    }
  }
  if (doc.contains("quotas")) {
    std::vector<std::pair<QuotaKind, uint64_t>> list;
    for (const auto& r : doc.at("quotas")) {
      std::string kind = r[0];
      if (kind != "D" && kind != "U" && kind != "G") return Status::Err(EINVAL, "malformed dump: quota kind " + kind);
      Quota q;
      q.kind = static_cast<QuotaKind>(kind[0]);
      q.id = r[1];
      q.max_bytes = r[2];
      q.max_inodes = r[3];
      q.used_bytes = r[4];
      q.used_inodes = r[5];
      list.emplace_back(q.kind, q.id);
      RETURN_IF_ERROR(w.Put(QuotaKey(q.kind, q.id), EncodeQuota(q)));
    }
    if (!list.empty()) RETURN_IF_ERROR(w.Put(QuotaListKey(), EncodeQuotaList(list)));
  }
  for (const auto& r : doc.at("pending_files")) {
    RETURN_IF_ERROR(w.Put(keys::PendingFile(r[0]), keys::EncodeU64(r[1])));
  }
  for (const auto& r : doc.at("pending_truncs")) {
    RETURN_IF_ERROR(w.Put(keys::PendingTrunc(r[0], r[1]), ""));
  }
  RETURN_IF_ERROR(w.Flush());
  // The format record last: until it exists the engine holds no usable volume, so an
  // interrupted load cannot be mounted by mistake.
  RETURN_IF_ERROR(engine->Txn([&](KvTxn& t) { return t.Put(keys::Format(), doc.at("format").dump()); }));
  if (progress) progress(*stats);
  return Status::OK();
}

}  // namespace

Status LoadVolume(KvEngine* engine, std::istream& in, const DumpProgress& progress, DumpStats* stats,
                  bool skip_dangling) {
  DumpStats local;
  if (stats == nullptr) stats = &local;
  json doc = json::parse(in, nullptr, false);
  if (doc.is_discarded()) return Status::Err(EINVAL, "the dump is not valid JSON");
  try {
    if (skip_dangling && doc.is_object() && doc.contains("inodes")) {
      std::set<Ino> present;
      for (const auto& j : doc["inodes"]) present.insert(j.at("ino").get<Ino>());
      for (auto& j : doc["inodes"]) {
        if (!j.contains("entries")) continue;
        json kept = json::array();
        for (auto& e : j["entries"]) {
          if (present.count(e.at("ino").get<Ino>())) {
            kept.push_back(std::move(e));
          } else {
            stats->dropped_entries++;
          }
        }
        j["entries"] = std::move(kept);
      }
    }
    return LoadDoc(engine, doc, progress, stats);
  } catch (const json::exception& e) {
    return Status::Err(EINVAL, std::string("malformed dump: ") + e.what());
  }
}

}  // namespace tierfs
