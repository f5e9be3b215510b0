"""The gateway's S3 API in detail, item by item of issue 23, through awscli, boto3 and raw
botocore-signed requests, with a FUSE mount of the same volume checking what lands there:
--multi-buckets and --subdir, listing (V1 and V2, S3's byte order across pages, markers,
start-after, encoding-type=url, fetch-owner), ranges (suffix, open, 416), conditional GETs
and copy sources, DeleteObjects, user metadata and content type, ETags kept across a rename
through the mount, directories ("dir/" objects, a key under a file), boto3's checksums,
presigned URLs, virtual-host style requests (--domain) and anonymous access.
"""

import hashlib
import os
import time
import urllib.parse

from gateway_helpers import GatewayTestCase
from harness import wait_for


class GatewayApiTest(GatewayTestCase):
    def put(self, key, body, gw=None, bucket=None, **headers):
        status, out, _ = self.signed("PUT", "/%s/%s" % (bucket or self.bucket, urllib.parse.quote(key)), body, headers,
                                     gw=gw)
        self.assertEqual(status, 200, out)

    def test_multi_buckets(self):
        gw = self.start_gateway("--multi-buckets")
        self.aws("s3", "mb", "s3://team-a", gw=gw)
        self.assertTrue(os.path.isdir(self.vol.path("team-a")), "CreateBucket is a mkdir")
        os.mkdir(self.vol.path("made-by-mount"))
        names = [b["Name"] for b in self.api("list-buckets", gw=gw)["Buckets"]]
        self.assertIn("team-a", names)
        self.assertIn("made-by-mount", names)
        again = self.aws("s3", "mb", "s3://team-a", gw=gw, check=False)
        self.assertIn("BucketAlreadyOwnedByYou", again.stderr)
        bad = self.aws("s3api", "create-bucket", "--bucket", "Bad_Name", gw=gw, check=False)
        self.assertIn("InvalidBucketName", bad.stderr)
        self.put("k/v.txt", b"hello", gw=gw, bucket="team-a")
        with open(self.vol.path("team-a/k/v.txt"), "rb") as f:
            self.assertEqual(f.read(), b"hello")
        busy = self.aws("s3api", "delete-bucket", "--bucket", "team-a", gw=gw, check=False)
        self.assertIn("BucketNotEmpty", busy.stderr)
        self.assertTrue(os.path.isdir(self.vol.path("team-a/k")))
        missing = self.aws("s3api", "list-objects-v2", "--bucket", "no-such-bucket", gw=gw, check=False)
        self.assertIn("NoSuchBucket", missing.stderr)
        self.aws("s3", "rm", "s3://team-a/k/v.txt", gw=gw)
        self.aws("s3api", "delete-bucket", "--bucket", "team-a", gw=gw)
        self.assertFalse(os.path.exists(self.vol.path("team-a")))
        # The default gateway serves the volume as one bucket and refuses others.
        other = self.aws("s3", "mb", "s3://another", check=False)
        self.assertNotEqual(other.returncode, 0)

    def test_subdir(self):
        os.makedirs(self.vol.path("exports/ds"))
        with open(self.vol.path("outside.txt"), "w") as f:
            f.write("not served")
        gw = self.start_gateway("--subdir", "exports")
        self.put("ds/new.txt", b"inside", gw=gw)
        with open(self.vol.path("exports/ds/new.txt"), "rb") as f:
            self.assertEqual(f.read(), b"inside")
        keys = [c["Key"] for c in self.api("list-objects-v2", "--bucket", self.bucket, gw=gw)["Contents"]]
        self.assertEqual(keys, ["ds/new.txt"])
        status, body, _ = self.signed("GET", "/%s/../outside.txt" % self.bucket, gw=gw)
        self.assertNotEqual(status, 200)
        self.assertNotIn(b"not served", body)

    def test_listing_order_pages_and_encodings(self):
        # A directory walk gives "a/" before "a-b"; S3 sorts by bytes: "a-b" < "a.c" < "a/".
        keys = ["a/b", "a-b", "a.c", "a/c/d", "a/c/e", "ba", "b/x y+z&", "caf\u00e9", "z/1", "z/2"]
        for k in keys:
            self.put(k, k.encode())
        # An empty directory is the object "name/" (as a PUT of "name/" makes one), listed
        # like any key; a directory with objects below is only their prefix.
        os.makedirs(self.vol.path("z/empty-dir-from-mount"))
        dirs = ["z/empty-dir-from-mount/", os.path.basename(self.work) + "/"]
        want = sorted(keys + dirs, key=lambda k: k.encode())
        s3 = self.boto3()
        for page_size in (1, 3, 1000):
            got, token, pages = [], None, 0
            while True:
                kw = {"ContinuationToken": token} if token else {}
                r = s3.list_objects_v2(Bucket=self.bucket, MaxKeys=page_size, **kw)
                got += [c["Key"] for c in r.get("Contents", [])]
                pages += 1
                if not r["IsTruncated"]:
                    break
                token = r["NextContinuationToken"]
            self.assertEqual(got, want, "page size %d" % page_size)
            self.assertEqual(pages, -(-len(want) // page_size))
        # V1 with markers, V2 with start-after, both with a prefix and a delimiter.
        r = s3.list_objects(Bucket=self.bucket, Marker="a/c/d")
        self.assertEqual([c["Key"] for c in r["Contents"]], want[want.index("a/c/d") + 1:])
        self.assertIn("Owner", r["Contents"][0], "V1 always gives the owner")
        r = s3.list_objects_v2(Bucket=self.bucket, StartAfter="b", FetchOwner=True)
        self.assertEqual([c["Key"] for c in r["Contents"]], [k for k in want if k.encode() > b"b"])
        self.assertIn("Owner", r["Contents"][0])
        self.assertNotIn("Owner", s3.list_objects_v2(Bucket=self.bucket)["Contents"][0])
        r = s3.list_objects_v2(Bucket=self.bucket, Delimiter="/")
        self.assertEqual([c["Key"] for c in r["Contents"]], ["a-b", "a.c", "ba", "caf\u00e9"])
        self.assertEqual([p["Prefix"] for p in r["CommonPrefixes"]],
                         ["a/", "b/", os.path.basename(self.work) + "/", "z/"])
        r = s3.list_objects_v2(Bucket=self.bucket, Prefix="a/", Delimiter="/")
        self.assertEqual([c["Key"] for c in r["Contents"]], ["a/b"])
        self.assertEqual([p["Prefix"] for p in r["CommonPrefixes"]], ["a/c/"])
        r = s3.list_objects(Bucket=self.bucket, Prefix="z/", Delimiter="/", MaxKeys=1)
        self.assertTrue(r["IsTruncated"])
        self.assertEqual(r["NextMarker"], "z/1")
        # encoding-type=url, as raw XML: the special key comes back percent-encoded.
        status, body, _ = self.signed("GET", "/%s?list-type=2&prefix=b%%2F&encoding-type=url" % self.bucket)
        self.assertEqual(status, 200, body)
        self.assertIn(b"<EncodingType>url</EncodingType>", body)
        self.assertIn(b"<Key>b/x%20y%2Bz%26</Key>", body)
        status, body, _ = self.signed("GET", "/%s?list-type=2&encoding-type=base64" % self.bucket)
        self.assertEqual(status, 400)
        self.assertIn(b"InvalidArgument", body)

    def test_ranges_conditions_and_batch_delete(self):
        data = os.urandom(10000)
        self.put("r/obj", data)
        s3 = self.boto3()
        etag = s3.head_object(Bucket=self.bucket, Key="r/obj")["ETag"]
        self.assertEqual(etag.strip('"'), hashlib.md5(data).hexdigest())
        for rng, want in (("bytes=-100", data[-100:]), ("bytes=9990-", data[9990:]), ("bytes=0-0", data[:1]),
                          ("bytes=-20000", data), ("bytes=9000-20000", data[9000:])):
            r = s3.get_object(Bucket=self.bucket, Key="r/obj", Range=rng)
            self.assertEqual(r["Body"].read(), want, rng)
            self.assertEqual(r["ResponseMetadata"]["HTTPStatusCode"], 206, rng)
        status, body, headers = self.signed("GET", "/%s/r/obj" % self.bucket, headers={"Range": "bytes=10000-"})
        self.assertEqual(status, 416, body)
        self.assertIn(b"<Code>InvalidRange</Code>", body)
        self.assertEqual(headers.get("Content-Range"), "bytes */10000")
        # Conditional GET and HEAD.
        cases = [({"If-Match": etag}, 200), ({"If-Match": '"0000"'}, 412), ({"If-None-Match": etag}, 304),
                 ({"If-None-Match": '"0000"'}, 200), ({"If-Modified-Since": "Sun, 01 Jan 2090 00:00:00 GMT"}, 304),
                 ({"If-Unmodified-Since": "Sat, 01 Jan 2000 00:00:00 GMT"}, 412),
                 ({"If-Modified-Since": "Sat, 01 Jan 2000 00:00:00 GMT"}, 200)]
        for method in ("GET", "HEAD"):
            for headers, want in cases:
                status, _, _ = self.signed(method, "/%s/r/obj" % self.bucket, headers=headers)
                self.assertEqual(status, want, (method, headers))
        # Copy-source conditions.
        status, body, _ = self.signed("PUT", "/%s/r/copy" % self.bucket, headers={
            "x-amz-copy-source": "/%s/r/obj" % self.bucket, "x-amz-copy-source-if-match": '"0000"'})
        self.assertEqual(status, 412, body)
        self.assertFalse(os.path.exists(self.vol.path("r/copy")))
        status, body, _ = self.signed("PUT", "/%s/r/copy" % self.bucket, headers={
            "x-amz-copy-source": "/%s/r/obj" % self.bucket, "x-amz-copy-source-if-none-match": '"0000"'})
        self.assertEqual(status, 200, body)
        # DeleteObjects: keys that do not exist are reported deleted too, as S3 does.
        r = s3.delete_objects(Bucket=self.bucket, Delete={"Objects": [{"Key": "r/obj"}, {"Key": "r/copy"},
                                                                      {"Key": "r/never-was"}]})
        self.assertEqual(sorted(d["Key"] for d in r["Deleted"]), ["r/copy", "r/never-was", "r/obj"])
        self.assertNotIn("Errors", r)
        # (The mount's entry cache may keep the directory for its 1 s timeout.)
        self.assertTrue(wait_for(lambda: not os.path.exists(self.vol.path("r")), timeout=10),
                        "the directory the gateway made goes with its objects")

    def test_edge_cases(self):
        # (Found by test_gateway_diff.py against radosgw; kept here so they run without Ceph.)
        self.put("e/d/f", b"hello")
        etag = '"%s"' % hashlib.md5(b"hello").hexdigest()
        # A 304 carries the ETag a 200 would have.
        status, _, headers = self.signed("GET", "/%s/e/d/f" % self.bucket, headers={"If-None-Match": etag})
        self.assertEqual((status, headers.get("ETag")), (304, etag))
        # An unparsable Range is ignored, as S3 does: the whole object.
        for rng in ("bytes=3-1", "bytes=x-1", "pages=1-2"):
            status, body, _ = self.signed("GET", "/%s/e/d/f" % self.bucket, headers={"Range": rng})
            self.assertEqual((status, body), (200, b"hello"), rng)
        # The directory made for e/d/f is only a prefix, not an object "e/d/".
        self.assertEqual(self.signed("HEAD", "/%s/e/d/" % self.bucket)[0], 404)
        # A refused conditional write makes no directories.
        status, _, _ = self.signed("PUT", "/%s/x/y/z" % self.bucket, b"1", {"If-Match": '"%s"' % ("0" * 32)})
        self.assertEqual(status, 412)
        self.assertFalse(os.path.exists(self.vol.path("x")))
        self.assertNotIn("x/", [p["Prefix"] for p in self.boto3().list_objects_v2(
            Bucket=self.bucket, Delimiter="/").get("CommonPrefixes", [])])
        # Conditional PUTs of "dir/" objects.
        self.assertEqual(self.signed("PUT", "/%s/m/" % self.bucket, b"")[0], 200)
        self.assertEqual(self.signed("PUT", "/%s/m/" % self.bucket, b"", {"If-None-Match": "*"})[0], 412)
        self.assertEqual(self.signed("PUT", "/%s/n/" % self.bucket, b"", {"If-Match": '"%s"' % ("0" * 32)})[0], 412)
        self.assertFalse(os.path.exists(self.vol.path("n")))
        # Names starting with ".tierfs-" are keys like any other (TierFS's own S3 client
        # probes a store with one); only the gateway's directory at the top is reserved.
        self.put("e/.tierfs-probe.1234", b"probe")
        with open(self.vol.path("e/.tierfs-probe.1234"), "rb") as f:
            self.assertEqual(f.read(), b"probe")
        status, body, _ = self.signed("PUT", "/%s/.tierfs-gateway/x" % self.bucket, b"no")
        self.assertEqual(status, 400, body)
        # GetObjectTagging: TierFS keeps no tags, so an object has none (awscli asks when it
        # copies between buckets).
        self.assertEqual(self.boto3().get_object_tagging(Bucket=self.bucket, Key="e/d/f")["TagSet"], [])

    def test_unsupported_apis_answer_as_the_readme_says(self):
        from botocore.exceptions import ClientError
        s3 = self.boto3()
        s3.put_object(Bucket=self.bucket, Key="u/obj", Body=b"x")
        self.assertNotIn("Status", s3.get_bucket_versioning(Bucket=self.bucket))
        calls = [
            (lambda: s3.put_bucket_versioning(Bucket=self.bucket, VersioningConfiguration={"Status": "Enabled"}),
             "NotImplemented"),
            (lambda: s3.list_object_versions(Bucket=self.bucket), "NotImplemented"),
            (lambda: s3.put_object_tagging(Bucket=self.bucket, Key="u/obj", Tagging={"TagSet": []}), "NotImplemented"),
            (lambda: s3.put_object_acl(Bucket=self.bucket, Key="u/obj", ACL="private"), "NotImplemented"),
            (lambda: s3.get_bucket_policy(Bucket=self.bucket), "NoSuchBucketPolicy"),
            (lambda: s3.get_bucket_lifecycle_configuration(Bucket=self.bucket), "NoSuchLifecycleConfiguration"),
            (lambda: s3.put_bucket_policy(Bucket=self.bucket, Policy="{}"), "NotImplemented"),
            (lambda: s3.get_object_retention(Bucket=self.bucket, Key="u/obj"), "NotImplemented"),
        ]
        for i, (call, code) in enumerate(calls):
            with self.assertRaises(ClientError, msg="call %d" % i) as cm:
                call()
            self.assertEqual(cm.exception.response["Error"]["Code"], code)
        # partNumber=1 of an object not uploaded in parts is the whole object, as in S3.
        self.assertEqual(s3.get_object(Bucket=self.bucket, Key="u/obj", PartNumber=1)["Body"].read(), b"x")
        self.assertEqual(s3.get_object_acl(Bucket=self.bucket, Key="u/obj")["Grants"][0]["Permission"], "FULL_CONTROL")

    def test_a_listing_reads_no_file_data(self):
        # 40 files of 1 MiB written through the mount, never seen by the gateway: a listing
        # gives them ETags from their identity ("-1": not an MD5) without reading them; a
        # HEAD computes the MD5, which later listings give.
        os.makedirs(self.vol.path("ls"))
        for i in range(40):
            with open(self.vol.path("ls/f%02d" % i), "wb") as f:
                f.write(os.urandom(1 << 20))
        before = rchar(self.gw.proc.pid)
        listed = self.boto3().list_objects_v2(Bucket=self.bucket, Prefix="ls/")["Contents"]
        self.assertLess(rchar(self.gw.proc.pid) - before, 8 << 20)
        self.assertEqual(len(listed), 40)
        self.assertTrue(all(o["ETag"].strip('"').endswith("-1") for o in listed), listed[0])
        with open(self.vol.path("ls/f00"), "rb") as f:
            md5 = hashlib.md5(f.read()).hexdigest()
        self.assertEqual(self.boto3().head_object(Bucket=self.bucket, Key="ls/f00")["ETag"].strip('"'), md5)
        listed = self.boto3().list_objects_v2(Bucket=self.bucket, Prefix="ls/", MaxKeys=1)["Contents"]
        self.assertEqual(listed[0]["ETag"].strip('"'), md5)

    def test_a_multipart_copy_reads_nothing(self):
        # awscli copies objects over 8 MiB between keys with UploadPartCopy: the parts share
        # the source's slices and the gateway reads none of its bytes (rchar: every byte its
        # read calls returned, SQLite's pages included).
        data = os.urandom(30 << 20)
        os.makedirs(self.vol.path("cp"))
        with open(self.vol.path("cp/src"), "wb") as f:
            f.write(data)
        self.aws("s3api", "head-object", "--bucket", self.bucket, "--key", "cp/src")  # its MD5, read once

        before = rchar(self.gw.proc.pid)
        self.aws("s3", "cp", "s3://%s/cp/src" % self.bucket, "s3://%s/cp/dst" % self.bucket)
        self.assertLess(rchar(self.gw.proc.pid) - before, 8 << 20)
        with open(self.vol.path("cp/dst"), "rb") as f:
            self.assertEqual(f.read(), data)
        head = self.api("head-object", "--bucket", self.bucket, "--key", "cp/dst")
        self.assertTrue(head["ETag"].strip('"').endswith("-4"), head["ETag"])

    def test_metadata_etags_and_directories(self):
        s3 = self.boto3()
        s3.put_object(Bucket=self.bucket, Key="m/doc.json", Body=b"{}", ContentType="application/json",
                      Metadata={"team": "vision", "run": "42"}, ContentDisposition="attachment")
        h = s3.head_object(Bucket=self.bucket, Key="m/doc.json")
        self.assertEqual(h["ContentType"], "application/json")
        self.assertEqual(h["Metadata"], {"team": "vision", "run": "42"})
        self.assertEqual(h["ContentDisposition"], "attachment")
        # Renamed through the mount: the ETag and metadata travel with the file.
        os.rename(self.vol.path("m/doc.json"), self.vol.path("m/renamed.json"))
        h2 = s3.head_object(Bucket=self.bucket, Key="m/renamed.json")
        self.assertEqual(h2["ETag"], h["ETag"])
        self.assertEqual(h2["Metadata"], h["Metadata"])
        # Changed through the mount: the stored ETag is not trusted any more.
        with open(self.vol.path("m/renamed.json"), "wb") as f:
            f.write(b"[1]")
        h3 = s3.head_object(Bucket=self.bucket, Key="m/renamed.json")
        self.assertEqual(h3["ETag"].strip('"'), hashlib.md5(b"[1]").hexdigest())
        # "dir/" with an empty body is a directory; a key under a file is refused.
        s3.put_object(Bucket=self.bucket, Key="newdir/", Body=b"")
        self.assertTrue(os.path.isdir(self.vol.path("newdir")))
        r = s3.list_objects_v2(Bucket=self.bucket, Prefix="newdir/")
        self.assertEqual([c["Key"] for c in r["Contents"]], ["newdir/"])
        status, body, _ = self.signed("PUT", "/%s/m/renamed.json/child" % self.bucket, b"x")
        self.assertEqual(status, 409, body)
        self.assertIn(b"<Code>ParentIsObject</Code>", body)
        status, body, _ = self.signed("PUT", "/%s/newdir/" % self.bucket, b"not empty")
        self.assertEqual(status // 100, 4, body)

    def test_boto3_checksums(self):
        s3 = self.boto3()
        data = os.urandom(200000)
        from botocore.exceptions import MissingDependencyException
        tried = []
        for algo in ("CRC32", "CRC32C", "SHA1", "SHA256"):
            key = "sums/" + algo
            try:
                put = s3.put_object(Bucket=self.bucket, Key=key, Body=data, ChecksumAlgorithm=algo)
            except MissingDependencyException:  # newer botocore computes CRC32C only with awscrt
                continue
            tried.append(algo)
            self.assertIn("Checksum" + algo, put, "the checksum is returned")
            got = s3.get_object(Bucket=self.bucket, Key=key, ChecksumMode="ENABLED")
            self.assertEqual(got["Body"].read(), data)  # botocore verifies the returned checksum while reading
            self.assertEqual(got["Checksum" + algo], put["Checksum" + algo])
        self.assertIn("SHA256", tried)
        # upload_file / download_file: boto3's transfer manager, multipart above 8 MiB.
        src = os.path.join(self.vol.dir, "big")
        with open(src, "wb") as f:
            f.write(os.urandom(17 << 20))
        s3.upload_file(src, self.bucket, "sums/big")
        dst = os.path.join(self.vol.dir, "big.back")
        s3.download_file(self.bucket, "sums/big", dst)
        with open(src, "rb") as a, open(dst, "rb") as b, open(self.vol.path("sums/big"), "rb") as c:
            da = a.read()
            self.assertEqual(da, b.read())
            self.assertEqual(da, c.read())

    def test_presigned_urls(self):
        self.put("p/obj", b"presigned")
        url = self.aws("s3", "presign", "s3://%s/p/obj" % self.bucket, "--expires-in", "60").stdout.strip()
        status, body, _ = self.raw("GET", url)
        self.assertEqual((status, body), (200, b"presigned"))
        short = self.aws("s3", "presign", "s3://%s/p/obj" % self.bucket, "--expires-in", "1").stdout.strip()
        time.sleep(2.5)
        status, body, _ = self.raw("GET", short)
        self.assertEqual(status, 403, body)
        self.assertIn(b"<Code>AccessDenied</Code>", body)
        self.assertIn(b"expired", body)
        tampered = url.replace("p%2Fobj", "p%2Fother").replace("/p/obj", "/p/other")
        status, body, _ = self.raw("GET", tampered)
        self.assertEqual(status, 403, body)
        self.assertIn(b"SignatureDoesNotMatch", body)
        too_long = url.replace("X-Amz-Expires=60", "X-Amz-Expires=604801")
        status, body, _ = self.raw("GET", too_long)
        self.assertEqual(status, 400, body)
        self.assertIn(b"AuthorizationQueryParametersError", body)

    def test_virtual_host_and_anonymous(self):
        gw = self.start_gateway("--domain", "s3.test", "--anonymous")
        self.put("v/obj", b"virtual host")
        host = "%s.s3.test:%d" % (self.bucket, gw.port)
        status, body, _ = self.signed("GET", "/v/obj", headers={"Host": host}, gw=gw)
        self.assertEqual((status, body), (200, b"virtual host"))
        # Anonymous requests read, and only read.
        status, body, _ = self.raw("GET", "%s/%s/v/obj" % (gw.endpoint, self.bucket))
        self.assertEqual((status, body), (200, b"virtual host"))
        status, body, _ = self.raw("PUT", "%s/%s/v/anon" % (gw.endpoint, self.bucket), b"x")
        self.assertEqual(status, 403, body)
        self.assertFalse(os.path.exists(self.vol.path("v/anon")))
        # Without --anonymous an unsigned request is refused.
        status, body, _ = self.raw("GET", "%s/%s/v/obj" % (self.gw.endpoint, self.bucket))
        self.assertEqual(status, 403, body)
        self.assertIn(b"AccessDenied", body)


def rchar(pid):
    """Bytes a process's read calls returned (/proc/PID/io), page-cache hits included."""
    with open("/proc/%d/io" % pid) as f:
        return int(next(line for line in f if line.startswith("rchar")).split()[1])


if __name__ == "__main__":
    import harness
    harness.main()
