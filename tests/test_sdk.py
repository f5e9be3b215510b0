"""The Python SDK (python/, src/sdk/): a volume from Python without a mount.

Runs under Debian's Python (the one the module is built for: ctest passes it), importing
the package from the build tree (TIERFS_SDK_PATH). On SQLite + a local bucket with a FUSE
mount of the same volume beside the client, and on Redis + radosgw (the shared test
servers). Covers the API, errors as Python exceptions, close-to-open between the client
and a mount, threads, fork(), a user without privileges, and `pip install ./python`.
"""

import errno
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import harness
import sdk_support
from harness import msg

tierfs = sdk_support.import_sdk()
SDK_PATH = os.path.dirname(os.path.dirname(tierfs.__file__))


def sdk_env(extra_path=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = extra_path or SDK_PATH
    return env


def in_threads(work, n):
    """work(0) ... work(n - 1), each in a thread of its own, all at once; returns when all end."""
    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


class SdkOnSqliteTest(harness.TierFSTestCase):
    """One volume made with tierfs.format, mounted with FUSE too, and one client of it."""
    AUTO_MOUNT = False

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.v, rec = sdk_support.class_volume(cls, "sdkvol")
        assert rec["name"] == "sdkvol" and len(rec["uuid"]) == 36, rec
        cls.fs = tierfs.Client(cls.v.meta_url, cache_dir=os.path.join(cls.v.dir, "sdkcache"))
        cls.addClassCleanup(cls.fs.close)

    def setUp(self):
        super().setUp()
        self.d = "/" + self._testMethodName
        self.fs.mkdir(self.d)

    def p(self, *names):
        return "/".join([self.d] + list(names))

    def on_mount(self, *names):
        return os.path.join(self.v.mnt, self._testMethodName, *names)

    # -- files ------------------------------------------------------------------------

    def test_binary_files_read_write_seek_truncate_append(self):
        data = os.urandom(5 << 20) + b"tail"
        with self.fs.open(self.p("a.bin"), "wb") as f:
            self.assertEqual(f.write(data[:1000]), 1000)
            f.write(data[1000:])
            self.assertEqual(f.tell(), len(data))
        with self.fs.open(self.p("a.bin"), "rb") as f:
            self.assertEqual(f.read(), data)
            f.seek(-4, os.SEEK_END)
            self.assertEqual(f.read(), b"tail")
            f.seek(4 << 20)
            buf = bytearray(100)
            self.assertEqual(f.readinto(buf), 100)
            self.assertEqual(bytes(buf), data[4 << 20:(4 << 20) + 100])
        with self.fs.open(self.p("a.bin"), "r+b") as f:
            f.seek(10)
            f.write(b"XYZ")
            f.truncate(20)
        with self.fs.open(self.p("a.bin"), "rb", buffering=0) as f:
            self.assertEqual(f.read(), data[:10] + b"XYZ" + data[13:20])
        with self.fs.open(self.p("a.bin"), "ab") as f:
            f.write(b"++")
        self.assertEqual(self.fs.stat(self.p("a.bin")).st_size, 22)
        with self.assertRaises(FileExistsError):
            self.fs.open(self.p("a.bin"), "xb")
        with self.fs.open(self.p("new.bin"), "xb") as f:
            f.write(b"x")
        # What the mount sees is what was written.
        with open(self.on_mount("a.bin"), "rb") as f:
            self.assertEqual(f.read(), data[:10] + b"XYZ" + data[13:20] + b"++")

    def test_append_modes_as_the_builtin_open(self):
        """Positions in the append modes are those of the built-in open() on a local
        directory (FileIO seeks to the end when it opens), step by step."""
        local = self.local_tmpdir()

        def steps(opener, root):
            out = []
            with opener(root + "/f", "wb") as f:
                f.write(b"x" * 6000)
            for mode, buffering in (("ab", 0), ("a+b", 0), ("ab", -1), ("a+b", -1)):
                f = opener(root + "/f", mode, buffering)
                out.append((mode, buffering, f.tell()))
                f.write(b"")  # moves nothing, as write(2) of nothing
                out.append(f.tell())
                f.write(b"y")
                out.append(f.tell())
                if "+" in mode:
                    f.seek(0)
                    out.append(f.read(2))
                    f.write(b"z")  # still at the end, whatever the position was
                    out.append(f.tell())
                f.close()
            # Another handle shrinks the file under an open append handle: its position
            # stays, truncate() with no size cuts (here: extends) there, and the next
            # write goes at the end.
            f = opener(root + "/f", "ab", 0)
            with opener(root + "/f", "wb") as g:
                g.write(b"short")
            out += [f.tell(), f.truncate(), f.write(b"!"), f.tell()]
            f.close()
            with opener(root + "/f", "rb") as f:
                out.append(f.read())
            return out

        expected = steps(open, local)
        self.assertEqual(steps(self.fs.open, self.d), expected)
        with open(self.on_mount("f"), "rb") as f:
            self.assertEqual(f.read(), expected[-1])

    def test_appends_of_threads_never_overwrite_each_other(self):
        """O_APPEND through one client: every thread's records land whole, none lost, even
        with a handle per thread (the end is chosen and written in one step)."""
        path = self.p("journal")
        errors = []

        def work(i):
            try:
                with self.fs.open(path, "ab", buffering=0) as f:
                    for r in range(100):
                        rec = ("%02d:%04d:" % (i, r)).encode().ljust(63, b".") + b"\n"
                        at = f.tell()
                        f.write(rec)
                        if f.tell() <= at:
                            errors.append("thread %d record %d: position %d after %d" % (i, r, f.tell(), at))
            except Exception as e:  # noqa: B902 - reported below
                errors.append(repr(e))

        self.fs.open(path, "wb").close()
        in_threads(work, 8)
        self.assertEqual(errors, [])
        with self.fs.open(path, "rb") as f:
            lines = f.read().splitlines()
        self.assertEqual(len(lines), 800)
        self.assertEqual(sorted(lines), sorted(("%02d:%04d:" % (i, r)).encode().ljust(63, b".")
                                               for i in range(8) for r in range(100)))

    def test_text_files(self):
        with self.fs.open(self.p("t.txt"), "w", encoding="utf-8") as f:
            f.write("línea 1\nline 2\n")
        with self.fs.open(self.p("t.txt")) as f:
            self.assertEqual(f.readline(), "línea 1\n")
            self.assertEqual(list(f), ["line 2\n"])
        with self.fs.open(self.p("t.txt"), "a") as f:
            print("line 3", file=f)
        with open(self.on_mount("t.txt"), encoding="utf-8") as f:
            self.assertEqual(f.read(), "línea 1\nline 2\nline 3\n")
        with self.assertRaises(ValueError):
            self.fs.open(self.p("t.txt"), "rw")
        with self.assertRaises(ValueError):
            self.fs.open(self.p("t.txt"), "r", buffering=0)

    def test_fsync_and_flush_make_writes_visible_to_the_mount_before_close(self):
        f = self.fs.open(self.p("open.bin"), "wb")
        try:
            f.write(b"a" * 1000)
            f.fsync()
            self.assertEqual(os.stat(self.on_mount("open.bin")).st_size, 1000)
            f.write(b"b" * 1000)
            f.flush()
            self.assertTrue(harness.wait_for(lambda: os.stat(self.on_mount("open.bin")).st_size == 2000, timeout=10))
        finally:
            f.close()

    # -- metadata ---------------------------------------------------------------------

    def test_stat_chmod_chown_utime_links_xattrs(self):
        with self.fs.open(self.p("f"), "wb") as f:
            f.write(b"12345")
        st = self.fs.stat(self.p("f"))
        self.assertTrue(stat.S_ISREG(st.st_mode))
        self.assertEqual(st.st_size, 5)
        self.assertEqual(st.st_ino, os.stat(self.on_mount("f")).st_ino)
        self.fs.chmod(self.p("f"), 0o640)
        self.fs.chown(self.p("f"), 1234, -1)
        self.fs.utime(self.p("f"), ns=(1_000_000_123, 2_000_000_456))
        st = self.fs.stat(self.p("f"))
        self.assertEqual((stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid), (0o640, 1234, 0))
        self.assertEqual((st.st_atime_ns, st.st_mtime_ns), (1_000_000_123, 2_000_000_456))
        # The mount shows them once its kernel's attribute cache (1 s) lets go.
        def on_mount():
            m = os.stat(self.on_mount("f"))
            return (stat.S_IMODE(m.st_mode), m.st_uid, m.st_gid, m.st_mtime_ns)
        harness.wait_for(lambda: on_mount() == (0o640, 1234, 0, 2_000_000_456), timeout=10)
        self.assertEqual(on_mount(), (0o640, 1234, 0, 2_000_000_456))
        self.fs.symlink("f", self.p("l"))
        self.assertEqual(self.fs.readlink(self.p("l")), "f")
        self.assertTrue(stat.S_ISLNK(self.fs.lstat(self.p("l")).st_mode))
        self.assertEqual(self.fs.stat(self.p("l")).st_ino, self.fs.stat(self.p("f")).st_ino)
        self.assertEqual(os.readlink(self.on_mount("l")), "f")
        self.fs.link(self.p("f"), self.p("h"))
        self.assertEqual(self.fs.stat(self.p("f")).st_nlink, 2)
        self.fs.setxattr(self.p("f"), "user.k", b"v\0x")
        self.assertEqual(self.fs.getxattr(self.p("f"), "user.k"), b"v\0x")
        self.assertIn("user.k", self.fs.listxattr(self.p("f")))
        self.assertEqual(os.getxattr(self.on_mount("f"), "user.k"), b"v\0x")
        self.fs.removexattr(self.p("f"), "user.k")
        with self.assertRaises(OSError) as cm:
            self.fs.getxattr(self.p("f"), "user.k")
        self.assertEqual(cm.exception.errno, errno.ENODATA)

    def test_set_id_bits_dropped_as_the_kernel_drops_them(self):
        """A change of owner or group drops a file's set-user-ID and set-group-ID bits, also
        for root; root's writes keep them (CAP_FSETID). A user's writes are covered by
        test_sdk_files.PermissionCallsTest."""
        p = self.p("setid")
        with self.fs.open(p, "wb") as f:
            f.write(b"x")
        self.fs.chmod(p, 0o6775)
        with self.fs.open(p, "r+b") as f:
            f.write(b"y")
        self.assertEqual(stat.S_IMODE(self.fs.stat(p).st_mode), 0o6775)
        self.fs.chown(p, -1, 0)
        self.assertEqual(stat.S_IMODE(self.fs.stat(p).st_mode), 0o775)
        self.assertEqual(stat.S_IMODE(os.stat(self.on_mount("setid")).st_mode), 0o775)

    def test_symlinks_in_paths_and_loops(self):
        self.fs.makedirs(self.p("real", "deep"))
        with self.fs.open(self.p("real", "deep", "x"), "wb") as f:
            f.write(b"x")
        self.fs.symlink("real", self.p("rel"))
        self.fs.symlink(self.p("real", "deep"), self.p("abs"))  # absolute: inside the volume
        self.assertEqual(self.fs.open(self.p("rel", "deep", "x"), "rb").read(), b"x")
        self.assertEqual(self.fs.open(self.p("abs", "x"), "rb").read(), b"x")
        self.assertEqual(self.fs.stat(self.p("real", "deep", "..", "deep", "x")).st_size, 1)
        self.fs.symlink("loop2", self.p("loop1"))
        self.fs.symlink("loop1", self.p("loop2"))
        with self.assertRaises(OSError) as cm:
            self.fs.stat(self.p("loop1"))
        self.assertEqual(cm.exception.errno, errno.ELOOP)

    # -- directories ------------------------------------------------------------------

    def test_directories_list_scan_walk_remove(self):
        self.fs.makedirs(self.p("a", "b", "c"))
        self.fs.makedirs(self.p("a", "b"), exist_ok=True)
        with self.assertRaises(FileExistsError):
            self.fs.makedirs(self.p("a", "b"))
        for name in ("a/1", "a/b/2", "a/b/c/3"):
            with self.fs.open(self.p(*name.split("/")), "wb") as f:
                f.write(name.encode())
        self.fs.symlink("b", self.p("a", "lnk"))
        self.assertEqual(sorted(self.fs.listdir(self.p("a"))), ["1", "b", "lnk"])
        kinds = {e.name: (e.is_dir(), e.is_file(), e.is_symlink()) for e in self.fs.scandir(self.p("a"))}
        self.assertEqual(kinds, {"1": (False, True, False), "b": (True, False, False), "lnk": (True, False, True)})
        ours = [(r[len(self.d):], sorted(d), sorted(f)) for r, d, f in self.fs.walk(self.p("a"))]
        theirs = [(r[len(self.on_mount()):], sorted(d), sorted(f)) for r, d, f in os.walk(self.on_mount("a"))]
        self.assertEqual(sorted(ours), sorted(theirs))
        with self.assertRaises(OSError) as cm:
            self.fs.rmdir(self.p("a"))
        self.assertEqual(cm.exception.errno, errno.ENOTEMPTY)
        self.fs.rename(self.p("a", "1"), self.p("one"))
        self.assertFalse(self.fs.exists(self.p("a", "1")))
        # The mount's kernel keeps the old name until its entry cache (1 s) lets go.
        self.assertTrue(harness.wait_for(lambda: not os.path.exists(self.on_mount("a", "1")), timeout=10))
        self.fs.rmr(self.p("a"))
        self.assertFalse(self.fs.exists(self.p("a")))
        self.assertEqual(self.fs.listdir(self.d), ["one"])
        # A big directory lists whole (more than one page of the engine's listing).
        self.fs.mkdir(self.p("big"))
        names = set("f%05d" % i for i in range(2500))
        for n in names:
            self.fs.open(self.p("big", n), "wb").close()
        self.assertEqual(set(self.fs.listdir(self.p("big"))), names)
        self.assertEqual(set(os.listdir(self.on_mount("big"))), names)

    def test_clone_summary_warmup_statvfs(self):
        data = os.urandom(3 << 20)
        self.fs.makedirs(self.p("src", "sub"))
        with self.fs.open(self.p("src", "sub", "f"), "wb") as f:
            f.write(data)
        used = self.fs.statvfs()["used"]
        self.fs.clone(self.p("src"), self.p("copy"))
        self.assertEqual(self.fs.open(self.p("copy", "sub", "f"), "rb").read(), data)
        self.assertEqual(self.fs.stat(self.p("copy", "sub", "f")).st_size, len(data))
        s = self.fs.summary(self.p("src"))
        self.assertEqual((s["files"], s["dirs"], s["bytes"]), (1, 2, len(data)))
        w = self.fs.warmup(self.p("copy"))
        self.assertEqual((w["files"], w["bytes"]), (1, len(data)))
        self.assertGreaterEqual(self.fs.statvfs()["used"], used)
        info = json.loads(os.getxattr(self.on_mount("copy", "sub", "f"), "tierfs.info"))
        self.assertTrue(info, "the clone has a layout")

    def test_quotas(self):
        self.fs.makedirs(self.p("team"))
        self.assertIsNone(self.fs.get_quota(path=self.p("team")))
        self.fs.set_quota(path=self.p("team"), max_bytes=1 << 20, max_inodes=3)
        with self.fs.open(self.p("team", "a"), "wb") as f:
            f.write(b"x" * 1000)
        q = self.fs.get_quota(path=self.p("team"))
        self.assertEqual((q["max_bytes"], q["max_inodes"], q["used_inodes"]), (1 << 20, 3, 1))
        for name in ("b", "c"):
            self.fs.open(self.p("team", name), "wb").close()
        with self.assertRaises(OSError) as cm:
            self.fs.open(self.p("team", "d"), "wb")
        self.assertEqual(cm.exception.errno, errno.EDQUOT)
        self.assertIn({"kind": "dir", "path": self.p("team"), "max_bytes": 1 << 20, "max_inodes": 3,
                       "used_bytes": q["used_bytes"], "used_inodes": 3}, self.fs.list_quotas())
        self.fs.set_quota(uid=4321, max_inodes=10)
        self.assertEqual(self.fs.get_quota(uid=4321)["max_inodes"], 10)
        self.fs.delete_quota(uid=4321)
        self.assertIsNone(self.fs.get_quota(uid=4321))
        self.fs.delete_quota(path=self.p("team"))
        self.fs.open(self.p("team", "d"), "wb").close()
        with self.assertRaises(TypeError):
            self.fs.get_quota(path=self.p("team"), uid=1)

    # -- errors -----------------------------------------------------------------------

    def test_errors_are_the_right_exceptions(self):
        with self.fs.open(self.p("file"), "wb"):
            pass
        with self.assertRaises(FileNotFoundError) as cm:
            self.fs.open(self.p("missing"), "rb")
        self.assertIn("missing", str(cm.exception))
        with self.assertRaises(FileNotFoundError):
            self.fs.stat(self.p("no", "such"))
        with self.assertRaises(NotADirectoryError):
            self.fs.stat(self.p("file", "x"))
        with self.assertRaises(NotADirectoryError):
            self.fs.listdir(self.p("file"))
        with self.assertRaises(IsADirectoryError):
            self.fs.open(self.d, "wb")
        with self.assertRaises(FileExistsError):
            self.fs.mkdir(self.p("file"))
        with self.assertRaises(OSError) as cm:
            self.fs.rename(self.d, self.p("inside"))
        self.assertEqual(cm.exception.errno, errno.EINVAL)
        with self.assertRaises(TypeError) as cm:
            tierfs.Client(self.v.meta_url, no_such_option=1)
        self.assertIn("no_such_option", str(cm.exception))
        with self.assertRaises(OSError) as cm:
            tierfs.Client(self.v.meta_url, cache_size="lots")
        self.assertEqual(cm.exception.errno, errno.EINVAL)

    def test_bad_urls_and_closed_clients(self):
        with self.assertRaises(OSError) as cm:
            tierfs.Client("sqlite3://" + os.path.join(self.v.dir, "nope.db"))
        self.assertIn("nope.db", str(cm.exception))
        with self.assertRaises(OSError) as cm:
            tierfs.Client("redis://127.0.0.1:1/0")
        self.assertIn("127.0.0.1:1", str(cm.exception))
        with self.assertRaises(OSError):
            tierfs.Client("bogus://x")
        c = tierfs.Client(self.v.meta_url, cache_dir="memory")
        f = c.open("/" + self._testMethodName + "/late", "wb")
        c.close()
        with self.assertRaises(ValueError):
            c.listdir("/")
        with self.assertRaises(OSError):
            f.write(b"x")
            f.flush()

    def test_format_errors_leave_nothing(self):
        d = self.local_tmpdir()
        url = "sqlite3://" + os.path.join(d, "v.db")
        with self.assertRaises(OSError) as cm:
            tierfs.format(url, "bad name!", bucket=os.path.join(d, "b"))
        self.assertEqual(cm.exception.errno, errno.EINVAL)
        with self.assertRaises(OSError) as cm:
            tierfs.format(url, "v", bucket=os.path.join(d, "b"), block_size="3M")
        self.assertIn("block-size", str(cm.exception))
        self.assertEqual(os.listdir(d), [])
        tierfs.format(url, "v", bucket=os.path.join(d, "b"))
        with self.assertRaises(OSError):
            tierfs.format(url, "v", bucket=os.path.join(d, "b"))  # no force: the volume stays
        with tierfs.Client(url, cache_dir="memory") as c:
            self.assertEqual(c.volume_name, "v")
            self.assertEqual(c.format_record()["trash_days"], 1)

    # -- with the mount, threads, fork --------------------------------------------------

    def test_client_and_mount_see_each_others_changes(self):
        with self.fs.open(self.p("from-sdk"), "wb") as f:
            f.write(b"sdk")
        with open(self.on_mount("from-sdk"), "rb") as f:
            self.assertEqual(f.read(), b"sdk")
        with open(self.on_mount("from-mount"), "wb") as f:
            f.write(b"mount")
        with self.fs.open(self.p("from-mount"), "rb") as f:
            self.assertEqual(f.read(), b"mount")
        # Rewritten through the mount: the client's next open reads the new data.
        with open(self.on_mount("from-sdk"), "wb") as f:
            f.write(b"rewritten")
        with self.fs.open(self.p("from-sdk"), "rb") as f:
            self.assertEqual(f.read(), b"rewritten")
        os.unlink(self.on_mount("from-mount"))
        self.assertFalse(self.fs.exists(self.p("from-mount")))

    def test_threads_share_one_client(self):
        errors = []
        blobs = {i: os.urandom(200_000 + i) for i in range(8)}

        def work(i):
            try:
                for r in range(5):
                    path = self.p("t%d-%d" % (i, r))
                    with self.fs.open(path, "wb") as f:
                        f.write(blobs[i])
                    with self.fs.open(path, "rb") as f:
                        if f.read() != blobs[i]:
                            errors.append("thread %d round %d read other data" % (i, r))
                    self.fs.listdir(self.d)
            except Exception as e:  # noqa: B902 - reported below
                errors.append(repr(e))

        in_threads(work, 8)
        self.assertEqual(errors, [])
        self.assertEqual(len(self.fs.listdir(self.d)), 40)

    def test_a_forked_child_uses_the_parents_client(self):
        with self.fs.open(self.p("before"), "wb") as f:
            f.write(b"parent")
        held = self.fs.open(self.p("before"), "rb")
        self.addCleanup(held.close)
        base = self.d

        def child():
            with self.fs.open(base + "/before", "rb") as f:
                seen = f.read().decode()
            with self.fs.open(base + "/by-child", "wb") as f:
                f.write(b"child")
            try:
                held.read()
                stale = "read"
            except OSError as e:
                stale = e.errno
            return [seen, stale, len(self.fs.listdir(base))]

        for _ in range(3):
            res = harness.in_child(child)
            self.assertEqual(res.get("ok"), ["parent", errno.EBADF, 2], res)
        # The parent's client and its open file are untouched.
        self.assertEqual(held.read(), b"parent")
        with self.fs.open(self.p("by-child"), "rb") as f:
            self.assertEqual(f.read(), b"child")
        self.fs.remove(self.p("by-child"))

    # -- a user without privileges --------------------------------------------------------

    def test_an_unprivileged_user_formats_and_uses_a_volume_of_its_own(self):
        d = self.local_tmpdir()
        os.chmod(d, 0o755)
        os.chown(d, 65534, 65534)
        script = """
import os, tierfs
d = %r
url = "sqlite3://" + d + "/v.db"
tierfs.format(url, "mine", bucket=d + "/b")
with tierfs.Client(url, cache_dir=d + "/cache") as c:
    with c.open("/f", "wb") as f:
        f.write(b"hello")
    st = c.stat("/f")
    assert (st.st_uid, st.st_gid) == (65534, 65534), (st.st_uid, st.st_gid)
    assert c.open("/f", "rb").read() == b"hello"
    try:
        c.chown("/f", 0, 0)
        raise SystemExit("chown to root worked")
    except PermissionError:
        pass
    try:
        c.set_quota(path="/", max_inodes=5)  # quotas are root's, even on a volume of one's own
        raise SystemExit("a user set a quota")
    except PermissionError:
        pass
    assert c.get_quota(path="/") is None
print("ok")
""" % d
        res = harness.run("setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
                          sys.executable, "-c", script, env=dict(sdk_env(), HOME=d))
        self.assertEqual(res[0], 0, msg(*res))
        self.assertIn("ok", res[1])

    def test_permissions_are_checked_as_the_calling_user(self):
        # A volume whose database and bucket another user may open (its files' modes
        # decide the rest): root makes a private file in it, that user's client is refused.
        d = self.local_tmpdir()
        url = "sqlite3://" + os.path.join(d, "v.db")
        tierfs.format(url, "shared", bucket=os.path.join(d, "b"), trash_days=0)
        with tierfs.Client(url, cache_dir="memory") as c:
            with c.open("/secret", "wb") as f:
                f.write(b"root only")
            c.chmod("/secret", 0o600)
            c.chmod("/", 0o777)
        for root, dirs, files in os.walk(d):
            for n in [root] + [os.path.join(root, x) for x in dirs + files]:
                os.chown(n, 65534, 65534)
        script = """
import tierfs
c = tierfs.Client(%r, cache_dir="memory")
try:
    c.open("/secret", "rb")
    print("read")
except PermissionError as e:
    print("denied", e.errno)
with c.open("/nobodys", "wb") as f:
    f.write(b"mine")
print(c.stat("/nobodys").st_uid)
c.close()
""" % url
        res = harness.run("setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
                          sys.executable, "-c", script, env=dict(sdk_env(), HOME="/tmp"))
        self.assertEqual(res[0], 0, msg(*res))
        self.assertEqual(res[1].split()[-3:], ["denied", str(errno.EACCES), "65534"], res[1])


class SdkOnRedisRadosgwTest(harness.TierFSTestCase):
    """The same client on the shared servers: Redis metadata, radosgw data."""
    AUTO_MOUNT = False

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.srv = harness.servers()
        cls.meta_url = cls.srv["redis_url"].rstrip("/") + "/9"
        subprocess.run(["redis-cli", "-u", cls.meta_url, "flushdb"], capture_output=True)
        cls.bucket = cls.srv["s3_endpoint"] + "/" + harness.unique("sdk")
        tierfs.format(cls.meta_url, "sdkredis", storage="s3", bucket=cls.bucket,
                      access_key=cls.srv["s3_access_key"], secret_key=cls.srv["s3_secret_key"], force=True)
        cls.fs = tierfs.Client(cls.meta_url, cache_dir="memory")
        cls.addClassCleanup(cls.fs.close)

    def test_children_forked_while_parent_threads_do_io(self):
        """Forks while four threads of the parent read and write through the store (libcurl,
        OpenSSL's hashing and signing) and Redis: each child reads and writes through its own
        client, none hangs on a lock a parent thread held at the fork (300 such children ran
        clean by hand)."""
        self.fs.makedirs("/busy")
        blobs = {i: os.urandom(300_000) for i in range(8)}
        for i, b in blobs.items():
            with self.fs.open("/busy/f%d" % i, "wb") as f:
                f.write(b)
        stop = threading.Event()
        errors = []

        def busy(k):
            n = 0
            try:
                while not stop.is_set():
                    with self.fs.open("/busy/f%d" % ((n + k) % 8), "rb") as f:
                        f.read()
                    with self.fs.open("/busy/w%d" % k, "wb") as f:
                        f.write(os.urandom(100_000))
                    n += 1
            except Exception as e:  # noqa: B902 - reported below
                errors.append(repr(e))

        workers = [threading.Thread(target=busy, args=(k,)) for k in range(4)]
        for t in workers:
            t.start()
        outcomes = []
        try:
            for i in range(30):
                pid = os.fork()
                if pid == 0:
                    try:
                        with self.fs.open("/busy/f%d" % (i % 8), "rb") as f:
                            same = f.read() == blobs[i % 8]
                        with self.fs.open("/busy/c%d" % i, "wb") as f:
                            f.write(b"c" * 200_000)
                        os._exit(0 if same else 3)
                    except BaseException:  # noqa: B902 - the exit status says it
                        os._exit(4)
                deadline = time.monotonic() + 30
                while True:
                    done, status = os.waitpid(pid, os.WNOHANG)
                    if done:
                        outcomes.append(os.waitstatus_to_exitcode(status))
                        break
                    if time.monotonic() > deadline:
                        os.kill(pid, 9)
                        os.waitpid(pid, 0)
                        outcomes.append("hung")
                        break
                    time.sleep(0.01)
        finally:
            stop.set()
            for t in workers:
                t.join()
        self.assertEqual(errors, [])
        self.assertEqual(outcomes, [0] * 30)
        self.assertEqual(self.fs.stat("/busy/c29").st_size, 200_000)

    def test_files_and_directories(self):
        data = os.urandom(9 << 20)
        self.fs.makedirs("/r/a")
        with self.fs.open("/r/a/big", "wb") as f:
            f.write(data)
        with tierfs.Client(self.meta_url, cache_dir="memory") as other:  # nothing cached
            with other.open("/r/a/big", "rb") as f:
                self.assertEqual(f.read(), data)
            self.assertEqual(other.listdir("/r/a"), ["big"])
        self.fs.rename("/r/a/big", "/r/big")
        self.fs.rmr("/r/a")
        self.assertEqual(self.fs.listdir("/r"), ["big"])

    def test_forked_children_use_the_client(self):
        # hiredis connections, libcurl handles and the session are the parent's: each child
        # must open its own (and draw its own random names) to read and write.
        with self.fs.open("/fork-parent", "wb") as f:
            f.write(b"p" * 100000)

        def child(i):
            with self.fs.open("/fork-parent", "rb") as f:
                ok = f.read() == b"p" * 100000
            with self.fs.open("/fork-child-%d" % i, "wb") as f:
                f.write(os.urandom(3 << 20))
            return ok

        for i in range(3):
            self.assertEqual(harness.in_child(child, i), {"ok": True})
        self.assertEqual(sorted(n for n in self.fs.listdir("/") if n.startswith("fork-child")),
                         ["fork-child-0", "fork-child-1", "fork-child-2"])
        self.assertEqual(self.fs.stat("/fork-child-2").st_size, 3 << 20)

    def test_secrets_stay_hidden(self):
        secret = self.srv["s3_secret_key"]
        self.assertNotIn(secret, repr(self.fs))
        self.assertNotIn(secret, json.dumps(self.fs.format_record()))
        with self.assertRaises(OSError) as cm:
            self.fs.open("/nowhere/x", "rb")
        self.assertNotIn(secret, str(cm.exception))


LOGGING_SCRIPT = r"""
import os, sys, threading, time
import tierfs
from tierfs import _tierfs
d = sys.argv[1]
tierfs.format("sqlite3://" + d + "/meta.db", "logvol", storage="file", bucket=d + "/bucket", trash_days=0)
fs = tierfs.Client("sqlite3://" + d + "/meta.db", cache_dir=d + "/cache")
fs.mkdir("/x")
# Children forked while a thread of the parent writes log lines without a pause: each
# child uses the client (its own session, memory caches) and logs a line itself.
pid = os.fork()  # a child before the flood: what it logs reaches stderr
if pid == 0:
    fs.listdir("/")
    os._exit(0)
os.waitpid(pid, 0)
saved = os.dup(2)
os.dup2(os.open(os.devnull, os.O_WRONLY), 2)  # the flood's lines go nowhere
stop = threading.Event()
def spam():
    while not stop.is_set():
        _tierfs._log_for_tests(1000, "warning")
t = threading.Thread(target=spam)
t.start()
hung = 0
for i in range(40):
    pid = os.fork()
    if pid == 0:
        fs.listdir("/")
        _tierfs._log_for_tests(1, "warning")
        os._exit(0)
    deadline = time.monotonic() + 10
    while not os.waitpid(pid, os.WNOHANG)[0]:
        if time.monotonic() > deadline:
            hung += 1
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            break
        time.sleep(0.01)
stop.set()
t.join()
os.dup2(saved, 2)
_tierfs._log_for_tests(1, "warning")
fs.close()
print("hung", hung)
"""


class SdkLoggingTest(unittest.TestCase):
    """The client's log inside someone else's process: on stderr, warnings and worse by
    default ($TIERFS_LOG_LEVEL for more), and safe across fork()."""

    def run_script(self, level=None):
        d = tempfile.mkdtemp(prefix="tierfs-sdklog-")
        self.addCleanup(shutil.rmtree, d, True)
        env = sdk_env()
        env.pop("TIERFS_LOG_LEVEL", None)
        if level:
            env["TIERFS_LOG_LEVEL"] = level
        return subprocess.run([sys.executable, "-c", LOGGING_SCRIPT, d], env=env, capture_output=True,
                              text=True, timeout=600)

    def test_children_forked_while_the_parent_logs_never_hang(self):
        # Before the sink's mutex was held across fork(), 2 of 30 such children hung in
        # their first log line (the lock taken by a parent thread that the child lacks).
        r = self.run_script()
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertEqual(r.stdout, "hung 0\n", "the host's stdout is its own: " + r.stdout[-500:])
        self.assertIn("[tierfs] [warning] log line 0 for a test", r.stderr)
        self.assertNotIn("[info]", r.stderr)
        # A forked child keeps its caches in memory while the parent holds the directory,
        # without saying so forty times.
        self.assertNotIn("in use by another", r.stderr)

    def test_the_level_comes_from_the_environment(self):
        r = self.run_script("info")
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertIn("[tierfs] [info] disk cache", r.stderr)
        r = self.run_script("error")
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertNotIn("log line", r.stderr)


class PipInstallTest(unittest.TestCase):
    def test_pip_installs_the_package_without_an_index(self):
        build = os.path.dirname(SDK_PATH)
        target = tempfile.mkdtemp(prefix="tierfs-pip-")
        self.addCleanup(shutil.rmtree, target, True)
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        # pip builds in the folder it is given (build/, *.egg-info): give it a copy.
        src = os.path.join(tempfile.mkdtemp(prefix="tierfs-pipsrc-"), "python")
        self.addCleanup(shutil.rmtree, os.path.dirname(src), True)
        shutil.copytree(os.path.join(root, "python"), src, ignore=shutil.ignore_patterns("build", "*.egg-info"))
        res = harness.run(sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-index",
                          "--target", target, src, timeout=900,
                          env=dict(os.environ, TIERFS_BUILD_DIR=build, TIERFS_SOURCE_DIR=root))
        self.assertEqual(res[0], 0, msg(*res))
        probe = ("import tierfs, importlib.metadata as m; print(tierfs.__file__); "
                 "print([e.value for e in m.entry_points(group='fsspec.specs') if e.name == 'tierfs'])")
        res = harness.run(sys.executable, "-c", probe, env=dict(os.environ, PYTHONPATH=target))
        self.assertEqual(res[0], 0, msg(*res))
        self.assertTrue(res[1].splitlines()[0].startswith(target), res[1])
        self.assertIn("tierfs.fsspec_fs:TierFSFileSystem", res[1])


if __name__ == "__main__":
    harness.main()
