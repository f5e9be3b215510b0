// The wire format's MACs and reply verification.
#include "group/wire.h"

#include <gtest/gtest.h>

#include <cerrno>

namespace tierfs::group {
namespace {

std::string Block(size_t n) {
  std::string b(n, '\0');
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<char>(i * 131 + 7);
  return b;
}

TEST(WireTest, RequestMacCoversEveryField) {
  std::string base = RequestMac("s", "uuid", "vol/chunks/1/1_0_10", 10, 1000);
  EXPECT_EQ(base.size(), 64u);
  EXPECT_EQ(base, RequestMac("s", "uuid", "vol/chunks/1/1_0_10", 10, 1000));
  EXPECT_NE(base, RequestMac("t", "uuid", "vol/chunks/1/1_0_10", 10, 1000));
  EXPECT_NE(base, RequestMac("s", "uuie", "vol/chunks/1/1_0_10", 10, 1000));
  EXPECT_NE(base, RequestMac("s", "uuid", "vol/chunks/1/1_0_11", 10, 1000));
  EXPECT_NE(base, RequestMac("s", "uuid", "vol/chunks/1/1_0_10", 11, 1000));
  EXPECT_NE(base, RequestMac("s", "uuid", "vol/chunks/1/1_0_10", 10, 1001));
}

TEST(WireTest, AGoodReplyVerifies) {
  for (size_t n : {size_t{1}, size_t{65536}, size_t{65537}, size_t{4 << 20}}) {
    std::string block = Block(n);
    std::string table = ChecksumTable(block);
    EXPECT_EQ(table.size(), TableSize(static_cast<uint32_t>(n)));
    std::string body = table + block;
    std::string_view data;
    Status st = VerifyReply("secret", "k", static_cast<uint32_t>(n), ReplyMac("secret", "k", static_cast<uint32_t>(n), table),
                            body, &data);
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(data, block);
  }
}

TEST(WireTest, DamagedOrForgedRepliesAreRefused) {
  const uint32_t n = 200000;
  std::string block = Block(n), table = ChecksumTable(block);
  std::string mac = ReplyMac("secret", "k", n, table);
  std::string_view data;
  std::string body = table + block;
  body[table.size() + 150000] ^= 1;  // one bit of segment 2
  Status st = VerifyReply("secret", "k", n, mac, body, &data);
  EXPECT_EQ(st.code(), EIO);
  EXPECT_NE(st.message().find("segment 2"), std::string::npos) << st.message();
  // A table recomputed over damaged data does not carry the MAC of the secret.
  std::string bad = block;
  bad[10] ^= 1;
  std::string forged = ChecksumTable(bad);
  EXPECT_EQ(VerifyReply("secret", "k", n, mac, forged + bad, &data).code(), EIO);
  EXPECT_EQ(VerifyReply("secret", "k", n, ReplyMac("other", "k", n, forged), forged + bad, &data).code(), EIO);
  // The reply for another block, or of the wrong size.
  EXPECT_EQ(VerifyReply("secret", "j", n, mac, table + block, &data).code(), EIO);
  EXPECT_EQ(VerifyReply("secret", "k", n, mac, table + block + "x", &data).code(), EIO);
  EXPECT_EQ(VerifyReply("secret", "k", n, mac, table + block.substr(1), &data).code(), EIO);
}

TEST(WireTest, SameMacComparesWholeStrings) {
  EXPECT_TRUE(SameMac("abc", "abc"));
  EXPECT_FALSE(SameMac("abc", "abd"));
  EXPECT_FALSE(SameMac("abc", "ab"));
  EXPECT_FALSE(SameMac("", "a"));
}

}  // namespace
}  // namespace tierfs::group
