// The hand-written XML: escaping and the times listings print per key.
#include "gateway/xml_out.h"

#include <gtest/gtest.h>

namespace tierfs::gateway {
namespace {

TEST(XmlOutTest, EscapesWhatXmlReserves) {
  EXPECT_EQ(XmlEscape("plain key/with spaces"), "plain key/with spaces");
  EXPECT_EQ(XmlEscape("a&b<c>d\"e'f"), "a&amp;b&lt;c&gt;d&quot;e&apos;f");
  EXPECT_EQ(XmlEscape(std::string("x\x01y\tz\n\r\x1f", 8)), "x&#x1;y\tz\n\r&#x1F;");
  EXPECT_EQ(XmlEscape("\xc3\xa9t\xc3\xa9"), "\xc3\xa9t\xc3\xa9");
  EXPECT_EQ(XmlEscape(""), "");
  EXPECT_EQ(XmlEscape("&&"), "&amp;&amp;");
  Xml x(false);
  x.Leaf("Key", "a<b").Leaf("ETag", "\"e\"");
  EXPECT_EQ(x.str(), "<Key>a&lt;b</Key><ETag>&quot;e&quot;</ETag>");
}

TEST(XmlOutTest, Iso8601WithMilliseconds) {
  const int64_t s = 1255369830;  // 2009-10-12T17:50:30Z
  EXPECT_EQ(Iso8601(s * 1000000000), "2009-10-12T17:50:30.000Z");
  EXPECT_EQ(Iso8601(s * 1000000000 + 7000000), "2009-10-12T17:50:30.007Z");  // same second again
  EXPECT_EQ(Iso8601(s * 1000000000 + 999999999), "2009-10-12T17:50:30.999Z");
  EXPECT_EQ(Iso8601((s + 1) * 1000000000 + 120000000), "2009-10-12T17:50:31.120Z");
  EXPECT_EQ(Iso8601(s * 1000000000 + 7000000), "2009-10-12T17:50:30.007Z");  // and back
  EXPECT_EQ(Iso8601(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(Iso8601(-1000000), "1969-12-31T23:59:59.999Z");
}

}  // namespace
}  // namespace tierfs::gateway
