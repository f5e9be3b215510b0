"""Faults the application must hear about: when the object store fills up, write, fsync or
close fails with ENOSPC instead of claiming success; data synced before stays intact; the
mount stays up and works again once space is back."""

import errno
import os
import subprocess

import harness
from harness import is_mounted

MiB = 1 << 20


class FullBucketTest(harness.TierFSTestCase):
    PER_TEST = True
    AUTO_MOUNT = False
    BLOCK_SIZE = "1M"

    def setUp(self):
        super().setUp()
        self.vol = self.new_volume()
        os.makedirs(self.vol.bucket)
        # A 4 MiB bucket: room for a little data, not for 16 MiB. Cleanups run last-first:
        # the volume is unmounted and removed before its bucket's tmpfs goes.
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", self.vol.bucket], check=True)
        self.addCleanup(subprocess.run, ["umount", "-l", self.vol.bucket])
        self.addCleanup(self.vol.cleanup)
        self.vol.format()
        self.vol.mount()
        self.mnt = self.vol.mnt

    def test_enospc_reaches_the_application(self):
        kept = os.path.join(self.mnt, "kept")
        kept_data = os.urandom(MiB)
        with open(kept, "wb") as f:
            f.write(kept_data)
            f.flush()
            os.fsync(f.fileno())

        big = os.path.join(self.mnt, "big")
        fd = os.open(big, os.O_CREAT | os.O_WRONLY, 0o644)
        failure = None
        try:
            for _ in range(16):
                os.write(fd, os.urandom(MiB))
            os.fsync(fd)
        except OSError as e:
            failure = e
        try:
            os.close(fd)
        except OSError as e:
            failure = failure or e
        self.assertIsNotNone(failure, "16 MiB into a 4 MiB bucket reported success")
        self.assertEqual(failure.errno, errno.ENOSPC, failure)

        self.assertTrue(is_mounted(self.mnt))
        with open(kept, "rb") as f:
            self.assertEqual(f.read(), kept_data, "data synced before the failure changed")
        os.unlink(big)
        # The failed upload's blocks were removed: small writes succeed again.
        small = os.path.join(self.mnt, "small")
        with open(small, "wb") as f:
            f.write(b"space is back")
        self.vol.umount()
        self.vol.mount()
        with open(small, "rb") as f:
            self.assertEqual(f.read(), b"space is back")
        with open(kept, "rb") as f:
            self.assertEqual(f.read(), kept_data)


if __name__ == "__main__":
    harness.main()
