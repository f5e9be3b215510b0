#include "group/hash_ring.h"

#include <algorithm>

#include "common/hash.h"

namespace tierfs {

int VnodesFor(uint64_t capacity) {
  uint64_t gib = capacity >> 30;
  return static_cast<int>(std::clamp<uint64_t>(gib, kMinVnodes, kMaxVnodes));
}

HashRing::HashRing(std::vector<RingMember> members) : members_(std::move(members)) {
  // Sorted by id so that the index of a member does not depend on the order the list came in.
  std::sort(members_.begin(), members_.end(), [](const RingMember& a, const RingMember& b) { return a.id < b.id; });
  members_.erase(std::unique(members_.begin(), members_.end(),
                             [](const RingMember& a, const RingMember& b) { return a.id == b.id; }),
                 members_.end());
  for (size_t m = 0; m < members_.size(); ++m) {
    int n = VnodesFor(members_[m].capacity);
    for (int v = 0; v < n; ++v) {
      points_.emplace_back(Hash64(members_[m].id + "#" + std::to_string(v)), static_cast<int>(m));
    }
  }
  std::sort(points_.begin(), points_.end());
}

int HashRing::Owner(const std::string& key) const { return OwnerOfHash(Hash64(key)); }

int HashRing::OwnerOfHash(uint64_t hash) const {
  if (points_.empty()) return -1;
  auto it = std::lower_bound(points_.begin(), points_.end(), std::make_pair(hash, -1));
  if (it == points_.end()) it = points_.begin();  // wraps around
  return it->second;
}

}  // namespace tierfs
