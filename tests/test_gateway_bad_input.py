"""Bad input to the gateway: each request gets S3's error code (never a 500) and leaves
nothing behind, neither an object nor a staged file in ROOT/.tierfs-gateway/tmp nor a part.

Wrong signatures, unknown keys and skewed clocks; bodies cut short by a client that dies
(single PUT, aws-chunked PUT, and a part that announces 5 GiB and sends 1 MiB); wrong and
malformed Content-MD5, checksums and x-amz-content-sha256; keys of 1025 bytes and keys
with '..', '//' or NUL; part numbers outside 1-10,000 and an upload of 1,100 parts listed in
pages. Expired and tampered presigned URLs are in test_gateway_api.py.
"""

import base64
import concurrent.futures
import datetime
import hashlib
import os
import socket
import time
import urllib.parse
from unittest import mock

from gateway_helpers import GatewayTestCase
from harness import wait_for


class GatewayBadInputTest(GatewayTestCase):
    def staged(self):
        """Entries in the gateway's staging area and upload directories (seen through the mount)."""
        root = self.vol.path(".tierfs-gateway")
        left = []
        for sub in ("tmp", "uploads"):
            d = os.path.join(root, sub)
            if os.path.isdir(d):
                left += [os.path.join(sub, n) for n in os.listdir(d)]
        return left

    def assertNothingLeft(self):
        self.assertTrue(wait_for(lambda: not self.staged(), timeout=10), "left behind: %s" % self.staged())

    def assertCode(self, answer, status, code):
        self.assertEqual(answer[0], status, answer[1])
        self.assertIn(b"<Code>%s</Code>" % code.encode(), answer[1])

    def send_cut_short(self, method, path, headers, sent):
        """Sends a request signed by botocore for its full body but only `sent` of it, then
        closes the connection, as a client that dies does."""
        with self.open_request(method, path, headers) as s:
            s.sendall(sent)
            time.sleep(0.3)
        # The gateway notices the closed connection; give it the moment it takes.
        time.sleep(0.5)

    def test_signatures(self):
        self.assertCode(self.signed("GET", "/%s" % self.bucket, secret="wrong"), 403, "SignatureDoesNotMatch")
        self.assertCode(self.signed("GET", "/%s" % self.bucket, ak="NOSUCHKEY"), 403, "InvalidAccessKeyId")
        # Signed for one body, sent with another.
        import botocore.auth
        from botocore.auth import S3SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials
        from gateway_helpers import AK, SECRET
        url = "http://127.0.0.1:%d/%s/sig/obj" % (self.port, self.bucket)
        req = AWSRequest(method="PUT", url=url, data=b"signed body", headers={})
        S3SigV4Auth(Credentials(AK, SECRET), "s3", "us-east-1").add_auth(req)
        answer = self.raw("PUT", url, b"other body!", dict(req.headers.items()))
        self.assertCode(answer, 400, "XAmzContentSHA256Mismatch")
        # A header changed after signing.
        req = AWSRequest(method="PUT", url=url, data=b"x", headers={"x-amz-meta-a": "1"})
        S3SigV4Auth(Credentials(AK, SECRET), "s3", "us-east-1").add_auth(req)
        h = dict(req.headers.items())
        h["x-amz-meta-a"] = "2"
        self.assertCode(self.raw("PUT", url, b"x", h), 403, "SignatureDoesNotMatch")
        # A clock 20 minutes off.
        req = AWSRequest(method="GET", url=url, headers={})
        skewed = datetime.datetime.utcnow() - datetime.timedelta(minutes=20)
        with mock.patch("botocore.auth.datetime") as clock:  # botocore before 1.34 asks datetime
            clock.datetime.utcnow.return_value = skewed
            if hasattr(botocore.auth, "get_current_datetime"):  # later ones this
                with mock.patch("botocore.auth.get_current_datetime", return_value=skewed):
                    S3SigV4Auth(Credentials(AK, SECRET), "s3", "us-east-1").add_auth(req)
            else:
                S3SigV4Auth(Credentials(AK, SECRET), "s3", "us-east-1").add_auth(req)
        self.assertCode(self.raw("GET", url, b"", dict(req.headers.items())), 403, "RequestTimeTooSkewed")
        # Garbage in the Authorization header is a 400 or 403 with an S3 code, never a 500.
        for auth in ("AWS4-HMAC-SHA256 garbage", "AWS4-HMAC-SHA256 Credential=AKIDTEST/x, Signature=zz", "Bearer x"):
            status, body, _ = self.raw("GET", url, b"", {"Authorization": auth, "x-amz-date": "20260101T000000Z"})
            self.assertIn(status, (400, 403), (auth, body))
            self.assertIn(b"<Code>", body)
        self.assertFalse(os.path.exists(self.vol.path("sig")))
        self.assertNothingLeft()

    def test_bodies_cut_short(self):
        key = "/%s/cut/obj" % self.bucket
        # The same request whole makes the object (so the ones below are refused for being
        # short, not for how they are sent).
        self.send_cut_short("PUT", key, {"Content-Length": "100000"}, b"x" * 100000)
        self.assertEqual(self.signed("HEAD", key)[0], 200)
        self.assertEqual(self.signed("DELETE", key)[0], 204)
        self.send_cut_short("PUT", key, {"Content-Length": "100000"}, b"x" * 50000)
        # aws-chunked with an unsigned payload: one chunk announced, half sent.
        self.send_cut_short("PUT", key + "2", {"Content-Encoding": "aws-chunked", "x-amz-decoded-content-length": "70000",
                                               "Content-Length": "70100"}, b"11170\r\n" + b"y" * 30000)
        # A part that announces 5 GiB and sends 1 MiB.
        up = self.boto3().create_multipart_upload(Bucket=self.bucket, Key="cut/big")["UploadId"]
        self.send_cut_short("PUT", "/%s/cut/big?partNumber=1&uploadId=%s" % (self.bucket, up),
                            {"Content-Length": str(5 << 30)}, os.urandom(1 << 20))
        parts = self.boto3().list_parts(Bucket=self.bucket, Key="cut/big", UploadId=up)
        self.assertEqual(parts.get("Parts", []), [], "a part cut short is not listed")
        self.boto3().abort_multipart_upload(Bucket=self.bucket, Key="cut/big", UploadId=up)
        for k in ("cut/obj", "cut/obj2", "cut/big"):
            self.assertEqual(self.signed("HEAD", "/%s/%s" % (self.bucket, k))[0], 404, k)
        self.assertFalse(os.path.exists(self.vol.path("cut")))
        self.assertNothingLeft()
        # Announced sizes past S3's limits are refused before any byte is read.
        status, body, _ = self.signed("PUT", key, b"", {"Content-Length": str((5 << 30) + 1)})
        self.assertEqual(status, 400, body)
        self.assertIn(b"EntityTooLarge", body)

    def test_digests_and_checksums(self):
        data = b"checked body"
        key = "/%s/sum/obj" % self.bucket
        wrong_md5 = base64.b64encode(hashlib.md5(b"something else").digest()).decode()
        self.assertCode(self.signed("PUT", key, data, {"Content-MD5": wrong_md5}), 400, "BadDigest")
        self.assertCode(self.signed("PUT", key, data, {"Content-MD5": "not-base64!"}), 400, "InvalidDigest")
        self.assertCode(self.signed("PUT", key, data, {"Content-MD5": base64.b64encode(b"short").decode()}), 400,
                        "InvalidDigest")
        for header in ("x-amz-checksum-crc32", "x-amz-checksum-crc32c", "x-amz-checksum-sha1",
                       "x-amz-checksum-sha256", "x-amz-checksum-crc64nvme"):
            wrong = base64.b64encode(hashlib.sha256(b"nope").digest()[:{"x-amz-checksum-sha1": 20,
                                                                        "x-amz-checksum-sha256": 32,
                                                                        "x-amz-checksum-crc64nvme": 8}.get(header, 4)])
            answer = self.signed("PUT", key, data, {header: wrong.decode()})
            self.assertCode(answer, 400, "BadDigest")
        self.assertFalse(os.path.exists(self.vol.path("sum")))
        self.assertNothingLeft()
        # The right ones are accepted and returned.
        right = base64.b64encode(hashlib.md5(data).digest()).decode()
        sha = base64.b64encode(hashlib.sha256(data).digest()).decode()
        status, body, _ = self.signed("PUT", key, data, {"Content-MD5": right, "x-amz-checksum-sha256": sha})
        self.assertEqual(status, 200, body)
        status, _, headers = self.signed("HEAD", key, headers={"x-amz-checksum-mode": "ENABLED"})
        self.assertEqual(headers.get("x-amz-checksum-sha256"), sha)

    def test_keys(self):
        long_ok = "/".join(["k" * 200] * 5) + "/" + "e" * 19  # 1024 bytes, components under 255
        self.assertEqual(len(long_ok), 1024)
        status, body, _ = self.signed("PUT", "/%s/%s" % (self.bucket, long_ok), b"max")
        self.assertEqual(status, 200, body)
        self.assertCode(self.signed("PUT", "/%s/%s" % (self.bucket, long_ok + "x"), b"x"), 400, "KeyTooLongError")
        for bad in ("a/../b", "../escape", "a//b", "a/./b", "nul\x00byte", ".tierfs-gateway/y"):
            answer = self.signed("PUT", "/%s/%s" % (self.bucket, urllib.parse.quote(bad, safe="/")), b"x")
            self.assertCode(answer, 400, "InvalidArgument")
            self.assertIn(b"TierFS stores keys as file paths", answer[1])
        self.assertEqual(sorted(os.listdir(self.vol.mnt)), sorted(["k" * 200, os.path.basename(self.work),
                                                                   ".tierfs-gateway"]))
        self.assertFalse(os.path.exists(os.path.join(self.vol.dir, "escape")))
        self.assertNothingLeft()

    def test_part_numbers_and_many_parts(self):
        s3 = self.boto3()
        up = s3.create_multipart_upload(Bucket=self.bucket, Key="parts/obj")["UploadId"]
        base = "/%s/parts/obj?uploadId=%s&partNumber=" % (self.bucket, up)
        for bad in ("0", "10001", "-1", "abc"):
            self.assertCode(self.signed("PUT", base + bad, b"x"), 400, "InvalidArgument")
        status, body, _ = self.signed("PUT", base + "10000", b"last")
        self.assertEqual(status, 200, body)
        # 1,100 parts: ListParts pages through them 1,000 at a time, in order.
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            codes = list(pool.map(lambda n: self.signed("PUT", base + str(n), b"p%d" % n)[0], range(1, 1100)))
        self.assertEqual(set(codes), {200})
        numbers, marker = [], 0
        while True:
            r = s3.list_parts(Bucket=self.bucket, Key="parts/obj", UploadId=up, PartNumberMarker=marker)
            numbers += [p["PartNumber"] for p in r["Parts"]]
            if not r["IsTruncated"]:
                break
            marker = r["NextPartNumberMarker"]
        self.assertEqual(numbers, list(range(1, 1100)) + [10000])
        # Parts under 5 MiB make a too-small object; the upload stays until aborted.
        parts = [{"PartNumber": n, "ETag": '"%s"' % hashlib.md5(b"p%d" % n).hexdigest()} for n in (1, 2)]
        status, body, _ = self.signed("POST", "/%s/parts/obj?uploadId=%s" % (self.bucket, up), complete_xml(parts))
        self.assertCode((status, body), 400, "EntityTooSmall")
        s3.abort_multipart_upload(Bucket=self.bucket, Key="parts/obj", UploadId=up)
        self.assertCode(self.signed("GET", "/%s/parts/obj?uploadId=%s" % (self.bucket, up)), 404, "NoSuchUpload")
        self.assertNothingLeft()


def complete_xml(parts):
    body = "".join("<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>" % (p["PartNumber"], p["ETag"])
                   for p in parts)
    return ("<CompleteMultipartUpload>%s</CompleteMultipartUpload>" % body).encode()


if __name__ == "__main__":
    import harness
    harness.main()
