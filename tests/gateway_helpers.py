"""Shared pieces of the gateway's tests: starting `tierfs gateway` on a free port and driving
it with Debian's awscli (/usr/bin/aws, awscli 2.x), botocore-signed raw requests and boto3.

A GatewayTestCase gets a fresh volume, mounted, for every test (so what the gateway writes is
checked through the mount) and one gateway, self.gw, started on it with the access key
AKIDTEST; tests start more with self.start_gateway(...).
"""

import json
import os
import socket
import subprocess
import urllib.error
import urllib.request

import harness
from harness import wait_for

AWS = "/usr/bin/aws"
AK = "AKIDTEST"
SECRET = "gateway-secret-key"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def aws_env(ak=AK, secret=SECRET, **extra):
    env = dict(os.environ, AWS_ACCESS_KEY_ID=ak, AWS_SECRET_ACCESS_KEY=secret, AWS_DEFAULT_REGION="us-east-1",
               AWS_CONFIG_FILE="/dev/null", AWS_SHARED_CREDENTIALS_FILE="/dev/null")
    env.pop("AWS_CA_BUNDLE", None)
    env.update(extra)
    return env


class Gateway:
    """One `tierfs gateway` process; stop() (also run at cleanup) sends SIGTERM and waits."""

    def __init__(self, meta_url, workdir, *extra, port=None, access_key=AK, secret=SECRET, scheme="http",
                 name="gateway"):
        self.port = port or free_port()
        self.scheme = scheme
        self.endpoint = "%s://127.0.0.1:%d" % (scheme, self.port)
        self.log_path = os.path.join(workdir, name + ".log")
        args = [harness.tierfs_bin(), "gateway", meta_url, "127.0.0.1:%d" % self.port, "--cache-dir", "memory"]
        if access_key:
            sk = os.path.join(workdir, name + ".secret")
            with open(sk, "w") as f:
                f.write(secret + "\n")
            os.chmod(sk, 0o600)
            args += ["--access-key", access_key, "--secret-key-file", sk]
        self.args = args + list(extra)
        self._logf = open(self.log_path, "w")
        self.proc = subprocess.Popen(self.args, stdout=subprocess.DEVNULL, stderr=self._logf)
        if not wait_for(self.listening, timeout=30) or self.proc.poll() is not None:
            self.stop()
            raise AssertionError("the gateway did not start:\n" + self.log())

    def listening(self):
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return self.proc.poll() is not None  # died: the caller reads the log

    def stop(self, timeout=60):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._logf.close()
        return self.proc.returncode

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()


class GatewayTestCase(harness.TierFSTestCase):
    PER_TEST = True
    GATEWAY_ARGS = ()

    def setUp(self):
        super().setUp()
        if not os.path.exists(AWS):
            self.skipTest("awscli is not installed (scripts/install-deps.sh installs it)")
        self.gw = self.start_gateway(*self.GATEWAY_ARGS)
        self.port = self.gw.port
        self.bucket = self.vol.name  # one bucket, named after the volume, unless --multi-buckets

    def start_gateway(self, *extra, **kw):
        kw.setdefault("name", "gateway%d" % len(getattr(self, "_gateways", [])))
        gw = Gateway(self.vol.meta_url, self.vol.dir, *extra, **kw)
        self._gateways = getattr(self, "_gateways", []) + [gw]
        self.addCleanup(gw.stop)
        return gw

    def log(self, gw=None):
        return (gw or self.gw).log()

    def aws(self, *args, secret=SECRET, ak=AK, check=True, gw=None, env=None, extra_args=()):
        gw = gw or self.gw
        p = subprocess.run([AWS, "--endpoint-url", gw.endpoint] + list(extra_args) + list(args), capture_output=True,
                           text=True, env=aws_env(ak, secret, **(env or {})), timeout=300)
        if check:
            self.assertEqual(p.returncode, 0, "aws %s: %s%s\ngateway log:\n%s" % (" ".join(args), p.stdout, p.stderr,
                                                                                 gw.log()[-3000:]))
        return p

    def api(self, *args, **kw):
        out = self.aws("s3api", *args, **kw).stdout
        return json.loads(out) if out.strip() else {}

    def boto3(self, gw=None, ak=AK, secret=SECRET, **config):
        """A boto3 S3 client with the SDK's defaults (checksums, retries) unless config says."""
        import boto3
        from botocore.config import Config
        gw = gw or self.gw
        return boto3.client("s3", endpoint_url=gw.endpoint, aws_access_key_id=ak, aws_secret_access_key=secret,
                            region_name="us-east-1", config=Config(**config) if config else None)

    def signed(self, method, path, body=b"", headers=None, gw=None, ak=AK, secret=SECRET, sign=True):
        """One request (path may include a query) signed with SigV4 by botocore, sent raw;
        returns (status, body bytes, headers)."""
        from botocore.auth import S3SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials
        gw = gw or self.gw
        url = "http://127.0.0.1:%d%s" % (gw.port, path)
        headers = dict(headers or {})
        if sign:
            req = AWSRequest(method=method, url=url, data=body, headers=headers)
            S3SigV4Auth(Credentials(ak, secret), "s3", "us-east-1").add_auth(req)
            headers = dict(req.headers.items())
        return self.raw(method, url, body, headers)

    def open_request(self, method, path, headers, gw=None):
        """Sends a request's head (signed with x-amz-content-sha256: UNSIGNED-PAYLOAD, so the
        body can follow at any pace, or not at all) on a new connection, and returns the socket."""
        from botocore.auth import S3SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials

        class Unsigned(S3SigV4Auth):
            def _should_sha256_sign_payload(self, request):
                return False

        gw = gw or self.gw
        req = AWSRequest(method=method, url="http://127.0.0.1:%d%s" % (gw.port, path), data=b"", headers=headers)
        Unsigned(Credentials(AK, SECRET), "s3", "us-east-1").add_auth(req)
        lines = ["%s %s HTTP/1.1" % (method, path), "Host: 127.0.0.1:%d" % gw.port]
        lines += ["%s: %s" % kv for kv in req.headers.items() if kv[0].lower() != "host"]
        s = socket.create_connection(("127.0.0.1", gw.port), timeout=60)
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        return s

    def raw(self, method, url, body=b"", headers=None):
        prepared = urllib.request.Request(url, data=body if method in ("PUT", "POST") else None,
                                          headers=dict(headers or {}), method=method)
        try:
            with urllib.request.urlopen(prepared, timeout=60) as r:
                return r.status, r.read(), dict(r.headers.items())
        except urllib.error.HTTPError as e:
            return e.code, e.read(), dict(e.headers.items())

    def assertS3Error(self, answer, status, code):
        got_status, body = answer[0], answer[1]
        self.assertEqual(got_status, status, body)
        if method_has_body(body):
            self.assertIn(b"<Code>%s</Code>" % code.encode(), body)


def method_has_body(body):
    return bool(body)
