#include "gateway/aws_chunked.h"

#include <cctype>

namespace tierfs::gateway {
namespace {

const char kEmptySha256[] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

S3Error Framing(const std::string& why) { return Err(400, "InvalidRequest", "malformed aws-chunked body: " + why); }
S3Error BadSignature(const std::string& what) {
  return Err(403, "SignatureDoesNotMatch", "the signature of " + what + " does not match");
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

ChunkedDecoder::ChunkedDecoder(const Identity& id, Sink sink) : id_(id), sink_(std::move(sink)) {
  signed_ = id.payload == Payload::kStreamingSigned || id.payload == Payload::kStreamingSignedTrailer;
  trailer_ = id.payload == Payload::kStreamingSignedTrailer || id.payload == Payload::kStreamingUnsignedTrailer;
  prev_sig_ = id.seed_signature;
}

std::string ChunkedDecoder::ChunkSignature(std::string_view data_sha256_hex) const {
  std::string to_sign = "AWS4-HMAC-SHA256-PAYLOAD\n" + id_.amz_date + "\n" + id_.scope + "\n" + prev_sig_ + "\n" +
                        kEmptySha256 + "\n" + std::string(data_sha256_hex);
  return HexEncode(HmacSha256(id_.signing_key, to_sign));
}

std::optional<S3Error> ChunkedDecoder::OnLine(const std::string& line) {
  if (state_ == State::kSize) {
    std::string size_s = line, ext;
    size_t semi = line.find(';');
    if (semi != std::string::npos) {
      size_s = line.substr(0, semi);
      ext = line.substr(semi + 1);
    }
    if (size_s.empty() || size_s.size() > 16 || size_s.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) {
      return Framing("bad chunk size '" + size_s + "'");
    }
    want_ = static_cast<size_t>(std::stoull(size_s, nullptr, 16));
    if (want_ > kMaxChunk) return Framing("a chunk of " + std::to_string(want_) + " bytes is over the limit");
    chunk_sig_.clear();
    if (ext.rfind("chunk-signature=", 0) == 0) chunk_sig_ = ext.substr(16);
    if (signed_ && chunk_sig_.empty()) return Err(403, "SignatureDoesNotMatch", "a chunk carries no chunk-signature");
    chunk_.clear();
    last_ = want_ == 0;
    state_ = State::kData;
    if (last_) {
      if (auto e = EndChunk()) return e;
      state_ = trailer_ ? State::kTrailer : State::kDataEnd;
    }
    return std::nullopt;
  }
  // A trailer line, or the empty line that ends the trailers.
  if (line.empty()) {
    if (signed_) {
      if (trailer_sig_.empty()) return Err(403, "SignatureDoesNotMatch", "the trailer carries no x-amz-trailer-signature");
      std::string to_sign = "AWS4-HMAC-SHA256-TRAILER\n" + id_.amz_date + "\n" + id_.scope + "\n" + prev_sig_ + "\n" +
                            Sha256Hex({trailer_canonical_});
      if (!ConstantTimeEqual(HexEncode(HmacSha256(id_.signing_key, to_sign)), trailer_sig_)) {
        return BadSignature("the trailing headers");
      }
    }
    state_ = State::kDone;
    return std::nullopt;
  }
  size_t colon = line.find(':');
  if (colon == std::string::npos) return Framing("bad trailer line '" + line + "'");
  std::string name = Lower(line.substr(0, colon)), value = line.substr(colon + 1);
  while (!value.empty() && value.front() == ' ') value.erase(0, 1);
  if (name == "x-amz-trailer-signature") {
    trailer_sig_ = value;
  } else {
    trailers_[name] = value;
    trailer_canonical_ += name + ":" + value + "\n";
  }
  return std::nullopt;
}

std::optional<S3Error> ChunkedDecoder::EndChunk() {
  if (signed_) {
    std::string want = ChunkSignature(Sha256Hex({chunk_}));
    if (!ConstantTimeEqual(want, chunk_sig_)) return BadSignature("chunk at byte " + std::to_string(decoded_));
    prev_sig_ = chunk_sig_;
  }
  if (!chunk_.empty()) {
    decoded_ += chunk_.size();
    if (auto e = sink_(chunk_)) return e;
  }
  chunk_.clear();
  return std::nullopt;
}

std::optional<S3Error> ChunkedDecoder::Feed(std::string_view bytes) {
  while (!bytes.empty()) {
    switch (state_) {
      case State::kSize:
      case State::kTrailer: {
        size_t nl = bytes.find('\n');
        if (nl == std::string_view::npos) {
          line_.append(bytes);
          if (line_.size() > 4096) return Framing("a line longer than 4096 bytes");
          return std::nullopt;
        }
        line_.append(bytes.substr(0, nl));
        bytes.remove_prefix(nl + 1);
        if (line_.empty() || line_.back() != '\r') return Framing("a line not ended by CRLF");
        line_.pop_back();
        std::string line = std::move(line_);
        line_.clear();
        if (auto e = OnLine(line)) return e;
        break;
      }
      case State::kData: {
        size_t n = std::min(bytes.size(), want_ - chunk_.size());
        if (!signed_ && chunk_.empty() && n == want_) {
          // Unsigned and whole in this buffer: hand it on without a copy.
          decoded_ += n;
          if (auto e = sink_(bytes.substr(0, n))) return e;
          bytes.remove_prefix(n);
          chunk_.clear();
          want_ = 0;
          state_ = State::kDataEnd;
          break;
        }
        chunk_.append(bytes.substr(0, n));
        bytes.remove_prefix(n);
        if (chunk_.size() == want_) {
          if (auto e = EndChunk()) return e;
          state_ = State::kDataEnd;
        }
        break;
      }
      case State::kDataEnd: {
        // "\r\n" after a chunk's data (after the last chunk of a body without trailers, too).
        line_.push_back(bytes.front());
        bytes.remove_prefix(1);
        if (line_.size() < 2) break;
        if (line_ != "\r\n") return Framing("chunk data not followed by CRLF");
        line_.clear();
        state_ = last_ ? State::kDone : State::kSize;
        break;
      }
      case State::kDone:
        return Framing("bytes after the end of the body");
    }
  }
  return std::nullopt;
}

std::optional<S3Error> ChunkedDecoder::Finish() {
  if (state_ == State::kDone) return std::nullopt;
  return Err(400, "IncompleteBody", "You did not provide the number of bytes specified by the Content-Length HTTP header");
}

}  // namespace tierfs::gateway
