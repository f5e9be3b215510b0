"""Permission rules for an ordinary user (uid 1000, gid 1000, supplementary group 2000),
with and without -o default_permissions: EACCES versus EPERM exactly as Linux returns them,
search permission on every path component, supplementary groups, sticky directories, and
set-user-ID / set-group-ID bits cleared by a write from a non-owner and by chown."""

import errno
import os
import stat
import subprocess
import unittest

import harness

SCRIPT_OK = 0


def as_user(fn):
    """Runs fn() as uid 1000 / gid 1000 with supplementary group 2000 in a child process;
    returns the errno it raised (0 when none)."""
    return harness.errno_as(1000, 1000, [2000], fn)


def run_program(path):
    rc = subprocess.call([path])
    if rc != 0:
        raise OSError(errno.EIO, "%s exited with %d" % (path, rc))


class PermissionRules:
    """Mixed into two test classes: with and without default_permissions."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        os.chmod(cls.vol.dir, 0o755)

    def setUp(self):
        super().setUp()
        os.chmod(self.work, 0o755)
        self.w = self.work

    def path(self, *parts):
        return os.path.join(self.w, *parts)

    def mkfile(self, name, mode, uid=0, gid=0, data=b"x"):
        p = self.path(name)
        with open(p, "wb") as f:
            f.write(data)
        os.chown(p, uid, gid)
        os.chmod(p, mode)
        return p

    def mkdir(self, name, mode, uid=0, gid=0):
        p = self.path(name)
        os.mkdir(p)
        os.chown(p, uid, gid)
        os.chmod(p, mode)
        return p

    def test_file_modes_and_groups(self):
        owner_only = self.mkfile("owner-only", 0o600)
        group_rw = self.mkfile("group-rw", 0o660, gid=2000)  # via the supplementary group
        other_r = self.mkfile("other-r", 0o604)
        self.assertEqual(as_user(lambda: open(owner_only, "rb").read()), errno.EACCES)
        self.assertEqual(as_user(lambda: os.close(os.open(group_rw, os.O_RDWR))), 0)
        self.assertEqual(as_user(lambda: open(other_r, "rb").read()), 0)
        self.assertEqual(as_user(lambda: open(other_r, "r+b")), errno.EACCES)

    def test_execute_only_program_runs(self):
        # Mode --x for the caller: execve needs execute permission only (the kernel opens
        # the program for exec, not for reading); reading it stays forbidden.
        p = self.path("true-x")
        with open("/bin/true", "rb") as src, open(p, "wb") as dst:
            dst.write(src.read())
        os.chmod(p, 0o711)
        self.assertEqual(as_user(lambda: run_program(p)), 0)
        self.assertEqual(as_user(lambda: open(p, "rb").read(1)), errno.EACCES)
        os.chmod(p, 0o700)
        self.assertEqual(as_user(lambda: run_program(p)), errno.EACCES)

    def test_directory_search_and_write(self):
        d = self.mkdir("closed", 0o700)
        with open(os.path.join(d, "inside"), "wb") as f:
            f.write(b"x")
        self.assertEqual(as_user(lambda: os.stat(os.path.join(d, "inside"))), errno.EACCES)
        ro = self.mkdir("readonly", 0o755)
        self.assertEqual(as_user(lambda: open(os.path.join(ro, "new"), "wb")), errno.EACCES)
        with open(os.path.join(ro, "victim"), "wb") as f:
            f.write(b"x")
        self.assertEqual(as_user(lambda: os.unlink(os.path.join(ro, "victim"))), errno.EACCES)
        self.assertEqual(as_user(lambda: os.mkdir(os.path.join(ro, "sub"))), errno.EACCES)
        self.assertEqual(as_user(lambda: os.rename(os.path.join(ro, "victim"), os.path.join(ro, "v2"))),
                         errno.EACCES)
        mine = self.mkdir("mine", 0o755, uid=1000, gid=1000)
        self.assertEqual(as_user(lambda: os.close(os.open(os.path.join(mine, "new"), os.O_CREAT | os.O_WRONLY))), 0)

    def test_sticky_directory(self):
        tmp = self.mkdir("tmp", 0o1777)
        theirs = os.path.join(tmp, "theirs")
        with open(theirs, "wb") as f:
            f.write(b"x")
        self.assertEqual(as_user(lambda: os.unlink(theirs)), errno.EPERM)
        self.assertEqual(as_user(lambda: os.rename(theirs, os.path.join(tmp, "stolen"))), errno.EPERM)
        self.assertEqual(as_user(lambda: open(os.path.join(tmp, "own"), "wb").close()), 0)
        self.assertEqual(as_user(lambda: os.unlink(os.path.join(tmp, "own"))), 0)

    def test_chmod_chown_rules(self):
        theirs = self.mkfile("theirs", 0o666)
        mine = self.mkfile("mine", 0o644, uid=1000, gid=1000)
        self.assertEqual(as_user(lambda: os.chmod(theirs, 0o600)), errno.EPERM)
        self.assertEqual(as_user(lambda: os.chmod(mine, 0o600)), 0)
        self.assertEqual(as_user(lambda: os.chown(mine, 0, -1)), errno.EPERM)
        self.assertEqual(as_user(lambda: os.chown(mine, -1, 2000)), 0)  # to one of its groups
        self.assertEqual(os.stat(mine).st_gid, 2000)
        self.assertEqual(as_user(lambda: os.chown(mine, -1, 3000)), errno.EPERM)
        self.assertEqual(as_user(lambda: os.chown(theirs, -1, 2000)), errno.EPERM)

    def test_setid_bits_cleared(self):
        p = self.mkfile("suid", 0o6777)
        self.assertEqual(os.stat(p).st_mode & 0o7777, 0o6777)
        # A write by a non-owner clears set-user-ID and set-group-ID (group exec is set).
        def write():
            fd = os.open(p, os.O_WRONLY)
            try:
                os.write(fd, b"changed")
            finally:
                os.close(fd)
        self.assertEqual(as_user(write), 0)
        mode = os.stat(p).st_mode
        self.assertFalse(mode & stat.S_ISUID, oct(mode))
        self.assertFalse(mode & stat.S_ISGID, oct(mode))
        with open(p, "rb") as f:
            self.assertEqual(f.read(), b"changed")
        # chown clears them too.
        q = self.mkfile("suid2", 0o6755)
        os.chown(q, 1000, 1000)
        self.assertFalse(os.stat(q).st_mode & (stat.S_ISUID | stat.S_ISGID), oct(os.stat(q).st_mode))


class WithoutDefaultPermissions(PermissionRules, harness.TierFSTestCase):
    # TierFS alone checks; with kernel caches off every lookup reaches it.
    MOUNT_ARGS = ["-o", "allow_other", "--no-default-permissions", "--entry-cache", "0",
                  "--dir-entry-cache", "0", "--attr-cache", "0"]


class WithDefaultPermissions(PermissionRules, harness.TierFSTestCase):
    MOUNT_ARGS = ["-o", "allow_other,default_permissions"]




class MountOptionsDevSuid(harness.TierFSTestCase):
    """-o dev,suid make device nodes and set-user-ID programs work, as an administrator may
    want for a root file system of containers; without them (the default) a mount is
    nodev,nosuid."""

    PER_TEST = True
    AUTO_MOUNT = False

    def mount_with(self, *opts):
        vol = self.new_volume()
        self.addCleanup(vol.cleanup)
        vol.format()
        vol.mount(*opts)
        os.chmod(vol.dir, 0o755)
        return vol

    def flags(self, mnt):
        with open("/proc/self/mountinfo") as f:
            for line in f:
                fields = line.split()
                if fields[4] == mnt:
                    return set(fields[5].split(","))
        self.fail("%s is not mounted" % mnt)

    def setuid_id(self, vol):
        p = vol.path("id")
        with open("/usr/bin/id", "rb") as src, open(p, "wb") as dst:
            dst.write(src.read())
        os.chmod(p, 0o4755)
        res = harness.run("setpriv", "--reuid=1000", "--regid=1000", "--clear-groups", p, "-u")
        self.assertEqual(res[0], 0, harness.msg(*res))
        return int(res[1].strip())

    def device_works(self, vol):
        null, zero = vol.path("null"), vol.path("zero")
        os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        os.mknod(zero, stat.S_IFCHR | 0o666, os.makedev(1, 5))
        try:
            with open(zero, "rb") as f:
                ok = f.read(4) == bytes(4)
            with open(null, "wb") as f:
                f.write(b"gone")
            return ok
        except PermissionError:
            return False

    def test_dev_suid(self):
        vol = self.mount_with("-o", "dev,suid,allow_other")
        self.assertFalse({"nodev", "nosuid"} & self.flags(vol.mnt))
        self.assertTrue(self.device_works(vol), "device nodes refused on a dev mount")
        self.assertEqual(self.setuid_id(vol), 0, "set-user-ID ignored on a suid mount")

    def test_default_is_nodev_nosuid(self):
        vol = self.mount_with("-o", "allow_other")
        self.assertLessEqual({"nodev", "nosuid"}, self.flags(vol.mnt))
        self.assertFalse(self.device_works(vol), "a device node worked on a nodev mount")
        self.assertEqual(self.setuid_id(vol), 1000)


if __name__ == "__main__":
    harness.main()
