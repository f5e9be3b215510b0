// HashRing: which member of a cache group owns a block. Consistent hashing with virtual
// nodes: each member places points on a 64-bit ring, as many as its weight asks for, and a
// key belongs to the member of the first point at or after the key's hash. A member that
// joins or leaves moves only the keys next to its own points: about 1/N of them.
//
// A member's points depend only on its id and its weight, so every member that knows the
// same member list computes the same ring, and a member that comes back with the same id
// (its advertised address) owns the same blocks again (its disk cache still holds them).
//
// Threads: immutable after construction; any thread may call Owner.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tierfs {

struct RingMember {
  std::string id;         // unique and stable: the member's advertised address
  uint64_t capacity = 0;  // its cache capacity in bytes: the weight
};

// Virtual nodes for a member of this capacity: one per GiB, at least kMinVnodes and at most
// kMaxVnodes (so a 100 GiB cache has 100 points; balance within about 10%).
constexpr int kMinVnodes = 16;
constexpr int kMaxVnodes = 1024;
int VnodesFor(uint64_t capacity);

class HashRing {
 public:
  HashRing() = default;
  explicit HashRing(std::vector<RingMember> members);

  // Index into members() of the key's owner; -1 when the ring is empty.
  int Owner(const std::string& key) const;
  int OwnerOfHash(uint64_t hash) const;
  const std::vector<RingMember>& members() const { return members_; }
  bool empty() const { return members_.empty(); }

 private:
  std::vector<RingMember> members_;
  std::vector<std::pair<uint64_t, int>> points_;  // (position, member index), sorted
};

}  // namespace tierfs
