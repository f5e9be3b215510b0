// The gateway's request checks against AWS's published examples (SigV4 in a header, in a
// presigned URL, and a signed aws-chunked upload) and the checksums' standard check values.
#include <gtest/gtest.h>

#include "gateway/aws_chunked.h"
#include "gateway/checksums.h"
#include "gateway/sigv4_verify.h"

namespace tierfs::gateway {
namespace {

const char kAk[] = "AKIAIOSFODNN7EXAMPLE";
const char kSk[] = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
constexpr int64_t kMay24 = 1369353600;  // 2013-05-24T00:00:00Z

SecretLookup Keys() {
  return [](const std::string& ak) -> std::optional<std::string> {
    if (ak == kAk) return std::string(kSk);
    return std::nullopt;
  };
}

std::string Digest(ChecksumAlgo a, std::string_view data) {
  Checksummer c(a);
  c.Update(data.substr(0, 3));
  c.Update(data.substr(3));
  return HexOf(c.Digest());
}

TEST(Checksums, StandardCheckValues) {
  EXPECT_EQ(Digest(ChecksumAlgo::kCrc32, "123456789"), "cbf43926");
  EXPECT_EQ(Digest(ChecksumAlgo::kCrc32c, "123456789"), "e3069283");
  EXPECT_EQ(Digest(ChecksumAlgo::kCrc64Nvme, "123456789"), "ae8b14860a799888");
  EXPECT_EQ(Digest(ChecksumAlgo::kSha1, "abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
  EXPECT_EQ(Digest(ChecksumAlgo::kSha256, "abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Digest(ChecksumAlgo::kMd5, "abc"), "900150983cd24fb0d6963f7d28e17f72");
  // Long inputs take the 8-bytes-at-a-time path; it must agree with the byte-wise one.
  std::string big(100003, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 131 + 7);
  uint32_t bytewise = 0;
  for (char c : big) bytewise = Crc32c(bytewise, std::string_view(&c, 1));
  EXPECT_EQ(Crc32c(0, big), bytewise);
  uint64_t bytewise64 = 0;
  for (char c : big) bytewise64 = Crc64Nvme(bytewise64, std::string_view(&c, 1));
  EXPECT_EQ(Crc64Nvme(0, big), bytewise64);
  Checksummer c(ChecksumAlgo::kCrc32);
  c.Update("123456789");
  EXPECT_EQ(Base64Encode(c.Digest()), "y/Q5Jg==");
  EXPECT_EQ(*Base64Decode("y/Q5Jg=="), std::string("\xcb\xf4\x39\x26"));
  EXPECT_FALSE(Base64Decode("y/Q5Jg=").has_value());
  EXPECT_EQ(ParseChecksumAlgo("crc64nvme"), ChecksumAlgo::kCrc64Nvme);
  EXPECT_FALSE(ParseChecksumAlgo("md5").has_value());
  EXPECT_EQ(ChecksumHeader(ChecksumAlgo::kCrc32c), "x-amz-checksum-crc32c");
}

AuthRequest GetObjectExample() {
  AuthRequest r;
  r.method = "GET";
  r.path = "/test.txt";
  r.now_s = kMay24 + 60;
  r.headers = {{"host", "examplebucket.s3.amazonaws.com"},
               {"range", "bytes=0-9"},
               {"x-amz-content-sha256", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
               {"x-amz-date", "20130524T000000Z"},
               {"authorization",
                "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
                "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
                "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"}};
  return r;
}

TEST(SigV4Verify, HeaderExampleOfAws) {
  AuthRequest r = GetObjectExample();
  auto id = Authenticate(r, Keys(), false);
  ASSERT_TRUE(id.ok()) << id.error().code << ": " << id.error().message;
  EXPECT_EQ(id->access_key, kAk);
  EXPECT_EQ(id->payload, Payload::kHashed);

  AuthRequest tampered = r;
  tampered.headers[1].second = "bytes=0-10";
  auto bad = Authenticate(tampered, Keys(), false);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, "SignatureDoesNotMatch");
  EXPECT_EQ(bad.error().http, 403);

  AuthRequest skewed = r;
  skewed.now_s = kMay24 + 3600;
  EXPECT_EQ(Authenticate(skewed, Keys(), false).error().code, "RequestTimeTooSkewed");

  AuthRequest unknown = r;
  unknown.headers[4].second.replace(unknown.headers[4].second.find("AKIA"), 4, "AKIB");
  EXPECT_EQ(Authenticate(unknown, Keys(), false).error().code, "InvalidAccessKeyId");

  AuthRequest malformed = r;
  malformed.headers[4].second = "AWS4-HMAC-SHA256 Credential=x, SignedHeaders=host, Signature=00";
  EXPECT_EQ(Authenticate(malformed, Keys(), false).error().code, "AuthorizationHeaderMalformed");

  AuthRequest v2 = r;
  v2.headers[4].second = "AWS AKIAIOSFODNN7EXAMPLE:frJIUN8DYpKDtOLCwo//yllqDzg=";
  EXPECT_EQ(Authenticate(v2, Keys(), false).error().code, "InvalidRequest");

  AuthRequest anon = r;
  anon.headers.pop_back();
  EXPECT_EQ(Authenticate(anon, Keys(), false).error().code, "AccessDenied");
  EXPECT_TRUE(Authenticate(anon, Keys(), true).ok());
}

AuthRequest PresignedExample(int64_t now) {
  AuthRequest r;
  r.method = "GET";
  r.path = "/test.txt";
  r.now_s = now;
  r.headers = {{"host", "examplebucket.s3.amazonaws.com"}};
  r.query = {{"X-Amz-Algorithm", "AWS4-HMAC-SHA256"},
             {"X-Amz-Credential", "AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request"},
             {"X-Amz-Date", "20130524T000000Z"},
             {"X-Amz-Expires", "86400"},
             {"X-Amz-SignedHeaders", "host"},
             {"X-Amz-Signature", "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"}};
  return r;
}

TEST(SigV4Verify, PresignedExampleOfAws) {
  auto id = Authenticate(PresignedExample(kMay24 + 3600), Keys(), false);
  ASSERT_TRUE(id.ok()) << id.error().code << ": " << id.error().message;
  EXPECT_EQ(id->payload, Payload::kUnsigned);
  auto expired = Authenticate(PresignedExample(kMay24 + 86401), Keys(), false);
  ASSERT_FALSE(expired.ok());
  EXPECT_EQ(expired.error().code, "AccessDenied");
  EXPECT_EQ(expired.error().message, "Request has expired");
  AuthRequest week = PresignedExample(kMay24 + 10);
  week.query[3].second = "604801";
  EXPECT_EQ(Authenticate(week, Keys(), false).error().code, "AuthorizationQueryParametersError");
  AuthRequest other = PresignedExample(kMay24 + 10);
  other.path = "/other.txt";
  EXPECT_EQ(Authenticate(other, Keys(), false).error().code, "SignatureDoesNotMatch");
}

// AWS's example of a signed streaming upload: 64 KiB and 1 KiB of 'a', then the final chunk.
AuthRequest StreamingExample() {
  AuthRequest r;
  r.method = "PUT";
  r.path = "/examplebucket/chunkObject.txt";
  r.now_s = kMay24;
  r.headers = {{"host", "s3.amazonaws.com"},
               {"x-amz-date", "20130524T000000Z"},
               {"x-amz-storage-class", "REDUCED_REDUNDANCY"},
               {"content-encoding", "aws-chunked"},
               {"x-amz-decoded-content-length", "66560"},
               {"content-length", "66824"},
               {"x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"},
               {"authorization",
                "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
                "SignedHeaders=content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;"
                "x-amz-decoded-content-length;x-amz-storage-class,"
                "Signature=4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9"}};
  return r;
}

std::string StreamingBody(const std::string& first_sig) {
  return "10000;chunk-signature=" + first_sig + "\r\n" + std::string(65536, 'a') + "\r\n" +
         "400;chunk-signature=0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497\r\n" +
         std::string(1024, 'a') + "\r\n" +
         "0;chunk-signature=b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9\r\n\r\n";
}

TEST(AwsChunked, SignedExampleOfAwsInAnySlicing) {
  auto id = Authenticate(StreamingExample(), Keys(), false);
  ASSERT_TRUE(id.ok()) << id.error().code << ": " << id.error().message;
  ASSERT_EQ(id->payload, Payload::kStreamingSigned);
  std::string body = StreamingBody("ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648");
  for (size_t step : {size_t{1}, size_t{7}, size_t{4096}, body.size()}) {
    std::string out;
    ChunkedDecoder d(*id, [&](std::string_view data) -> std::optional<S3Error> {
      out.append(data);
      return std::nullopt;
    });
    for (size_t i = 0; i < body.size(); i += step) {
      auto e = d.Feed(std::string_view(body).substr(i, step));
      ASSERT_FALSE(e.has_value()) << e->code << ": " << e->message;
    }
    ASSERT_FALSE(d.Finish().has_value());
    EXPECT_EQ(out, std::string(66560, 'a'));
  }
  // A forged first chunk: nothing of it reaches the sink.
  std::string forged = StreamingBody("ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288649");
  std::string out;
  ChunkedDecoder d(*id, [&](std::string_view data) -> std::optional<S3Error> {
    out.append(data);
    return std::nullopt;
  });
  auto e = d.Feed(forged);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code, "SignatureDoesNotMatch");
  EXPECT_TRUE(out.empty());
  // A body cut short.
  ChunkedDecoder cut(*id, [](std::string_view) -> std::optional<S3Error> { return std::nullopt; });
  ASSERT_FALSE(cut.Feed(body.substr(0, 1000)).has_value());
  EXPECT_EQ(cut.Finish()->code, "IncompleteBody");
}

TEST(AwsChunked, UnsignedWithTrailer) {
  Identity id;
  id.payload = Payload::kStreamingUnsignedTrailer;
  std::string body = "5\r\nhello\r\n6\r\n world\r\n0\r\nx-amz-checksum-crc32:DUoRhQ==\r\n\r\n";
  std::string out;
  ChunkedDecoder d(id, [&](std::string_view data) -> std::optional<S3Error> {
    out.append(data);
    return std::nullopt;
  });
  ASSERT_FALSE(d.Feed(body).has_value());
  ASSERT_FALSE(d.Finish().has_value());
  EXPECT_EQ(out, "hello world");
  EXPECT_EQ(d.trailers().at("x-amz-checksum-crc32"), "DUoRhQ==");
  ChunkedDecoder bad(id, [](std::string_view) -> std::optional<S3Error> { return std::nullopt; });
  EXPECT_EQ(bad.Feed("zz\r\n")->code, "InvalidRequest");
}

}  // namespace
}  // namespace tierfs::gateway
