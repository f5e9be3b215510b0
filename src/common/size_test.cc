#include "common/size.h"

#include <gtest/gtest.h>

namespace tierfs {

TEST(Size, Parse) {
  EXPECT_EQ(*ParseSize("4M"), 4u << 20);
  EXPECT_EQ(*ParseSize("64K"), 64u << 10);
  EXPECT_EQ(*ParseSize("1G"), 1ull << 30);
  EXPECT_EQ(*ParseSize("300"), 300u);
  EXPECT_EQ(*ParseSize("2MiB"), 2u << 20);
  EXPECT_EQ(*ParseSize("1.5G"), 3ull << 29);
  EXPECT_EQ(*ParseSize("0"), 0u);
  EXPECT_FALSE(ParseSize("").ok());
  EXPECT_FALSE(ParseSize("abc").ok());
  EXPECT_FALSE(ParseSize("4X").ok());
}

// P and E are binary too; what does not fit in 63 bits, or is negative, is refused rather
// than wrapped into a small or "unlimited" number.
TEST(Size, PetaAndExaAndNothingThatOverflows) {
  EXPECT_EQ(*ParseSize("2P"), 2ull << 50);
  EXPECT_EQ(*ParseSize("3E"), 3ull << 60);
  EXPECT_EQ(*ParseSize("7E"), 7ull << 60);
  EXPECT_EQ(*ParseSize("1p"), 1ull << 50);
  EXPECT_EQ(*ParseSize("9223372036854775807"), kMaxSize);
  for (const char* bad : {"8E", "9223372036854775808", "99999999999999999999999T", "8192P", "99999999T",
                          "18446744073709551616", "-1", "-5G", "-0", "inf", "nan", "1e3", "0x10", " 4M", "4M ",
                          ".", "G", "1.5.3G", "+4M"}) {
    auto r = ParseSize(bad);
    EXPECT_FALSE(r.ok()) << bad << " gave " << (r.ok() ? *r : 0);
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find(bad), std::string::npos) << r.status().message();
    }
  }
  EXPECT_NE(ParseSize("-1").status().message().find("negative"), std::string::npos);
  EXPECT_NE(ParseSize("8E").status().message().find("too large"), std::string::npos);
}

TEST(Size, Count) {
  EXPECT_EQ(*ParseCount("0"), 0u);
  EXPECT_EQ(*ParseCount("1000000"), 1000000u);
  for (const char* bad : {"", "-1", "1k", "99999999999999999999", "1.5"}) EXPECT_FALSE(ParseCount(bad).ok()) << bad;
}

TEST(Size, Format) {
  EXPECT_EQ(FormatSize(512), "512 B");
  EXPECT_EQ(FormatSize(4u << 20), "4.0 MiB");
  EXPECT_EQ(FormatSize(2ull << 50), "2.0 PiB");
  EXPECT_EQ(FormatSize(3ull << 60), "3.0 EiB");
}

}  // namespace tierfs
