// Flat copies for FUSE passthrough: which open file qualifies, the name of its content, and
// the fill that writes a copy from the blocks the disk cache holds (chunk/flat_files.h).
//
// The name is computed from the length and slice maps the open itself refreshed (close-to-
// open: another client's change is seen by the next open here, and changes the maps), so
// an open is never answered with a copy of content other than what it would read.
// The fill reads exactly those maps, not the inode's later ones: a copy is always of the
// content it is named for, even if the file changes while it is built.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "chunk/block_key.h"
#include "chunk/cached_store.h"
#include "chunk/flat_files.h"
#include "common/hash.h"
#include "meta/slice_map.h"
#include "vfs/file_writer.h"
#include "vfs/inode_state.h"
#include "vfs/vfs.h"
#include "vfs/vfs_internal.h"

namespace tierfs {
namespace {

constexpr uint32_t kFillPiece = 4 << 20;

using Maps = std::vector<std::pair<uint32_t, std::vector<ChunkSegment>>>;

void Put(std::string* out, uint64_t v) { out->append(reinterpret_cast<const char*>(&v), sizeof v); }

std::string LayoutBytes(uint64_t length, const Maps& maps) {
  std::string b;
  Put(&b, length);
  for (const auto& [chunk, segs] : maps) {
    Put(&b, chunk);
    for (const ChunkSegment& s : segs) {
      for (uint64_t v : {uint64_t{s.pos}, uint64_t{s.len}, s.id, uint64_t{s.size}, uint64_t{s.off}, s.pack,
                         uint64_t{s.pack_len}, uint64_t{s.pack_off}}) {
        Put(&b, v);
      }
    }
    Put(&b, ~0ull);
  }
  return b;
}

// The segments of chunk `chunk` inside a file of `length` bytes.
std::vector<ChunkSegment> Visible(const std::vector<ChunkSegment>& segs, uint32_t chunk, uint64_t length) {
  uint64_t start = uint64_t{chunk} * kChunkSize;
  if (start >= length) return {};
  return Slice(segs, 0, static_cast<uint32_t>(std::min<uint64_t>(kChunkSize, length - start)));
}

Status Fill(CachedStore* store, const Maps& maps, uint64_t length, int fd) {
  std::vector<char> buf(kFillPiece);
  for (const auto& [chunk, segs] : maps) {
    const uint64_t start = uint64_t{chunk} * kChunkSize;
    for (const ChunkSegment& s : Visible(segs, chunk, length)) {
      if (s.id == 0) continue;  // a hole: the sized file reads zeros there
      for (uint32_t done = 0; done < s.len;) {
        uint32_t n = std::min(kFillPiece, s.len - done);
        RETURN_IF_ERROR(store->ReadSlice(s.id, s.size, s.off + done, n, buf.data(), nullptr,
                                         PackRef{s.pack, s.pack_len, s.pack_off}));
        off_t at = static_cast<off_t>(start + s.pos + done);
        for (uint32_t w = 0; w < n;) {
          ssize_t k = pwrite(fd, buf.data() + w, n - w, at + w);
          if (k < 0 && errno == EINTR) continue;
          if (k < 0) return Status::Err(errno, std::string("writing a flat copy: ") + strerror(errno));
          w += static_cast<uint32_t>(k);
        }
        done += n;
      }
    }
  }
  return Status::OK();
}

}  // namespace

void Vfs::EnableFlatCopies(std::unique_ptr<FlatFiles> flat, uint64_t min_size) {
  flat_ = std::move(flat);
  flat_min_size_ = min_size;
}

Vfs::FlatCopy Vfs::PassthroughCopy(uint64_t fh) {
  FlatCopy out;
  if (!flat_) return out;
  auto h = GetHandle(fh);
  if (!h || h->is_dir || !h->reader) return out;
  auto st = h->state;
  uint64_t length, gen;
  {
    std::lock_guard<std::mutex> l(st->mu);
    if (st->writer && st->writer->Dirty()) return out;
    length = st->length;
    gen = st->gen_locked();
  }
  if (length < flat_min_size_ || length == 0) return out;
  auto chunks = st->ChunkList();
  if (!chunks.ok()) return out;
  Maps maps;
  for (uint32_t c : *chunks) {
    if (uint64_t{c} * kChunkSize >= length) break;
    auto segs = st->Segments(c);
    if (!segs.ok()) return out;
    maps.emplace_back(c, std::move(*segs));
  }
  if (st->Gen() != gen) return out;  // changed here meanwhile: not this open's content
  out.name = Hash128Hex(LayoutBytes(length, maps));
  out.path = flat_->Ready(out.name);
  if (!out.path.empty() || !flat_->WouldBuild(out.name, length)) return out;
  // Qualifies only with every block on disk: a copy is made from the cache, never by
  // downloading (that is what reading the file does).
  const uint32_t bs = store_->config().block_size;
  for (const auto& [chunk, segs] : maps) {
    for (const ChunkSegment& s : Visible(segs, chunk, length)) {
      if (s.id == 0) continue;
      for (const BlockSpan& span : BlockSpans(s.size, bs, s.off, s.len)) {
        std::string key =
            store_->KeyOf(s.id, span.index, BlockLength(s.size, bs, span.index), PackRef{s.pack, s.pack_len, s.pack_off});
        if (store_->CachedLevel(key) != 2) {
          out.name.clear();
          return out;
        }
      }
    }
  }
  CachedStore* store = store_;
  flat_->Want(out.name, length, [store, maps = std::move(maps), length](int fd) { return Fill(store, maps, length, fd); });
  return out;
}

}  // namespace tierfs
