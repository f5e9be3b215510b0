#!/usr/bin/env python3
"""On etcd, a mount drops what the kernel caches of other clients' changes as etcd pushes
them (fuse/remote_invalidation.h): with attributes and names cached for 60 s, a chmod,
a write, a rename, a removal and a new file made through another mount show within
seconds; a mount with --no-meta-watch, same caches, still shows the old state (so the
kernel's caches are really in play), and the mount that made the changes drops nothing of
its own. Then each member of the three in turn is SIGKILLed and restarted: whichever
member carried the watch, the stream resumes on another and changes keep arriving."""
import json
import os
import signal
import stat
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import servers  # noqa: E402

CACHE = ["--attr-cache", "60", "--entry-cache", "60", "--dir-entry-cache", "60"]
SEEN_WITHIN_S = 10  # a push takes milliseconds; the bound only keeps a failure from hanging


def stats(mnt):
    return json.loads(os.getxattr(mnt, "tierfs.stats"))


def invalidations(mnt):
    s = stats(mnt)["metrics"]
    return sum(v for k, v in s.items() if k.startswith("tierfs_remote_invalidations_total"))


def mode_of(path):
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return None


def size_of(path):
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return None


class MetaWatchTest(harness.TierFSTestCase):
    AUTO_MOUNT = False

    def setUp(self):
        super().setUp()
        self.tmp = self.local_tmpdir()
        self.etcd = servers.Etcd(self.tmp, port=servers.free_ports(6), name="etcd-watch")
        self.addCleanup(self.etcd.stop)
        self.etcd.start()
        self.vol = harness.Volume("watchvol", meta_url=self.etcd.url("watch") + "?timeout=15s", base=self.tmp)
        self.addCleanup(self.vol.cleanup)
        self.vol.format()
        self.vol.mount(*CACHE)  # the writer
        self.watching = os.path.join(self.tmp, "watching")
        self.blind = os.path.join(self.tmp, "blind")
        for mnt, extra in ((self.watching, []), (self.blind, ["--no-meta-watch"])):
            os.makedirs(mnt)
            res = self.vol.mount_at(mnt, *(CACHE + extra))
            self.assertEqual(res[0], 0, harness.msg(*res))

    def eventually(self, what, fn, want):
        deadline = time.monotonic() + SEEN_WITHIN_S
        got = fn()
        while got != want and time.monotonic() < deadline:
            time.sleep(0.05)
            got = fn()
        self.assertEqual(got, want, what)

    def test_other_clients_changes_show_at_once_with_long_caches(self):
        a = self.vol.mnt
        for name in ("f", "g", "h"):
            with open(os.path.join(a, name), "w") as f:
                f.write("x")
        os.chmod(os.path.join(a, "f"), 0o644)
        # Both readers cache f's attributes, g's and h's names, and the absence of "new".
        for m in (self.watching, self.blind):
            self.assertEqual(mode_of(os.path.join(m, "f")), 0o644)
            self.assertEqual(size_of(os.path.join(m, "g")), 1)
            self.assertEqual(size_of(os.path.join(m, "h")), 1)
            self.assertIsNone(mode_of(os.path.join(m, "new")))
        own_before = invalidations(a)

        os.chmod(os.path.join(a, "f"), 0o600)
        with open(os.path.join(a, "g"), "a") as f:
            f.write("more")
        os.rename(os.path.join(a, "h"), os.path.join(a, "h2"))
        with open(os.path.join(a, "new"), "w") as f:
            f.write("new")

        w = self.watching
        self.eventually("chmod", lambda: mode_of(os.path.join(w, "f")), 0o600)
        self.eventually("size after a write", lambda: size_of(os.path.join(w, "g")), 5)
        self.eventually("renamed away", lambda: size_of(os.path.join(w, "h")), None)
        self.eventually("renamed to", lambda: size_of(os.path.join(w, "h2")), 1)
        self.eventually("a new file over a cached absence", lambda: size_of(os.path.join(w, "new")), 3)
        self.assertGreater(invalidations(w), 0)

        # The same caches without the watch: the old state, for the caches' 60 s.
        b = self.blind
        self.assertEqual(mode_of(os.path.join(b, "f")), 0o644)
        self.assertEqual(size_of(os.path.join(b, "g")), 1)
        self.assertEqual(size_of(os.path.join(b, "h")), 1)
        self.assertIsNone(mode_of(os.path.join(b, "new")))
        self.assertEqual(invalidations(b), 0)
        # The writer dropped nothing for its own changes.
        self.assertEqual(invalidations(a), own_before)

        # Whichever member carries the stream, losing it loses no change.
        for i in range(3):
            self.etcd.kill_member(i, signal.SIGKILL)
            os.chmod(os.path.join(a, "f"), 0o640 + i)  # while the member is down
            self.eventually("chmod while member %d is down" % i, lambda: mode_of(os.path.join(w, "f")), 0o640 + i)
            self.etcd.start_member(i)
            self.assertTrue(harness.wait_for(lambda: self.etcd.healthy(i), timeout=30), "member %d did not rejoin" % i)
            os.chmod(os.path.join(a, "f"), 0o600 + i)
            self.eventually("chmod after member %d is back" % i, lambda: mode_of(os.path.join(w, "f")), 0o600 + i)


if __name__ == "__main__":
    harness.main()
