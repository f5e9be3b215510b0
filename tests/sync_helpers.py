"""Helpers of the sync tests: odd random trees, running `tierfs sync`, side URLs of every
kind (directory, S3 on radosgw, RADOS, Azurite, volumes on SQLite and Redis), and trees
read back for comparison."""
import hashlib
import json
import os
import random
import subprocess

import harness

ODD_NAMES = ["plain", "with space", "caf\u00e9 \u6f22\u5b57", "per%cent", "plus+sign", "-dash", "a.txt", "a0",
             "quote'\"", "tab\there"]
NEWLINE_NAME = "new\nline"


def make_tree(root, seed, nfiles=60, max_size=300 << 10, symlinks=True, hardlinks=True, newline=True,
              empty_dirs=True, modes=True):
    """A random tree: deep and wide directories, odd names, sizes from 0 to several 64 KiB
    blocks, symlinks (relative, absolute, dangling), hard links, modes and past mtimes.
    Deterministic for a seed. Returns the list of regular files' relative paths."""
    rng = random.Random(seed)
    os.makedirs(root, exist_ok=True)
    names = ODD_NAMES + ([NEWLINE_NAME] if newline else [])
    dirs = [""]
    deep = ""
    for i in range(6):  # a deep chain
        deep = os.path.join(deep, "deep%d" % i)
        dirs.append(deep)
    for i in range(8):
        dirs.append(os.path.join(rng.choice(dirs), "%s d%d" % (rng.choice(names), i)))
    for d in dirs:
        os.makedirs(os.path.join(root, d), exist_ok=True)
    files = []
    sizes = [0, 1, 4095, 4096, 65535, 65536, 65537, 200000]
    for i in range(nfiles):
        d = rng.choice(dirs)
        name = "%s-%d%s" % (rng.choice(names), i, rng.choice(["", ".log", ".bin", ".txt"]))
        rel = os.path.join(d, name)
        size = rng.choice(sizes) if rng.random() < 0.5 else rng.randrange(0, max_size)
        with open(os.path.join(root, rel), "wb") as f:
            f.write(rng.randbytes(size))
        if modes:
            os.chmod(os.path.join(root, rel), rng.choice([0o644, 0o600, 0o755, 0o444]))
        files.append(rel)
    wide = os.path.join(root, "wide")
    os.makedirs(wide, exist_ok=True)
    for i in range(150):  # a wide directory, names sharing prefixes with a subdirectory
        rel = os.path.join("wide", "w%03d" % i)
        with open(os.path.join(root, rel), "wb") as f:
            f.write(b"%d" % i)
        files.append(rel)
    os.makedirs(os.path.join(wide, "w0"), exist_ok=True)
    with open(os.path.join(wide, "w0", "inner"), "wb") as f:
        f.write(b"inner")
    files.append(os.path.join("wide", "w0", "inner"))
    if empty_dirs:
        os.makedirs(os.path.join(root, "empty", "deeper empty"), exist_ok=True)
    if symlinks:
        os.symlink("plain-0", os.path.join(root, "rel link"))
        os.symlink("/nonexistent/target", os.path.join(root, "dangling"))
        os.symlink("../" + files[0], os.path.join(root, deep, "up link"))
    if hardlinks:
        for j in range(3):
            src = os.path.join(root, files[j])
            os.link(src, os.path.join(root, os.path.dirname(files[j]), "hard-%d" % j))
            files.append(os.path.join(os.path.dirname(files[j]), "hard-%d" % j))
    # Times last (making entries changes the directories' times).
    t0 = 1600000000
    for dirpath, dirnames, filenames in os.walk(root, topdown=False):
        for n in filenames + dirnames:
            p = os.path.join(dirpath, n)
            ns = (t0 + rng.randrange(0, 10 ** 7)) * 10 ** 9 + rng.randrange(0, 10 ** 9)
            os.utime(p, ns=(ns, ns), follow_symlinks=False)
    os.utime(root, ns=(t0 * 10 ** 9, t0 * 10 ** 9))
    return files


def contents(root):
    """{relative path: sha256} of the regular files, and the set of directories."""
    files, dirs = {}, set()
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames:
            dirs.add(os.path.relpath(os.path.join(dirpath, n), root))
        for n in filenames:
            p = os.path.join(dirpath, n)
            if os.path.islink(p):
                continue
            with open(p, "rb") as f:
                files[os.path.relpath(p, root)] = hashlib.sha256(f.read()).hexdigest()
    return files, dirs


_CACHE = []


def cache_dir():
    """A disk cache directory for syncs that ask for one (without --cache-dir a volume side
    uses none), removed at exit."""
    if not _CACHE:
        import atexit
        import shutil
        import tempfile
        _CACHE.append(tempfile.mkdtemp(prefix="tierfs-sync-cache-"))
        atexit.register(shutil.rmtree, _CACHE[0], True)
    return _CACHE[0]


def sync(*args, check=True, timeout=300, env=None):
    """Runs `tierfs sync ARGS --json`; returns (rc, summary dict or None, stderr)."""
    rc, out, err = harness.tierfs("sync", *[str(a) for a in args], "--json", timeout=timeout, env=env)
    summary = None
    for line in out.splitlines()[::-1]:
        if line.startswith("{"):
            summary = json.loads(line)
            break
    if check and rc != 0:
        raise AssertionError("tierfs sync %s failed (%d)\n%s" % (" ".join(map(str, args)), rc, err[-3000:]))
    return rc, summary, err


def compare_with_rsync(oracle, tree, src, **kw):
    """harness.compare_trees(oracle, tree), less the directories whose time differs from
    rsync's result but equals the source's (under load rsync can set a directory's time
    before its last file is renamed into it)."""
    def rsync_dir_time(diff):
        if ": mtime " not in diff:
            return False
        rel = diff.split(": mtime ")[0]
        p, s = os.path.join(tree, rel), os.path.join(src, rel)
        return (os.path.isdir(p) and not os.path.islink(p) and os.path.isdir(s) and
                os.lstat(p).st_mtime_ns == os.lstat(s).st_mtime_ns)
    return [d for d in harness.compare_trees(oracle, tree, **kw) if not rsync_dir_time(d)]


def rsync(*args):
    res = harness.run("rsync", *args)
    if res[0] != 0:
        raise AssertionError("rsync failed\n" + harness.msg(*res))


class Sides:
    """Where each kind of side lives for one test: fresh locations on every call."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.srv = None
        self.n = 0
        self.volumes = {}

    def _servers(self):
        if self.srv is None:
            self.srv = harness.servers()
        return self.srv

    def kinds(self):
        kinds = ["dir", "sqlite"]
        if os.environ.get("TIERFS_TEST_REDIS_URL"):
            kinds += ["redis", "s3", "rados"]
        if os.environ.get("TIERFS_TEST_AZURE_ENDPOINT"):
            kinds.append("azure")
        return kinds

    def volume(self, kind):
        """The META-URL of a volume of this kind (sqlite or redis), formatted once."""
        if kind not in self.volumes:
            d = os.path.join(self.tmp, "vol-" + kind)
            os.makedirs(d)
            if kind == "sqlite":
                url = "sqlite3://" + os.path.join(d, "meta.db")
            else:
                url = "%s/%d" % (self._servers()["redis_url"], harness.REDIS_DB["sync"])
                harness.run("redis-cli", "-u", url, "flushdb")
            res = harness.tierfs("format", url, "sync" + kind, "--storage", "file", "--bucket",
                                 os.path.join(d, "bucket"), "--block-size", "64K", "--trash-days", "0",
                                 "--changelog-hours", "1")
            if res[0] != 0:
                raise AssertionError("format failed\n" + harness.msg(*res))
            self.volumes[kind] = url
        return self.volumes[kind]

    def new(self, kind):
        """A fresh, empty location of this kind: (url, extra sync arguments with %s for --src/--dst)."""
        self.n += 1
        name = "loc%d" % self.n
        if kind == "dir":
            return os.path.join(self.tmp, name), []
        if kind in ("sqlite", "redis"):
            return self.volume(kind) + ":/" + name, []
        srv = self._servers()
        if kind == "s3":
            if not hasattr(self, "bucket"):
                self.bucket = harness.unique("sync")
            ep = srv["s3_endpoint"]
            return "%s/%s/%s/" % (ep, self.bucket, name), ["%s-access-key", srv["s3_access_key"],
                                                           "%s-secret-key", srv["s3_secret_key"]]
        if kind == "rados":
            return "rados://%s/%s-%s/" % (srv["rados_pool"], harness.unique("sync"), name), [
                "%s-ceph-conf", srv["ceph_conf"]]
        if kind == "azure":
            ep = srv["azure_endpoint"]
            if not hasattr(self, "azure_dir"):  # one container per process, a folder per Sides
                self.azure_dir = harness.unique("s")
            return "azure+%s/%s/%s/%s/%s/" % (ep, srv["azure_account"], "sync" + str(os.getpid()), self.azure_dir,
                                              name), [
                "%s-access-key", srv["azure_account"], "%s-secret-key", srv["azure_key"]]
        raise ValueError(kind)


def side_args(extra, which):
    """Fills in --src- or --dst- in a Sides.new extra list."""
    return [a % ("--" + which) if a.startswith("%s") else a for a in extra]
