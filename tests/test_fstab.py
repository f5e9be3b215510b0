"""Living with the OS: an fstab line of type tierfs mounts through mount(8) and its helper
mount.tierfs (the tierfs binary under that name), `tierfs mount --update-fstab` writes that
line, and the systemd unit template parses. `mount -a` skips a line that is mounted already
(rc 0), and an option neither tierfs nor FUSE knows is named in the error.

The helper must be /usr/sbin/mount.tierfs (or /sbin/...) for mount(8) to find it: the tests
link it there to the binary under test when nothing is there, and remove the link after.
"""

import json
import os
import shutil
import subprocess

import harness
from harness import msg, run, tierfs

HELPER = "/usr/sbin/mount.tierfs"


class FstabTest(harness.TierFSTestCase):
    PER_TEST = True
    AUTO_MOUNT = False

    def setUp(self):
        super().setUp()
        self.vol = self.new_volume()
        self.addCleanup(self.vol.cleanup)
        self.vol.format()
        self.fstab = os.path.join(self.vol.dir, "fstab")
        self.others = ["# /etc/fstab: static file system information.",
                       "",
                       "UUID=0a3407de-014b-458b-b5c1-848e92a327a3 /  ext4  errors=remount-ro 0 1",
                       "tmpfs /mnt/scratch tmpfs defaults,size=1G 0 0"]

    def install_helper(self):
        binary = os.path.realpath(harness.tierfs_bin())
        if os.path.lexists(HELPER):
            if os.path.realpath(HELPER) != binary:
                self.skipTest("%s exists and is not the binary under test" % HELPER)
            return
        os.symlink(binary, HELPER)
        self.addCleanup(lambda: os.path.islink(HELPER) and os.unlink(HELPER))

    def write_fstab(self, *lines):
        with open(self.fstab, "w") as f:
            f.write("\n".join(list(self.others) + list(lines)) + "\n")

    def umount(self):
        self.vol.pid = self.vol._find_daemon_pid(self.vol.mnt)
        self.vol.umount()

    def disk_roots(self):
        st = json.loads(os.getxattr(self.vol.mnt, "tierfs.stats"))
        return st["disk"].get("roots", [])

    def test_fstab_line_mounts_with_mount_and_mount_all(self):
        self.install_helper()
        cache = os.path.join(self.vol.dir, "nvme")
        os.mkdir(cache)
        self.write_fstab("%s %s tierfs _netdev,cache-dir=%s,log=%s,attr-cache=2,nofail,x-systemd.automount 0 0"
                         % (self.vol.meta_url, self.vol.mnt, cache, self.vol.log))
        for cmd in (["mount", "-T", self.fstab, self.vol.mnt], ["mount", "-a", "-T", self.fstab, "-t", "tierfs"]):
            rc, out, err = run(*cmd)
            self.assertEqual(rc, 0, " ".join(cmd) + "\n" + msg(rc, out, err))
            self.assertTrue(harness.is_mounted(self.vol.mnt), cmd)
            self.assertTrue(os.path.realpath(cache) in [os.path.realpath(r) for r in self.disk_roots()]
                            or any(r.startswith(cache) for r in self.disk_roots()), self.disk_roots())
            with open(self.vol.path("f"), "wb") as f:
                f.write(b"x" * 100000)
            self.assertEqual(os.path.getsize(self.vol.path("f")), 100000)
            self.assertTrue(os.path.isdir(os.path.join(cache, self.vol.status_json()["uuid"])))
            self.umount()
            self.assertIn("mounted", self.vol.read_log())  # log= applied
            os.unlink(self.vol.log)
        # mount's own -o joins the fstab options: ro is the mount's read-only mode.
        rc, out, err = run("mount", "-T", self.fstab, "-o", "ro", self.vol.mnt)
        self.assertEqual(rc, 0, msg(rc, out, err))
        with self.assertRaises(OSError) as e:
            open(self.vol.path("g"), "wb")
        self.assertEqual(e.exception.errno, 30)  # EROFS
        self.umount()

    def test_bad_option_fails_with_a_message(self):
        self.install_helper()
        self.write_fstab("%s %s tierfs _netdev,cache-size 0 0" % (self.vol.meta_url, self.vol.mnt))
        rc, out, err = run("mount", "-T", self.fstab, self.vol.mnt)
        self.assertNotEqual(rc, 0)
        self.assertIn("cache-size needs a value", out + err)
        self.assertFalse(harness.is_mounted(self.vol.mnt))

    def mounts_at(self, path):
        with open("/proc/self/mountinfo") as f:
            return sum(1 for line in f if line.split()[4] == path)

    def test_mount_all_skips_a_line_already_mounted(self):
        # As for other file systems: the mounted line is skipped and mount -a returns 0.
        self.install_helper()
        self.write_fstab("%s %s tierfs _netdev,cache-dir=%s,log=%s 0 0"
                         % (self.vol.meta_url, self.vol.mnt, os.path.join(self.vol.dir, "c"), self.vol.log))
        for attempt in range(2):
            rc, out, err = run("mount", "-a", "-T", self.fstab, "-t", "tierfs")
            self.assertEqual(rc, 0, "mount -a, attempt %d\n%s" % (attempt + 1, msg(rc, out, err)))
            self.assertEqual(self.mounts_at(self.vol.mnt), 1)
        # The source mount(8) compares is the META-URL, as in fstab.
        rc, out, err = run("findmnt", "-n", "-o", "SOURCE", self.vol.mnt)
        self.assertEqual(out.strip(), self.vol.meta_url, msg(rc, out, err))
        self.umount()

    def test_unknown_option_is_named(self):
        self.install_helper()
        self.write_fstab("%s %s tierfs _netdev,allow_other,no-such-option 0 0" % (self.vol.meta_url, self.vol.mnt))
        rc, out, err = run("mount", "-T", self.fstab, self.vol.mnt)
        self.assertNotEqual(rc, 0)
        self.assertIn("unknown mount option 'no-such-option'", out + err, msg(rc, out, err))
        self.assertFalse(harness.is_mounted(self.vol.mnt))

    def fstab_lines(self):
        with open(self.fstab) as f:
            return f.read().splitlines()

    def test_update_fstab_adds_then_replaces_the_line(self):
        self.write_fstab()
        env = dict(os.environ, TIERFS_FSTAB=self.fstab)
        cache = os.path.join(self.vol.dir, "cache1")
        rc, out, err = self.vol.mount_at(self.vol.mnt, "--cache-dir", cache, "--attr-cache", "2", "--writeback",
                                         "-o", "allow_other", "--update-fstab", log=self.vol.log, env=env)
        self.assertEqual(rc, 0, msg(rc, out, err))
        lines = self.fstab_lines()
        self.assertEqual(lines[:len(self.others)], self.others)
        self.assertEqual(len(lines), len(self.others) + 1)
        fields = lines[-1].split()
        self.assertEqual(fields[:3], [self.vol.meta_url, self.vol.mnt, "tierfs"])
        self.assertEqual(fields[4:], ["0", "0"])
        self.assertEqual(sorted(fields[3].split(",")),
                         sorted(["_netdev", "cache-dir=" + cache, "attr-cache=2", "writeback", "allow_other",
                                 "log=" + self.vol.log]))
        self.umount()
        # A second mount with other options: the same line replaced, the others untouched.
        rc, out, err = self.vol.mount_at(self.vol.mnt, "--cache-dir", cache, "--read-only", "--update-fstab",
                                         log=self.vol.log, env=env)
        self.assertEqual(rc, 0, msg(rc, out, err))
        lines = self.fstab_lines()
        self.assertEqual(lines[:len(self.others)], self.others)
        self.assertEqual(len(lines), len(self.others) + 1)
        self.assertEqual(sorted(lines[-1].split()[3].split(",")),
                         sorted(["_netdev", "cache-dir=" + cache, "ro", "log=" + self.vol.log]))
        self.umount()
        # The line it wrote mounts through mount(8).
        self.install_helper()
        rc, out, err = run("mount", "-T", self.fstab, self.vol.mnt)
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.assertTrue(harness.is_mounted(self.vol.mnt))
        with self.assertRaises(OSError):
            open(self.vol.path("g"), "wb")  # ro came back
        self.umount()

    def test_update_fstab_keeps_passwords_out(self):
        self.write_fstab()
        env = dict(os.environ, TIERFS_FSTAB=self.fstab)
        rc, out, err = tierfs("mount", "redis://:hunter2@127.0.0.1:1/1", self.vol.mnt, "-d", "--update-fstab", env=env)
        self.assertNotEqual(rc, 0)
        self.assertIn("TIERFS_META_PASSWORD_FILE", err)
        with open(self.fstab) as f:
            self.assertNotIn("hunter2", f.read())
        self.assertFalse(harness.is_mounted(self.vol.mnt))

    def test_systemd_unit_template_verifies(self):
        if not shutil.which("systemd-analyze"):
            self.skipTest("no systemd-analyze")
        with open(os.path.join(harness.REPO, "scripts", "systemd", "tierfs@.service")) as f:
            unit = f.read()
        d = os.path.join(self.vol.dir, "units")
        os.mkdir(d)
        # The instance of one mount point, with the binary under test where the unit expects it.
        path = os.path.join(d, "tierfs@mnt-data.service")
        with open(path, "w") as f:
            f.write(unit.replace("/usr/local/bin/tierfs", os.path.realpath(harness.tierfs_bin())))
        rc, out, err = run("systemd-analyze", "verify", path)
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.assertNotIn("tierfs@", out + err)  # no warning about the unit


if __name__ == "__main__":
    harness.main()
