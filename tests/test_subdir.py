"""`mount --subdir DIR`: one department's directory of a shared volume as a mount's root.

The mount shows only that directory's tree and nothing above it (its ".." is itself, and a
file handle of an inode elsewhere in the volume is stale there), everything done in it is the volume's (seen by a
mount of the whole volume), the control xattrs sit on its root (so `tierfs umount` works),
and a path that is missing, not a directory, or climbs with ".." is refused with a clear
message.
"""

import errno
import os

import harness
from harness import msg, tierfs
from test_file_handles import drop_kernel_caches, name_to_handle, open_by_handle


class SubdirTest(harness.TierFSTestCase):
    PER_TEST = True
    AUTO_MOUNT = False

    REDIS = False  # SubdirOnRedisTest: the same tests on Redis

    def setUp(self):
        super().setUp()
        url = harness.servers()["redis_url"] + "/%d" % harness.REDIS_DB["subdir"] if self.REDIS else None
        self.vol = self.new_volume(meta_url=url)
        self.addCleanup(self.vol.cleanup)
        self.vol.format("--force")
        self.vol.mount()
        m = self.vol.mnt
        os.makedirs(os.path.join(m, "teams", "vision", "data"))
        os.makedirs(os.path.join(m, "teams", "speech"))
        for p, data in (("secret", b"top"), ("teams/speech/s", b"speech"), ("teams/vision/data/a", b"a" * 5000)):
            with open(os.path.join(m, p), "wb") as f:
                f.write(data)
        self.sub = os.path.join(self.vol.dir, "vision")
        os.mkdir(self.sub)

    def mount_sub(self, path, check=True):
        res = self.vol.mount_at(self.sub, "--subdir", path)
        if check:
            self.assertEqual(res[0], 0, msg(*res))
        return res

    def test_the_subdir_is_the_root_and_nothing_above_it_is_reachable(self):
        self.mount_sub("/teams/vision")
        self.assertEqual(sorted(os.listdir(self.sub)), ["data"])
        with open(os.path.join(self.sub, "data", "a"), "rb") as f:
            self.assertEqual(f.read(), b"a" * 5000)
        # The kernel sees the subdir as the mount's root inode; a walk up from inside ends
        # at it (above it is the host's directory, not the volume's).
        self.assertEqual(os.stat(self.sub).st_ino, 1)
        self.assertEqual(sorted(os.listdir(os.path.join(self.sub, "data", ".."))), ["data"])
        # Changes land in the volume, where a mount of the whole volume sees them.
        with open(os.path.join(self.sub, "data", "b"), "wb") as f:
            f.write(b"new")
        os.rename(os.path.join(self.sub, "data", "a"), os.path.join(self.sub, "a2"))
        os.mkdir(os.path.join(self.sub, "d"))
        os.link(os.path.join(self.sub, "a2"), os.path.join(self.sub, "d", "a3"))
        whole = os.path.join(self.vol.mnt, "teams", "vision")
        self.assertTrue(harness.wait_for(lambda: sorted(os.listdir(whole)) == ["a2", "d", "data"], timeout=5),
                        os.listdir(whole))
        with open(os.path.join(whole, "data", "b"), "rb") as f:
            self.assertEqual(f.read(), b"new")
        self.assertEqual(os.stat(os.path.join(whole, "d", "a3")).st_nlink, 2)
        # The control xattrs are on the mount's root; tierfs umount finds the client.
        self.assertEqual(int(os.getxattr(self.sub, "tierfs.pid")), self.vol._find_daemon_pid(self.sub))
        self.assertIn("store", os.getxattr(self.sub, "tierfs.stats").decode())
        rc, out, err = tierfs("umount", self.sub)
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.assertFalse(harness.is_mounted(self.sub))

    def test_file_handles_reach_only_what_is_under_the_subdir(self):
        self.mount_sub("/teams/vision")
        inside = name_to_handle(os.path.join(self.vol.mnt, "teams", "vision", "data", "a"))
        inside_dir = name_to_handle(os.path.join(self.vol.mnt, "teams", "vision", "data"))
        outside = name_to_handle(os.path.join(self.vol.mnt, "secret"))
        outside_dir = name_to_handle(os.path.join(self.vol.mnt, "teams", "speech"))
        drop_kernel_caches()  # the handles must be resolved by asking the mount
        for h in (inside, inside_dir):
            os.close(open_by_handle(self.sub, h))
        fd = open_by_handle(self.sub, inside)
        try:
            self.assertEqual(os.read(fd, 10), b"a" * 10)
        finally:
            os.close(fd)
        for h in (outside, outside_dir):
            with self.assertRaises(OSError) as cm:
                os.close(open_by_handle(self.sub, h))
            self.assertEqual(cm.exception.errno, errno.ESTALE)

    def test_bad_subdirs_are_refused_clearly(self):
        for path, words in (("/teams/nope", "does not exist"), ("/secret", "not a directory"),
                            ("/teams/../secret", "without . or ..")):
            rc, out, err = self.mount_sub(path, check=False)
            self.assertNotEqual(rc, 0, path)
            self.assertIn(words, out + err, path)
            self.assertFalse(harness.is_mounted(self.sub), path)


class SubdirOnRedisTest(SubdirTest):
    REDIS = True


if __name__ == "__main__":
    harness.main()
