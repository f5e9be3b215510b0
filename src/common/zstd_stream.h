// zstd compression for whole documents written as streams (metadata backups): an ostream
// whose bytes are compressed into a string as they are written, and a one-shot decompress.
//
// Threads: one object, one thread.
#pragma once

#include <memory>
#include <ostream>
#include <streambuf>
#include <string>
#include <string_view>

#include "common/status.h"

namespace tierfs {

// The first bytes of every zstd frame.
bool LooksLikeZstd(std::string_view data);

class ZstdWriter : public std::streambuf {
 public:
  explicit ZstdWriter(int level = 3);
  ~ZstdWriter() override;
  // Ends the frame; the compressed document is then out(). Errors: EIO naming zstd's.
  Status Finish();
  const std::string& out() const { return out_; }

 protected:
  int_type overflow(int_type ch) override;
  std::streamsize xsputn(const char* s, std::streamsize n) override;

 private:
  Status Feed(const char* data, size_t len, bool end);
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
  std::string out_;
  Status error_;
};

Result<std::string> ZstdDecompress(std::string_view data);

}  // namespace tierfs
