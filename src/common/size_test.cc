#include "common/size.h"

#include <gtest/gtest.h>

namespace tierfs {

TEST(Size, Parse) {
  EXPECT_EQ(*ParseSize("4M"), 4u << 20);
  EXPECT_EQ(*ParseSize("64K"), 64u << 10);
  EXPECT_EQ(*ParseSize("1G"), 1ull << 30);
  EXPECT_EQ(*ParseSize("300"), 300u);
  EXPECT_EQ(*ParseSize("2MiB"), 2u << 20);
  EXPECT_FALSE(ParseSize("").ok());
  EXPECT_FALSE(ParseSize("abc").ok());
  EXPECT_FALSE(ParseSize("4X").ok());
}

TEST(Size, Format) {
  EXPECT_EQ(FormatSize(512), "512 B");
  EXPECT_EQ(FormatSize(4u << 20), "4.0 MiB");
}

}  // namespace tierfs
