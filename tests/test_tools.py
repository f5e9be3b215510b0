"""Real tools on a TierFS mount: cp -a + diff -r of a system header tree, tar both ways,
git, and Python file I/O."""

import hashlib
import json
import os
import random
import shutil
import sys
import sysconfig

import harness
from harness import compare_trees, make_tree, msg, run


def source_tree():
    """A sizeable real tree to copy: TIERFS_TEST_SRC_TREE, else the system headers, else
    Python's standard library."""
    for cand in (os.environ.get("TIERFS_TEST_SRC_TREE"), "/usr/include", sysconfig.get_paths()["stdlib"]):
        if cand and os.path.isdir(cand) and os.listdir(cand):
            return cand
    raise AssertionError("no source tree to copy")


class CopyTreeTest(harness.TierFSTestCase):
    def test_cp_a_and_diff_r(self):
        src = source_tree()
        dst = os.path.join(self.work, "copy")
        rc, out, err = run("cp", "-a", src, dst, timeout=900)
        self.assertEqual(rc, 0, "cp -a into the mount failed\n" + msg(rc, out, err))
        rc, out, err = run("diff", "-r", "--no-dereference", src, dst, timeout=900)
        self.assertEqual(rc, 0, "diff -r found differences\n" + msg(rc, out, err))
        diffs = compare_trees(src, dst, content=False)
        self.assertEqual(diffs[:20], [], "%d metadata differences after cp -a" % len(diffs))
        # And back out again: reading the mount as a source.
        back = os.path.join(self.local_tmpdir(), "back")
        rc, out, err = run("cp", "-a", dst, back, timeout=900)
        self.assertEqual(rc, 0, "cp -a out of the mount failed\n" + msg(rc, out, err))
        rc, out, err = run("diff", "-r", "--no-dereference", src, back, timeout=900)
        self.assertEqual(rc, 0, msg(rc, out, err))
        # rm -rf of the whole copy leaves an empty directory.
        rc, out, err = run("rm", "-rf", dst, timeout=900)
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.assertEqual(os.listdir(self.work), [])


class TarTest(harness.TierFSTestCase):
    TAR_OPTS = ["--format=posix", "--xattrs", "--xattrs-include=user.*"]

    def test_tar_out_of_mount(self):
        tree = os.path.join(self.work, "tree")
        os.mkdir(tree)
        make_tree(tree, seed=11, specials=True)
        local = self.local_tmpdir()
        tarball = os.path.join(local, "t.tar")
        rc, out, err = run("tar", *self.TAR_OPTS, "-C", tree, "-cpf", tarball, ".", timeout=600)
        self.assertEqual(rc, 0, msg(rc, out, err))
        dest = os.path.join(local, "x")
        os.mkdir(dest)
        rc, out, err = run("tar", *self.TAR_OPTS, "-C", dest, "-xpf", tarball, timeout=600)
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.assertEqual(compare_trees(tree, dest, xattrs=True), [])

    def test_tar_into_mount(self):
        local = self.local_tmpdir()
        src = os.path.join(local, "src")
        os.mkdir(src)
        make_tree(src, seed=12, specials=True)
        # A sparse file crossing the 64 MiB chunk boundary.
        with open(os.path.join(src, "sparse"), "wb") as f:
            f.write(b"head")
            f.seek((64 << 20) - 2)
            f.write(b"across")
            f.truncate(80 << 20)
        tarball = os.path.join(local, "t.tar")
        rc, out, err = run("tar", *self.TAR_OPTS, "-S", "-C", src, "-cpf", tarball, ".", timeout=600)
        self.assertEqual(rc, 0, msg(rc, out, err))
        dest = os.path.join(self.work, "x")
        os.mkdir(dest)
        rc, out, err = run("tar", *self.TAR_OPTS, "-C", dest, "-xpf", tarball, timeout=600)
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.assertEqual(compare_trees(src, dest, xattrs=True), [])
        # tar's own verification against the archive.
        rc, out, err = run("tar", "--format=posix", "-C", dest, "--compare", "-f", tarball, timeout=600)
        self.assertEqual(rc, 0, "tar --compare reports differences\n" + msg(rc, out, err))

    def test_tar_gz_pipeline_in_mount(self):
        tree = os.path.join(self.work, "tree")
        os.mkdir(tree)
        make_tree(tree, seed=13, nfiles=60)
        archive = os.path.join(self.work, "t.tar.gz")
        rc, out, err = run("tar", "-C", tree, "-czpf", archive, ".", timeout=600)
        self.assertEqual(rc, 0, msg(rc, out, err))
        dest = os.path.join(self.work, "x")
        os.mkdir(dest)
        rc, out, err = run("tar", "-C", dest, "-xzpf", archive, timeout=600)
        self.assertEqual(rc, 0, msg(rc, out, err))
        # gnu format keeps whole seconds only, so mtimes are not compared here.
        self.assertEqual(compare_trees(tree, dest, mtime=False), [])


class GitTest(harness.TierFSTestCase):
    def git(self, *args, cwd=None, check=True):
        env = dict(os.environ)
        env.update(HOME=self.home, GIT_CONFIG_NOSYSTEM="1", GIT_TERMINAL_PROMPT="0", LC_ALL="C")
        res = run("git", "-c", "user.name=TierFS Test", "-c", "user.email=test@tierfs.invalid",
                  "-c", "init.defaultBranch=main", "-c", "safe.directory=*", *args,
                  cwd=cwd or self.repo, env=env, timeout=300)
        if check:
            self.assertEqual(res[0], 0, "git %s\n%s" % (" ".join(args), msg(*res)))
        return res[1]

    def setUp(self):
        super().setUp()
        self.home = self.local_tmpdir()
        self.repo = os.path.join(self.work, "repo")
        os.mkdir(self.repo)

    def test_init_add_commit_log(self):
        self.git("init")
        rng = random.Random(5)
        for i in range(50):
            d = os.path.join(self.repo, "pkg%d" % (i % 5))
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "mod%d.py" % i), "w") as f:
                f.write("".join("line %d of file %d %s\n" % (j, i, rng.random()) for j in range(200)))
        with open(os.path.join(self.repo, "blob.bin"), "wb") as f:
            f.write(rng.randbytes(3 << 20))
        self.git("add", "-A")
        self.git("commit", "-q", "-m", "first")
        with open(os.path.join(self.repo, "pkg0", "mod0.py"), "a") as f:
            f.write("appended\n")
        os.rename(os.path.join(self.repo, "pkg1", "mod1.py"), os.path.join(self.repo, "renamed.py"))
        os.unlink(os.path.join(self.repo, "pkg2", "mod2.py"))
        self.git("add", "-A")
        self.git("commit", "-q", "-m", "second")
        self.assertEqual(self.git("log", "--format=%s").split(), ["second", "first"])
        self.assertEqual(self.git("status", "--porcelain"), "")
        stat_out = self.git("diff", "--stat", "HEAD~1", "HEAD")
        self.assertIn("pkg0/mod0.py", stat_out)
        self.assertIn("renamed.py", stat_out)
        self.git("fsck", "--full", "--strict")
        self.git("gc", "-q", "--aggressive")
        self.git("fsck", "--full", "--strict")
        self.assertEqual(self.git("log", "--format=%s").split(), ["second", "first"])
        # Go back and forth between commits.
        self.git("checkout", "-q", "HEAD~1")
        self.assertTrue(os.path.exists(os.path.join(self.repo, "pkg2", "mod2.py")))
        self.assertFalse(os.path.exists(os.path.join(self.repo, "renamed.py")))
        self.git("checkout", "-q", "main")
        self.assertTrue(os.path.exists(os.path.join(self.repo, "renamed.py")))
        self.assertEqual(self.git("status", "--porcelain"), "")
        # A clone out of the mount has identical content.
        clone = os.path.join(self.local_tmpdir(), "clone")
        self.git("clone", "-q", self.repo, clone, cwd=self.home)
        self.assertEqual(self.git("rev-parse", "HEAD"), self.git("rev-parse", "HEAD", cwd=clone))
        rc, out, err = run("diff", "-r", "--exclude=.git", self.repo, clone)
        self.assertEqual(rc, 0, msg(rc, out, err))

    def test_clone_into_mount(self):
        local = os.path.join(self.local_tmpdir(), "origin")
        os.mkdir(local)
        self.git("init", "-q", cwd=local)
        for i in range(20):
            with open(os.path.join(local, "f%d.txt" % i), "w") as f:
                f.write("content %d\n" % i * 100)
            self.git("add", "-A", cwd=local)
            self.git("commit", "-q", "-m", "c%d" % i, cwd=local)
        target = os.path.join(self.work, "cloned")
        self.git("clone", "-q", "--no-local", local, target, cwd=self.home)
        self.git("fsck", "--full", cwd=target)
        self.assertEqual(len(self.git("log", "--format=%H", cwd=target).split()), 20)
        self.assertEqual(self.git("status", "--porcelain", cwd=target), "")
        rc, out, err = run("diff", "-r", "--exclude=.git", local, target)
        self.assertEqual(rc, 0, msg(rc, out, err))


class PythonIOTest(harness.TierFSTestCase):
    def test_json_round_trip(self):
        rng = random.Random(7)
        doc = {"name": "tierfs", "items": [{"i": i, "v": rng.random(), "s": "x" * (i % 50)} for i in range(20000)],
               "nested": {"a": [1, 2, {"b": None, "c": True}], "unicode": "\u00e9\u4e2d\U0001F600"}}
        p = os.path.join(self.work, "doc.json")
        with open(p, "w", encoding="utf-8") as f:
            json.dump(doc, f, ensure_ascii=False)
        with open(p, encoding="utf-8") as f:
            self.assertEqual(json.load(f), doc)
        # Rewrite in place (shorter): no stale tail may remain.
        with open(p, "w", encoding="utf-8") as f:
            json.dump({"short": 1}, f)
        with open(p, encoding="utf-8") as f:
            self.assertEqual(json.load(f), {"short": 1})

    def test_many_small_files(self):
        rng = random.Random(8)
        expect = {}
        for i in range(2000):
            d = os.path.join(self.work, "d%02d" % (i % 20))
            os.makedirs(d, exist_ok=True)
            p = os.path.join(d, "f%05d" % i)
            data = rng.randbytes(rng.randrange(0, 8192))
            with open(p, "wb") as f:
                f.write(data)
            expect[p] = hashlib.sha256(data).hexdigest()
        for p, h in expect.items():
            with open(p, "rb") as f:
                self.assertEqual(hashlib.sha256(f.read()).hexdigest(), h, p)
        count = sum(len(fs) for _, _, fs in os.walk(self.work))
        self.assertEqual(count, 2000)
        shutil.rmtree(self.work)
        self.assertFalse(os.path.exists(self.work))

    def test_50mib_file_hash(self):
        rng = random.Random(9)
        p = os.path.join(self.work, "big.bin")
        h = hashlib.sha256()
        total = 50 << 20
        with open(p, "wb") as f:
            written = 0
            while written < total:
                n = min(total - written, rng.choice([1, 100, 4096, 65536, 131072, 1 << 20, 3 << 20]) + rng.randrange(7))
                b = rng.randbytes(n)
                f.write(b)
                h.update(b)
                written += n
        want = h.hexdigest()
        self.assertEqual(os.path.getsize(p), total)
        for bufsize in (4096, 1 << 20, 7 << 20):
            g = hashlib.sha256()
            with open(p, "rb", buffering=0) as f:
                while True:
                    b = f.read(bufsize)
                    if not b:
                        break
                    g.update(b)
            self.assertEqual(g.hexdigest(), want, "hash mismatch reading with %d-byte reads" % bufsize)
        self.vol.remount()
        self.assertEqual(harness.file_sha256(p), want, "hash mismatch after remount")


if __name__ == "__main__":
    harness.main()
