#include "common/zstd_stream.h"

#include <gtest/gtest.h>

#include <random>

namespace tierfs {
namespace {

TEST(Zstd, StreamRoundTripsAndDamageIsAnError) {
  std::string doc;
  std::mt19937 rng(1);
  for (int i = 0; i < 200000; ++i) doc += "line " + std::to_string(rng() % 1000) + "\n";
  ZstdWriter w;
  std::ostream os(&w);
  for (size_t pos = 0; pos < doc.size(); pos += 777) os << doc.substr(pos, 777);
  os.flush();
  ASSERT_TRUE(w.Finish().ok());
  EXPECT_TRUE(LooksLikeZstd(w.out()));
  EXPECT_LT(w.out().size(), doc.size() / 3);
  auto back = ZstdDecompress(w.out());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, doc);
  EXPECT_FALSE(ZstdDecompress(w.out().substr(0, w.out().size() / 2)).ok());
  EXPECT_FALSE(LooksLikeZstd("{\"format\""));
}

}  // namespace
}  // namespace tierfs
