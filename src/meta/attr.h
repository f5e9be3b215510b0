// Binary encoding of inode attributes and slice records (values of "A ino I" and
// "A ino C idx seq" keys).
#pragma once

#include <string>
#include <string_view>

#include "meta/types.h"

namespace tierfs {

std::string EncodeAttr(const Attr& a);
bool DecodeAttr(std::string_view v, Attr* a);
std::string EncodeSliceRecord(const SliceRecord& r);  // seq is in the key, not the value
bool DecodeSliceRecord(std::string_view v, SliceRecord* r);
// Values of "PL" (where a packed slice is) and "PM" (a pack's member) keys (key_schema.h).
std::string EncodePackLocation(uint64_t pack, uint32_t pack_len, uint32_t off);
std::string EncodePackMember(uint32_t pack_len, uint32_t off, uint32_t size);

}  // namespace tierfs
