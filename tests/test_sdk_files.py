"""The SDK's file objects against the built-in open(): random sequences of calls on a few
open files at once (open modes, buffered or not; write, read, seek, tell, truncate, flush,
close; stat and remove by name), run through tierfs.Client.open, through the built-in
open() on the FUSE mount of the same volume, and on a local directory. Every call must
give the same answer (or raise the same exception class) on all three sides, and the files
must end up the same.

Runs under Debian's Python (python3-hypothesis), importing the package from the build tree;
SDK_FILES_EXAMPLES sets the number of sequences (default 40). A random search of this kind
found the append-mode positions and the lost appends of threads fixed in PathClient::Append.
"""

import io
import os
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
DEFAULT_OPEN = {0: ("a", "r+b", 0), 1: ("a", "ab", 0), 2: ("b", "a+b", -1)}
OPEN = st.tuples(st.just("open"), SLOTS, st.sampled_from(NAMES),
                 st.sampled_from(["rb", "wb", "ab", "r+b", "w+b", "a+b", "xb"]), st.sampled_from([0, -1]))
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


class FileCallsTest(harness.TierFSTestCase):
    AUTO_MOUNT = False

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.v, _ = sdk_support.class_volume(cls, "filesvol")
        cls.fs = tierfs.Client(cls.v.meta_url, cache_dir="memory")
        cls.addClassCleanup(cls.fs.close)
        cls.localdir = tempfile.mkdtemp(prefix="tierfs-files-")
        cls.addClassCleanup(__import__("shutil").rmtree, cls.localdir, True)
        cls.runs = 0

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


if __name__ == "__main__":
    unittest.main()
