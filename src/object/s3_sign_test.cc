// Signature V4 test vectors. The first three are the worked examples of the AWS S3
// documentation ("Signature Calculations for the Authorization Header"); the others were
// computed independently with Python's hmac and hashlib modules (a direct transcription
// of the SigV4 specification, not of this code):
//
//   def h(k, m): return hmac.new(k, m.encode(), hashlib.sha256).digest()
//   cq = '&'.join(f'{k}={v}' for k, v in sorted((quote(k, safe='-_.~'), quote(v, safe='-_.~'))
//                                                for k, v in query))
//   hs = sorted((k.lower(), ' '.join(v.split())) for k, v in headers)
//   creq = '\n'.join([method, uri, cq, ''.join(f'{k}:{v}\n' for k, v in hs),
//                     ';'.join(k for k, _ in hs), payload_hash])
//   sts = '\n'.join(['AWS4-HMAC-SHA256', date, scope, sha256(creq).hexdigest()])
//   key = h(h(h(h(b'AWS4' + secret, date[:8]), region), 's3'), 'aws4_request')
//   signature = hmac.new(key, sts.encode(), hashlib.sha256).hexdigest()
#include "object/s3_sign.h"

#include <gtest/gtest.h>

namespace tierfs {
namespace {

constexpr char kAccess[] = "AKIAIOSFODNN7EXAMPLE";
constexpr char kSecret[] = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
constexpr char kEmptyHash[] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

std::string SignatureOf(const std::string& authorization) {
  size_t pos = authorization.find("Signature=");
  return pos == std::string::npos ? "" : authorization.substr(pos + 10);
}

TEST(S3Sign, Hashes) {
  EXPECT_EQ(Sha256Hex({}), kEmptyHash);
  EXPECT_EQ(Sha256Hex({"abc"}), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex({"a", "", "bc"}), Sha256Hex({"abc"}));
  // RFC 4231 test case 2.
  EXPECT_EQ(HexEncode(HmacSha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(S3Sign, UriEncode) {
  EXPECT_EQ(UriEncode("AZaz09-_.~", false), "AZaz09-_.~");
  EXPECT_EQ(UriEncode("a b+c/d=é*", false), "a%20b%2Bc%2Fd%3D%C3%A9%2A");
  EXPECT_EQ(UriEncode("dir/a b/..", true), "dir/a%20b/..");
  EXPECT_EQ(UriEncode(std::string("\x00\xff", 2), true), "%00%FF");
}

TEST(S3Sign, CanonicalQueryIsSortedAndEncoded) {
  EXPECT_EQ(CanonicalQueryString({}), "");
  EXPECT_EQ(CanonicalQueryString({{"uploads", ""}}), "uploads=");
  EXPECT_EQ(CanonicalQueryString({{"uploadId", "2~abc/def=="}, {"partNumber", "3"}}),
            "partNumber=3&uploadId=2~abc%2Fdef%3D%3D");
  EXPECT_EQ(CanonicalQueryString({{"prefix", "b"}, {"max-keys", "2"}, {"list-type", "2"}, {"a", "2"}, {"a", "1"}}),
            "a=1&a=2&list-type=2&max-keys=2&prefix=b");
}

TEST(S3Sign, AwsExampleGetObject) {
  SigV4Request req{"GET",
                   "/test.txt",
                   {},
                   {{"Host", "examplebucket.s3.amazonaws.com"},
                    {"Range", "bytes=0-9"},
                    {"x-amz-content-sha256", kEmptyHash},
                    {"x-amz-date", "20130524T000000Z"}},
                   kEmptyHash};
  EXPECT_EQ(CanonicalRequest(req),
            "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
            "x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n"
            "x-amz-date:20130524T000000Z\n\nhost;range;x-amz-content-sha256;x-amz-date\n"
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(StringToSign(CanonicalRequest(req), "20130524T000000Z", "20130524/us-east-1/s3/aws4_request"),
            "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n"
            "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972");
  std::string auth = Authorization(req, {kAccess, kSecret, ""}, "us-east-1", "20130524T000000Z");
  EXPECT_EQ(auth,
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST(S3Sign, AwsExamplePutObject) {
  std::string body = "Welcome to Amazon S3.";
  std::string hash = Sha256Hex({body});
  EXPECT_EQ(hash, "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
  SigV4Request req{"PUT",
                   "/" + UriEncode("test$file.text", true),
                   {},
                   {{"Host", "examplebucket.s3.amazonaws.com"},
                    {"Date", "Fri, 24 May 2013 00:00:00 GMT"},
                    {"x-amz-date", "20130524T000000Z"},
                    {"x-amz-storage-class", "REDUCED_REDUNDANCY"},
                    {"x-amz-content-sha256", hash}},
                   hash};
  EXPECT_EQ(req.canonical_uri, "/test%24file.text");
  EXPECT_EQ(SignatureOf(Authorization(req, {kAccess, kSecret, ""}, "us-east-1", "20130524T000000Z")),
            "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
}

TEST(S3Sign, AwsExampleListObjects) {
  SigV4Request req{"GET",
                   "/",
                   {{"prefix", "J"}, {"max-keys", "2"}},
                   {{"Host", "examplebucket.s3.amazonaws.com"},
                    {"x-amz-date", "20130524T000000Z"},
                    {"x-amz-content-sha256", kEmptyHash}},
                   kEmptyHash};
  EXPECT_EQ(SignatureOf(Authorization(req, {kAccess, kSecret, ""}, "us-east-1", "20130524T000000Z")),
            "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
}

// Path-style part upload: encoded key, encoded query values, a session token, a header
// value with spaces to trim, and a region other than us-east-1 (vector from Python).
TEST(S3Sign, PartUploadWithTokenAndRegion) {
  std::string body("part data \x00\xff", 12);
  std::string hash = Sha256Hex({body.substr(0, 5), body.substr(5)});
  EXPECT_EQ(hash, "1fc653c224eccc75d7d1c2057a12bc64f5eedd045de2e80f36c233b5435bfc56");
  SigV4Request req{"PUT",
                   "/my-bucket/" + UriEncode("dir/a b+cé.bin", true),
                   {{"uploadId", "2~abc/def=="}, {"partNumber", "3"}},
                   {{"host", "127.0.0.1:27580"},
                    {"x-amz-date", "20261122T070225Z"},
                    {"x-amz-content-sha256", hash},
                    {"x-amz-security-token", "tok/en+=="},
                    {"Content-Type", "  application/octet-stream  "}},
                   hash};
  EXPECT_EQ(CanonicalRequest(req),
            "PUT\n/my-bucket/dir/a%20b%2Bc%C3%A9.bin\npartNumber=3&uploadId=2~abc%2Fdef%3D%3D\n"
            "content-type:application/octet-stream\nhost:127.0.0.1:27580\n"
            "x-amz-content-sha256:1fc653c224eccc75d7d1c2057a12bc64f5eedd045de2e80f36c233b5435bfc56\n"
            "x-amz-date:20261122T070225Z\nx-amz-security-token:tok/en+==\n\n"
            "content-type;host;x-amz-content-sha256;x-amz-date;x-amz-security-token\n"
            "1fc653c224eccc75d7d1c2057a12bc64f5eedd045de2e80f36c233b5435bfc56");
  std::string auth = Authorization(req, {"AK2", "secret/key+2", "tok/en+=="}, "eu-west-3", "20261122T070225Z");
  EXPECT_NE(auth.find("Credential=AK2/20261122/eu-west-3/s3/aws4_request,"), std::string::npos) << auth;
  EXPECT_EQ(SignatureOf(auth), "69840c1db3168eb3975e0924aa3676b0d83409eaffd3a9ec1bdbf7b278358c33");
}

TEST(S3Sign, BareQueryName) {
  SigV4Request req{"POST",
                   "/b/k",
                   {{"uploads", ""}},
                   {{"host", "h:1"}, {"x-amz-date", "20261122T070225Z"}, {"x-amz-content-sha256", kEmptyHash}},
                   kEmptyHash};
  EXPECT_EQ(SignatureOf(Authorization(req, {"AK", "SK", ""}, "us-east-1", "20261122T070225Z")),
            "75a106ad7d76c96aa1af4e65ae8839a505cca5cf83ff272cd49f4d7cf9d520b1");
}

TEST(S3Sign, AmzDate) {
  EXPECT_EQ(AmzDate(0), "19700101T000000Z");
  EXPECT_EQ(AmzDate(1369353600), "20130524T000000Z");
}

}  // namespace
}  // namespace tierfs
