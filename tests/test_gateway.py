"""`tierfs gateway` driven by the clients users run (Debian's awscli at /usr/bin/aws, botocore
for raw signed requests, rclone, s3cmd), with a FUSE mount of the same volume: what one
writes the other reads at once.

Covered so far: ListBuckets, PutObject (awscli's default checksums), GetObject whole and
ranged, HeadObject, CopyObject (its own LastModified), ListObjectsV2 with a delimiter,
DeleteObject (the directory the gateway made for a key goes with its last object, never a
mount user's), ETags of files written through the mount, multipart uploads (awscli's and
s3api's, with S3's error codes), conditional writes racing, gateway users (uid mapping,
permissions, read-only, removal) and a wrong secret refused; all of it on the embedded
default (SQLite and a file bucket) and again over Redis and radosgw. The rest of the API is
in test_gateway_api.py, bad input in test_gateway_bad_input.py, running a gateway (HTTPS,
logs, metrics, stopping, two gateways, s3fs) in test_gateway_ops.py, and the comparison
with radosgw in test_gateway_diff.py.
"""

import hashlib
import json
import os
import subprocess
import time

import harness
from gateway_helpers import AWS, GatewayTestCase
from harness import wait_for


class GatewayTest(GatewayTestCase):
    def test_objects_through_awscli_and_the_mount(self):
        bucket = self.vol.name  # one bucket, named after the volume
        self.assertIn(bucket, self.aws("s3", "ls").stdout)
        data = os.urandom(300 * 1024)
        src = os.path.join(self.vol.dir, "upload.bin")
        with open(src, "wb") as f:
            f.write(data)
        self.aws("s3", "cp", src, "s3://%s/data/upload.bin" % bucket)
        # The mount sees it at once, byte for byte.
        with open(self.vol.path("data/upload.bin"), "rb") as f:
            self.assertEqual(f.read(), data)
        head = self.api("head-object", "--bucket", bucket, "--key", "data/upload.bin")
        self.assertEqual(head["ContentLength"], len(data))
        self.assertEqual(head["ETag"].strip('"'), hashlib.md5(data).hexdigest())
        # Ranged GET.
        out = os.path.join(self.vol.dir, "range.bin")
        got = self.api("get-object", "--bucket", bucket, "--key", "data/upload.bin", "--range", "bytes=1000-1999", out)
        self.assertEqual(got["ContentLength"], 1000)
        with open(out, "rb") as f:
            self.assertEqual(f.read(), data[1000:2000])
        # A file written through the mount has an MD5 ETag when S3 first asks.
        mounted = os.urandom(4096)
        os.makedirs(self.vol.path("fromfuse"))
        with open(self.vol.path("fromfuse/m.bin"), "wb") as f:
            f.write(mounted)
        head = self.api("head-object", "--bucket", bucket, "--key", "fromfuse/m.bin")
        self.assertEqual(head["ETag"].strip('"'), hashlib.md5(mounted).hexdigest())
        # Copy shares the data; listing with a delimiter gives prefixes.
        source = self.api("head-object", "--bucket", bucket, "--key", "data/upload.bin")
        time.sleep(1.1)
        copied = self.api("copy-object", "--bucket", bucket, "--key", "copy.bin", "--copy-source",
                          bucket + "/data/upload.bin")["CopyObjectResult"]
        self.assertNotEqual(copied["LastModified"][:19], source["LastModified"][:19], "a copy has its own LastModified")
        with open(self.vol.path("copy.bin"), "rb") as f:
            self.assertEqual(f.read(), data)
        listing = self.api("list-objects-v2", "--bucket", bucket, "--delimiter", "/")
        self.assertEqual([c["Key"] for c in listing.get("Contents", [])], ["copy.bin"])
        self.assertEqual([p["Prefix"] for p in listing.get("CommonPrefixes", [])],
                         sorted(["data/", "fromfuse/", os.path.basename(self.work) + "/"]))
        # Deleting the last object of data/ removes the directory the gateway made for it;
        # fromfuse/ was made through the mount and stays.
        self.aws("s3", "rm", "s3://%s/data/upload.bin" % bucket)
        self.aws("s3", "rm", "s3://%s/fromfuse/m.bin" % bucket)
        self.assertFalse(os.path.exists(self.vol.path("data")))
        self.assertTrue(os.path.isdir(self.vol.path("fromfuse")))
        missing = self.aws("s3api", "head-object", "--bucket", bucket, "--key", "data/upload.bin", check=False)
        self.assertNotEqual(missing.returncode, 0)
        self.assertIn("404", missing.stderr)

    def test_multipart_uploads(self):
        bucket = self.vol.name
        # awscli splits anything over 8 MiB into 8 MiB parts: 20 MiB is three parts, spliced
        # into one file without copying.
        data = os.urandom(20 << 20)
        src = os.path.join(self.vol.dir, "big.bin")
        with open(src, "wb") as f:
            f.write(data)
        self.aws("s3", "cp", src, "s3://%s/big/big.bin" % bucket)
        with open(self.vol.path("big/big.bin"), "rb") as f:
            self.assertEqual(hashlib.md5(f.read()).hexdigest(), hashlib.md5(data).hexdigest())
        head = self.api("head-object", "--bucket", bucket, "--key", "big/big.bin")
        parts = [data[i:i + (8 << 20)] for i in range(0, len(data), 8 << 20)]
        want = hashlib.md5(b"".join(hashlib.md5(p).digest() for p in parts)).hexdigest() + "-3"
        self.assertEqual(head["ETag"].strip('"'), want)
        # The low-level calls: a part too small in the middle is EntityTooSmall, a wrong ETag
        # InvalidPart, parts out of order InvalidPartOrder; abort leaves nothing behind.
        up = self.api("create-multipart-upload", "--bucket", bucket, "--key", "mp/obj")["UploadId"]
        small = os.path.join(self.vol.dir, "small.bin")
        with open(small, "wb") as f:
            f.write(b"s" * 1024)
        etags = []
        for n in (1, 2):
            r = self.api("upload-part", "--bucket", bucket, "--key", "mp/obj", "--upload-id", up,
                         "--part-number", str(n), "--body", small)
            etags.append(r["ETag"])
        listed = self.api("list-parts", "--bucket", bucket, "--key", "mp/obj", "--upload-id", up)
        self.assertEqual([p["PartNumber"] for p in listed["Parts"]], [1, 2])
        uploads = self.api("list-multipart-uploads", "--bucket", bucket)
        self.assertEqual([u["UploadId"] for u in uploads.get("Uploads", [])], [up])

        def complete(parts):
            doc = json.dumps({"Parts": [{"PartNumber": n, "ETag": e} for n, e in parts]})
            return self.aws("s3api", "complete-multipart-upload", "--bucket", bucket, "--key", "mp/obj",
                            "--upload-id", up, "--multipart-upload", doc, check=False)

        for parts, code in (([(1, etags[0]), (2, etags[1])], "EntityTooSmall"),
                            ([(1, etags[0]), (2, '"00000000000000000000000000000000"')], "InvalidPart"),
                            ([(2, etags[1]), (1, etags[0])], "InvalidPartOrder")):
            p = complete(parts)
            self.assertNotEqual(p.returncode, 0)
            self.assertIn(code, p.stderr)
        # One part is allowed to be small.
        p = complete([(1, etags[0])])
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(self.vol.path("mp/obj"), "rb") as f:
            self.assertEqual(f.read(), b"s" * 1024)
        gone = self.aws("s3api", "list-parts", "--bucket", bucket, "--key", "mp/obj", "--upload-id", up, check=False)
        self.assertIn("NoSuchUpload", gone.stderr)
        up2 = self.api("create-multipart-upload", "--bucket", bucket, "--key", "mp/aborted")["UploadId"]
        self.api("upload-part", "--bucket", bucket, "--key", "mp/aborted", "--upload-id", up2, "--part-number", "1",
                 "--body", small)
        self.aws("s3api", "abort-multipart-upload", "--bucket", bucket, "--key", "mp/aborted", "--upload-id", up2)
        self.assertEqual(self.api("list-multipart-uploads", "--bucket", bucket).get("Uploads", []), [])
        self.assertFalse(os.path.exists(self.vol.path("mp/aborted")))

    def test_conditional_writes_have_one_winner(self):
        # If-None-Match: * is decided in the transaction that publishes the object: of
        # writers racing for a new key exactly one wins, the others get 412.
        import concurrent.futures
        bucket = self.vol.name
        for round_ in range(5):
            key = "/%s/race/k%d" % (bucket, round_)
            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                codes = list(pool.map(lambda i: self.signed("PUT", key, b"writer %d" % i,
                                                           {"If-None-Match": "*"})[0], range(8)))
            self.assertEqual(sorted(codes), [200] + [412] * 7, codes)
        # If-Match: the write happens only over the ETag given.
        status, _, _ = self.signed("PUT", "/%s/race/k0" % bucket, b"new", {"If-Match": '"0123"'})
        self.assertEqual(status, 412)
        etag = self.api("head-object", "--bucket", bucket, "--key", "race/k0")["ETag"]
        status, _, _ = self.signed("PUT", "/%s/race/k0" % bucket, b"new", {"If-Match": etag})
        self.assertEqual(status, 200)
        with open(self.vol.path("race/k0"), "rb") as f:
            self.assertEqual(f.read(), b"new")

    def test_rclone_and_s3cmd(self):
        bucket = self.vol.name
        src = os.path.join(self.vol.dir, "tree")
        os.makedirs(os.path.join(src, "sub"))
        for i in range(3):
            with open(os.path.join(src, "sub", "f%d" % i), "wb") as f:
                f.write(os.urandom(100000 + i))
        env = {k: v for k, v in os.environ.items() if k != "AWS_CA_BUNDLE"}  # rclone refuses it over http
        env.update(RCLONE_CONFIG_GW_TYPE="s3", RCLONE_CONFIG_GW_PROVIDER="Other", RCLONE_CONFIG_GW_ACCESS_KEY_ID="AKIDTEST",
                   RCLONE_CONFIG_GW_SECRET_ACCESS_KEY="gateway-secret-key",
                   RCLONE_CONFIG_GW_ENDPOINT="http://127.0.0.1:%d" % self.port, RCLONE_CONFIG="/dev/null")
        for args in (["copy", src, "gw:%s/rc" % bucket], ["check", src, "gw:%s/rc" % bucket]):
            p = subprocess.run(["rclone"] + args, capture_output=True, text=True, env=env, timeout=120)
            self.assertEqual(p.returncode, 0, p.stderr + self.log()[-2000:])
        for i in range(3):
            with open(os.path.join(src, "sub", "f%d" % i), "rb") as a, open(self.vol.path("rc/sub/f%d" % i), "rb") as b:
                self.assertEqual(a.read(), b.read())
        s3cmd = ["s3cmd", "--config=/dev/null", "--access_key=AKIDTEST", "--secret_key=gateway-secret-key",
                 "--host=127.0.0.1:%d" % self.port, "--host-bucket=127.0.0.1:%d" % self.port, "--no-ssl"]
        p = subprocess.run(s3cmd + ["ls", "-r", "s3://%s/rc/" % bucket], capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(sorted(line.split()[-1] for line in p.stdout.splitlines()),
                         ["s3://%s/rc/sub/f%d" % (bucket, i) for i in range(3)])
        got = os.path.join(self.vol.dir, "got")
        p = subprocess.run(s3cmd + ["get", "s3://%s/rc/sub/f1" % bucket, got], capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(got, "rb") as a, open(os.path.join(src, "sub", "f1"), "rb") as b:
            self.assertEqual(a.read(), b.read())

    def test_gateway_users(self):
        bucket = self.vol.name
        secret = os.path.join(self.vol.dir, "user.secret")
        with open(secret, "w") as f:
            f.write("alice-secret-key\n")
        for ak, extra in (("alice", []), ("reader", ["--read-only"])):
            res = harness.tierfs("gateway-user", "add", self.vol.meta_url, ak, "--secret-key-file", secret, "--uid", "1000",
                                 "--gid", "1000", "--bucket", bucket, *extra)
            self.assertEqual(res[0], 0, harness.msg(*res))
        rc, out, err = harness.tierfs("gateway-user", "list", self.vol.meta_url, "--json")
        self.assertEqual(rc, 0, err)
        listed = json.loads(out)
        self.assertEqual(sorted(u["access_key"] for u in listed), ["alice", "reader"])
        self.assertNotIn("alice-secret-key", out)
        os.mkdir(self.vol.path("home"))
        os.chown(self.vol.path("home"), 1000, 1000)

        def as_user(ak, *args):
            env = dict(os.environ, AWS_ACCESS_KEY_ID=ak, AWS_SECRET_ACCESS_KEY="alice-secret-key",
                       AWS_DEFAULT_REGION="us-east-1", AWS_CONFIG_FILE="/dev/null", AWS_SHARED_CREDENTIALS_FILE="/dev/null")
            return subprocess.run([AWS, "--endpoint-url", "http://127.0.0.1:%d" % self.port] + list(args),
                                  capture_output=True, text=True, env=env, timeout=120)

        src = os.path.join(self.vol.dir, "a.txt")
        with open(src, "w") as f:
            f.write("from alice")
        p = as_user("alice", "s3", "cp", src, "s3://%s/home/a.txt" % bucket)
        self.assertEqual(p.returncode, 0, p.stderr + self.log()[-2000:])
        st = os.stat(self.vol.path("home/a.txt"))
        self.assertEqual((st.st_uid, st.st_gid), (1000, 1000), "objects are made as the user's uid and gid")
        # Permissions are the volume's, checked as the mapped user: this directory is root's.
        os.mkdir(self.vol.path("rootonly"), 0o755)
        p = as_user("alice", "s3", "cp", src, "s3://%s/rootonly/a.txt" % bucket)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("AccessDenied", p.stderr)
        p = as_user("reader", "s3", "cp", "s3://%s/home/a.txt" % bucket, "-")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, "from alice")
        p = as_user("reader", "s3", "cp", src, "s3://%s/home/b.txt" % bucket)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("AccessDenied", p.stderr)
        res = harness.tierfs("gateway-user", "remove", self.vol.meta_url, "alice")
        self.assertEqual(res[0], 0, harness.msg(*res))
        self.assertTrue(wait_for(lambda: "InvalidAccessKeyId" in as_user("alice", "s3", "ls").stderr, timeout=30),
                        "a removed user still works")

    def test_a_wrong_secret_is_refused(self):
        p = self.aws("s3", "ls", secret="not-the-secret", check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("SignatureDoesNotMatch", p.stderr)
        # And nothing else changed: the right secret still works.
        self.aws("s3", "ls")


class GatewayOnRedisAndRadosgwTest(GatewayTest):
    """Every test above again with the volume's metadata in Redis and its data in radosgw
    (the ctest fixture's servers), as a shared deployment runs it."""

    @classmethod
    def new_volume(cls, **kw):
        srv = harness.servers()
        db = harness.REDIS_DB["gateway"]
        port = srv["redis_url"].rsplit(":", 1)[1]
        harness.run("redis-cli", "-p", port, "-n", str(db), "FLUSHDB")
        kw.update(meta_url="%s/%d" % (srv["redis_url"], db), storage=harness.s3_storage_args(harness.unique("gw")))
        return super().new_volume(**kw)


if __name__ == "__main__":
    harness.main()
