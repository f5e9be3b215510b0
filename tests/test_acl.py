"""POSIX ACLs on a real mount, set and read with setfacl/getfacl and enforced on ordinary
users' syscalls: named users and groups (supplementary groups included), the mask and
chmod, default ACLs inherited by new files and directories in place of the umask, removal,
remount, and cp -a / getfacl -R / setfacl --restore round trips. Wherever the outcome is
a getfacl listing or an errno it is compared with the same operations on the local ext4.

Run twice: with the kernel enforcing ACLs too (default_permissions, the default), and
with --no-default-permissions and every kernel cache off, where TierFS alone decides."""

import errno
import os
import stat
import unittest

import harness
from harness import msg, run

ALICE = (1000, 1000, [])
BOB = (1001, 1001, [])
CAROL = (1002, 1002, [2000])  # in group 2000 through a supplementary group only


def as_user(who, fn):
    """Runs fn() as who = (uid, gid, supplementary groups) in a child process; returns
    the errno it raised (0 when none)."""
    return harness.errno_as(*who, fn)


def read(path):
    with open(path, "rb") as f:
        f.read()


def write(path):
    with open(path, "r+b") as f:
        f.write(b"w")


def create(path):
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))


class AclRules:
    """Mixed into the two test classes below."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        os.chmod(cls.vol.dir, 0o755)  # other users reach the mount point

    def setUp(self):
        super().setUp()
        os.chmod(self.work, 0o755)
        self.old_umask = os.umask(0o022)
        self.addCleanup(os.umask, self.old_umask)
        self._local = None

    # ----- helpers ---------------------------------------------------------------------

    def local(self):
        """A directory on the local file system for comparisons; skips when it has no ACLs."""
        if self._local is None:
            d = self.local_tmpdir()
            os.chmod(d, 0o755)
            probe = os.path.join(d, "probe")
            create(probe)
            rc, out, err = run("setfacl", "-m", "u:1000:r", probe)
            if rc != 0:
                raise unittest.SkipTest("the local file system has no POSIX ACLs: " + err.strip())
            os.unlink(probe)
            self._local = d
        return self._local

    def both(self, name):
        """The same relative path under the mount and under the local directory."""
        return os.path.join(self.work, name), os.path.join(self.local(), name)

    def facl(self, path, *opts):
        """getfacl -n of path, run from its directory so that the listing names it relatively."""
        res = run("getfacl", "-n", *opts, os.path.basename(path), cwd=os.path.dirname(path))
        self.assertEqual(res[0], 0, msg(*res))
        return res[1]

    def setfacl(self, *args):
        res = run("setfacl", *args)
        self.assertEqual(res[0], 0, msg(*res))

    def facl_tree(self, root):
        """getfacl -R of a tree as {relative path: listing}, independent of readdir order."""
        res = run("getfacl", "-R", "-n", ".", cwd=root)
        self.assertEqual(res[0], 0, msg(*res))
        out = {}
        for block in res[1].strip().split("\n\n"):
            lines = block.splitlines()
            out[lines[0]] = "\n".join(lines[1:])
        return out

    def file(self, path, mode, data=b"secret"):
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, mode)
        return path

    def assertSameFacl(self, ours, ext4):
        self.assertEqual(self.facl(ours), self.facl(ext4))
        self.assertEqual(stat.S_IMODE(os.stat(ours).st_mode), stat.S_IMODE(os.stat(ext4).st_mode), ours)

    # ----- tests -----------------------------------------------------------------------

    def test_fresh_file_and_directory(self):
        for i, make in enumerate((lambda p: self.file(p, 0o644), os.mkdir)):
            ours, ext4 = self.both("fresh%d" % i)
            make(ours)
            make(ext4)
            self.assertSameFacl(ours, ext4)
        self.assertNotIn("system.posix_acl_access", os.listxattr(ours))
        with self.assertRaises(OSError) as cm:
            os.getxattr(ours, "system.posix_acl_access")
        self.assertEqual(cm.exception.errno, errno.ENODATA)

    def test_named_user_is_granted_what_the_mode_denies(self):
        for p in self.both("f"):
            self.file(p, 0o600)
            self.assertEqual(as_user(ALICE, lambda: read(p)), errno.EACCES, p)
            self.setfacl("-m", "u:1000:rw", p)
            self.assertEqual(as_user(ALICE, lambda: read(p)), 0, p)
            self.assertEqual(as_user(ALICE, lambda: write(p)), 0, p)
            self.assertEqual(as_user(BOB, lambda: read(p)), errno.EACCES, p)
            # Only the owner (or root) may change an ACL.
            self.assertEqual(as_user(ALICE, lambda: os.setxattr(p, "system.posix_acl_access",
                                                                 os.getxattr(p, "system.posix_acl_access"))),
                             errno.EPERM, p)
        self.assertSameFacl(*self.both("f"))
        ours = self.both("f")[0]
        self.assertEqual(stat.S_IMODE(os.stat(ours).st_mode), 0o660)  # group bits: the mask
        self.assertIn("system.posix_acl_access", os.listxattr(ours))

    def test_named_group_through_supplementary_groups(self):
        for p in self.both("g"):
            self.file(p, 0o640)
            self.setfacl("-m", "g:2000:r", p)
            self.assertEqual(as_user(CAROL, lambda: read(p)), 0, p)
            self.assertEqual(as_user(CAROL, lambda: write(p)), errno.EACCES, p)
            self.assertEqual(as_user((1002, 1002, []), lambda: read(p)), errno.EACCES, p)
            # A group entry that matches and does not grant denies, although other grants.
            self.setfacl("-m", "g:2000:-,o::r", p)
            self.assertEqual(as_user(CAROL, lambda: read(p)), errno.EACCES, p)
            self.assertEqual(as_user(BOB, lambda: read(p)), 0, p)
            # Unless the mask is empty: then (in Linux) the ACL is not consulted at all.
            os.chmod(p, 0o604)
            self.assertEqual(as_user(CAROL, lambda: read(p)), 0, p)
        self.assertSameFacl(*self.both("g"))

    def test_directory_acl_grants_search_and_create(self):
        for d in self.both("dir"):
            os.mkdir(d, 0o700)
            self.file(os.path.join(d, "inside"), 0o644)
            self.assertEqual(as_user(ALICE, lambda: os.stat(os.path.join(d, "inside"))), errno.EACCES, d)
            self.setfacl("-m", "u:1000:rwx", d)
            self.assertEqual(as_user(ALICE, lambda: read(os.path.join(d, "inside"))), 0, d)
            self.assertEqual(as_user(ALICE, lambda: create(os.path.join(d, "alice"))), 0, d)
            self.assertEqual(as_user(ALICE, lambda: os.unlink(os.path.join(d, "alice"))), 0, d)
            self.assertEqual(as_user(BOB, lambda: os.listdir(d)), errno.EACCES, d)
        self.assertSameFacl(*self.both("dir"))

    def test_mask_limits_named_entries_and_follows_chmod(self):
        for p in self.both("m"):
            self.file(p, 0o644)
            self.setfacl("-m", "u:1000:rwx,g:2000:rw", p)
            os.chmod(p, 0o640)  # the mask becomes r--
            self.assertEqual(as_user(ALICE, lambda: read(p)), 0, p)
            self.assertEqual(as_user(ALICE, lambda: write(p)), errno.EACCES, p)
            self.assertEqual(as_user(CAROL, lambda: write(p)), errno.EACCES, p)
        ours, ext4 = self.both("m")
        self.assertIn("mask::r--", self.facl(ours))
        self.assertIn("#effective:r--", self.facl(ours))
        self.assertSameFacl(ours, ext4)
        for p in (ours, ext4):
            os.chmod(p, 0o660)
            self.assertEqual(as_user(ALICE, lambda: write(p)), 0, p)
            self.assertEqual(as_user(CAROL, lambda: write(p)), 0, p)
            # setfacl -m m:: limits the named entries and shows in the mode.
            self.setfacl("-m", "m::r", p)
            self.assertEqual(as_user(ALICE, lambda: write(p)), errno.EACCES, p)
        self.assertSameFacl(ours, ext4)
        self.assertEqual(stat.S_IMODE(os.stat(ours).st_mode), 0o640)

    def test_default_acl_is_inherited_instead_of_the_umask(self):
        os.umask(0o077)
        for d in self.both("inherit"):
            os.mkdir(d)
            os.chmod(d, 0o755)
            self.setfacl("-d", "-m", "u:1000:rwx,g:2000:rx,o::r", d)
            os.close(os.open(os.path.join(d, "file"), os.O_CREAT | os.O_WRONLY, 0o666))
            os.mkdir(os.path.join(d, "sub"), 0o777)
            os.close(os.open(os.path.join(d, "sub", "deep"), os.O_CREAT | os.O_WRONLY, 0o640))
            os.mkfifo(os.path.join(d, "fifo"), 0o666)
            os.symlink("file", os.path.join(d, "link"))
            self.assertEqual(as_user(ALICE, lambda: write(os.path.join(d, "file"))), 0, d)
            self.assertEqual(as_user(ALICE, lambda: create(os.path.join(d, "sub", "alice"))), 0, d)
            # Elsewhere the umask still applies.
            os.close(os.open(os.path.join(d + "-plain"), os.O_CREAT | os.O_WRONLY, 0o666))
        ours, ext4 = self.both("inherit")
        self.assertSameFacl(ours, ext4)
        for rel in ("file", "sub", "sub/deep", "sub/alice", "fifo"):
            self.assertSameFacl(os.path.join(ours, rel), os.path.join(ext4, rel))
        self.assertEqual(stat.S_IMODE(os.stat(os.path.join(ours, "file")).st_mode), 0o664)
        self.assertEqual(stat.S_IMODE(os.stat(os.path.join(ours, "sub")).st_mode), 0o774)
        self.assertIn("default:user:1000:rwx", self.facl(os.path.join(ours, "sub")))
        self.assertEqual(stat.S_IMODE(os.stat(ours + "-plain").st_mode), 0o600)
        self.assertEqual(os.readlink(os.path.join(ours, "link")), "file")

    def test_removal(self):
        for d in self.both("rm"):
            os.mkdir(d, 0o755)
            p = self.file(os.path.join(d, "f"), 0o600)
            self.setfacl("-m", "u:1000:r", p)
            self.setfacl("-d", "-m", "u:1000:rwx", d)
            self.setfacl("-b", p)  # every extended entry, the mask too
            self.setfacl("-k", d)  # the default ACL
            self.assertEqual(as_user(ALICE, lambda: read(p)), errno.EACCES, p)
        ours, ext4 = self.both("rm")
        self.assertSameFacl(ours, ext4)
        self.assertSameFacl(os.path.join(ours, "f"), os.path.join(ext4, "f"))
        self.assertEqual(os.listxattr(ours), [])
        self.assertEqual(os.listxattr(os.path.join(ours, "f")), [])

    def test_errors_as_ext4(self):
        value = None
        for d in self.both("errs"):
            os.mkdir(d, 0o755)
            p = self.file(os.path.join(d, "f"), 0o644)
            self.setfacl("-m", "u:1000:r", p)
            value = os.getxattr(p, "system.posix_acl_access")
        cases = [
            ("default ACL on a file", lambda d: os.setxattr(os.path.join(d, "f"), "system.posix_acl_default", value)),
            ("malformed", lambda d: os.setxattr(os.path.join(d, "f"), "system.posix_acl_access", value[:-2])),
            ("remove absent default", lambda d: os.removexattr(d, "system.posix_acl_default")),
            ("non-owner", None),
        ]
        for what, fn in cases:
            got = []
            for d in self.both("errs"):
                if fn is None:
                    got.append(as_user(ALICE, lambda: os.removexattr(os.path.join(d, "f"), "system.posix_acl_access")))
                    continue
                try:
                    fn(d)
                    got.append(0)
                except OSError as e:
                    got.append(e.errno)
            self.assertEqual(got[0], got[1], "%s: errno %s on TierFS, %s on ext4" % (what, got[0], got[1]))
        self.assertEqual(got, [errno.EPERM, errno.EPERM])


class KernelAndTierFS(AclRules, harness.TierFSTestCase):
    """default_permissions (the default): the kernel checks the ACLs it caches, TierFS again."""
    MOUNT_ARGS = ["-o", "allow_other"]

    def test_acls_survive_a_remount(self):
        d = os.path.join(self.work, "kept")
        os.mkdir(d, 0o750)
        p = self.file(os.path.join(d, "f"), 0o600)
        self.setfacl("-m", "u:1000:rwx", d)
        self.setfacl("-d", "-m", "g:2000:rw", d)
        self.setfacl("-m", "u:1000:r,g:2000:rw", p)
        before = self.facl_tree(d)
        self.vol.remount()
        self.assertEqual(self.facl_tree(d), before)
        self.assertEqual(as_user(ALICE, lambda: read(p)), 0)
        self.assertEqual(as_user(ALICE, lambda: write(p)), errno.EACCES)
        self.assertEqual(as_user(CAROL, lambda: write(p)), errno.EACCES)  # no search on d
        rc, out, err = harness.tierfs("fsck", self.vol.meta_url)
        self.assertEqual(rc, 0, msg(rc, out, err))

    def test_cp_a_getfacl_restore_round_trip(self):
        src = os.path.join(self.work, "tree")
        os.makedirs(os.path.join(src, "a", "b"))
        self.file(os.path.join(src, "a", "f1"), 0o640)
        self.file(os.path.join(src, "a", "b", "f2"), 0o755)
        self.file(os.path.join(src, "plain"), 0o644)
        self.setfacl("-R", "-m", "u:1000:rX,g:2000:r", os.path.join(src, "a"))
        self.setfacl("-d", "-m", "u:1001:rwx", os.path.join(src, "a", "b"))
        want = self.facl_tree(src)
        self.assertIn("default:user:1001:rwx", want["# file: a/b"])
        # To the local file system and back.
        ext4 = os.path.join(self.local(), "copy")
        res = run("cp", "-a", src, ext4)
        self.assertEqual(res[0], 0, msg(*res))
        self.assertEqual(self.facl_tree(ext4), want)
        back = os.path.join(self.work, "back")
        res = run("cp", "-a", ext4, back)
        self.assertEqual(res[0], 0, msg(*res))
        self.assertEqual(self.facl_tree(back), want)
        # Saved with getfacl -R, stripped, restored.
        saved = run("getfacl", "-R", "-n", ".", cwd=back)[1]
        self.setfacl("-R", "-b", back)
        self.assertNotEqual(self.facl_tree(back), want)
        res = run("setfacl", "--restore=-", input=saved, cwd=back)
        self.assertEqual(res[0], 0, msg(*res))
        self.assertEqual(self.facl_tree(back), want)


class TierFSAlone(AclRules, harness.TierFSTestCase):
    """No kernel checks and no kernel caches: every decision above is TierFS's own."""
    MOUNT_ARGS = ["-o", "allow_other", "--no-default-permissions", "--entry-cache", "0",
                  "--dir-entry-cache", "0", "--attr-cache", "0"]


if __name__ == "__main__":
    harness.main()
