#include "common/segment_hasher.h"

#include "common/hash.h"

namespace tierfs {

namespace {
thread_local SegmentHasher* t_hasher = nullptr;
}  // namespace

SegmentHasher::SegmentHasher(uint32_t segment) : segment_(segment), prev_(t_hasher) { t_hasher = this; }
SegmentHasher::~SegmentHasher() { t_hasher = prev_; }

void SegmentHasher::Received(const std::string& body, size_t appended) {
  SegmentHasher* h = t_hasher;
  if (h == nullptr || h->segment_ == 0) return;
  // A new body, or the string moved to a larger buffer: start over on this one.
  if (appended >= body.size() || body.data() != h->data_ || body.size() < h->hashed_) {
    h->data_ = body.data();
    h->hashed_ = 0;
    h->sums_.clear();
  }
  const std::string_view v(body);
  while (v.size() - h->hashed_ >= h->segment_) {
    h->sums_.push_back(Checksum32(v.substr(h->hashed_, h->segment_)));
    h->hashed_ += h->segment_;
  }
}

std::vector<uint32_t> SegmentHasher::Sums(std::string_view body) const {
  std::vector<uint32_t> out;
  size_t done = 0;
  if (segment_ == 0) return out;
  if (body.data() == data_ && hashed_ <= body.size()) {
    out = sums_;
    done = hashed_;
  }
  for (; done < body.size(); done += segment_) out.push_back(Checksum32(body.substr(done, segment_)));
  return out;
}

}  // namespace tierfs
