"""A volume moved between metadata engines with `tierfs dump` and `tierfs load`:
SQLite -> Redis -> PostgreSQL keeps every file, byte, attribute, xattr, POSIX ACL, link and
inode number; the data stays where it is (one bucket). The dump leaves the secret key out
unless asked, and load refuses an engine that is not empty, and a dump holding a name or a
value no file system holds (naming the entry, writing nothing).

The objects belong to one engine at a time (VOLUME/owner): a copy made by load shares them
and says so; it mounts read-only, and its gc --delete, read-write mount and destroy refuse
while the original owns them (a gc of the copy would delete what the original wrote since);
`config --take-bucket` moves the volume for good, after which the original is refused."""

import json
import os
import stat
import subprocess

import harness
from harness import diff_snapshots, make_tree, msg, run, snapshot, tierfs


def facls(root):
    """getfacl -R -n of the tree: one listing per path, sorted (readdir order differs)."""
    rc, out, err = run("getfacl", "-R", "-n", "-P", ".", cwd=root)
    if rc != 0:
        raise AssertionError("getfacl -R failed\n" + msg(rc, out, err))
    return sorted(out.strip().split("\n\n"))


class MigrateTest(harness.TierFSTestCase):
    PER_TEST = True
    AUTO_MOUNT = False

    def populate(self, root):
        make_tree(root, seed=7, nfiles=150, specials=True)
        with open(os.path.join(root, "big"), "wb") as f:
            f.write(os.urandom(11 << 20))
        with open(os.path.join(root, "sparse"), "wb") as f:
            f.seek(200 << 20)
            f.write(b"tail")
        with open(os.path.join(root, "truncated"), "wb") as f:
            f.write(os.urandom(5 << 20))
        os.truncate(os.path.join(root, "truncated"), 1 << 20)
        os.link(os.path.join(root, "big"), os.path.join(root, "big-link"))
        os.symlink("big", os.path.join(root, "big-sym"))
        os.setxattr(os.path.join(root, "big"), "user.binary", bytes(range(256)))
        os.setxattr(os.path.join(root, "big"), "user.text", b"hello")
        name = os.fsdecode(b"not-utf8-\xff\xfe")
        with open(os.path.join(root, name), "wb") as f:
            f.write(b"odd name")
        os.mkfifo(os.path.join(root, "mig-fifo"))
        os.mknod(os.path.join(root, "mig-chr"), stat.S_IFCHR | 0o640, os.makedev(1, 7))
        os.mkdir(os.path.join(root, "mig-sticky"))
        os.chmod(os.path.join(root, "mig-sticky"), 0o1777)
        os.chown(os.path.join(root, "truncated"), 1000, 1001)
        acl_dir = os.path.join(root, "mig-acl")
        os.mkdir(acl_dir)
        for args in (["-m", "u:1000:rwx,g:2000:rx", acl_dir], ["-d", "-m", "u:1001:rw", acl_dir]):
            rc, out, err = run("setfacl", *args)
            if rc != 0:
                raise AssertionError("setfacl failed\n" + msg(rc, out, err))
        with open(os.path.join(acl_dir, "inherited"), "wb") as f:
            f.write(b"x")

    def dump(self, url, path, *extra):
        rc, out, err = tierfs("dump", url, path, *extra)
        self.assertEqual(rc, 0, msg(rc, out, err))

    def load(self, url, path, *extra):
        rc, out, err = tierfs("load", url, path, *extra)
        self.assertEqual(rc, 0, msg(rc, out, err))

    def test_sqlite_to_redis_to_postgres(self):
        srv = harness.servers()
        redis = srv["redis_url"] + "/%d" % harness.REDIS_DB["migrate"]
        pg = srv["pg_url"] + "/tierfs_migrate"
        vol = self.new_volume()
        self.addCleanup(vol.cleanup)
        vol.format()
        vol.mount()
        self.populate(vol.mnt)
        want = snapshot(vol.mnt)
        want_acls = facls(vol.mnt)
        self.assertTrue(any("default:user:1001:rw-" in a for a in want_acls), want_acls)
        vol.umount()

        hops = [("redis", redis), ("postgres", pg)]
        src = vol.meta_url
        for name, url in hops:
            path = os.path.join(vol.dir, "dump-%s.json" % name)
            self.dump(src, path)
            with open(path) as f:
                doc = json.load(f)
            self.assertEqual(doc["tierfs_dump"], 1)
            # Empty the target first (a previous run may have left a volume there); the
            # volume moves for good, so the new engine takes the objects over.
            self.load(url, path, "--force", "--take-bucket")
            mp = os.path.join(vol.dir, "mnt-" + name)
            os.mkdir(mp)
            vol.meta_url = url  # the volume now lives in the new engine
            rc, out, err = vol.mount_at(mp)
            self.assertEqual(rc, 0, msg(rc, out, err))
            got = snapshot(mp)
            self.assertEqual(diff_snapshots(want, got), [], "after moving to " + name)
            self.assertEqual(facls(mp), want_acls, "ACLs after moving to " + name)
            # The moved volume is writable and consistent.
            with open(os.path.join(mp, "written-on-" + name), "wb") as f:
                f.write(b"new data")
            want = snapshot(mp)
            want_acls = facls(mp)
            rc, out, err = tierfs("umount", mp)
            self.assertEqual(rc, 0, msg(rc, out, err))
            harness.wait_for(lambda: not harness.is_mounted(mp), timeout=30)
            rc, out, err = tierfs("fsck", url)
            self.assertEqual(rc, 0, "fsck after load into %s\n%s" % (name, msg(rc, out, err)))
            src = url

    def test_load_refuses_non_empty_engine_and_bad_dump(self):
        vol = self.new_volume()
        self.addCleanup(vol.cleanup)
        vol.format()
        path = os.path.join(vol.dir, "d.json")
        self.dump(vol.meta_url, path)
        rc, out, err = tierfs("load", vol.meta_url, path)
        self.assertNotEqual(rc, 0)
        self.assertIn("not empty", err)
        bad = os.path.join(vol.dir, "bad.json")
        with open(bad, "w") as f:
            f.write('{"hello": 1}')
        other = "sqlite3://" + os.path.join(vol.dir, "other.db")
        rc, out, err = tierfs("load", other, bad)
        self.assertNotEqual(rc, 0)
        self.assertIn("not a TierFS dump", err)
        rc, out, err = tierfs("load", other, os.path.join(vol.dir, "missing.json"))
        self.assertNotEqual(rc, 0)
        self.assertIn("cannot read", err)

    def test_load_refuses_impossible_names_and_values(self):
        vol = self.new_volume()
        self.addCleanup(vol.cleanup)
        vol.format()
        vol.mount()
        os.mkdir(os.path.join(vol.mnt, "dir"))
        with open(os.path.join(vol.mnt, "dir", "file"), "wb") as f:
            f.write(b"data")
        ino = os.stat(os.path.join(vol.mnt, "dir", "file")).st_ino
        vol.umount()
        path = os.path.join(vol.dir, "d.json")
        self.dump(vol.meta_url, path)
        with open(path) as f:
            good = json.load(f)

        def edit_entry(field, value):
            def f(doc):
                for i in doc["inodes"]:
                    for e in i.get("entries", []):
                        if e.get("name") == "file":
                            e.pop("name")
                            e[field] = value
            return f

        def edit_inode(field, value):
            def f(doc):
                for i in doc["inodes"]:
                    if i["ino"] == ino:
                        i[field] = value
            return f
        cases = [
            ("empty name", edit_entry("name", ""), "empty name"),
            ("dotdot", edit_entry("name", ".."), "'..'"),
            ("slash", edit_entry("name", "a/b"), "'/'"),
            ("NUL", edit_entry("name_b64", "YQBi"), "NUL"),  # "a\0b"
            ("256 bytes", edit_entry("name", "x" * 256), "256 bytes"),
            ("length 2^64-1", edit_inode("length", 2**64 - 1), "length"),
            ("uid 2^64-1", edit_inode("uid", 2**64 - 1), "uid"),
            ("gid -1", edit_inode("gid", -1), "gid"),
            ("no file type", edit_inode("mode", 0o170644), "mode"),
            ("nlink", edit_inode("nlink", 4000000000), "link count"),
        ]
        for what, edit, says in cases:
            doc = json.loads(json.dumps(good))
            edit(doc)
            bad = os.path.join(vol.dir, "bad.json")
            with open(bad, "w") as f:
                json.dump(doc, f)
            db = os.path.join(vol.dir, "bad.db")
            rc, out, err = tierfs("load", "sqlite3://" + db, bad)
            self.assertNotEqual(rc, 0, "%s was loaded\n%s" % (what, msg(rc, out, err)))
            self.assertIn("the dump is damaged", err, what)
            self.assertIn(says, err, what)
            self.assertIn("nothing was loaded", err, what)
            self.assertFalse(os.path.exists(db), what + ": the database file was left")
        db = os.path.join(vol.dir, "good.db")
        self.load("sqlite3://" + db, path)

    def test_a_copy_shares_the_bucket_and_deletes_nothing_of_it(self):
        srv = harness.servers()
        copy = srv["redis_url"] + "/%d" % harness.REDIS_DB["migrate"]
        vol = self.new_volume()
        self.addCleanup(vol.cleanup)
        vol.format()
        vol.mount()
        with open(os.path.join(vol.mnt, "before"), "wb") as f:
            f.write(os.urandom(3 << 20))
        path = os.path.join(vol.dir, "d.json")
        self.dump(vol.meta_url, path)
        rc, out, err = tierfs("load", copy, path, "--force")
        self.assertEqual(rc, 0, msg(rc, out, err))
        load_said = err
        # The original goes on writing: objects the copy knows nothing of.
        after = os.urandom(5 << 20)
        with open(os.path.join(vol.mnt, "after"), "wb") as f:
            f.write(after)
        # gc of the copy sees them as leaked; it must not delete them.
        gc = tierfs("gc", copy, "--delete", "--min-age", "0")
        rc, out, err = tierfs("fsck", vol.meta_url)
        self.assertEqual(rc, 0, "gc --delete of the copy deleted the original's objects\n" + msg(rc, out, err))
        self.assertNotEqual(gc[0], 0, "gc --delete of a copy\n" + msg(*gc))
        self.assertIn("gc --delete refused", gc[2])
        self.assertIn("shares the objects", load_said)
        self.assertIn("--take-bucket", load_said)
        # The copy: read-only only; gc --delete and destroy refuse, and delete nothing.
        mp = os.path.join(vol.dir, "copy")
        os.mkdir(mp)
        saved, vol.meta_url = vol.meta_url, copy
        try:
            rc, out, err = vol.mount_at(mp)
            self.assertNotEqual(rc, 0, "a copy mounted read-write\n" + msg(rc, out, err))
            self.assertIn("belong to another metadata engine", err)
            self.assertIn("tierfs config %s --take-bucket" % copy, err)
            rc, out, err = vol.mount_at(mp, "--read-only")
            self.assertEqual(rc, 0, msg(rc, out, err))
            self.assertEqual(harness.file_sha256(os.path.join(mp, "before")),
                             harness.file_sha256(os.path.join(vol.mnt, "before")))
            rc, out, err = tierfs("umount", mp)  # returns once its session is closed
            self.assertEqual(rc, 0, msg(rc, out, err))
        finally:
            vol.meta_url = saved
        rc, out, err = tierfs("destroy", copy, json.loads(tierfs("status", copy, "--json")[1])["uuid"], "--yes")
        self.assertNotEqual(rc, 0, msg(rc, out, err))
        self.assertIn("--keep-objects", err)
        # The original's objects are all there.
        subprocess.run(["sync"], check=True)
        rc, out, err = tierfs("fsck", vol.meta_url)
        self.assertEqual(rc, 0, "the copy deleted the original's objects\n" + msg(rc, out, err))
        with open(os.path.join(vol.mnt, "after"), "rb") as f:
            self.assertEqual(f.read(), after)

        # A migration: the original is no longer used, and the copy takes the objects over.
        vol.umount()
        rc, out, err = tierfs("config", copy, "--take-bucket")
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.assertIn("now owns", out)
        saved, vol.meta_url = vol.meta_url, copy
        try:
            rc, out, err = vol.mount_at(mp)
            self.assertEqual(rc, 0, msg(rc, out, err))
            with open(os.path.join(mp, "new"), "wb") as f:
                f.write(b"written by the new owner")
            tierfs("umount", mp)
            harness.wait_for(lambda: not harness.is_mounted(mp), timeout=30)
        finally:
            vol.meta_url = saved
        # From now on the original is refused what would touch the objects.
        rc, out, err = vol.mount(check=False)
        self.assertNotEqual(rc, 0, msg(rc, out, err))
        self.assertIn("belong to another metadata engine", err)
        rc, out, err = tierfs("gc", vol.meta_url, "--delete", "--min-age", "0")
        self.assertNotEqual(rc, 0, msg(rc, out, err))
        rc, out, err = tierfs("fsck", copy)
        self.assertEqual(rc, 0, msg(rc, out, err))

    def test_dump_leaves_secret_key_out_unless_asked(self):
        srv = harness.servers()
        vol = self.new_volume(name=harness.unique("mig"), storage=harness.s3_storage_args(harness.unique("mig")))
        self.addCleanup(vol.cleanup)
        vol.format()
        secret = srv["s3_secret_key"]
        path = os.path.join(vol.dir, "d.json")
        self.dump(vol.meta_url, path)
        with open(path) as f:
            text = f.read()
        self.assertNotIn(secret, text)
        self.assertEqual(json.loads(text)["format"]["access_key"], srv["s3_access_key"])
        self.dump(vol.meta_url, path, "--keep-secret-key")
        with open(path) as f:
            self.assertEqual(json.load(f)["format"]["secret_key"], secret)


if __name__ == "__main__":
    harness.main()
