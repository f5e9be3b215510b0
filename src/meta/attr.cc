#include "meta/attr.h"

#include <sys/stat.h>

#include "common/encoding.h"

namespace tierfs {

bool Attr::IsDir() const { return S_ISDIR(mode); }
bool Attr::IsRegular() const { return S_ISREG(mode); }
bool Attr::IsSymlink() const { return S_ISLNK(mode); }

namespace {
// 1: without `allocated`; such files count as fully allocated.
constexpr uint8_t kAttrVersion = 2;
}

std::string EncodeAttr(const Attr& a) {
  std::string s;
  s.reserve(80);
  PutU8(&s, kAttrVersion);
  PutU32(&s, a.mode);
  PutU32(&s, a.uid);
  PutU32(&s, a.gid);
  PutU32(&s, a.nlink);
  PutU64(&s, a.length);
  PutU64(&s, a.rdev);
  PutU64(&s, static_cast<uint64_t>(a.atime_ns));
  PutU64(&s, static_cast<uint64_t>(a.mtime_ns));
  PutU64(&s, static_cast<uint64_t>(a.ctime_ns));
  PutU64(&s, a.parent);
  PutU32(&s, a.flags);
  PutU64(&s, a.seq);
  PutU64(&s, a.allocated);
  return s;
}

bool DecodeAttr(std::string_view v, Attr* a) {
  ByteReader r(v);
  uint8_t version = r.U8();
  if (version != 1 && version != kAttrVersion) return false;
  a->mode = r.U32();
  a->uid = r.U32();
  a->gid = r.U32();
  a->nlink = r.U32();
  a->length = r.U64();
  a->rdev = r.U64();
  a->atime_ns = static_cast<int64_t>(r.U64());
  a->mtime_ns = static_cast<int64_t>(r.U64());
  a->ctime_ns = static_cast<int64_t>(r.U64());
  a->parent = r.U64();
  a->flags = r.U32();
  a->seq = r.U64();
  a->allocated = version >= 2 ? r.U64() : (a->length + 4095) / 4096 * 4096;
  return r.ok();
}

std::string EncodeSliceRecord(const SliceRecord& rec) {
  std::string s;
  s.reserve(24);
  PutU32(&s, rec.pos);
  PutU64(&s, rec.id);
  PutU32(&s, rec.size);
  PutU32(&s, rec.off);
  PutU32(&s, rec.len);
  if (rec.flags) s.push_back(static_cast<char>(rec.flags));
  return s;
}

bool DecodeSliceRecord(std::string_view v, SliceRecord* rec) {
  ByteReader r(v);
  rec->pos = r.U32();
  rec->id = r.U64();
  rec->size = r.U32();
  rec->off = r.U32();
  rec->len = r.U32();
  if (!r.ok()) return false;
  rec->flags = v.size() > 24 ? static_cast<uint8_t>(v[24]) : 0;
  return v.size() <= 25;
}

std::string EncodePackLocation(uint64_t pack, uint32_t pack_len, uint32_t off) {
  std::string v;
  PutU64(&v, pack);
  PutU32(&v, pack_len);
  PutU32(&v, off);
  return v;
}

std::string EncodePackMember(uint32_t pack_len, uint32_t off, uint32_t size) {
  std::string v;
  PutU32(&v, pack_len);
  PutU32(&v, off);
  PutU32(&v, size);
  return v;
}

}  // namespace tierfs
