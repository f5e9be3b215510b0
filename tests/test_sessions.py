"""Two clients of one volume; one is killed with SIGKILL while it holds a flock, a record
lock and an open-but-unlinked file. The other client reclaims all of it within the session
timeout (3 s, set at format time): the locks become free, the dead session disappears from
`tierfs status`, and the unlinked file's inode and space are released."""

import fcntl
import json
import os
import signal
import struct
import time

import harness
from harness import is_mounted, msg, pid_alive, run, tierfs, wait_for

MiB = 1 << 20


class DeadClientTest(harness.TierFSTestCase):
    PER_TEST = True
    AUTO_MOUNT = False

    def setUp(self):
        super().setUp()
        self.vol = self.new_volume()
        self.addCleanup(self.vol.cleanup)
        self.vol.format("--session-timeout", "3")
        self.vol.mount()
        self.a = self.vol.mnt
        self.b = os.path.join(self.vol.dir, "mnt-b")
        os.mkdir(self.b)
        rc, out, err = self.vol.mount_at(self.b)
        self.assertEqual(rc, 0, msg(rc, out, err))

    def status(self):
        rc, out, err = tierfs("status", self.vol.meta_url, "--json")
        self.assertEqual(rc, 0, msg(rc, out, err))
        return json.loads(out)

    def test_killed_client_is_reclaimed(self):
        self.assertEqual(self.status()["session_timeout_s"], 3)
        with open(os.path.join(self.a, "lockfile"), "wb") as f:
            f.write(b"x" * 100)
        # Client A: a flock, a record lock and an open-but-unlinked 2 MiB file.
        lf = os.open(os.path.join(self.a, "lockfile"), os.O_RDWR)
        fcntl.flock(lf, fcntl.LOCK_EX | fcntl.LOCK_NB)
        pf = os.open(os.path.join(self.a, "lockfile"), os.O_RDWR)
        fcntl.lockf(pf, fcntl.LOCK_EX | fcntl.LOCK_NB, 10, 0)
        held = os.open(os.path.join(self.a, "held"), os.O_CREAT | os.O_RDWR, 0o644)
        os.write(held, os.urandom(2 * MiB))
        os.fsync(held)
        os.unlink(os.path.join(self.a, "held"))
        # Usage counters are flushed by each client once a second.
        before = wait_for(lambda: (lambda s: s if s["used_bytes"] >= 2 * MiB else None)(self.status()),
                          timeout=10, interval=0.2)
        self.assertIsNotNone(before, "A's write never showed in the usage: %r" % self.status())
        self.assertEqual(len(before["sessions"]), 2)

        # Client B sees the locks.
        bf = os.open(os.path.join(self.b, "lockfile"), os.O_RDWR)
        with self.assertRaises(OSError):
            fcntl.flock(bf, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with self.assertRaises(OSError):
            fcntl.lockf(bf, fcntl.LOCK_EX | fcntl.LOCK_NB, 10, 0)

        # Kill A. Its kernel mount turns into a dead one; our descriptors die with it.
        pid = self.vol.pid
        os.kill(pid, signal.SIGKILL)
        self.assertTrue(wait_for(lambda: not pid_alive(pid), timeout=30))
        for fd in (lf, pf, held):
            try:
                os.close(fd)
            except OSError:
                pass
        run("fusermount3", "-uz", self.a)

        # B reclaims A within a few session timeouts.
        def locks_free():
            try:
                fcntl.flock(bf, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.lockf(bf, fcntl.LOCK_EX | fcntl.LOCK_NB, 10, 0)
                return True
            except OSError:
                return False
        self.assertTrue(wait_for(locks_free, timeout=20, interval=0.5), "the dead client's locks were never released")
        self.assertTrue(wait_for(lambda: len(self.status()["sessions"]) == 1, timeout=20, interval=0.5),
                        "the dead session is still listed")
        after = wait_for(lambda: (lambda s: s if s["inodes"] < before["inodes"] else None)(self.status()),
                         timeout=20, interval=0.5)
        self.assertIsNotNone(after, "the open-but-unlinked inode was not reclaimed: %r" % self.status())
        self.assertLessEqual(after["used_bytes"], before["used_bytes"] - 2 * MiB)
        os.close(bf)


if __name__ == "__main__":
    harness.main()
