"""Running the gateway: HTTPS with a certificate of our own (and a clear error for a bad
one), the access log, Prometheus metrics by API call, a graceful stop that finishes the
upload in flight, `--help` naming every option, bad command lines, two gateways and a mount
agreeing on one volume (conditional writes across gateways have one winner), and s3fs
mounting the gateway.
"""

import concurrent.futures
import os
import re
import signal
import subprocess
import time
import urllib.request

import harness
from gateway_helpers import AWS, Gateway, GatewayTestCase, aws_env, free_port
from harness import wait_for


class GatewayOpsTest(GatewayTestCase):
    def test_https(self):
        cert, key = os.path.join(self.vol.dir, "cert.pem"), os.path.join(self.vol.dir, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
                        "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", cert],
                       check=True, capture_output=True)
        gw = self.start_gateway("--cert-file", cert, "--key-file", key, scheme="https")
        src = os.path.join(self.vol.dir, "tls.txt")
        with open(src, "w") as f:
            f.write("over tls")
        self.aws("s3", "cp", src, "s3://%s/tls.txt" % self.bucket, gw=gw, extra_args=["--ca-bundle", cert])
        with open(self.vol.path("tls.txt")) as f:
            self.assertEqual(f.read(), "over tls")
        # Plain HTTP to the HTTPS port is not served; an unknown CA is refused by the client.
        p = self.aws("s3", "ls", gw=gw, check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("SSL", p.stderr.upper())
        # A key that is not the certificate's: the gateway says so and exits.
        other = os.path.join(self.vol.dir, "other.pem")
        subprocess.run(["openssl", "genrsa", "-out", other, "2048"], check=True, capture_output=True)
        p = subprocess.run([harness.tierfs_bin(), "gateway", self.vol.meta_url, "127.0.0.1:%d" % free_port(),
                            "--cache-dir", "memory", "--anonymous", "--cert-file", cert, "--key-file", other],
                           capture_output=True, text=True, timeout=60)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("do not match", p.stderr)

    def test_access_log_and_metrics(self):
        alog = os.path.join(self.vol.dir, "access.log")
        mport = free_port()
        gw = self.start_gateway("--access-log", alog, "--metrics", "127.0.0.1:%d" % mport)
        data = os.urandom(123456)
        src = os.path.join(self.vol.dir, "m.bin")
        with open(src, "wb") as f:
            f.write(data)
        self.aws("s3", "cp", src, "s3://%s/m/m.bin" % self.bucket, gw=gw)
        self.aws("s3", "cp", "s3://%s/m/m.bin" % self.bucket, os.path.join(self.vol.dir, "back.bin"), gw=gw)
        self.aws("s3api", "head-object", "--bucket", self.bucket, "--key", "m/missing", gw=gw, check=False)
        with open(alog) as f:
            lines = f.read().splitlines()
        ops = [line.split()[3] for line in lines]
        for op in ("PutObject", "GetObject", "HeadObject"):
            self.assertIn(op, ops)
        missing = [line for line in lines if "/m/missing" in line]
        self.assertEqual(len(missing), 1)
        self.assertIn(" 404 ", missing[0])
        self.assertIn(" AKIDTEST ", missing[0])
        self.assertEqual(os.stat(alog).st_mode & 0o777, 0o600, "the access log names keys: only its owner reads it")
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % mport, timeout=10) as r:
            text = r.read().decode()

        def sample(name, **labels):
            for line in text.splitlines():
                if line.startswith(name + "{") and all('%s="%s"' % kv in line for kv in labels.items()):
                    return float(line.rsplit(" ", 1)[1])
            return None

        self.assertEqual(sample("tierfs_gateway_request_duration_seconds_count", op="PutObject", status="2xx"), 1)
        self.assertEqual(sample("tierfs_gateway_request_duration_seconds_count", op="HeadObject", status="4xx"), 1)
        self.assertEqual(sample("tierfs_gateway_bytes_total", op="PutObject", direction="in"), len(data))
        self.assertEqual(sample("tierfs_gateway_bytes_total", op="GetObject", direction="out"), len(data))
        # The same client metrics a mount serves.
        self.assertIsNotNone(re.search(r"^tierfs_object_requests_total\{", text, re.M) or
                             re.search(r"^tierfs_meta_", text, re.M), text[:2000])

    def test_graceful_stop_finishes_the_upload_in_flight(self):
        body = os.urandom(3 << 20)
        s = self.open_request("PUT", "/%s/slow.bin" % self.bucket, {"Content-Length": str(len(body))})
        s.sendall(body[:1 << 20])
        time.sleep(0.5)
        self.gw.proc.send_signal(signal.SIGTERM)
        time.sleep(1)
        self.assertIsNone(self.gw.proc.poll(), "the gateway waits for the request in flight")
        s.sendall(body[1 << 20:])
        answer = s.recv(4096)
        s.close()
        self.assertTrue(answer.startswith(b"HTTP/1.1 200"), answer)
        self.assertEqual(self.gw.proc.wait(30), 0)
        self.assertIn("finishing the requests in flight", self.log())
        with open(self.vol.path("slow.bin"), "rb") as f:
            self.assertEqual(f.read(), body)

    def test_help_and_bad_command_lines(self):
        rc, out, err = harness.tierfs("gateway", "--help")
        self.assertEqual(rc, 0, err)
        for opt in ("--multi-buckets", "--subdir", "--access-key", "--secret-key-file", "--anonymous", "--uid", "--gid",
                    "--umask", "--domain", "--cert-file", "--key-file", "--access-log", "--metrics",
                    "--upload-max-age", "--cache-dir", "--cache-group"):
            self.assertIn(opt, out)
        self.assertIn("TIERFS_GATEWAY_SECRET_KEY", out)
        rc, out, err = harness.tierfs("gateway-user", "add", "--help")
        self.assertEqual(rc, 0, err)
        for opt in ("--secret-key-file", "--bucket", "--read-only"):
            self.assertIn(opt, out)
        cases = [(["127.0.0.1"], "ADDR:PORT"), (["127.0.0.1:99999"], "bad port"),
                 (["127.0.0.1:%d" % self.port, "--anonymous"], "cannot listen"),
                 (["127.0.0.1:%d" % free_port(), "--access-key", "AK"], "TIERFS_GATEWAY_SECRET_KEY"),
                 (["127.0.0.1:%d" % free_port(), "--umask", "9z9"], "octal")]
        env = {k: v for k, v in os.environ.items() if k != "TIERFS_GATEWAY_SECRET_KEY"}
        for args, want in cases:
            p = subprocess.run([harness.tierfs_bin(), "gateway", self.vol.meta_url] + args + ["--cache-dir", "memory"],
                               capture_output=True, text=True, timeout=60, env=env)
            self.assertNotEqual(p.returncode, 0, args)
            self.assertIn(want, p.stderr, args)
        p = subprocess.run([harness.tierfs_bin(), "gateway", "sqlite3://" + os.path.join(self.vol.dir, "none.db"),
                            "127.0.0.1:%d" % free_port(), "--anonymous"], capture_output=True, text=True, timeout=60)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("format", p.stderr)
        # The secret from the environment works as the file does.
        port = free_port()
        gw = subprocess.Popen([harness.tierfs_bin(), "gateway", self.vol.meta_url, "127.0.0.1:%d" % port, "--cache-dir",
                               "memory", "--access-key", "ENVKEY"], env=dict(env, TIERFS_GATEWAY_SECRET_KEY="env-secret"),
                              stderr=subprocess.DEVNULL)
        try:
            ok = wait_for(lambda: subprocess.run([AWS, "--endpoint-url", "http://127.0.0.1:%d" % port, "s3", "ls"],
                                                 capture_output=True, env=aws_env("ENVKEY", "env-secret")).returncode == 0,
                          timeout=30, interval=0.5)
            self.assertTrue(ok)
        finally:
            gw.terminate()
            gw.wait(30)

    def test_two_gateways_and_a_mount_agree(self):
        gw2 = self.start_gateway()
        data = os.urandom(50000)
        src = os.path.join(self.vol.dir, "two.bin")
        with open(src, "wb") as f:
            f.write(data)
        self.aws("s3", "cp", src, "s3://%s/two/a.bin" % self.bucket)
        back = os.path.join(self.vol.dir, "two.back")
        self.aws("s3", "cp", "s3://%s/two/a.bin" % self.bucket, back, gw=gw2)
        with open(back, "rb") as f:
            self.assertEqual(f.read(), data, "the second gateway reads what the first wrote")
        head1 = self.api("head-object", "--bucket", self.bucket, "--key", "two/a.bin")
        head2 = self.api("head-object", "--bucket", self.bucket, "--key", "two/a.bin", gw=gw2)
        self.assertEqual(head1["ETag"], head2["ETag"])
        with open(self.vol.path("two/a.bin"), "rb") as f:
            self.assertEqual(f.read(), data)
        # Written through the mount, listed by both.
        with open(self.vol.path("two/b.txt"), "w") as f:
            f.write("from the mount")
        for gw in (self.gw, gw2):
            keys = [c["Key"] for c in self.api("list-objects-v2", "--bucket", self.bucket, "--prefix", "two/",
                                               gw=gw)["Contents"]]
            self.assertEqual(keys, ["two/a.bin", "two/b.txt"])
        # Writers racing for one new key through two gateways: one wins.
        for round_ in range(4):
            path = "/%s/two/race%d" % (self.bucket, round_)
            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                codes = list(pool.map(lambda i: self.signed("PUT", path, b"w%d" % i, {"If-None-Match": "*"},
                                                            gw=(self.gw, gw2)[i % 2])[0], range(8)))
            self.assertEqual(sorted(codes), [200] + [412] * 7, codes)
        # A multipart upload begun on one gateway is finished on the other.
        s3a, s3b = self.boto3(), self.boto3(gw=gw2)
        up = s3a.create_multipart_upload(Bucket=self.bucket, Key="two/mp")["UploadId"]
        p1 = s3b.upload_part(Bucket=self.bucket, Key="two/mp", UploadId=up, PartNumber=1, Body=b"a" * (5 << 20))
        p2 = s3a.upload_part(Bucket=self.bucket, Key="two/mp", UploadId=up, PartNumber=2, Body=b"b" * 10)
        s3b.complete_multipart_upload(Bucket=self.bucket, Key="two/mp", UploadId=up, MultipartUpload={"Parts": [
            {"PartNumber": 1, "ETag": p1["ETag"]}, {"PartNumber": 2, "ETag": p2["ETag"]}]})
        self.assertEqual(os.path.getsize(self.vol.path("two/mp")), (5 << 20) + 10)

    def test_s3fs_mounts_the_gateway(self):
        mnt = os.path.join(self.vol.dir, "s3fs")
        os.mkdir(mnt)
        pw = os.path.join(self.vol.dir, "s3fs.passwd")
        with open(pw, "w") as f:
            f.write("AKIDTEST:gateway-secret-key\n")
        os.chmod(pw, 0o600)
        p = subprocess.run(["s3fs", self.bucket, mnt, "-o", "url=http://127.0.0.1:%d" % self.port, "-o",
                            "use_path_request_style", "-o", "passwd_file=" + pw, "-o", "dbglevel=warn", "-o",
                            "stat_cache_expire=1"], capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.addCleanup(lambda: subprocess.run(["fusermount3", "-u", mnt], capture_output=True) and None)
        self.assertTrue(wait_for(lambda: harness.is_mounted(mnt), timeout=30))
        data = os.urandom(700000)
        os.makedirs(os.path.join(mnt, "viafs"), exist_ok=True)
        with open(os.path.join(mnt, "viafs", "f.bin"), "wb") as f:
            f.write(data)
        # s3fs uploads on close: the TierFS mount reads the object at once.
        with open(self.vol.path("viafs/f.bin"), "rb") as f:
            self.assertEqual(f.read(), data)
        with open(self.vol.path("viafs/g.txt"), "w") as f:
            f.write("from tierfs")
        self.assertTrue(wait_for(lambda: os.path.exists(os.path.join(mnt, "viafs", "g.txt")), timeout=30))
        with open(os.path.join(mnt, "viafs", "g.txt")) as f:
            self.assertEqual(f.read(), "from tierfs")
        self.assertEqual(sorted(os.listdir(os.path.join(mnt, "viafs"))), ["f.bin", "g.txt"])
        os.unlink(os.path.join(mnt, "viafs", "f.bin"))
        self.assertTrue(wait_for(lambda: not os.path.exists(self.vol.path("viafs/f.bin")), timeout=10))


if __name__ == "__main__":
    harness.main()
