#include "meta/dump_check.h"

#include <sys/stat.h>

#include <cerrno>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

#include "common/base64.h"
#include "meta/key_schema.h"
#include "meta/meta.h"
#include "meta/record_check.h"

namespace tierfs::internal {

namespace {

using nlohmann::json;

// The first problem found, as the message the load fails with.
struct Bad {
  std::string what;
};

[[noreturn]] void Fail(const std::string& where, const std::string& what) { throw Bad{where + ": " + what}; }

const json& Field(const json& j, const char* field, const std::string& where) {
  if (!j.is_object() || !j.contains(field)) Fail(where, std::string("no field '") + field + "'");
  return j.at(field);
}

// A whole number from 0 to max.
uint64_t Unsigned(const json& j, const char* field, uint64_t max, const std::string& where) {
  const json& v = Field(j, field, where);
  if (!v.is_number_unsigned() || v.get<uint64_t>() > max) {
    Fail(where, std::string(field) + " " + v.dump() + " is not a whole number from 0 to " + std::to_string(max));
  }
  return v.get<uint64_t>();
}

int64_t Signed(const json& j, const char* field, const std::string& where) {
  const json& v = Field(j, field, where);
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX})) {
    Fail(where, std::string(field) + " " + v.dump() + " is not a 64-bit whole number");
  }
  return v.get<int64_t>();
}

// "name" (UTF-8) or "name_b64" (any bytes).
std::string Bytes(const json& j, const char* field, const std::string& where) {
  if (j.is_object() && j.contains(field)) {
    if (!j.at(field).is_string()) Fail(where, std::string(field) + " is not a string");
    return j.at(field).get<std::string>();
  }
  std::string b = std::string(field) + "_b64";
  if (j.is_object() && j.contains(b) && j.at(b).is_string()) {
    auto d = Base64Decode(j.at(b).get<std::string>());
    if (d) return *d;
    Fail(where, b + " is not base64");
  }
  Fail(where, std::string("no field '") + field + "'");
}

const json& Array(const json& j, const char* field, const std::string& where, bool optional = false) {
  static const json kEmpty = json::array();
  if (optional && (!j.is_object() || !j.contains(field))) return kEmpty;
  const json& v = Field(j, field, where);
  if (!v.is_array()) Fail(where, std::string(field) + " is not a list");
  return v;
}

// A list of tuples of whole numbers ("slice_refs": [[id, size, n], ...]); max per column.
void Tuples(const json& doc, const char* field, const std::vector<uint64_t>& max, bool optional = false) {
  for (const json& r : Array(doc, field, "the dump", optional)) {
    std::string where = std::string(field) + " " + r.dump();
    if (!r.is_array() || r.size() != max.size()) {
      Fail(where, "not a list of " + std::to_string(max.size()) + " numbers");
    }
    for (size_t i = 0; i < max.size(); ++i) {
      if (!r[i].is_number_unsigned() || r[i].get<uint64_t>() > max[i]) Fail(where, "a number out of range");
    }
  }
}

struct InodeFacts {
  uint32_t type = 0;  // S_IFMT
  uint64_t parent = 0;
  uint32_t nlink = 0;
};

Attr CheckAttr(const json& j, const std::string& where) {
  Attr a;
  a.mode = static_cast<uint32_t>(Unsigned(j, "mode", UINT32_MAX, where));
  a.uid = static_cast<uint32_t>(Unsigned(j, "uid", UINT32_MAX - 1, where));
  a.gid = static_cast<uint32_t>(Unsigned(j, "gid", UINT32_MAX - 1, where));
  a.nlink = static_cast<uint32_t>(Unsigned(j, "nlink", UINT32_MAX, where));
  a.length = Unsigned(j, "length", kMaxFileSize, where);
  a.rdev = Unsigned(j, "rdev", UINT64_MAX, where);
  a.atime_ns = Signed(j, "atime_ns", where);
  a.mtime_ns = Signed(j, "mtime_ns", where);
  a.ctime_ns = Signed(j, "ctime_ns", where);
  a.parent = Unsigned(j, "parent", UINT64_MAX, where);
  a.flags = static_cast<uint32_t>(Unsigned(j, "flags", UINT32_MAX, where));
  a.seq = Unsigned(j, "seq", UINT64_MAX, where);
  a.allocated = j.contains("allocated") ? Unsigned(j, "allocated", UINT64_MAX, where) : (a.length + 4095) / 4096 * 4096;
  if (std::string bad = record_check::Attributes(a); !bad.empty()) Fail(where, bad);
  // A dump holds linked inodes only.
  if (a.nlink == 0) Fail(where, "link count 0");
  if (a.IsDir() && a.parent == 0) Fail(where, "a directory without a parent");
  return a;
}

void CheckInodeRecords(const json& j, Ino ino, const Attr& a, const std::string& where) {
  for (const json& c : Array(j, "chunks", where, true)) {
    if (!a.IsRegular()) Fail(where, "chunk records in an inode that is not a regular file");
    SliceRecord r;
    uint64_t index = Unsigned(c, "index", kMaxFileSize / kChunkSize, where + ": chunk record");
    r.seq = Unsigned(c, "seq", UINT64_MAX, where + ": chunk record");
    std::string rec = where + ": record " + std::to_string(r.seq) + " of chunk " + std::to_string(index);
    r.pos = static_cast<uint32_t>(Unsigned(c, "pos", UINT32_MAX, rec));
    r.id = Unsigned(c, "id", UINT64_MAX, rec);
    r.size = static_cast<uint32_t>(Unsigned(c, "size", UINT32_MAX, rec));
    r.off = static_cast<uint32_t>(Unsigned(c, "off", UINT32_MAX, rec));
    r.len = static_cast<uint32_t>(Unsigned(c, "len", UINT32_MAX, rec));
    r.flags = c.contains("flags") ? static_cast<uint8_t>(Unsigned(c, "flags", UINT8_MAX, rec)) : 0;
    if (std::string bad = record_check::ChunkRecord(r); !bad.empty()) Fail(rec, bad);
  }
  for (const json& t : Array(j, "truncs", where, true)) {
    if (!a.IsRegular()) Fail(where, "truncation masks in an inode that is not a regular file");
    Unsigned(t, "seq", UINT64_MAX, where + ": truncation mask");
    Unsigned(t, "length", kMaxFileSize, where + ": truncation mask");
  }
  std::set<std::string> xnames;
  for (const json& x : Array(j, "xattrs", where, true)) {
    std::string name = Bytes(x, "name", where + ": extended attribute");
    std::string xw = where + ": extended attribute '" + keys::Quote(name) + "'";
    if (std::string bad = record_check::XattrName(name); !bad.empty()) Fail(xw, bad);
    if (!xnames.insert(name).second) Fail(xw, "named twice");
    std::string value = Bytes(x, "value", xw);
    if (std::string bad = record_check::XattrValue(value); !bad.empty()) Fail(xw, bad);
  }
  bool has_target = j.contains("symlink") || j.contains("symlink_b64");
  if (a.IsSymlink() != has_target) {
    Fail(where, a.IsSymlink() ? "a symlink without a target" : "a symlink target in an inode that is not a symlink");
  }
  if (has_target) {
    if (std::string bad = record_check::SymlinkTarget(Bytes(j, "symlink", where)); !bad.empty()) Fail(where, bad);
  }
  (void)ino;
}

void CheckDocument(const json& doc) {
  const json& format = Field(doc, "format", "the dump");
  if (!format.is_object()) Fail("the dump", "its format record is not an object");
  auto rec = FormatRecord::FromJson(format.dump());
  if (!rec.ok()) Fail("the format record", rec.status().message());
  if (rec->name.empty() || rec->name.find('/') != std::string::npos) Fail("the format record", "a bad volume name");
  if (rec->uuid.empty()) Fail("the format record", "no uuid");
  if (rec->block_size < (64u << 10) || rec->block_size > (16u << 20) || (rec->block_size & (rec->block_size - 1))) {
    Fail("the format record", "block size " + std::to_string(rec->block_size));
  }

  // Pass 1: every inode, its attributes and records.
  const json& inodes = Array(doc, "inodes", "the dump");
  std::unordered_map<Ino, InodeFacts> facts;
  uint64_t total_entries = 0;
  for (const json& j : inodes) {
    if (!j.is_object()) Fail("the dump", "an inode that is not an object");
    Ino ino = Unsigned(j, "ino", UINT64_MAX, "an inode");
    std::string where = "inode " + std::to_string(ino);
    if (ino == 0) Fail(where, "inode number 0");
    Attr a = CheckAttr(j, where);
    CheckInodeRecords(j, ino, a, where);
    if (!facts.emplace(ino, InodeFacts{a.mode & S_IFMT, a.parent, a.nlink}).second) Fail(where, "dumped twice");
    const json& entries = Array(j, "entries", where, true);
    if (!entries.empty() && !a.IsDir()) Fail(where, "directory entries in an inode that is not a directory");
    total_entries += entries.size();
  }
  auto root = facts.find(kRootIno);
  if (root == facts.end()) Fail("the dump", "no root directory (inode " + std::to_string(kRootIno) + ")");
  if (root->second.type != S_IFDIR) Fail("inode 1", "the root is not a directory");

  // Pass 2: entries against the inodes they lead to.
  for (const json& j : inodes) {
    Ino dir = j.at("ino").get<Ino>();
    std::set<std::string> names;
    for (const json& e : Array(j, "entries", "inode", true)) {
      std::string name = Bytes(e, "name", "an entry of directory inode " + std::to_string(dir));
      std::string where = "entry '" + keys::Quote(name) + "' of directory inode " + std::to_string(dir);
      if (std::string bad = record_check::EntryName(name); !bad.empty()) Fail(where, bad);
      if (!names.insert(name).second) Fail(where, "the name appears twice in its directory");
      Ino target = Unsigned(e, "ino", UINT64_MAX, where);
      uint32_t type = static_cast<uint32_t>(Unsigned(e, "type", UINT8_MAX, where));
      if (std::string bad = record_check::EntryType(type); !bad.empty()) Fail(where, bad);
      auto it = facts.find(target);
      if (it == facts.end()) {
        Fail(where, "it points at inode " + std::to_string(target) +
                        ", which the dump does not contain (a backup taken while files were deleted loads with "
                        "--skip-dangling)");
      }
      if (it->second.type != type << 12) {
        Fail(where, "it says file type " + std::to_string(type) + " but inode " + std::to_string(target) + " has " +
                        std::to_string(it->second.type >> 12));
      }
    }
  }
  for (const auto& [ino, f] : facts) {
    std::string where = "inode " + std::to_string(ino);
    if (f.type == S_IFDIR && !facts.count(f.parent)) {
      Fail(where, "its parent directory, inode " + std::to_string(f.parent) + ", is not in the dump");
    }
    if (f.nlink > total_entries + 2) {
      Fail(where, "link count " + std::to_string(f.nlink) + ", more than the dump has entries");
    }
  }

  // The volume's other records.
  const json& counters = Field(doc, "counters", "the dump");
  if (!counters.is_object()) Fail("the dump", "counters is not an object");
  for (const auto& [name, v] : counters.items()) {
    if (!v.is_number_unsigned()) Fail("counter " + name, v.dump() + " is not a whole number");
  }
  constexpr uint64_t kU32 = UINT32_MAX, kU64 = UINT64_MAX;
  Tuples(doc, "slice_refs", {kU64, kU32, kU64});
  Tuples(doc, "pending_slices", {kU64, kU32, kU64});
  Tuples(doc, "pack_members", {kU64, kU64, kU32, kU32, kU32}, true);
  Tuples(doc, "pending_packs", {kU64, kU32, kU64}, true);
  Tuples(doc, "pending_files", {kU64, kU64});
  Tuples(doc, "pending_truncs", {kU64, kU64});
  for (const json& u : Array(doc, "gateway_users", "the dump", true)) {
    if (!u.is_object() || !u.contains("access_key") || !u["access_key"].is_string() ||
        u["access_key"].get<std::string>().empty()) {
      Fail("gateway user " + u.dump().substr(0, 80), "no access key");
    }
  }
  for (const json& q : Array(doc, "quotas", "the dump", true)) {
    std::string where = "quota " + q.dump();
    if (!q.is_array() || q.size() != 6 || !q[0].is_string()) Fail(where, "not a quota record");
    std::string kind = q[0].get<std::string>();
    if (kind != "D" && kind != "U" && kind != "G") Fail(where, "quota kind " + kind);
    if (!q[1].is_number_unsigned()) Fail(where, "a bad id");
    for (size_t i = 2; i < 6; ++i) {
      if (!q[i].is_number_integer()) Fail(where, "a limit or usage that is not a whole number");
    }
  }
}

}  // namespace

Status CheckDumpDocument(const json& doc) {
  try {
    CheckDocument(doc);
    return Status::OK();
  } catch (const Bad& b) {
    return Status::Err(EINVAL, "the dump is damaged: " + b.what + "; nothing was loaded");
  }
}

}  // namespace tierfs::internal
