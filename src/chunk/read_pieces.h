// The bytes of one read as a list of windows, so that a cached block reaches the FUSE reply
// without being copied into a reply buffer first.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace tierfs {

// A window of a read's reply, in file order. `hold` keeps a cached block alive while the
// reply is sent (the block may leave the cache meanwhile); a piece without `hold` points
// into the caller's scratch buffer (bytes from the disk cache, a ranged GET, or zeros).
struct ReadPiece {
  std::shared_ptr<const std::string> hold;
  const char* data = nullptr;
  size_t len = 0;
};

class ReadPieces {
 public:
  void Clear() { pieces_.clear(); }
  const std::vector<ReadPiece>& pieces() const { return pieces_; }

  // A window of a shared block.
  void AddBlock(std::shared_ptr<const std::string> block, size_t off, size_t len) {
    const char* p = block->data() + off;
    pieces_.push_back({std::move(block), p, len});
  }
  // Bytes already in the scratch buffer; joins the previous piece when it ends at p.
  void AddScratch(const char* p, size_t len) {
    if (len == 0) return;
    if (!pieces_.empty() && !pieces_.back().hold && pieces_.back().data + pieces_.back().len == p) {
      pieces_.back().len += len;
      return;
    }
    pieces_.push_back({nullptr, p, len});
  }

 private:
  std::vector<ReadPiece> pieces_;
};

}  // namespace tierfs
