"""`tierfs clone` on real mounts, on SQLite and on Redis: a tree is copied without copying a
byte (the store holds the same objects), byte-exact with its symlinks, xattrs, modes and
holes; the copy appears under its name complete (no hidden entry is left); writes, deletes
and truncations on either side do not show in the other, and deleting the source keeps the
clone's data; usage counts the clone, gc finds nothing leaked, fsck is clean. Bad requests
(an existing name, a destination inside the source) fail with a clear error. A clone of
another user's file belongs to the caller and counts in the caller's quota.
`cp --reflink=auto` of a file (copy_file_range through FUSE) shares the data the same way.
"""

import hashlib
import json
import os
import shutil
import subprocess

import harness
from harness import msg, tierfs


def objects(bucket):
    return sum(len(fs) for _, _, fs in os.walk(bucket))


def digest_tree(root):
    out = {}
    for d, dirs, files in os.walk(root):
        dirs.sort()
        for n in sorted(files) + sorted(x for x in dirs):
            p = os.path.join(d, n)
            st = os.lstat(p)
            rel = os.path.relpath(p, root)
            if os.path.islink(p):
                out[rel] = ("link", os.readlink(p))
            elif os.path.isdir(p):
                out[rel] = ("dir", oct(st.st_mode))
            else:
                with open(p, "rb") as f:
                    out[rel] = ("file", oct(st.st_mode), hashlib.sha256(f.read()).hexdigest(),
                                sorted(os.listxattr(p)))
    return out


class CloneTest(harness.TierFSTestCase):
    PER_TEST = True
    AUTO_MOUNT = False

    def make_tree(self, root):
        for d in range(5):
            sub = os.path.join(root, "d%d" % d, "deep")
            os.makedirs(sub)
            for i in range(40):
                with open(os.path.join(sub if i % 2 else os.path.dirname(sub), "f%02d" % i), "wb") as f:
                    f.write(os.urandom(1000 * i + 1))
        os.symlink("d0/f00", os.path.join(root, "link"))
        os.setxattr(os.path.join(root, "d1", "f00"), "user.tag", b"v")
        os.chmod(os.path.join(root, "d2", "f02"), 0o600)
        with open(os.path.join(root, "sparse"), "wb") as f:
            f.truncate(50 << 20)
            f.seek(20 << 20)
            f.write(b"x" * 100000)

    def check_clone(self, vol):
        vol.format("--force")
        vol.mount()
        src, dst = os.path.join(vol.mnt, "src"), os.path.join(vol.mnt, "dst")
        os.mkdir(src)
        self.make_tree(src)
        before_objects = objects(vol.bucket) if vol.storage is None else None
        used = vol.status_json()["used_bytes"]
        self.assertFalse(os.path.exists(dst))  # the kernel may now cache a negative entry
        rc, out, err = tierfs("clone", src, dst)
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.assertEqual(digest_tree(dst), digest_tree(src))
        self.assertEqual(sorted(os.listdir(vol.mnt)), ["dst", "src"])  # no hidden entry left
        if before_objects is not None:
            self.assertEqual(objects(vol.bucket), before_objects)  # not a byte copied
        self.assertEqual(vol.status_json()["used_bytes"], 2 * used)
        # Isolation both ways.
        snapshot = digest_tree(src)
        with open(os.path.join(dst, "d0", "f02"), "r+b") as f:
            f.write(b"changed")
        os.truncate(os.path.join(dst, "d1", "f04"), 3)
        os.unlink(os.path.join(dst, "d2", "f02"))
        self.assertEqual(digest_tree(src), snapshot)
        with open(os.path.join(src, "d3", "f06"), "ab") as f:
            f.write(b"more")
        self.assertNotEqual(digest_tree(dst)["d3/f06"], digest_tree(src)["d3/f06"])
        # The clone keeps its data when the source goes.
        kept = digest_tree(dst)
        shutil.rmtree(src)
        vol.umount()
        rc, out, err = tierfs("gc", vol.meta_url, "--delete", "--min-age", "0")
        self.assertEqual(rc, 0, msg(rc, out, err))
        vol.mount()
        self.assertEqual(digest_tree(dst), kept)
        # Errors.
        os.mkdir(os.path.join(vol.mnt, "other"))
        rc, out, err = tierfs("clone", dst, os.path.join(vol.mnt, "other"))
        self.assertNotEqual(rc, 0)
        self.assertIn("File exists", err)
        rc, out, err = tierfs("clone", dst, os.path.join(dst, "d0", "inside"))
        self.assertNotEqual(rc, 0)
        self.assertIn("Invalid argument", err)
        vol.umount()
        rc, out, err = tierfs("fsck", vol.meta_url, "--deep")
        self.assertEqual(rc, 0, msg(rc, out, err))

    def test_clone_on_sqlite(self):
        vol = self.new_volume()
        self.addCleanup(vol.cleanup)
        self.check_clone(vol)

    def test_clone_on_redis(self):
        url = harness.servers()["redis_url"] + "/%d" % harness.REDIS_DB["clone"]
        vol = self.new_volume(meta_url=url)
        self.addCleanup(vol.cleanup)
        self.check_clone(vol)

    def test_cp_reflink_shares_the_data(self):
        vol = self.new_volume()
        self.addCleanup(vol.cleanup)
        vol.format()
        vol.mount()
        a = os.path.join(vol.mnt, "a")
        with open(a, "wb") as f:
            f.write(os.urandom(9 << 20))
        n = objects(vol.bucket)
        subprocess.run(["cp", "--reflink=auto", a, os.path.join(vol.mnt, "b")], check=True)
        self.assertEqual(objects(vol.bucket), n)
        with open(a, "rb") as f, open(os.path.join(vol.mnt, "b"), "rb") as g:
            self.assertEqual(f.read(), g.read())

    def test_clone_of_another_users_file_belongs_to_the_caller(self):
        # Bob clones Alice's world-writable file in a sticky directory, as `cp` would copy it:
        # the copy is Bob's (he may remove it), and it counts in Bob's quota, not Alice's.
        vol = self.new_volume(mount_args=["-o", "allow_other"])
        self.addCleanup(vol.cleanup)
        vol.format()
        vol.mount()
        os.chmod(vol.dir, 0o755)
        os.chmod(vol.mnt, 0o755)
        pub = os.path.join(vol.mnt, "pub")
        os.mkdir(pub)
        os.chmod(pub, 0o1777)

        def as_user(uid, *cmd):
            return subprocess.run(["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, "--clear-groups"] + list(cmd),
                                  capture_output=True, text=True, timeout=120)

        shared, copy = os.path.join(pub, "shared.dat"), os.path.join(pub, "bobs-copy.dat")
        res = as_user(1000, "sh", "-c", "head -c 300000 /dev/urandom > %s && chmod 666 %s" % (shared, shared))
        self.assertEqual(res.returncode, 0, res)
        for uid in ("1000", "1001"):
            self.assertOk(tierfs("quota", "set", vol.meta_url, "--uid", uid, "--capacity", "1G"), "quota set")

        def used(uid):
            return json.loads(tierfs("quota", "get", vol.meta_url, "--uid", uid, "--json")[1])["used_bytes"]

        alice_before = used("1000")
        self.assertEqual(used("1001"), 0)
        res = as_user(1001, harness.tierfs_bin(), "clone", shared, copy)
        self.assertEqual(res.returncode, 0, res)
        st = os.stat(copy)
        self.assertEqual((st.st_uid, st.st_gid), (1001, 1001))
        with open(shared, "rb") as a, open(copy, "rb") as b:
            self.assertEqual(a.read(), b.read())
        self.assertEqual(used("1000"), alice_before)
        self.assertGreaterEqual(used("1001"), 300000)
        res = as_user(1001, "rm", copy)
        self.assertEqual(res.returncode, 0, res)
        self.assertEqual(used("1001"), 0)
        # Root's clone keeps the owner, as cp -a does.
        self.assertOk(tierfs("clone", shared, os.path.join(pub, "roots-copy.dat")), "clone as root")
        self.assertEqual(os.stat(os.path.join(pub, "roots-copy.dat")).st_uid, 1000)

if __name__ == "__main__":
    harness.main()
