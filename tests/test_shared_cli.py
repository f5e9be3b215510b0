"""The command line on shared engines and stores (Redis, PostgreSQL, S3 on Ceph's radosgw,
Ceph RADOS): format and mount each combination, objbench, config, and every bad input the
issue names (wrong password, unreachable server, missing database, a database that is not
a TierFS volume, wrong or revoked S3 keys), plus secrets kept out of ps, logs, status and
dump."""

import hashlib
import json
import os
import subprocess
import time

import harness
import servers
from harness import msg, run, tierfs

MiB = 1 << 20


def redis_url(extra_db=0):
    return harness.servers()["redis_url"] + "/%d" % (harness.REDIS_DB["shared_cli"] + extra_db)


def pg_url(db="tierfs_cli", password=None):
    url = harness.servers()["pg_url"] + "/" + db
    if password is not None:
        url = url.replace(":tierfs-test-pw@", ":%s@" % password)
    return url


def radosgw_admin(*args):
    conf = harness.servers()["ceph_conf"]
    return run("radosgw-admin", "-c", conf, *args, timeout=60)


class SharedCliTest(harness.TierFSTestCase):
    PER_TEST = True
    AUTO_MOUNT = False

    def volume(self, meta_url, storage):
        vol = self.new_volume(name=harness.unique("cli"), meta_url=meta_url, storage=storage)
        self.addCleanup(vol.cleanup)
        return vol

    def roundtrip(self, vol):
        vol.format("--force")
        vol.mount()
        data = os.urandom(6 * MiB + 777)
        with open(os.path.join(vol.mnt, "f"), "wb") as f:
            f.write(data)
        os.mkdir(os.path.join(vol.mnt, "d"))
        vol.remount()
        with open(os.path.join(vol.mnt, "f"), "rb") as f:
            self.assertEqual(hashlib.sha256(f.read()).hexdigest(), hashlib.sha256(data).hexdigest())
        info = vol.info_json(os.path.join(vol.mnt, "f"))
        self.assertEqual(info["length"], len(data))
        st = vol.status_json()
        self.assertEqual(len(st["sessions"]), 1)
        vol.umount()
        rc, out, err = tierfs("fsck", vol.meta_url)
        self.assertEqual(rc, 0, msg(rc, out, err))

    # ---- each engine with each shared store -------------------------------------------

    def test_etcd_with_s3(self):
        # The shared three-member test cluster, a prefix of this test's own.
        url = harness.servers()["etcd_url"] + harness.unique("cli").replace("-", "_")
        self.roundtrip(self.volume(url, harness.s3_storage_args(harness.unique("cli"))))

    def test_redis_with_s3(self):
        self.roundtrip(self.volume(redis_url(), harness.s3_storage_args(harness.unique("cli"))))

    def test_postgres_with_rados(self):
        self.roundtrip(self.volume(pg_url(), harness.rados_storage_args()))

    def test_objbench_every_store(self):
        srv = harness.servers()
        env = dict(os.environ, TIERFS_ACCESS_KEY=srv["s3_access_key"], TIERFS_SECRET_KEY=srv["s3_secret_key"])
        urls = [srv["s3_endpoint"] + "/" + harness.unique("objbench"),
                "rados://%s?conf=%s" % (srv["rados_pool"], srv["ceph_conf"])]
        for url in urls:
            rc, out, err = run(harness.tierfs_bin(), "objbench", url, "--big-count", "8", "--small-count", "50",
                               env=env, timeout=300)
            self.assertEqual(rc, 0, msg(rc, out, err))
            self.assertIn("| multipart upload | ok |", out)
            self.assertIn("| list with paging | ok |", out)
            self.assertIn("| put 4.0 MiB |", out)
            self.assertNotIn("FAILED", out)
        rc, out, err = run(harness.tierfs_bin(), "objbench", "ftp://x/y")
        self.assertNotEqual(rc, 0)
        self.assertIn("unknown storage URL scheme", err)

    def s3_head(self, bucket_url, key):
        """The object's HTTP headers (lowercase names), from a signed HEAD by curl."""
        srv = harness.servers()
        rc, out, err = run("curl", "-sS", "-I", "--aws-sigv4", "aws:amz:us-east-1:s3",
                           "--user", "%s:%s" % (srv["s3_access_key"], srv["s3_secret_key"]),
                           "-H", "x-amz-content-sha256: " + hashlib.sha256(b"").hexdigest(), bucket_url + "/" + key)
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.assertIn(" 200", out.splitlines()[0], out)
        return {k.strip().lower(): v.strip() for k, v in
                (line.split(":", 1) for line in out.splitlines()[1:] if ":" in line)}

    def test_s3_block_objects_are_exactly_their_blocks(self):
        """Format version 2 (and 3, the default) keeps each object's checksum table in its S3
        metadata, so a 4 MiB block is a 4 MiB object (radosgw splits anything longer into
        two RADOS objects); version 1 volumes keep the table in front and still work."""
        data = os.urandom(9 * MiB + 12345)
        for version, extra in ((2, 0), (1, 12 + 4 * 64)):
            bucket = harness.unique("layout")
            vol = self.volume(redis_url(), harness.s3_storage_args(bucket))
            vol.format("--force", "--format-version", str(version))
            self.assertEqual(vol.status_json()["format_version"], version)
            vol.mount()
            path = os.path.join(vol.mnt, "f")
            with open(path, "wb") as f:
                f.write(data)
            vol.remount()
            with open(path, "rb") as f:
                self.assertEqual(f.read(), data)
            keys = vol.object_keys(path)
            self.assertEqual(len(keys), 3)
            bucket_url = harness.servers()["s3_endpoint"] + "/" + bucket
            for key in keys:
                block = int(key.rsplit("_", 1)[1])
                h = self.s3_head(bucket_url, key)
                want = block + (extra if block == 4 * MiB else 12 + 4 * ((block + 65535) // 65536))
                self.assertEqual(int(h["content-length"]), want if version == 1 else block, (version, key, h))
                self.assertEqual("x-amz-meta-tierfs" in h, version >= 2, h)
            vol.umount()
            rc, out, err = tierfs("fsck", vol.meta_url, "--deep")
            self.assertEqual(rc, 0, msg(rc, out, err))
        bad = self.volume(redis_url(), harness.s3_storage_args(harness.unique("layout")))
        self.expect_fail("format", bad.meta_url, "v", *bad.storage, "--format-version", "4",
                         contains=["--format-version must be between 1 and 3"])


    def expect_fail(self, *args, contains=(), env=None):
        rc, out, err = run(harness.tierfs_bin(), *args, env=env, timeout=120)
        self.assertNotEqual(rc, 0, "expected failure: %s\n%s" % (args, msg(rc, out, err)))
        for c in contains:
            self.assertIn(c, err, msg(rc, out, err))
        return err

    def test_meta_durability_is_reported_and_can_be_required(self):
        """`tierfs status` says what one server's loss could lose, from each engine's servers;
        `mount --require-safe-meta` refuses an engine that is not safe, saying why."""
        own = servers.Etcd(self.new_volume().dir, port=servers.free_ports(2), members=1, name="etcd-single")
        self.addCleanup(own.stop)
        own.start()
        cases = [
            (None, False, ["one file on this machine"]),  # the embedded default
            (redis_url(1), False, ["appendfsync everysec", "no replica"]),
            (pg_url(), False, ["fsync off", "no synchronous standby"]),
            (own.url(harness.unique("one").replace("-", "_")), False, ["one voting member"]),
            (harness.servers()["etcd_url"] + harness.unique("three").replace("-", "_"), True, []),
            (harness.servers()["etcd_url"] + harness.unique("json").replace("-", "_") + "?api=json", True, []),
        ]
        for url, safe, risks in cases:
            with self.subTest(url=url):
                vol = self.volume(url, None) if url else self.new_volume()
                vol.format("--force")
                d = vol.status_json()["meta_durability"]
                self.assertEqual(d["safe"], safe, d)
                for r in risks:
                    self.assertTrue(any(r in x for x in d["risks"]), (r, d))
                if safe:
                    self.assertIn("3 voting", d["summary"])
                    vol.mount("--require-safe-meta")
                    vol.umount()
                else:
                    res = vol.mount("--require-safe-meta", check=False)
                    self.assertNotEqual(res[0], 0)
                    self.assertIn("--require-safe-meta", res[2], msg(*res))
                    self.assertIn(risks[0], res[2], msg(*res))
                    vol.mount()  # without it: a warning in the log
                    vol.umount()
                    self.assertIn("not safe against one server's loss", vol.log_tail())

    def test_unreachable_servers(self):
        bucket = os.path.join(self.new_volume().dir, "b")
        self.expect_fail("format", "redis://127.0.0.1:1/0", "v", "--bucket", bucket, contains=["127.0.0.1:1"])
        self.expect_fail("format", "postgres://u:p@127.0.0.1:1/db", "v", "--bucket", bucket,
                         contains=["127.0.0.1"])
        err = self.expect_fail("status", "postgres://u:sekrit-pw@127.0.0.1:1/db")
        self.assertNotIn("sekrit-pw", err)
        self.expect_fail("format", redis_url(), "v", "--storage", "s3", "--bucket", "http://127.0.0.1:1/b",
                         "--access-key", "a", "--secret-key", "b", contains=["127.0.0.1:1"])

    def test_wrong_password_and_missing_database(self):
        err = self.expect_fail("status", pg_url(password="wrong-pw"), contains=["authentication failed"])
        self.assertNotIn("wrong-pw", err)
        self.expect_fail("status", pg_url(db="no_such_db"), contains=["no_such_db"])
        srv = harness.servers()
        self.expect_fail("format", redis_url(), "v",
                         "--storage", "s3", "--bucket", srv["s3_endpoint"] + "/" + harness.unique("wrongkey"),
                         "--access-key", srv["s3_access_key"], "--secret-key", "not-the-secret",
                         contains=["access denied"])

    def test_database_that_is_not_a_volume(self):
        db = harness.REDIS_DB["shared_cli"] + 9
        port = harness.servers()["redis_url"].rsplit(":", 1)[1]
        run("redis-cli", "-p", port, "-n", str(db), "FLUSHDB")
        run("redis-cli", "-p", port, "-n", str(db), "SET", "someone-elses-key", "precious")
        foreign = redis_url(9)
        vol = self.new_volume()
        self.addCleanup(vol.cleanup)
        self.expect_fail("format", foreign, "v", "--bucket", vol.bucket, contains=["not a TierFS volume"])
        self.expect_fail("mount", foreign, vol.mnt, contains=["not a TierFS volume"])
        rc, out, err = run("redis-cli", "-p", port, "-n", str(db), "GET", "someone-elses-key")
        self.assertEqual(out.strip(), "precious", "a foreign database was modified")
        run("redis-cli", "-p", port, "-n", str(db), "FLUSHDB")
        # An empty engine holds no volume: a clear error, not a crash.
        self.expect_fail("mount", redis_url(9), vol.mnt, contains=["format"])
        self.expect_fail("status", pg_url(db="tierfs_bench"), contains=["format"])

    def test_revoked_keys_fail_writes_and_config_installs_new_keys(self):
        uid = harness.unique("rot")
        ak1, sk1 = ("AK1" + uid.replace("-", "")).upper()[:20], "secret-one-" + uid
        ak2, sk2 = ("AK2" + uid.replace("-", "")).upper()[:20], "secret-two-" + uid
        radosgw_admin("user", "create", "--uid=" + uid, "--display-name=rotation test",
                      "--access-key=" + ak1, "--secret-key=" + sk1)
        self.addCleanup(radosgw_admin, "user", "rm", "--uid=" + uid, "--purge-data")
        srv = harness.servers()
        bucket = srv["s3_endpoint"] + "/" + harness.unique("rot")
        vol = self.volume(redis_url(), ["--storage", "s3", "--bucket", bucket, "--access-key", ak1,
                                        "--secret-key", sk1])
        vol.format("--force")
        vol.mount()
        with open(os.path.join(vol.mnt, "before"), "wb") as f:
            f.write(b"a" * 100000)
        # The keys are revoked (expired credentials): writes fail at close instead of
        # claiming success, and the log says why.
        radosgw_admin("key", "create", "--uid=" + uid, "--key-type=s3", "--access-key=" + ak2, "--secret-key=" + sk2)
        radosgw_admin("key", "rm", "--uid=" + uid, "--key-type=s3", "--access-key=" + ak1)
        failed = False
        try:
            with open(os.path.join(vol.mnt, "after"), "wb") as f:
                f.write(os.urandom(5 * MiB))
                f.flush()
                os.fsync(f.fileno())
        except OSError:
            failed = True
        self.assertTrue(failed, "a write with revoked keys claimed success")
        self.assertTrue(harness.wait_for(lambda: "access denied" in vol.read_log(), timeout=10), vol.log_tail())
        vol.umount(check=False)
        vol.force_unmount()
        # config refuses keys that do not work, then installs the new ones.
        self.expect_fail("config", vol.meta_url, "--secret-key", "still-wrong", contains=["access denied"])
        rc, out, err = tierfs("config", vol.meta_url, "--access-key", ak2, "--secret-key", sk2)
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.assertNotIn(sk2, out + err)
        vol.mount()
        with open(os.path.join(vol.mnt, "before"), "rb") as f:
            self.assertEqual(f.read(), b"a" * 100000)
        with open(os.path.join(vol.mnt, "after2"), "wb") as f:
            f.write(b"works again")
        vol.umount()

    # ---- secrets ---------------------------------------------------------------------

    def test_secrets_stay_out_of_ps_logs_status_and_dump(self):
        srv = harness.servers()
        sk = srv["s3_secret_key"]
        pw = "tierfs-test-pw"
        url = pg_url()
        vol = self.volume(url, ["--storage", "s3", "--bucket", srv["s3_endpoint"] + "/" + harness.unique("sec")])
        # Keys from the environment at format time.
        env = dict(os.environ, TIERFS_ACCESS_KEY=srv["s3_access_key"], TIERFS_SECRET_KEY=sk)
        rc, out, err = run(harness.tierfs_bin(), "format", url, vol.name, *vol.storage, "--force", env=env)
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.assertNotIn(pw, out + err)
        vol.mount()
        with open(os.path.join(vol.mnt, "f"), "w") as f:
            f.write("x")
        with open("/proc/%d/cmdline" % vol.pid, "rb") as f:
            cmdline = f.read().decode(errors="replace")
        self.assertIn("127.0.0.1", cmdline)
        self.assertNotIn(pw, cmdline, "metadata password visible in ps")
        for args in (("status", url), ("status", url, "--json"), ("config", url), ("dump", url, "-")):
            rc, out, err = tierfs(*args)
            self.assertEqual(rc, 0, msg(rc, out, err))
            self.assertNotIn(sk, out + err, "secret key shown by %s" % (args,))
            self.assertNotIn(pw, out + err, "password shown by %s" % (args,))
        vol.umount()
        log = vol.read_log()
        self.assertTrue(log)
        self.assertNotIn(sk, log)
        self.assertNotIn(pw, log)
        # A secret given on the command line is blanked in the process's argv.
        p = subprocess.Popen([harness.tierfs_bin(), "objbench", srv["s3_endpoint"] + "/" + harness.unique("argv"),
                              "--access-key", srv["s3_access_key"], "--secret-key=" + sk, "--skip-functional",
                              "--big-count", "400"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(p.kill)
        def cmdline():
            with open("/proc/%d/cmdline" % p.pid, "rb") as f:
                return f.read().decode(errors="replace")
        self.assertTrue(harness.wait_for(lambda: "objbench" in cmdline(), timeout=10))
        time.sleep(0.5)  # past the first lines of main(), where argv is scrubbed
        seen = cmdline()
        self.assertIn("--secret-key=", seen)
        self.assertNotIn(sk, seen, "secret key visible in ps")
        p.kill()
        # The password may also come from a file named by TIERFS_META_PASSWORD_FILE.
        pwfile = os.path.join(vol.dir, "pw")
        with open(pwfile, "w") as f:
            f.write(pw + "\n")
        bare = url.replace(":" + pw + "@", "@")
        rc, out, err = run(harness.tierfs_bin(), "status", bare, env=dict(os.environ, TIERFS_META_PASSWORD_FILE=pwfile))
        self.assertEqual(rc, 0, msg(rc, out, err))
        rc, out, err = run(harness.tierfs_bin(), "status", bare, env=dict(os.environ, TIERFS_META_PASSWORD=pw))
        self.assertEqual(rc, 0, msg(rc, out, err))

    def test_config_shows_and_changes_settings(self):
        vol = self.volume(redis_url(), harness.rados_storage_args())
        vol.format("--force")
        rc, out, err = tierfs("config", vol.meta_url)
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.assertEqual(json.loads(out)["storage"], "rados")
        rc, out, err = tierfs("config", vol.meta_url, "--session-timeout", "17")
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.assertEqual(vol.status_json()["session_timeout_s"], 17)
        self.expect_fail("config", vol.meta_url, "--bucket", "no-such-pool-" + harness.unique("p"),
                         "--ceph-conf", "/nonexistent/ceph.conf", contains=["do not work"])


if __name__ == "__main__":
    harness.main()
