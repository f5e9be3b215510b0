#include "chunk/block_key.h"

#include <algorithm>
#include <charconv>

#include "common/hash.h"

namespace tierfs {

namespace {

constexpr std::string_view kChunksDir = "/chunks/";
constexpr std::string_view kPacksDir = "/packs/";

std::string FanOut(uint64_t slice_id) {
  static constexpr char kHex[] = "0123456789abcdef";
  uint32_t h = static_cast<uint32_t>(Hash64(std::to_string(slice_id)) % 256);
  return std::string{kHex[h >> 4], kHex[h & 15]};
}

// Parses a decimal number that fills `text` exactly.
template <typename T>
bool ParseDecimal(std::string_view text, T* out) {
  if (text.empty()) return false;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

}  // namespace

std::string BlockKey(const std::string& volume, uint64_t slice_id, uint32_t index, uint32_t len) {
  std::string key;
  key.reserve(volume.size() + 48);
  key.append(volume);
  key.append(kChunksDir);
  key.append(FanOut(slice_id));
  key.push_back('/');
  key.append(std::to_string(slice_id));
  key.push_back('_');
  key.append(std::to_string(index));
  key.push_back('_');
  key.append(std::to_string(len));
  return key;
}

bool ParseBlockKey(std::string_view key, std::string* volume, uint64_t* id, uint32_t* index, uint32_t* len) {
  size_t dir = key.rfind(kChunksDir);
  if (dir == std::string_view::npos || dir == 0) return false;
  std::string_view rest = key.substr(dir + kChunksDir.size());
  // rest = "HH/ID_INDEX_LEN"
  if (rest.size() < 3 || rest[2] != '/') return false;
  std::string_view name = rest.substr(3);
  size_t u1 = name.find('_');
  if (u1 == std::string_view::npos) return false;
  size_t u2 = name.find('_', u1 + 1);
  if (u2 == std::string_view::npos) return false;
  uint64_t parsed_id = 0;
  uint32_t parsed_index = 0, parsed_len = 0;
  if (!ParseDecimal(name.substr(0, u1), &parsed_id) ||
      !ParseDecimal(name.substr(u1 + 1, u2 - u1 - 1), &parsed_index) ||
      !ParseDecimal(name.substr(u2 + 1), &parsed_len) || parsed_len == 0) {
    return false;
  }
  std::string parsed_volume(key.substr(0, dir));
  // Rejects leading zeros, '+' signs, wrong fan-out digits and anything else BlockKey would
  // not have produced.
  if (BlockKey(parsed_volume, parsed_id, parsed_index, parsed_len) != key) return false;
  *volume = std::move(parsed_volume);
  *id = parsed_id;
  *index = parsed_index;
  *len = parsed_len;
  return true;
}

uint32_t BlockCount(uint32_t size, uint32_t block_size) {
  return static_cast<uint32_t>((static_cast<uint64_t>(size) + block_size - 1) / block_size);
}

uint32_t BlockLength(uint32_t size, uint32_t block_size, uint32_t index) {
  uint64_t start = static_cast<uint64_t>(index) * block_size;
  if (start >= size) return 0;
  return static_cast<uint32_t>(std::min<uint64_t>(block_size, size - start));
}

std::vector<BlockSpan> BlockSpans(uint32_t size, uint32_t block_size, uint32_t off, uint32_t len) {
  std::vector<BlockSpan> spans;
  uint64_t pos = off;
  uint64_t end = std::min<uint64_t>(static_cast<uint64_t>(off) + len, size);
  while (pos < end) {
    uint32_t index = static_cast<uint32_t>(pos / block_size);
    uint64_t block_start = static_cast<uint64_t>(index) * block_size;
    uint64_t piece_end = std::min<uint64_t>(block_start + block_size, end);
    spans.push_back(BlockSpan{index, static_cast<uint32_t>(pos - block_start),
                              static_cast<uint32_t>(piece_end - pos)});
    pos = piece_end;
  }
  return spans;
}

std::string PackKey(const std::string& volume, uint64_t pack_id, uint32_t len) {
  return volume + std::string(kPacksDir) + FanOut(pack_id) + "/" + std::to_string(pack_id) + "_" +
         std::to_string(len);
}

bool ParsePackKey(std::string_view key, std::string* volume, uint64_t* pack_id, uint32_t* len) {
  size_t dir = key.rfind(kPacksDir);
  if (dir == std::string_view::npos || dir == 0) return false;
  std::string_view rest = key.substr(dir + kPacksDir.size());
  if (rest.size() < 3 || rest[2] != '/') return false;
  std::string_view name = rest.substr(3);
  size_t us = name.find('_');
  if (us == std::string_view::npos) return false;
  if (!ParseDecimal(name.substr(0, us), pack_id) || !ParseDecimal(name.substr(us + 1), len)) return false;
  *volume = std::string(key.substr(0, dir));
  return *len > 0 && key == PackKey(*volume, *pack_id, *len);
}

std::string PackedBlockKey(const std::string& volume, uint64_t pack_id, uint32_t pack_len, uint32_t off) {
  return PackKey(volume, pack_id, pack_len) + "@" + std::to_string(off);
}

bool ParsePackedBlockKey(std::string_view key, std::string* pack_key, uint32_t* off) {
  size_t at = key.rfind('@');
  if (at == std::string_view::npos) return false;
  std::string volume;
  uint64_t id = 0;
  uint32_t len = 0;
  if (!ParsePackKey(key.substr(0, at), &volume, &id, &len) || !ParseDecimal(key.substr(at + 1), off)) return false;
  *pack_key = std::string(key.substr(0, at));
  return *off < len;
}

}  // namespace tierfs
