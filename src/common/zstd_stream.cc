#include "common/zstd_stream.h"

#include <zstd.h>

#include <cerrno>

namespace tierfs {

struct ZstdWriter::Ctx {
  ZSTD_CCtx* cctx = nullptr;
  ~Ctx() { ZSTD_freeCCtx(cctx); }
};

bool LooksLikeZstd(std::string_view data) {
  return data.size() >= 4 && static_cast<unsigned char>(data[0]) == 0x28 &&
         static_cast<unsigned char>(data[1]) == 0xB5 && static_cast<unsigned char>(data[2]) == 0x2F &&
         static_cast<unsigned char>(data[3]) == 0xFD;
}

ZstdWriter::ZstdWriter(int level) : ctx_(std::make_unique<Ctx>()) {
  ctx_->cctx = ZSTD_createCCtx();
  if (!ctx_->cctx) {
    error_ = Status::Err(ENOMEM, "zstd: cannot create a compression context");
    return;
  }
  ZSTD_CCtx_setParameter(ctx_->cctx, ZSTD_c_compressionLevel, level);
  // A checksum of the content in the frame: a damaged file fails to decompress.
  ZSTD_CCtx_setParameter(ctx_->cctx, ZSTD_c_checksumFlag, 1);
}

ZstdWriter::~ZstdWriter() = default;

Status ZstdWriter::Feed(const char* data, size_t len, bool end) {
  if (!error_.ok()) return error_;
  ZSTD_inBuffer in{data, len, 0};
  char buf[1 << 16];
  for (;;) {
    ZSTD_outBuffer o{buf, sizeof buf, 0};
    size_t left = ZSTD_compressStream2(ctx_->cctx, &o, &in, end ? ZSTD_e_end : ZSTD_e_continue);
    if (ZSTD_isError(left)) {
      error_ = Status::Err(EIO, std::string("zstd: ") + ZSTD_getErrorName(left));
      return error_;
    }
    out_.append(buf, o.pos);
    if (end ? left == 0 : in.pos == in.size) return Status::OK();
  }
}

ZstdWriter::int_type ZstdWriter::overflow(int_type ch) {
  if (ch == traits_type::eof()) return traits_type::not_eof(ch);
  char c = static_cast<char>(ch);
  return Feed(&c, 1, false).ok() ? ch : traits_type::eof();
}

std::streamsize ZstdWriter::xsputn(const char* s, std::streamsize n) {
  return Feed(s, static_cast<size_t>(n), false).ok() ? n : 0;
}

Status ZstdWriter::Finish() { return Feed(nullptr, 0, true); }

Result<std::string> ZstdDecompress(std::string_view data) {
  ZSTD_DCtx* d = ZSTD_createDCtx();
  if (!d) return Status::Err(ENOMEM, "zstd: cannot create a decompression context");
  std::string out;
  ZSTD_inBuffer in{data.data(), data.size(), 0};
  char buf[1 << 16];
  size_t last = 1;
  for (;;) {
    ZSTD_outBuffer o{buf, sizeof buf, 0};
    last = ZSTD_decompressStream(d, &o, &in);
    if (ZSTD_isError(last)) {
      ZSTD_freeDCtx(d);
      return Status::Err(EIO, std::string("zstd: ") + ZSTD_getErrorName(last) + " (a damaged file?)");
    }
    out.append(buf, o.pos);
    // Done when the input is used up and the decoder has nothing more to give.
    if (in.pos == in.size && o.pos < o.size) break;
  }
  ZSTD_freeDCtx(d);
  if (ZSTD_isError(last) || last != 0) return Status::Err(EIO, "zstd: the compressed file is cut off");
  return out;
}

}  // namespace tierfs
