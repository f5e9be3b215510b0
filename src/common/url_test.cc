#include "common/url.h"

#include <gtest/gtest.h>

namespace tierfs {

TEST(Url, Sqlite) {
  auto u = ParseUrl("sqlite3:///var/lib/x.db");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->scheme, "sqlite3");
  EXPECT_EQ(u->path, "/var/lib/x.db");
}

TEST(Url, RedisWithPassword) {
  auto u = ParseUrl("redis://alice:s3cret@127.0.0.1:6379/2");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->user, "alice");
  EXPECT_EQ(u->password, "s3cret");
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, 6379);
  EXPECT_EQ(u->path, "2");
  EXPECT_EQ(u->Redacted().find("s3cret"), std::string::npos);
}

TEST(Url, Malformed) {
  EXPECT_FALSE(ParseUrl("not-a-url").ok());
  EXPECT_FALSE(ParseUrl("redis://host:99999/0").ok());
  EXPECT_FALSE(ParseUrl("redis://host:abc/0").ok());
}

TEST(Url, Query) {
  auto u = ParseUrl("postgres://u@h:5432/db?sslmode=disable&x=1");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->query["sslmode"], "disable");
  EXPECT_EQ(u->query["x"], "1");
}

// Host lists are split by their engines; a last host without a port leaves every port in
// host rather than taking "5432,h2" for a port.
TEST(Url, HostLists) {
  auto u = ParseUrl("postgres://u:p@h1:5432,h2:5433/db");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "h1:5432,h2");
  EXPECT_EQ(u->port, 5433);
  u = ParseUrl("postgres://u:p@h1:5432,h2/db");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->host, "h1:5432,h2");
  EXPECT_EQ(u->port, 0);
}

}  // namespace tierfs
