#include "common/base64.h"

#include <gtest/gtest.h>

namespace tierfs {
namespace {

TEST(Base64, Rfc4648Vectors) {
  const std::pair<const char*, const char*> cases[] = {
      {"", ""}, {"f", "Zg=="}, {"fo", "Zm8="}, {"foo", "Zm9v"},
      {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="}, {"foobar", "Zm9vYmFy"}};
  for (auto [plain, enc] : cases) {
    EXPECT_EQ(Base64Encode(plain), enc);
    EXPECT_EQ(Base64Decode(enc), std::string(plain));
  }
}

TEST(Base64, BinaryRoundTripAndGarbage) {
  std::string all;
  for (int i = 0; i < 256; ++i) all += char(i);
  EXPECT_EQ(Base64Decode(Base64Encode(all)), all);
  EXPECT_EQ(Base64Decode("abc"), std::nullopt);
  EXPECT_EQ(Base64Decode("ab!="), std::nullopt);
}

}  // namespace
}  // namespace tierfs
