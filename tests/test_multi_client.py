"""Several clients of one shared volume (Redis metadata, Ceph data through RADOS), each a
separate `tierfs mount` process: close-to-open consistency, namespace and attribute
changes seen by the others within the attribute-cache timeout, flock and record locks
that exclude across clients, concurrent creates/appends/renames from several clients that
lose nothing, and a client killed with SIGKILL whose locks and open-unlinked files the
others reclaim within the session timeout."""

import fcntl
import hashlib
import os
import signal
import subprocess
import sys
import textwrap
import time

import harness
from harness import is_mounted, msg, pid_alive, tierfs, wait_for

MiB = 1 << 20
ATTR_CACHE = 1.0      # seconds, given to every mount below
SESSION_TIMEOUT = 3   # seconds, given at format time


def redis_url():
    return harness.servers()["redis_url"] + "/%d" % harness.REDIS_DB["multi_client"]


class MultiClientTest(harness.TierFSTestCase):
    PER_TEST = True
    AUTO_MOUNT = False
    CLIENTS = 3

    def storage(self):
        return harness.rados_storage_args()

    def setUp(self):
        super().setUp()
        self.vol = self.new_volume(name=harness.unique("mc").replace("-", "_"), meta_url=self.meta_url(),
                                   storage=self.storage())
        self.addCleanup(self.vol.cleanup)
        self.vol.format("--force", "--session-timeout", str(SESSION_TIMEOUT))
        self.mnts = []
        for i in range(self.CLIENTS):
            mp = os.path.join(self.vol.dir, "client%d" % i)
            os.mkdir(mp)
            rc, out, err = self.vol.mount_at(mp, "--attr-cache", str(ATTR_CACHE), "--entry-cache", str(ATTR_CACHE),
                                             "--dir-entry-cache", str(ATTR_CACHE))
            self.assertEqual(rc, 0, msg(rc, out, err))
            self.mnts.append(mp)

    def meta_url(self):
        return redis_url()

    def eventually(self, pred, what):
        # Visible within the attribute-cache timeout, plus scheduling slack on a loaded machine.
        self.assertTrue(wait_for(pred, timeout=ATTR_CACHE * 3 + 2), what)

    # ---- data -----------------------------------------------------------------------

    def test_close_to_open_across_clients(self):
        a, b, c = self.mnts
        data = os.urandom(9 * MiB + 12345)
        with open(os.path.join(a, "model.bin"), "wb") as f:
            f.write(data)
        # Opened after the writer closed: byte-exact on every other client.
        for m in (b, c):
            with open(os.path.join(m, "model.bin"), "rb") as f:
                self.assertEqual(hashlib.sha256(f.read()).digest(), hashlib.sha256(data).digest())
        # Rewrite part of it on b; a and c see the new bytes at their next open.
        patch = os.urandom(100000)
        with open(os.path.join(b, "model.bin"), "r+b") as f:
            f.seek(4 * MiB - 5000)
            f.write(patch)
        expect = data[:4 * MiB - 5000] + patch + data[4 * MiB - 5000 + len(patch):]
        for m in (a, c):
            self.eventually(lambda: os.path.getsize(os.path.join(m, "model.bin")) == len(expect), "size")
            with open(os.path.join(m, "model.bin"), "rb") as f:
                self.assertEqual(f.read(), expect)

    def test_namespace_and_attributes_visible_within_attr_timeout(self):
        a, b, _ = self.mnts
        os.mkdir(os.path.join(a, "d"))
        with open(os.path.join(a, "d", "f"), "w") as f:
            f.write("x")
        self.assertTrue(os.path.exists(os.path.join(b, "d", "f")))
        os.rename(os.path.join(a, "d", "f"), os.path.join(a, "d", "g"))
        self.eventually(lambda: not os.path.exists(os.path.join(b, "d", "f")), "rename: old name still seen")
        self.eventually(lambda: os.path.exists(os.path.join(b, "d", "g")), "rename: new name not seen")
        os.chmod(os.path.join(a, "d", "g"), 0o600)
        os.chown(os.path.join(a, "d", "g"), 1234, 5678)
        os.utime(os.path.join(a, "d", "g"), ns=(1_000_000_000_123, 2_000_000_000_456))

        def attrs_seen():
            st = os.stat(os.path.join(b, "d", "g"))
            return (st.st_mode & 0o7777, st.st_uid, st.st_gid, st.st_mtime_ns) == (0o600, 1234, 5678, 2_000_000_000_456)
        self.eventually(attrs_seen, "chmod/chown/utime on one client not seen by another")
        self.assertEqual(sorted(os.listdir(os.path.join(b, "d"))), ["g"])
        os.unlink(os.path.join(a, "d", "g"))
        self.eventually(lambda: not os.path.exists(os.path.join(b, "d", "g")), "unlink not seen")
        os.rmdir(os.path.join(b, "d"))
        self.eventually(lambda: not os.path.exists(os.path.join(a, "d")), "rmdir not seen")

    def test_open_creat_of_a_name_another_client_just_made(self):
        # Client a caches "no such entry"; b creates the file; a's open(O_CREAT) reaches the
        # volume as a create of a name that now exists. Without O_EXCL it opens b's file.
        a, b, _ = self.mnts
        self.assertFalse(os.path.exists(os.path.join(a, "log")))
        with open(os.path.join(b, "log"), "w") as f:
            f.write("from b\n")
        with open(os.path.join(a, "log"), "a") as f:
            f.write("from a\n")
        with open(os.path.join(b, "log")) as f:
            self.assertEqual(f.read(), "from b\nfrom a\n")
        self.assertFalse(os.path.exists(os.path.join(a, "log2")))
        with open(os.path.join(b, "log2"), "w") as f:
            f.write("old")
        with self.assertRaises(FileExistsError):
            os.open(os.path.join(a, "log2"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        self.assertFalse(os.path.exists(os.path.join(a, "log3")))
        with open(os.path.join(b, "log3"), "w") as f:
            f.write("old contents")
        with open(os.path.join(a, "log3"), "w") as f:   # O_CREAT | O_TRUNC
            f.write("new")
        with open(os.path.join(a, "log3")) as f:
            self.assertEqual(f.read(), "new")

    # ---- locks ----------------------------------------------------------------------

    def lock_attempt(self, path, kind, blocking=False, timeout=30):
        """Runs a lock attempt in a separate process; returns (rc, stdout)."""
        code = textwrap.dedent("""
            import fcntl, sys, time
            path, kind, blocking = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
            f = open(path, "r+")
            t0 = time.time()
            try:
                if kind == "flock":
                    fcntl.flock(f, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
                else:
                    fcntl.lockf(f, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB), 100, 50)
            except OSError as e:
                print("busy", e.errno); sys.exit(1)
            print("locked after %.2f" % (time.time() - t0)); sys.exit(0)
        """)
        r = subprocess.run([sys.executable, "-c", code, path, kind, "1" if blocking else "0"],
                           capture_output=True, text=True, timeout=timeout)
        return r.returncode, r.stdout + r.stderr

    def test_flock_excludes_across_clients(self):
        a, b, c = self.mnts
        with open(os.path.join(a, "lockfile"), "w") as f:
            f.write("x")
        holder = open(os.path.join(a, "lockfile"), "r+")
        fcntl.flock(holder, fcntl.LOCK_EX)
        for m in (b, c):
            rc, out = self.lock_attempt(os.path.join(m, "lockfile"), "flock")
            self.assertEqual(rc, 1, "flock on another client succeeded while held: " + out)
        # A blocking attempt waits until the holder lets go.
        waiter = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
            import fcntl, sys
            f = open(sys.argv[1], "r+"); fcntl.flock(f, fcntl.LOCK_EX); print("got it")
        """), os.path.join(b, "lockfile")], stdout=subprocess.PIPE, text=True)
        time.sleep(1.0)
        self.assertIsNone(waiter.poll(), "blocking flock returned while another client held the lock")
        holder.close()
        out, _ = waiter.communicate(timeout=30)
        self.assertEqual(waiter.returncode, 0)
        self.assertIn("got it", out)
        rc, out = self.lock_attempt(os.path.join(c, "lockfile"), "flock")
        self.assertEqual(rc, 0, "flock not free after both holders closed: " + out)

    def test_record_locks_exclude_across_clients(self):
        a, b, _ = self.mnts
        with open(os.path.join(a, "records"), "w") as f:
            f.write("x" * 1000)
        holder = open(os.path.join(a, "records"), "r+")
        fcntl.lockf(holder, fcntl.LOCK_EX, 100, 120)   # bytes [120, 220)
        rc, out = self.lock_attempt(os.path.join(b, "records"), "lockf")  # wants [50, 150)
        self.assertEqual(rc, 1, "overlapping record lock granted on another client: " + out)
        other = open(os.path.join(b, "records"), "r+")
        fcntl.lockf(other, fcntl.LOCK_EX | fcntl.LOCK_NB, 100, 300)  # [300, 400): no overlap
        fcntl.lockf(holder, fcntl.LOCK_UN, 100, 120)
        rc, out = self.lock_attempt(os.path.join(b, "records"), "lockf")
        self.assertEqual(rc, 0, "record lock not granted after the holder released it: " + out)
        holder.close()
        other.close()

    # ---- concurrency ----------------------------------------------------------------

    WORKER = textwrap.dedent("""
        import fcntl, os, sys
        mnt, me, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
        d = os.path.join(mnt, "shared")
        for i in range(n):
            p = os.path.join(d, "%s-%d.tmp" % (me, i))
            with open(p, "w") as f:
                f.write("%s %d\\n" % (me, i) * 50)
            os.rename(p, os.path.join(d, "%s-%d" % (me, i)))
            with open(os.path.join(d, "own-%s.log" % me), "a") as f:
                f.write("%s %d\\n" % (me, i))
            # Appends to one shared file, serialized by flock as applications do across hosts.
            with open(os.path.join(d, "shared.log"), "a") as f:
                fcntl.flock(f, fcntl.LOCK_EX)
                f.seek(0, os.SEEK_END)
                f.write("%s %d\\n" % (me, i))
                f.flush()
                os.fsync(f.fileno())
                fcntl.flock(f, fcntl.LOCK_UN)
    """)

    def test_concurrent_creates_appends_renames_lose_nothing(self):
        os.mkdir(os.path.join(self.mnts[0], "shared"))
        n = 60
        procs = []
        for ci, m in enumerate(self.mnts):
            for w in range(2):
                me = "c%dw%d" % (ci, w)
                procs.append(subprocess.Popen([sys.executable, "-c", self.WORKER, m, me, str(n)],
                                              stderr=subprocess.PIPE, text=True))
        for p in procs:
            _, err = p.communicate(timeout=600)
            self.assertEqual(p.returncode, 0, err)
        names = ["c%dw%d" % (c, w) for c in range(self.CLIENTS) for w in range(2)]
        want = {"%s-%d" % (me, i) for me in names for i in range(n)}
        want |= {"own-%s.log" % me for me in names} | {"shared.log"}
        for m in self.mnts:
            d = os.path.join(m, "shared")
            self.eventually(lambda: set(os.listdir(d)) == want, "directory listing differs on " + m)
            for me in names:
                with open(os.path.join(d, "own-%s.log" % me)) as f:
                    self.assertEqual(f.read(), "".join("%s %d\n" % (me, i) for i in range(n)))
                with open(os.path.join(d, "%s-%d" % (me, n - 1))) as f:
                    self.assertEqual(f.read(), "%s %d\n" % (me, n - 1) * 50)
            with open(os.path.join(d, "shared.log")) as f:
                lines = f.read().splitlines()
            self.assertEqual(sorted(lines), sorted("%s %d" % (me, i) for me in names for i in range(n)),
                             "flock-serialized appends from several clients lost or mangled lines")

    # ---- a client dies --------------------------------------------------------------

    def test_killed_client_locks_and_open_unlinked_files_reclaimed(self):
        a, b, _ = self.mnts
        victim = self.vol._find_daemon_pid(a)
        self.assertTrue(victim)
        with open(os.path.join(a, "lockfile"), "w") as f:
            f.write("x")
        holder_code = textwrap.dedent("""
            import fcntl, os, sys, time
            d = sys.argv[1]
            l = open(os.path.join(d, "lockfile"), "r+"); fcntl.flock(l, fcntl.LOCK_EX)
            r = open(os.path.join(d, "lockfile"), "r+"); fcntl.lockf(r, fcntl.LOCK_EX, 10, 0)
            g = open(os.path.join(d, "ghost"), "wb"); g.write(os.urandom(3 << 20)); g.flush(); os.fsync(g.fileno())
            os.unlink(os.path.join(d, "ghost"))
            print("ready", flush=True)
            time.sleep(3600)
        """)
        holder = subprocess.Popen([sys.executable, "-c", holder_code, a], stdout=subprocess.PIPE, text=True)
        self.addCleanup(holder.kill)
        self.assertEqual(holder.stdout.readline().strip(), "ready")
        # Clients flush their usage counters about once a second.
        self.assertTrue(wait_for(lambda: self.vol.status_json()["used_bytes"] >= 3 << 20, timeout=10))
        used_before = self.vol.status_json()["used_bytes"]
        rc, out = self.lock_attempt(os.path.join(b, "lockfile"), "flock")
        self.assertEqual(rc, 1, "flock should be held by the client about to die: " + out)
        os.kill(victim, signal.SIGKILL)
        self.assertTrue(wait_for(lambda: not pid_alive(victim), timeout=10))
        t0 = time.time()
        # Another client reclaims within the session timeout (plus one cleanup period).
        ok = wait_for(lambda: self.lock_attempt(os.path.join(b, "lockfile"), "flock")[0] == 0,
                      timeout=SESSION_TIMEOUT * 4 + 10, interval=0.5)
        self.assertTrue(ok, "flock of the killed client never released")
        rc, out = self.lock_attempt(os.path.join(b, "lockfile"), "lockf")
        self.assertEqual(rc, 0, "record lock of the killed client not released: " + out)
        self.assertTrue(wait_for(lambda: self.vol.status_json()["used_bytes"] <= used_before - (3 << 20),
                                 timeout=SESSION_TIMEOUT * 4 + 10, interval=0.5),
                        "open-unlinked file of the killed client not reclaimed")
        sessions = self.vol.status_json()["sessions"]
        self.assertFalse([s for s in sessions if s["pid"] == victim], "dead session still listed")
        sys.stderr.write("reclaimed %.1f s after the kill\n" % (time.time() - t0))
        holder.kill()
        harness.run("umount", "-l", a)


class MultiClientPostgresS3Test(MultiClientTest):
    """The same behaviour on PostgreSQL metadata with data in S3 (Ceph's radosgw)."""

    def meta_url(self):
        return harness.servers()["pg_url"] + "/tierfs_multi"

    def storage(self):
        return harness.s3_storage_args(harness.unique("mc").lower())


if __name__ == "__main__":
    harness.main()
