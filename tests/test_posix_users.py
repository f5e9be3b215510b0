"""What other local users can do on a mounted TierFS volume (-o allow_other): ownership of
what they create, set-group-ID directories, permission checks, sticky directories. ctest runs
it twice, with the trash off and on (TIERFS_TEST_TRASH_DAYS=1), like test_posix_ops."""

import errno
import os
import stat

import harness
from harness import in_child
from test_posix_ops import read_file, write_file

os.umask(0o022)


def _as_user(uid, gid, fn, *args):
    def wrapped():
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
        return fn(*args)
    return in_child(wrapped)


def _create_things(d):
    with open(os.path.join(d, "userfile"), "wb") as f:
        f.write(b"by user")
    os.mkdir(os.path.join(d, "userdir"))
    os.symlink("userfile", os.path.join(d, "userlink"))
    return os.getuid()


def _try_create(path):
    with open(path, "wb") as f:
        f.write(b"x")
    return "created"


def _try_read(path):
    with open(path, "rb") as f:
        return f.read().decode()


def _try_chmod(path):
    os.chmod(path, 0o777)
    return "chmodded"


class NonRootTest(harness.TierFSTestCase):
    MOUNT_ARGS = ["-o", "allow_other"]

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # The temporary directory is private to root; let uid 1000 reach the mountpoint.
        os.chmod(cls.vol.dir, 0o755)
        os.chmod(cls.vol.mnt, 0o755)

    def setUp(self):
        super().setUp()
        os.chmod(self.work, 0o755)
        self.shared = os.path.join(self.work, "shared")
        os.mkdir(self.shared)
        os.chmod(self.shared, 0o777)

    def test_files_owned_by_creating_user(self):
        res = _as_user(1000, 1000, _create_things, self.shared)
        self.assertEqual(res, {"ok": 1000}, res)
        for n in ("userfile", "userdir"):
            st = os.stat(os.path.join(self.shared, n))
            self.assertEqual((st.st_uid, st.st_gid), (1000, 1000), n)
        st = os.lstat(os.path.join(self.shared, "userlink"))
        self.assertEqual((st.st_uid, st.st_gid), (1000, 1000))
        self.assertEqual(read_file(os.path.join(self.shared, "userfile")), b"by user")

    def test_setgid_dir_with_non_root_creator(self):
        d = os.path.join(self.work, "group")
        os.mkdir(d)
        os.chown(d, 0, 1234)
        os.chmod(d, 0o2777)
        res = _as_user(1000, 1000, _create_things, d)
        self.assertEqual(res, {"ok": 1000}, res)
        st = os.stat(os.path.join(d, "userfile"))
        self.assertEqual((st.st_uid, st.st_gid), (1000, 1234))
        st = os.stat(os.path.join(d, "userdir"))
        self.assertEqual((st.st_uid, st.st_gid), (1000, 1234))
        self.assertTrue(st.st_mode & stat.S_ISGID)

    def test_permission_checks(self):
        private = os.path.join(self.work, "private")
        os.mkdir(private, 0o755)
        res = _as_user(1000, 1000, _try_create, os.path.join(private, "nope"))
        self.assertEqual(res.get("errno"), errno.EACCES, res)
        self.assertFalse(os.path.exists(os.path.join(private, "nope")))
        secret = os.path.join(self.work, "secret")
        write_file(secret, b"s")
        os.chmod(secret, 0o600)
        res = _as_user(1000, 1000, _try_read, secret)
        self.assertEqual(res.get("errno"), errno.EACCES, res)
        os.chmod(secret, 0o644)
        self.assertEqual(_as_user(1000, 1000, _try_read, secret), {"ok": "s"})
        res = _as_user(1000, 1000, _try_chmod, secret)
        self.assertEqual(res.get("errno"), errno.EPERM, res)
        res = _as_user(1000, 1000, _try_create, secret)
        self.assertEqual(res.get("errno"), errno.EACCES, res)
        self.assertEqual(read_file(secret), b"s")

    def test_sticky_directory(self):
        tmp = os.path.join(self.work, "tmp")
        os.mkdir(tmp)
        os.chmod(tmp, 0o1777)
        victim = os.path.join(tmp, "rootfile")
        write_file(victim, b"r")
        os.chmod(victim, 0o666)

        def try_unlink(p):
            os.unlink(p)
            return "unlinked"
        res = _as_user(1000, 1000, try_unlink, victim)
        self.assertEqual(res.get("errno"), errno.EPERM, res)
        self.assertTrue(os.path.exists(victim))
        res = _as_user(1000, 1000, _try_create, os.path.join(tmp, "mine"))
        self.assertEqual(res, {"ok": "created"})
        self.assertEqual(_as_user(1000, 1000, try_unlink, os.path.join(tmp, "mine")), {"ok": "unlinked"})


if __name__ == "__main__":
    harness.main()
