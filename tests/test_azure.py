"""Volumes on Azure Blob Storage, against Azurite (tests/servers.py): format with
--storage azure, mount, write and read files with cp and dd, each block a blob of exactly
its size in the container (checksums in x-ms-meta-tierfs), the account key and a SAS
token (made here, independently of TierFS, as Azure's documentation specifies), a wrong
key refused at format, and `tierfs objbench --storage azure`.

The blobs are looked at with a small Shared Key client in this file, not through TierFS."""

import base64
import email.utils
import hashlib
import hmac
import http.client
import os
import re
import urllib.parse

import harness
from harness import msg, run, tierfs

MiB = 1 << 20
API_VERSION = "2021-08-06"


def azure():
    srv = harness.servers()
    if not srv.get("azure_endpoint"):
        raise harness.unittest.SkipTest("TIERFS_TEST_AZURE_ENDPOINT is not set (no Azurite)")
    return srv


def account_sas(account, key, permissions="rwdlac"):
    """An account SAS for the blob service (version 2020-12-06 and later string to sign)."""
    q = {"sv": API_VERSION, "ss": "b", "srt": "sco", "sp": permissions, "st": "2020-01-01T00:00:00Z",
         "se": "2099-01-01T00:00:00Z", "spr": "https,http"}
    to_sign = "\n".join([account, q["sp"], q["ss"], q["srt"], q["st"], q["se"], "", q["spr"], q["sv"], ""]) + "\n"
    q["sig"] = base64.b64encode(hmac.new(base64.b64decode(key), to_sign.encode(), hashlib.sha256).digest()).decode()
    return urllib.parse.urlencode(q)


def blob_request(method, path, query=()):
    """A Shared Key request to Azurite; path starts with /ACCOUNT/CONTAINER. Returns
    (status, headers with lowercase names, body)."""
    srv = azure()
    account, key = srv["azure_account"], srv["azure_key"]
    headers = {"x-ms-date": email.utils.formatdate(usegmt=True), "x-ms-version": API_VERSION}
    to_sign = method + "\n" * 12 + "".join("%s:%s\n" % (k, headers[k]) for k in sorted(headers))
    to_sign += "/" + account + path
    for name, value in sorted(query):
        to_sign += "\n%s:%s" % (name, value)
    sig = base64.b64encode(hmac.new(base64.b64decode(key), to_sign.encode(), hashlib.sha256).digest()).decode()
    headers["Authorization"] = "SharedKey %s:%s" % (account, sig)
    url = urllib.parse.urlsplit(srv["azure_endpoint"])
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    try:
        target = path + ("?" + urllib.parse.urlencode(query) if query else "")
        conn.request(method, target, headers=headers)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def list_blobs(container, prefix):
    """{name: size} of the blobs under prefix (one page: tests keep few)."""
    path = "/%s/%s" % (azure()["azure_account"], container)
    status, _, body = blob_request("GET", path, [("comp", "list"), ("prefix", prefix), ("restype", "container")])
    if status != 200:
        raise AssertionError("List Blobs answered %d: %r" % (status, body[:300]))
    text = body.decode()
    names = re.findall(r"<Name>(.*?)</Name>", text)
    sizes = re.findall(r"<Content-Length>(\d+)</Content-Length>", text)
    return dict(zip(names, map(int, sizes)))


class AzureTest(harness.TierFSTestCase):
    PER_TEST = True
    AUTO_MOUNT = False

    def container_url(self, container):
        srv = azure()
        return "%s/%s/%s" % (srv["azure_endpoint"], srv["azure_account"], container)

    def volume(self, container, secret=None):
        storage = ["--storage", "azure", "--bucket", self.container_url(container),
                   "--secret-key", secret or azure()["azure_key"]]
        vol = self.new_volume(name=harness.unique("az"), storage=storage)
        self.addCleanup(vol.cleanup)
        return vol

    def write_read_and_check_blobs(self, vol, container):
        vol.format()
        vol.mount()
        src = os.path.join(self.local_tmpdir(), "src")
        data = os.urandom(9 * MiB + 12345)
        with open(src, "wb") as f:
            f.write(data)
        big = os.path.join(vol.mnt, "big")
        self.assertOk(run("cp", src, big), "cp into the volume")
        self.assertOk(run("dd", "if=" + src, "of=" + os.path.join(vol.mnt, "dd"), "bs=64k", "count=48",
                          "conv=fsync", "status=none"), "dd into the volume")
        with open(os.path.join(vol.mnt, "small"), "w") as f:
            f.write("hello azure\n")
        vol.remount()
        copy = os.path.join(self.local_tmpdir(), "copy")
        self.assertOk(run("cp", big, copy), "cp out of the volume")
        self.assertEqual(harness.file_sha256(copy), hashlib.sha256(data).hexdigest())
        rc, out, err = run("dd", "if=" + os.path.join(vol.mnt, "dd"), "bs=1M", "status=none", "of=" + copy)
        self.assertEqual(rc, 0, msg(rc, out, err))
        with open(copy, "rb") as f:
            self.assertEqual(f.read(), data[:48 * 65536])
        with open(os.path.join(vol.mnt, "small")) as f:
            self.assertEqual(f.read(), "hello azure\n")
        # Each block of the file is a blob of exactly the block's size: the checksums
        # travel as its metadata.
        keys = vol.object_keys(big)
        self.assertEqual(len(keys), 3, keys)
        blobs = list_blobs(container, vol.name + "/")
        for key in keys:
            self.assertIn(key, blobs, "block object %s is not a blob in container %s" % (key, container))
            self.assertEqual(blobs[key], int(key.rsplit("_", 1)[1]), key)
            status, headers, _ = blob_request("HEAD", "/%s/%s/%s" % (azure()["azure_account"], container,
                                                                     urllib.parse.quote(key)))
            self.assertEqual(status, 200, key)
            self.assertTrue(headers.get("x-ms-meta-tierfs"), headers)
        self.assertEqual(sum(blobs[k] for k in keys), len(data))
        st = vol.status_json()
        self.assertEqual(st["storage"], "azure", st)
        vol.umount()
        rc, out, err = tierfs("fsck", vol.meta_url, "--deep")
        self.assertEqual(rc, 0, msg(rc, out, err))

    def test_volume_with_the_account_key(self):
        container = "tierfs-vol-%d" % os.getpid()
        vol = self.volume(container)
        self.write_read_and_check_blobs(vol, container)
        # The key is kept in the volume and never shown.
        rc, out, err = tierfs("config", vol.meta_url)
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.assertIn('"storage": "azure"', out)
        self.assertNotIn(azure()["azure_key"], out + err)

    def test_volume_with_a_sas_token(self):
        srv = azure()
        container = "tierfs-sas-%d" % os.getpid()
        sas = account_sas(srv["azure_account"], srv["azure_key"])
        vol = self.volume(container, secret="sas:" + sas)
        self.write_read_and_check_blobs(vol, container)
        rc, out, err = tierfs("status", vol.meta_url)
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.assertNotIn(sas, out + err)

    def test_a_wrong_key_is_refused_at_format(self):
        wrong = base64.b64encode(b"k" * 64).decode()
        vol = self.volume("tierfs-wrongkey", secret=wrong)
        rc, out, err = vol.format(check=False)
        self.assertNotEqual(rc, 0, msg(rc, out, err))
        self.assertIn("account key of account %s was refused" % azure()["azure_account"], err, msg(rc, out, err))
        self.assertNotIn(wrong, out + err)
        self.assertFalse(os.path.exists(vol.meta_db), "a failed format leaves no database")
        rc, out, err = tierfs("format", "sqlite3://" + vol.meta_db, "v", "--storage", "azure", "--bucket",
                              self.container_url("tierfs-nokey"))
        self.assertNotEqual(rc, 0)
        self.assertIn("--secret-key sas:TOKEN", err, msg(rc, out, err))

    def test_objbench(self):
        srv = azure()
        env = dict(os.environ, TIERFS_SECRET_KEY=srv["azure_key"])
        rc, out, err = run(harness.tierfs_bin(), "objbench", "--storage", "azure",
                           self.container_url("tierfs-objbench"), "--big-count", "16", "--small-count", "200",
                           env=env, timeout=300)
        self.assertEqual(rc, 0, msg(rc, out, err))
        for check in ("put", "get range past end", "multipart upload", "list with paging", "head missing -> ENOENT"):
            self.assertIn("| %s | ok |" % check, out)
        print(out)


if __name__ == "__main__":
    harness.main()
