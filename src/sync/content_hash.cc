#include "sync/content_hash.h"

#include <openssl/evp.h>

#include <memory>

namespace tierfs::sync {

Result<std::string> ContentMd5(Side* side, const Entry& e) {
  if (!e.md5.empty()) return e.md5;
  ASSIGN_OR_RETURN(auto reader, side->Open(e));
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_DigestInit_ex(ctx.get(), EVP_md5(), nullptr);
  std::string buf(4 << 20, '\0');
  uint64_t off = 0;
  for (;;) {
    ASSIGN_OR_RETURN(size_t got, reader->Read(off, buf.data(), buf.size()));
    if (got == 0) break;
    EVP_DigestUpdate(ctx.get(), buf.data(), got);
    off += got;
    if (got < buf.size()) break;
  }
  if (off != e.size) {
    return Status::Err(EAGAIN, side->Describe() + " " + e.key + " changed while it was read (" + std::to_string(off) +
                                   " bytes, listed with " + std::to_string(e.size) + ")");
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_DigestFinal_ex(ctx.get(), md, &n);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < n; ++i) {
    out += hex[md[i] >> 4];
    out += hex[md[i] & 15];
  }
  return out;
}

}  // namespace tierfs::sync
