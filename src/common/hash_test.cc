// The hashes are part of the on-disk formats (block checksums in objects and in the disk
// cache, content names): these answers were computed with libxxhash's portable code, and
// whichever implementation hash.cc picks (the CPU dispatcher on x86) must give them.
#include "common/hash.h"

#include <gtest/gtest.h>

#include <string>

namespace tierfs {
namespace {

std::string Pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 2654435761u) >> 13);
  return s;
}

TEST(Hash, GivesTheAnswersOfThePortableCodeAtEverySize) {
  const struct {
    size_t size;
    uint32_t sum;
  } cases[] = {{0, 0x38d394c2u},    {1, 0x074eecdbu},    {100, 0x670a2548u},   {240, 0x22744964u},
               {241, 0x480dd281u},  {1000, 0x6ea5d2f2u}, {65536, 0x5c5ff65au}, {(4u << 20) + 3, 0x72f31c1bu}};
  const std::string data = Pattern((4u << 20) + 3);
  for (const auto& c : cases) {
    EXPECT_EQ(Checksum32(std::string_view(data).substr(0, c.size)), c.sum) << c.size << " bytes";
  }
  EXPECT_EQ(Hash64("tierfs"), 0x27a91bb843c6e5a0ull);
  EXPECT_EQ(Hash128Hex("tierfs"), "d5f54e923839a61dc464a453ac278d83");
}

TEST(Hash, AChecksumOfPartsIsTheChecksumOfTheirConcatenation) {
  const std::string data = Pattern(65536);
  const std::string_view v(data);
  for (size_t cut : {0ul, 1ul, 239ul, 4096ul, 65535ul}) {
    EXPECT_EQ(Checksum32({v.substr(0, cut), v.substr(cut)}), 0x5c5ff65au) << "cut at " << cut;
    EXPECT_EQ(Checksum32({v.substr(0, cut / 2), v.substr(cut / 2, cut - cut / 2), v.substr(cut)}), 0x5c5ff65au);
  }
}

}  // namespace
}  // namespace tierfs
