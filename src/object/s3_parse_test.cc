// S3 URLs, XML documents and dates as the S3 client parses and writes them (no server).
#include <gtest/gtest.h>

#include <string>

#include "object/http_client.h"
#include "object/s3_store.h"
#include "object/s3_xml.h"

namespace tierfs {
namespace {

bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(S3Location, PathStyle) {
  auto loc = ParseS3Location("http://127.0.0.1:9000/my-bucket");
  ASSERT_TRUE(loc.ok()) << loc.status().ToString();
  EXPECT_EQ(loc->scheme, "http");
  EXPECT_EQ(loc->host, "127.0.0.1");
  EXPECT_EQ(loc->port, 9000);
  EXPECT_EQ(loc->bucket, "my-bucket");
  EXPECT_FALSE(loc->virtual_hosted);
  EXPECT_EQ(loc->region, "us-east-1");
  EXPECT_EQ(loc->tries, 10);
  EXPECT_EQ(loc->Endpoint(), "http://127.0.0.1:9000");
  EXPECT_EQ(loc->HostHeader(), "127.0.0.1:9000");
  EXPECT_EQ(loc->Describe(), "s3://127.0.0.1:9000/my-bucket/");

  auto slash = ParseS3Location("https://s3.example.com/b1/?region=eu-west-3&tries=2&timeout=7");
  ASSERT_TRUE(slash.ok()) << slash.status().ToString();
  EXPECT_EQ(slash->bucket, "b1");
  EXPECT_EQ(slash->port, 0);
  EXPECT_EQ(slash->region, "eu-west-3");
  EXPECT_EQ(slash->tries, 2);
  EXPECT_EQ(slash->connect_timeout_s, 7);
  EXPECT_EQ(slash->io_timeout_s, 7);
  EXPECT_EQ(slash->Endpoint(), "https://s3.example.com");
  EXPECT_EQ(slash->Describe(), "s3://s3.example.com/b1/");
}

TEST(S3Location, VirtualHosted) {
  auto loc = ParseS3Location("https://my-bucket.s3.eu-west-3.amazonaws.com?region=eu-west-3");
  ASSERT_TRUE(loc.ok()) << loc.status().ToString();
  EXPECT_TRUE(loc->virtual_hosted);
  EXPECT_EQ(loc->bucket, "my-bucket");
  EXPECT_EQ(loc->host, "my-bucket.s3.eu-west-3.amazonaws.com");
  EXPECT_EQ(loc->region, "eu-west-3");
  EXPECT_EQ(loc->Describe(), "s3://my-bucket.s3.eu-west-3.amazonaws.com/");
  auto local = ParseS3Location("http://vol1.localhost:27580/");
  ASSERT_TRUE(local.ok());
  EXPECT_EQ(local->bucket, "vol1");
  EXPECT_EQ(local->Endpoint(), "http://vol1.localhost:27580");
}

TEST(S3Location, Errors) {
  for (const char* bad : {"bucket", "ftp://host/b", "http://127.0.0.1:9000", "http://localhost:9000/",
                          "http://host/b/prefix", "http://host/b?colour=red", "http://host/b?tries=0",
                          "http://host/b?timeout=x", "http://host/b?region=", "http://host/b%2F",
                          "http:///b"}) {
    auto loc = ParseS3Location(bad);
    EXPECT_EQ(loc.status().code(), EINVAL) << bad;
    EXPECT_TRUE(Contains(loc.status().message(), "http(s)://HOST[:PORT]/BUCKET")) << loc.status().message();
  }
  auto creds = ParseS3Location("http://AK:SECRET@host/b");
  EXPECT_EQ(creds.status().code(), EINVAL);
  EXPECT_FALSE(Contains(creds.status().message(), "SECRET")) << creds.status().message();

  StorageSpec spec{"s3", "http://host/b", "AK", "", "", ""};
  auto store = NewS3Store(spec);
  EXPECT_EQ(store.status().code(), EINVAL);
  EXPECT_TRUE(Contains(store.status().message(), "the secret key is missing")) << store.status().message();
}

// ---------------------------------------------------------------- XML and dates

TEST(S3Xml, Error) {
  S3Error err;
  EXPECT_TRUE(ParseS3Error(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>NoSuchBucket</Code><Message></Message>"
      "<BucketName>foo</BucketName></Error>",
      &err));
  EXPECT_EQ(err.code, "NoSuchBucket");
  EXPECT_EQ(err.message, "");
  EXPECT_FALSE(ParseS3Error("", &err));
  EXPECT_FALSE(ParseS3Error("<html>bad gateway</html>", &err));
  EXPECT_FALSE(ParseS3Error("not xml", &err));
}

TEST(S3Xml, ListObjects) {
  ListObjectsPage page;
  ASSERT_TRUE(ParseListObjects(
                  "<?xml version=\"1.0\"?><ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
                  "<Name>b</Name><Prefix>p/</Prefix><KeyCount>2</KeyCount><MaxKeys>2</MaxKeys>"
                  "<IsTruncated>true</IsTruncated><NextContinuationToken>tok&amp;1</NextContinuationToken>"
                  "<Contents><Key>p/a&amp;b</Key><LastModified>2009-10-12T17:50:30.250Z</LastModified>"
                  "<ETag>\"x\"</ETag><Size>434234</Size></Contents>"
                  "<Contents><Key>p/c</Key><LastModified>2009-10-12T17:50:31Z</LastModified><Size>0</Size>"
                  "</Contents></ListBucketResult>",
                  &page)
                  .ok());
  ASSERT_EQ(page.objects.size(), 2u);
  EXPECT_EQ(page.objects[0].key, "p/a&b");
  EXPECT_EQ(page.objects[0].size, 434234u);
  EXPECT_EQ(page.objects[0].mtime_ns, 1255369830250000000LL);
  EXPECT_EQ(page.objects[1].mtime_ns, 1255369831000000000LL);
  EXPECT_TRUE(page.truncated);
  EXPECT_EQ(page.next_token, "tok&1");

  ListObjectsPage level;  // with a delimiter
  ASSERT_TRUE(ParseListObjects("<ListBucketResult><IsTruncated>false</IsTruncated>"
                               "<Contents><Key>p/f</Key><Size>1</Size></Contents>"
                               "<CommonPrefixes><Prefix>p/a/</Prefix></CommonPrefixes>"
                               "<CommonPrefixes><Prefix>p/b &amp; c/</Prefix></CommonPrefixes></ListBucketResult>",
                               &level)
                  .ok());
  ASSERT_EQ(level.objects.size(), 1u);
  EXPECT_EQ(level.prefixes, (std::vector<std::string>{"p/a/", "p/b & c/"}));
  EXPECT_EQ(ParseListObjects("<ListBucketResult><CommonPrefixes/></ListBucketResult>", &level).code(), EIO);

  ListObjectsPage bad;
  EXPECT_EQ(ParseListObjects("<Error><Code>x</Code></Error>", &bad).code(), EIO);
  EXPECT_EQ(ParseListObjects("<ListBucketResult><Contents><Key>k</Key><Size>z</Size></Contents></ListBucketResult>",
                             &bad)
                .code(),
            EIO);
}

TEST(S3Xml, MultipartDocuments) {
  auto id = ParseUploadId(
      "<InitiateMultipartUploadResult><Bucket>b</Bucket><Key>k</Key><UploadId>2~xyz</UploadId>"
      "</InitiateMultipartUploadResult>");
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(*id, "2~xyz");
  EXPECT_EQ(ParseUploadId("<InitiateMultipartUploadResult/>").status().code(), EIO);

  ListPartsPage parts;
  ASSERT_TRUE(ParseListParts("<ListPartsResult><IsTruncated>true</IsTruncated><NextPartNumberMarker>2"
                             "</NextPartNumberMarker><Part><PartNumber>1</PartNumber><ETag>\"a\"</ETag></Part>"
                             "<Part><PartNumber>2</PartNumber><ETag>\"b\"</ETag></Part></ListPartsResult>",
                             &parts)
                  .ok());
  EXPECT_EQ(parts.etags, (std::map<int, std::string>{{1, "\"a\""}, {2, "\"b\""}}));
  EXPECT_TRUE(parts.truncated);
  EXPECT_EQ(parts.next_marker, 2);

  EXPECT_EQ(CompleteMultipartXml({{1, "\"a\""}, {2, "b&c"}}),
            "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>&quot;a&quot;</ETag></Part>"
            "<Part><PartNumber>2</PartNumber><ETag>b&amp;c</ETag></Part></CompleteMultipartUpload>");
}

TEST(S3Xml, Dates) {
  EXPECT_EQ(ParseHttpDate("Sun, 06 Nov 1994 08:49:37 GMT"), 784111777000000000LL);
  EXPECT_EQ(ParseHttpDate("garbage"), 0);
  EXPECT_EQ(ParseIso8601("1994-11-06T08:49:37.5Z"), 784111777500000000LL);
  EXPECT_EQ(ParseIso8601(""), 0);
}

// ---------------------------------------------------------------- retries, scripted server

// A one-connection-at-a-time HTTP server. The handler sees the request number (from 1),
// the request line and the body size, and returns the raw response; an empty response
// means "never answer" (the connection is held until the client gives up).

}  // namespace
}  // namespace tierfs
