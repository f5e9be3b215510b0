"""The SDK's fsspec protocol ("tierfs"): the AbstractFileSystem calls, and a randomized
differential test (python3-hypothesis) that runs the same operations through the tierfs
protocol, through fsspec's local file system on the FUSE mount of the same volume, and on a
local directory, and wants the same answers and the same trees."""

import errno
import os
import tempfile

import harness
import sdk_support

sdk_support.import_sdk()  # registers the protocol
import fsspec  # noqa: E402
from fsspec.implementations.local import LocalFileSystem  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402



class FsspecTest(harness.TierFSTestCase):
    AUTO_MOUNT = False

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.v, _ = sdk_support.class_volume(cls, "fsspecvol")
        cls.fs = fsspec.filesystem("tierfs", meta=cls.v.meta_url, cache_dir="memory")
        cls.addClassCleanup(cls.fs.client.close)

    def setUp(self):
        super().setUp()
        self.d = "/" + self._testMethodName
        self.fs.mkdir(self.d)

    def test_listing_and_info(self):
        self.fs.makedirs(self.d + "/a/b")
        self.fs.pipe({self.d + "/a/x.csv": b"1", self.d + "/a/b/y.csv": b"22", self.d + "/z.txt": b"333"})
        self.assertEqual(self.fs.ls(self.d, detail=False), [self.d + "/a", self.d + "/z.txt"])
        info = self.fs.info(self.d + "/z.txt")
        self.assertEqual((info["type"], info["size"]), ("file", 3))
        self.assertEqual(self.fs.info(self.d + "/a")["type"], "directory")
        self.assertEqual(sorted(self.fs.find(self.d)), [self.d + "/a/b/y.csv", self.d + "/a/x.csv", self.d + "/z.txt"])
        self.assertEqual(sorted(self.fs.glob(self.d + "/**/*.csv")), [self.d + "/a/b/y.csv", self.d + "/a/x.csv"])
        self.assertEqual(self.fs.du(self.d), 6)
        walked = {root: (sorted(dirs), sorted(files)) for root, dirs, files in self.fs.walk(self.d)}
        self.assertEqual(walked[self.d + "/a"], (["b"], ["x.csv"]))
        self.assertTrue(self.fs.exists("tierfs://" + self.d + "/z.txt"))
        self.assertFalse(self.fs.exists(self.d + "/nope"))
        with self.assertRaises(FileNotFoundError):
            self.fs.info(self.d + "/nope")
        self.assertLessEqual(self.fs.modified(self.d + "/z.txt").timestamp(), self.fs.created(self.d + "/z.txt").timestamp() + 1)
        self.assertNotEqual(self.fs.checksum(self.d + "/z.txt"), self.fs.checksum(self.d + "/a/x.csv"))

    def test_data_calls(self):
        data = os.urandom(3 << 20)
        self.fs.pipe_file(self.d + "/f", data)
        self.assertEqual(self.fs.cat_file(self.d + "/f"), data)
        self.assertEqual(self.fs.cat_file(self.d + "/f", start=10, end=20), data[10:20])
        self.assertEqual(self.fs.cat_file(self.d + "/f", start=-5), data[-5:])
        self.assertEqual(self.fs.cat_ranges([self.d + "/f"] * 2, [0, 100], [4, 104]), [data[:4], data[100:104]])
        with fsspec.open("tierfs://" + self.d + "/f", "rb", meta=self.v.meta_url, cache_dir="memory") as f:
            f.seek(1 << 20)
            self.assertEqual(f.read(8), data[1 << 20:(1 << 20) + 8])
        with self.fs.open(self.d + "/t.txt", "w") as f:
            f.write("text\n")
        with open(os.path.join(self.v.mnt, self.d.lstrip("/"), "t.txt")) as f:
            self.assertEqual(f.read(), "text\n")
        local = tempfile.mkdtemp(prefix="tierfs-fsspec-")
        self.addCleanup(__import__("shutil").rmtree, local, True)
        self.fs.get(self.d + "/f", os.path.join(local, "f"))
        with open(os.path.join(local, "f"), "rb") as f:
            self.assertEqual(f.read(), data)
        self.fs.put(os.path.join(local, "f"), self.d + "/put/f2")
        self.assertEqual(self.fs.cat_file(self.d + "/put/f2"), data)
        self.fs.touch(self.d + "/empty")
        self.assertEqual(self.fs.size(self.d + "/empty"), 0)

    def test_copy_is_a_clone_move_is_a_rename_rm_removes_trees(self):
        data = os.urandom(8 << 20)
        self.fs.pipe_file(self.d + "/big", data)
        def stored():  # what the bucket holds on disk
            return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(self.v.bucket) for f in fs)
        before = stored()
        ino = self.fs.info(self.d + "/big")["ino"]
        self.fs.cp_file(self.d + "/big", self.d + "/copy")
        self.assertEqual(self.fs.cat_file(self.d + "/copy"), data)
        self.assertLess(stored() - before, 1 << 20, "the copy wrote data")
        self.fs.mv(self.d + "/big", self.d + "/moved")
        self.assertEqual(self.fs.info(self.d + "/moved")["ino"], ino)
        self.fs.makedirs(self.d + "/tree/a/b")
        self.fs.pipe({self.d + "/tree/a/b/%d" % i: b"x" for i in range(50)})
        self.fs.rm(self.d + "/tree", recursive=True)
        self.assertFalse(self.fs.exists(self.d + "/tree"))
        with self.assertRaises(OSError) as cm:
            self.fs.rmdir(self.d)
        self.assertEqual(cm.exception.errno, errno.ENOTEMPTY)

    def test_pandas_reads_and_writes_through_the_protocol(self):
        import pandas as pd
        opts = {"meta": self.v.meta_url, "cache_dir": "memory"}
        df = pd.DataFrame({"id": range(1000), "label": ["cat", "dog"] * 500})
        df.to_csv("tierfs://" + self.d + "/labels.csv", index=False, storage_options=opts)
        back = pd.read_csv("tierfs://" + self.d + "/labels.csv", storage_options=opts)
        self.assertTrue(back.equals(df))
        with open(os.path.join(self.v.mnt, self.d.lstrip("/"), "labels.csv")) as f:
            self.assertEqual(f.readline(), "id,label\n")
        df.to_json("tierfs://" + self.d + "/labels.json", storage_options=opts)
        self.assertEqual(len(pd.read_json("tierfs://" + self.d + "/labels.json", storage_options=opts)), 1000)


NAMES = st.sampled_from(["a", "b", "c", "a/x", "a/y", "b/z"])
OPS = st.lists(st.one_of(
    st.tuples(st.just("pipe"), NAMES, st.binary(max_size=300)),
    st.tuples(st.just("mkdir"), NAMES),
    st.tuples(st.just("rm"), NAMES),
    st.tuples(st.just("rmtree"), NAMES),
    st.tuples(st.just("mv"), NAMES, NAMES),
    st.tuples(st.just("cat"), NAMES),
    st.tuples(st.just("cat_range"), NAMES, st.integers(0, 400), st.integers(0, 400)),  # start, length
    st.tuples(st.just("ls"), NAMES),
    st.tuples(st.just("append"), NAMES, st.binary(max_size=100)),
), max_size=30)


def apply(fs, root, op):
    """One operation; its answer or the class of the exception it raised."""
    kind, name = op[0], root + "/" + op[1]
    try:
        if kind == "pipe":
            fs.pipe_file(name, op[2])
        elif kind == "mkdir":
            fs.mkdir(name, create_parents=False)
        elif kind == "rm":
            fs.rm_file(name)
        elif kind == "rmtree":
            fs.rm(name, recursive=True)
        elif kind == "mv":
            # rename(2) semantics on every side (fsspec's local mv is shutil.move, which
            # moves into an existing directory).
            if isinstance(fs, LocalFileSystem):
                os.rename(name, root + "/" + op[2])
            else:
                fs.mv(name, root + "/" + op[2])
        elif kind == "cat":
            return fs.cat_file(name)
        elif kind == "cat_range":
            return fs.cat_file(name, start=op[2], end=op[2] + op[3])
        elif kind == "ls":
            if fs.isfile(name):
                return "file"  # fsspec versions disagree on ls of a file (local: NotADirectoryError)
            return sorted((os.path.basename(i["name"]), i["type"], i["size"] if i["type"] == "file" else 0)
                          for i in fs.ls(name, detail=True))
        elif kind == "append":
            with fs.open(name, "ab") as f:
                f.write(op[2])
        return None
    except OSError as e:
        # The exception's class (fsspec's local file system raises FileExistsError(path)
        # without an errno); the errno only where the class says nothing more.
        if type(e) is OSError:
            return "OSError:%s" % errno.errorcode.get(e.errno, e.errno)
        return type(e).__name__


def tree(fs, root):
    out = {}
    for path in sorted(fs.find(root, withdirs=True)):
        rel = path[len(root):]
        out[rel] = fs.cat_file(path) if fs.isfile(path) else "dir"
    return out


class DifferentialTest(harness.TierFSTestCase):
    """tierfs protocol vs the FUSE mount (through fsspec's local file system) vs a local
    directory: the same random operations, the same answers."""
    AUTO_MOUNT = False

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.v, _ = sdk_support.class_volume(cls, "diffvol")
        cls.sdk = fsspec.filesystem("tierfs", meta=cls.v.meta_url, cache_dir="memory", skip_instance_cache=True)
        cls.addClassCleanup(cls.sdk.client.close)
        cls.local = LocalFileSystem()
        cls.localdir = tempfile.mkdtemp(prefix="tierfs-diff-")
        cls.addClassCleanup(__import__("shutil").rmtree, cls.localdir, True)
        cls.runs = 0

    @settings(max_examples=int(os.environ.get("SDK_DIFF_EXAMPLES") or 60), deadline=None, derandomize=False,
              suppress_health_check=list(HealthCheck))
    @given(OPS)
    def test_same_answers_as_the_mount_and_a_local_directory(self, ops):
        type(self).runs += 1
        run = "r%d" % self.runs
        sides = [(self.sdk, "/sdk-" + run), (self.local, os.path.join(self.v.mnt, "fuse-" + run)),
                 (self.local, os.path.join(self.localdir, run))]
        for fs, root in sides:
            fs.mkdir(root)
        for op in ops:
            answers = [apply(fs, root, op) for fs, root in sides]
            self.assertEqual(answers[0], answers[2], "tierfs vs local directory on %r after %r" % (op, ops))
            self.assertEqual(answers[1], answers[2], "FUSE mount vs local directory on %r after %r" % (op, ops))
        trees = [tree(fs, root) for fs, root in sides]
        self.assertEqual(trees[0], trees[2], ops)
        self.assertEqual(trees[1], trees[2], ops)


if __name__ == "__main__":
    harness.main()
