"""The SDK against the built-in open() and os: random sequences of calls run through
tierfs.Client, through open()/os on the FUSE mount of the same volume, and on a local
directory; every call must give the same answer (or raise the same exception class and
errno) on all three sides.

- File calls on a few open files at once (open modes, buffered or not; write, read, seek,
  tell, truncate, flush, close; stat and remove by name); the files must end up the same.
- Namespace calls on a small tree (mkdir, makedirs, rmdir, remove, rename, link, symlink,
  readlink, stat, lstat, listdir, chmod, utime, truncate, exists, isdir, access, and
  creating files) with names that go through symbolic links, "..", "." and trailing
  slashes.

Runs under Debian's Python (python3-hypothesis), importing the package from the build tree;
SDK_FILES_EXAMPLES sets the number of sequences (default 40). A random search of this kind
found the append-mode positions and the lost appends of threads fixed in PathClient::Append,
and the namespace one a file created through a dangling link (ENOENT before), trailing
slashes ignored, errors in another order than Linux's, and exists()/access() raising for a
symlink loop.
"""

import errno
import io
import json
import os
import stat
import sys
import tempfile
import unittest

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import harness
import sdk_support

tierfs = sdk_support.import_sdk()

NAMES = ["a", "b"]
SLOTS = st.integers(0, 2)
# What a call on a slot with no open file opens first: two handles of one file, one of them
# appending, and an appending reader of the other.
# Buffered ones name their buffer's size: by default open() takes the file's st_blksize,
# which differs between the sides, and with it the moments a buffered write reaches the file.
DEFAULT_OPEN = {0: ("a", "r+b", 0), 1: ("a", "ab", 0), 2: ("b", "a+b", 8192)}
OPEN = st.tuples(st.just("open"), SLOTS, st.sampled_from(NAMES),
                 st.sampled_from(["rb", "wb", "ab", "r+b", "w+b", "a+b", "xb"]), st.sampled_from([0, 8192]))
OPS = st.lists(st.one_of(
    OPEN, OPEN, OPEN,  # more opens: most calls need an open file
    st.tuples(st.just("write"), SLOTS, st.sampled_from([0, 1, 7, 4096, 70000]), st.integers(0, 255)),
    st.tuples(st.just("read"), SLOTS, st.sampled_from([-1, 0, 1, 100, 5000])),
    st.tuples(st.just("seek"), SLOTS, st.sampled_from([0, 3, 5000, 100000]), st.sampled_from([0, 1, 2])),
    st.tuples(st.just("tell"), SLOTS),
    st.tuples(st.just("truncate"), SLOTS, st.sampled_from([None, 0, 10, 6000, 200000])),
    st.tuples(st.just("flush"), SLOTS),
    st.tuples(st.just("close"), SLOTS),
    st.tuples(st.just("size"), st.sampled_from(NAMES)),
    st.tuples(st.just("remove"), st.sampled_from(NAMES)),
), max_size=40)


class Side:
    """One of the three places the calls run: an opener (tierfs.Client.open or the built-in
    open), the directory names resolve in, and the open files by slot."""

    def __init__(self, opener, root, size, remove):
        self.opener, self.root, self.size_of, self.remove = opener, root, size, remove
        self.files = {}

    def call(self, op):
        """The answer to op, or the class of the exception it raised."""
        kind = op[0]
        try:
            if kind == "open":
                _, slot, name, mode, buffering = op
                old = self.files.pop(slot, None)
                if old is not None:
                    old.close()
                self.files[slot] = self.opener(self.root + "/" + name, mode, buffering)
                return None
            if kind == "size":
                return self.size_of(self.root + "/" + op[1])
            if kind == "remove":
                return self.remove(self.root + "/" + op[1])
            f = self.files.get(op[1])
            if f is None:  # a call on a slot with no open file opens the slot's own first
                name, mode, buffering = DEFAULT_OPEN[op[1]]
                f = self.files[op[1]] = self.opener(self.root + "/" + name, mode, buffering)
            if kind == "write":
                return f.write(bytes([op[3]]) * op[2])
            if kind == "read":
                return f.read(op[2])
            if kind == "seek":
                # SEEK_CUR and SEEK_END take only 0 on buffered files; the offset stands for
                # "somewhere": 0 for those.
                return f.seek(op[2] if op[3] == io.SEEK_SET else 0, op[3])
            if kind == "tell":
                return f.tell()
            if kind == "truncate":
                return f.truncate(op[2])
            if kind == "flush":
                return f.flush()
            if kind == "close":
                self.files.pop(op[1]).close()
                return None
        except (OSError, ValueError) as e:
            return type(e).__name__
        raise AssertionError("unknown operation %r" % (op,))

    def close_all(self):
        for f in self.files.values():
            try:
                f.close()
            except OSError:
                pass
        self.files.clear()


class ThreeSides(harness.TierFSTestCase):
    """A volume (a client of it, and its FUSE mount) and a local directory, for one class;
    each example runs in directories of its own (runs counts them)."""
    AUTO_MOUNT = False
    VOLUME = None

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.v, _ = sdk_support.class_volume(cls, cls.VOLUME)
        cls.fs = tierfs.Client(cls.v.meta_url, cache_dir="memory")
        cls.addClassCleanup(cls.fs.close)
        cls.localdir = tempfile.mkdtemp(prefix="tierfs-%s-" % cls.VOLUME)
        cls.addClassCleanup(__import__("shutil").rmtree, cls.localdir, True)
        cls.runs = 0


class FileCallsTest(ThreeSides):
    VOLUME = "filesvol"

    @settings(max_examples=int(os.environ.get("SDK_FILES_EXAMPLES") or 40), deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(OPS)
    def test_same_answers_as_the_builtin_open(self, ops):
        type(self).runs += 1
        run = "r%d" % self.runs
        fs = self.fs
        fs.mkdir("/sdk-" + run)
        mount_root = os.path.join(self.v.mnt, "fuse-" + run)
        os.mkdir(mount_root)
        local_root = os.path.join(self.localdir, run)
        os.mkdir(local_root)
        sides = [
            ("sdk", Side(fs.open, "/sdk-" + run, lambda p: fs.stat(p).st_size, fs.remove)),
            ("mount", Side(open, mount_root, lambda p: os.stat(p).st_size, os.remove)),
            ("local", Side(open, local_root, lambda p: os.stat(p).st_size, os.remove)),
        ]
        for _, side in sides:  # the files exist at the start, with different lengths
            for name, length in (("a", 6000), ("b", 10)):
                with side.opener(side.root + "/" + name, "wb") as f:
                    f.write(b"s" * length)
        try:
            for i, op in enumerate(ops):
                answers = {name: side.call(op) for name, side in sides}
                self.assertEqual(answers["sdk"], answers["local"], "call %d %r of %r" % (i, op, ops))
                self.assertEqual(answers["mount"], answers["local"], "call %d %r of %r" % (i, op, ops))
        finally:
            for _, side in sides:
                side.close_all()
        for name in NAMES:
            contents = []
            for _, side in sides:
                try:
                    with side.opener(side.root + "/" + name, "rb") as f:
                        contents.append(f.read())
                except FileNotFoundError:
                    contents.append(None)
            self.assertEqual(contents[0], contents[2], "%s after %r" % (name, ops))
            self.assertEqual(contents[1], contents[2], "%s after %r" % (name, ops))


# Names of the tree (relative to a side's root): "l" and "a/l2" are made links by the calls;
# link targets are relative and stay inside the root (an absolute one means the volume's
# root to the SDK and the machine's to the others).
PATHS = st.sampled_from(["a", "b", "a/c", "a/d", "b/e", "l", "a/l2", "a/c/f", "x/y", "",
                         "a/../b", "a/./c", "l/c", "a/c/", "l/"])
TARGETS = st.sampled_from(["a", "b", "nowhere", "a/c", "l", "a/", "c/..", "l2"])
NS_OPS = st.lists(st.one_of(
    st.tuples(st.sampled_from(["mkdir", "rmdir", "remove", "readlink", "create", "listdir", "stat",
                               "lstat", "chmod", "exists", "isdir", "truncate", "utime", "makedirs",
                               "access"]), PATHS),
    st.tuples(st.sampled_from(["rename", "link"]), PATHS, PATHS),
    st.tuples(st.just("symlink"), TARGETS, PATHS),
), max_size=40)


def os_calls(root):
    """The calls on a local path (the mount's or a directory's): os and open()."""
    def p(name):
        return root + "/" + name if name else root

    def st_of(s):
        return (stat.S_IFMT(s.st_mode), s.st_size if stat.S_ISREG(s.st_mode) else 0,
                0 if stat.S_ISDIR(s.st_mode) else s.st_nlink)
    return {
        "mkdir": lambda a: os.mkdir(p(a)), "rmdir": lambda a: os.rmdir(p(a)),
        "remove": lambda a: os.remove(p(a)), "readlink": lambda a: os.readlink(p(a)),
        "create": lambda a: open(p(a), "wb").close(), "listdir": lambda a: sorted(os.listdir(p(a))),
        "stat": lambda a: st_of(os.stat(p(a))), "lstat": lambda a: st_of(os.lstat(p(a))),
        "chmod": lambda a: os.chmod(p(a), 0o750), "exists": lambda a: os.path.exists(p(a)),
        "isdir": lambda a: os.path.isdir(p(a)), "truncate": lambda a: os.truncate(p(a), 10),
        "utime": lambda a: (os.utime(p(a), (1000, 2000)), os.stat(p(a)).st_mtime)[1],
        "makedirs": lambda a: os.makedirs(p(a), exist_ok=True), "access": lambda a: os.access(p(a), os.W_OK),
        "rename": lambda a, b: os.rename(p(a), p(b)), "link": lambda a, b: os.link(p(a), p(b)),
        "symlink": lambda target, a: os.symlink(target, p(a)),
    }, st_of


def sdk_calls(fs, root):
    calls, st_of = os_calls(root)  # the same shapes, through the client instead

    def p(name):
        return root + "/" + name if name else root
    calls.update({
        "mkdir": lambda a: fs.mkdir(p(a)), "rmdir": lambda a: fs.rmdir(p(a)),
        "remove": lambda a: fs.remove(p(a)), "readlink": lambda a: fs.readlink(p(a)),
        "create": lambda a: fs.open(p(a), "wb").close(), "listdir": lambda a: sorted(fs.listdir(p(a))),
        "stat": lambda a: st_of(fs.stat(p(a))), "lstat": lambda a: st_of(fs.lstat(p(a))),
        "chmod": lambda a: fs.chmod(p(a), 0o750), "exists": lambda a: fs.exists(p(a)),
        "isdir": lambda a: fs.isdir(p(a)), "truncate": lambda a: fs.truncate(p(a), 10),
        "utime": lambda a: (fs.utime(p(a), (1000, 2000)), fs.stat(p(a)).st_mtime)[1],
        "makedirs": lambda a: fs.makedirs(p(a), exist_ok=True), "access": lambda a: fs.access(p(a), os.W_OK),
        "rename": lambda a, b: fs.rename(p(a), p(b)), "link": lambda a, b: fs.link(p(a), p(b)),
        "symlink": lambda target, a: fs.symlink(target, p(a)),
    })
    return calls


def answer(calls, op):
    try:
        return calls[op[0]](*op[1:])
    except OSError as e:
        return (type(e).__name__, errno.errorcode.get(e.errno, e.errno))


class NamespaceCallsTest(ThreeSides):
    VOLUME = "nsvol"

    def same_answers(self, ops):
        type(self).runs += 1
        run = "r%d" % self.runs
        self.fs.mkdir("/sdk-" + run)
        os.mkdir(os.path.join(self.v.mnt, "fuse-" + run))
        os.mkdir(os.path.join(self.localdir, run))
        sides = [("sdk", sdk_calls(self.fs, "/sdk-" + run)),
                 ("mount", os_calls(os.path.join(self.v.mnt, "fuse-" + run))[0]),
                 ("local", os_calls(os.path.join(self.localdir, run))[0])]
        for i, op in enumerate(ops):
            got = {name: answer(calls, op) for name, calls in sides}
            self.assertEqual(got["sdk"], got["local"], "call %d %r of %r" % (i, op, ops))
            self.assertEqual(got["mount"], got["local"], "call %d %r of %r" % (i, op, ops))

    def test_cases_found_before(self):
        self.same_answers([
            ("symlink", "b", "l"), ("create", "l"), ("stat", "b"),  # made through a dangling link
            ("create", "a/c/"), ("mkdir", "a"), ("create", "a/c/"), ("create", "b/"),  # trailing slashes
            ("remove", "b/"), ("symlink", "b", "a/c/"), ("symlink", "b", "x/"), ("link", "b", "a/c/"),
            ("rename", "b", "a/"), ("lstat", "l/"),
            ("makedirs", "b/e"), ("mkdir", "a/."), ("mkdir", "a/.."), ("mkdir", "x/.."),  # error order
            ("link", "a", "b"), ("link", "a", "x"), ("mkdir", "a/c"), ("create", "a/c/f"),
            ("rename", "a/c/f", "a/c"), ("rename", "a/c/f", "a"),
            ("symlink", "l2", "a/l2"), ("exists", "a/l2"), ("isdir", "a/l2/"), ("access", "a/l2"),  # a loop
        ])

    @settings(max_examples=int(os.environ.get("SDK_FILES_EXAMPLES") or 40), deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(NS_OPS)
    def test_same_answers_as_os(self, ops):
        self.same_answers(ops)


class PermissionCallsTest(unittest.TestCase):
    """As a user without privileges (setpriv), on a volume and a directory of that user's
    own: seeded random calls with random modes (100 seeds: the set-ID bits that a write must
    drop stayed, in at least five of them, before the SDK dropped them), the SDK's answers
    against os's (sdk_permission_calls.py). What the SDK allows and denies must be what
    Linux allows and denies, call by call."""

    def test_same_answers_as_os_for_a_user_without_privileges(self):
        work = tempfile.mkdtemp(prefix="tierfs-perm-")
        self.addCleanup(__import__("shutil").rmtree, work, True)
        os.chmod(work, 0o777)
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sdk_permission_calls.py")
        env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(tierfs.__file__)))
        seeds = int(os.environ.get("SDK_PERMISSION_SEEDS") or 100)
        res = harness.run("setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
                          sys.executable, script, work, str(seeds), "300", env=env, timeout=600)
        self.assertEqual(res[0], 0, harness.msg(*res))
        self.assertEqual(json.loads(res[1].strip().splitlines()[-1]), [])


if __name__ == "__main__":
    unittest.main()
