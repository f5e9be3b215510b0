#!/usr/bin/env python3
"""A volume on an etcd cluster that speaks only TLS, checks client certificates and has
authentication enabled: etcds:// with ca=, cert= and key=, and a user whose role may read
and write the volume's prefix, over both of the client's APIs (gRPC and the JSON gateway).

Each wrong set-up fails at once with a message that says what is wrong, and writes nothing:
a wrong password, a user without permission on the prefix, a CA that does not sign the
members' certificates, plain etcd:// to a TLS cluster, a TLS file that does not exist."""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import servers  # noqa: E402


def openssl(*args, cwd):
    subprocess.run(["openssl"] + list(args), cwd=cwd, check=True, capture_output=True)


def make_certs(d):
    """A CA, a server certificate for 127.0.0.1 and a client certificate, all signed by it;
    and a second CA that signs nothing the cluster uses."""
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
            "-subj", "/CN=tierfs-test-ca", cwd=d)
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "other.key", "-out", "other.pem", "-days",
            "2", "-subj", "/CN=tierfs-other-ca", cwd=d)
    with open(os.path.join(d, "san.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n")
    # The client's certificate has no CommonName: etcd 3.4's JSON gateway refuses a request
    # whose client certificate has one while authentication is on (it would not be used).
    for name, subject in (("server", "/CN=tierfs-server"), ("client", "/O=tierfs-client")):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", name + ".key", "-out", name + ".csr", "-subj",
                subject, cwd=d)
        openssl("x509", "-req", "-in", name + ".csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out",
                name + ".pem", "-days", "2", "-extfile", "san.ext", cwd=d)
    return {k: os.path.join(d, v) for k, v in (("ca", "ca.pem"), ("cert", "server.pem"), ("key", "server.key"),
                                               ("client_cert", "client.pem"), ("client_key", "client.key"),
                                               ("other_ca", "other.pem"))}


class EtcdTlsTest(harness.TierFSTestCase):
    AUTO_MOUNT = False

    def setUp(self):
        super().setUp()
        self.tmp = self.local_tmpdir()
        self.certs = make_certs(self.tmp)
        self.etcd = servers.Etcd(self.tmp, port=servers.free_ports(2), members=1, name="etcd-tls", tls=self.certs)
        self.addCleanup(self.etcd.stop)
        self.etcd.start()
        ep = self.etcd.endpoint(0)
        c = self.certs
        ctl = ["etcdctl", "--endpoints", "https://" + ep, "--cacert", c["ca"], "--cert", c["client_cert"],
               "--key", c["client_key"]]
        env = dict(os.environ, ETCDCTL_API="3")
        for args in (["user", "add", "root:root-pw-1"], ["user", "grant-role", "root", "root"],
                     ["user", "add", "tf:tf-pw-2"], ["role", "add", "tfrole"],
                     ["role", "grant-permission", "tfrole", "--prefix=true", "readwrite", "tlsvol/"],
                     ["user", "grant-role", "tf", "tfrole"], ["user", "add", "other:other-pw-3"],
                     ["auth", "enable"]):
            r = subprocess.run(ctl + args, env=env, capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, "etcdctl %s: %s%s" % (" ".join(args), r.stdout, r.stderr))
        self.tls_query = "ca=%s&cert=%s&key=%s" % (c["ca"], c["client_cert"], c["client_key"])

    def url(self, user="tf:tf-pw-2", prefix="tlsvol", query=None, scheme="etcds", api="grpc", timeout="10s"):
        return "%s://%s@%s/%s?api=%s&timeout=%s&%s" % (scheme, user, self.etcd.endpoint(0), prefix, api, timeout,
                                                       self.tls_query if query is None else query)

    def test_a_volume_over_tls_with_a_user_and_every_wrong_setup_refused(self):
        vol = harness.Volume("tlsvol", meta_url=self.url(), base=self.tmp)
        self.addCleanup(vol.cleanup)
        vol.format()
        vol.mount()
        with open(os.path.join(vol.mnt, "f"), "w") as f:
            f.write("over tls")
        vol.umount()
        # The JSON gateway reads what gRPC wrote.
        vol.meta_url = self.url(api="json")
        vol.mount()
        with open(os.path.join(vol.mnt, "f")) as f:
            self.assertEqual(f.read(), "over tls")
        vol.umount()
        rc, out, err = harness.tierfs("status", vol.meta_url)
        self.assertEqual(rc, 0, harness.msg(rc, out, err))
        self.assertNotIn("tf-pw-2", out + err)

        bad = [
            ("a wrong password", self.url(user="tf:wrong"), ["authentication failed", "auth"]),
            ("a user without permission on the prefix", self.url(user="other:other-pw-3"), ["permission"]),
            ("a CA that did not sign the members' certificates",
             self.url(query="ca=%s&cert=%s&key=%s" % (self.certs["other_ca"], self.certs["client_cert"],
                                                      self.certs["client_key"])), ["certificate", "ssl", "handshake"]),
            ("no client certificate", self.url(query="ca=%s" % self.certs["ca"]), ["certificate", "ssl", "handshake"]),
            ("plain etcd:// to a TLS cluster", self.url(scheme="etcd", query=""), []),
            ("a CA file that does not exist", self.url(query="ca=/nonexistent/ca.pem"), ["/nonexistent/ca.pem"]),
            ("a client key without its certificate", self.url(query="ca=%s&key=%s" % (self.certs["ca"],
                                                                                     self.certs["client_key"])),
             ["without its certificate"]),
        ]
        for api in ("grpc", "json"):
            for what, url, words in bad:
                # A failure that looks transient is retried until ?timeout=: keep it short.
                url = url.replace("api=grpc", "api=" + api).replace("timeout=10s", "timeout=3s")
                t0 = time.monotonic()
                rc, out, err = harness.tierfs("status", url)
                took = time.monotonic() - t0
                self.assertNotEqual(rc, 0, "%s (%s) was accepted" % (what, api))
                if words:
                    self.assertTrue(any(w in err.lower() for w in words), "%s (%s): %s" % (what, api, err))
                self.assertNotIn("pw", err.replace("password", ""), "a password in the message")
                print("%s over %s: refused in %.2f s: %s" % (what, api, took, err.strip()[-300:]), file=sys.stderr)


if __name__ == "__main__":
    harness.main()
