"""What one local user may not learn of another's files through the files TierFS keeps on the
host (README, "Local privacy"): a `file` bucket's directories and objects (blocks, metadata
backups) are private to the user running tierfs; the SQLite metadata file (and its -wal and
-shm files) is created 0600, and format warns about one other users can read; the mount's
log and `tierfs dump` output are private. Other users are played by `setpriv`.

Each volume lives in a directory made 0755 here (as /srv/tierfs would be), so that only the
modes TierFS gives its own files stand between the other user and the data.
"""

import glob
import os
import stat
import subprocess

import harness
from harness import msg, tierfs

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
SECRET = b"the-secret-salary-table-" * 1000


def as_nobody(*cmd):
    return subprocess.run(NOBODY + [str(c) for c in cmd], capture_output=True, text=True, timeout=120)


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


class PrivacyTest(harness.TierFSTestCase):
    PER_TEST = True
    AUTO_MOUNT = False

    def setUp(self):
        super().setUp()
        self.old_umask = os.umask(0o022)  # the usual one: files 0644 unless TierFS says otherwise
        self.addCleanup(os.umask, self.old_umask)
        self.vol = self.new_volume()
        self.addCleanup(self.vol.cleanup)
        os.chmod(self.vol.dir, 0o755)

    def write_private_file(self):
        d = self.vol.path("alice")
        os.mkdir(d, 0o700)
        p = os.path.join(d, "salaries")
        with open(p, "wb") as f:
            f.write(SECRET)
        os.chmod(p, 0o600)
        return p

    def test_bucket_objects_are_private_to_the_volume_owner(self):
        self.vol.format()
        self.vol.mount("--backup-meta", "1")
        self.write_private_file()
        harness.wait_for(lambda: glob.glob(os.path.join(self.vol.bucket, "*", "meta", "dump-*")), timeout=60)
        self.assertTrue(glob.glob(os.path.join(self.vol.bucket, "*", "meta", "dump-*")), "a metadata backup was taken")
        self.vol.umount()
        # Another user can neither list the volume's objects nor read one.
        res = as_nobody("grep", "-rl", "the-secret-salary", self.vol.bucket)
        self.assertNotEqual(res.returncode, 0, "another user found the data in the bucket: %s" % res)
        self.assertIn("Permission denied", res.stderr)
        for path in glob.glob(os.path.join(self.vol.bucket, "**", "*"), recursive=True):
            if os.path.isfile(path):
                res = as_nobody("cat", path)
                self.assertNotEqual(res.returncode, 0, "nobody read %s" % path)
        # Every file and directory TierFS made in the bucket is its owner's only.
        objects = 0
        for d, dirs, files in os.walk(self.vol.bucket):
            self.assertEqual(mode(d), 0o700, d)
            for f in files:
                self.assertEqual(mode(os.path.join(d, f)), 0o600, os.path.join(d, f))
                objects += 1
        self.assertGreater(objects, 1)

    def test_a_bucket_an_older_version_left_open_is_closed_at_mount(self):
        self.vol.format()
        self.vol.mount()
        self.write_private_file()
        self.vol.umount()
        volume_dir = os.path.join(self.vol.bucket, "itvol")
        self.assertTrue(os.path.isdir(volume_dir))
        # What tierfs before 0.4 left: 0755 directories, 0644 objects.
        for d, dirs, files in os.walk(self.vol.bucket):
            os.chmod(d, 0o755)
            for f in files:
                os.chmod(os.path.join(d, f), 0o644)
        self.assertEqual(as_nobody("grep", "-rlq", "the-secret-salary", self.vol.bucket).returncode, 0,
                         "the setup is readable by others, as old buckets were")
        self.vol.mount()
        self.assertEqual(mode(volume_dir), 0o700)
        self.assertIn("open to other users", self.vol.read_log())
        res = as_nobody("grep", "-rl", "the-secret-salary", self.vol.bucket)
        self.assertNotEqual(res.returncode, 0, res)

    def test_metadata_database_is_created_private(self):
        self.vol.format()
        self.vol.mount()
        with open(self.vol.path("f"), "wb") as f:
            f.write(b"x")
        files = [self.vol.meta_db + s for s in ("", "-wal", "-shm") if os.path.exists(self.vol.meta_db + s)]
        self.assertIn(self.vol.meta_db + "-wal", files)
        for p in files:
            self.assertEqual(mode(p), 0o600, p)
        res = as_nobody("cat", self.vol.meta_db)
        self.assertNotEqual(res.returncode, 0, res)
        self.assertIn("Permission denied", res.stderr)

    def test_format_warns_about_a_database_others_can_read(self):
        open(self.vol.meta_db, "wb").close()
        os.chmod(self.vol.meta_db, 0o644)
        rc, out, err = self.vol.format()
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.assertIn("readable by other users", err, msg(rc, out, err))
        self.assertIn("chmod 600", err)
        os.chmod(self.vol.meta_db, 0o600)
        rc, out, err = self.vol.format("--force")
        self.assertNotIn("readable by other users", err, msg(rc, out, err))

    def test_log_and_dump_are_private(self):
        self.vol.format()
        self.vol.mount()
        self.write_private_file()
        self.assertEqual(mode(self.vol.log), 0o600)
        self.assertNotEqual(as_nobody("cat", self.vol.log).returncode, 0)
        dump = os.path.join(self.vol.dir, "dump.json")
        self.assertOk(tierfs("dump", self.vol.meta_url, dump), "dump")
        self.assertEqual(mode(dump), 0o600)
        with open(dump) as f:
            self.assertIn("salaries", f.read())
        self.vol.umount()
        # An older log that everybody could read: other users lose access at the next mount.
        os.chmod(self.vol.log, 0o644)
        self.vol.mount()
        self.assertEqual(mode(self.vol.log) & 0o007, 0)
        res = as_nobody("cat", self.vol.log)
        self.assertNotEqual(res.returncode, 0, res)


if __name__ == "__main__":
    harness.main()
