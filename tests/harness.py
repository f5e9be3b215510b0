"""Shared helpers for the TierFS integration tests.

The tests mount a real TierFS volume through FUSE and drive it with syscalls and ordinary
tools.  Every volume lives in its own temporary directory (sqlite3 metadata, file-store
bucket, mountpoint, client log) and is always unmounted on teardown, also when a test
fails, with `fusermount3 -uz` / `umount -l` as fallbacks so no mount is left behind.

Environment:
  TIERFS_BIN          the tierfs binary under test (default: <repo>/build/src/cmd/tierfs)
  TIERFS_TEST_TMPDIR  parent directory for the per-volume temporary directories
  TIERFS_TEST_KEEP    if set, keep the temporary directories (for debugging)
"""

import errno
import hashlib
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import unittest

from kernel_knobs import URING_PARAM, drop_page_cache, enable_fuse_uring, fuse_uring_enabled  # noqa: F401

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Upper bound for any single command; exceeding it means a hang, not slowness.
DEFAULT_TIMEOUT = 120


def tierfs_bin():
    path = os.environ.get("TIERFS_BIN") or os.path.join(REPO, "build", "src", "cmd", "tierfs")
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise RuntimeError("tierfs binary not found at %r; set TIERFS_BIN" % path)
    return path


def run(*cmd, timeout=DEFAULT_TIMEOUT, input=None, env=None, cwd=None):
    """Runs cmd and returns (rc, stdout, stderr) as text.

    Output goes through temporary files rather than pipes so that a daemon that keeps an
    inherited descriptor open cannot make the call hang.  A command that outlives
    `timeout` is killed and reported as a test error.
    """
    if len(cmd) == 1 and isinstance(cmd[0], (list, tuple)):
        cmd = tuple(cmd[0])
    cmd = [str(c) for c in cmd]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                                stdout=out, stderr=err, env=env, cwd=cwd)
        try:
            if input is not None:
                data = input.encode() if isinstance(input, str) else input
                proc.communicate(data, timeout=timeout)
            else:
                proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise AssertionError("command timed out after %ss: %s" % (timeout, " ".join(cmd)))
        out.seek(0)
        err.seek(0)
        return (proc.returncode, out.read().decode(errors="replace"),
                err.read().decode(errors="replace"))


def tierfs(*args, **kw):
    return run(tierfs_bin(), *args, **kw)


def _unescape_mountinfo(s):
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), s)


def mounts():
    """Returns {mountpoint: fstype} from /proc/self/mountinfo."""
    result = {}
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            sep = fields.index("-")
            result[_unescape_mountinfo(fields[4])] = fields[sep + 1]
    return result


def is_mounted(path):
    return os.path.realpath(path) in mounts()


def wait_for(pred, timeout=30.0, interval=0.05):
    """Polls pred() until it is truthy or `timeout` passes; returns the last value.

    Used only to wait for asynchronous effects (a daemon exiting, a counter being
    flushed), never to judge speed.
    """
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v or time.monotonic() >= deadline:
            return v
        time.sleep(interval)


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours counts as gone.
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def file_sha256(path, bufsize=1 << 20):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(bufsize)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def msg(rc, out, err):
    return "rc=%s\nstdout:\n%s\nstderr:\n%s" % (rc, out[-4000:], err[-4000:])


def in_child(fn, *args):
    """Runs fn(*args) in a forked child and returns its JSON-able result (exceptions become
    {"error": errno})."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        code = 0
        try:
            try:
                res = {"ok": fn(*args)}
            except OSError as e:
                res = {"errno": e.errno, "error": str(e)}
            except BaseException as e:  # noqa: B902 - report anything to the parent
                res = {"exc": repr(e)}
            os.write(w, json.dumps(res).encode())
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(w)
    chunks = []
    while True:
        b = os.read(r, 65536)
        if not b:
            break
        chunks.append(b)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    if os.WEXITSTATUS(status) != 0 or not chunks:
        raise AssertionError("child failed with status %d" % status)
    return json.loads(b"".join(chunks))


def errno_as(uid, gid, groups, fn):
    """Runs fn() in a child process as uid/gid with the supplementary groups; returns the
    errno it raised, 0 when none (255 for any other exception)."""
    res = in_child(_drop_to_and_run, uid, gid, groups, fn)
    if "ok" in res:
        return 0
    return res.get("errno", 255)


def _drop_to_and_run(uid, gid, groups, fn):
    os.setgroups(groups)
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    fn()


def helper_bin(name, env_var):
    """A helper program built with the tests (tests/NAME.cc): from env_var (ctest sets it),
    else next to the tierfs binary's build tree."""
    path = os.environ.get(env_var) or os.path.join(
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(tierfs_bin())))), "tests", name)
    if not os.access(path, os.X_OK):
        raise AssertionError("%s helper not found at %s (built with the tests)" % (name, path))
    return path


FALLOC_FL_KEEP_SIZE = 0x01
FALLOC_FL_PUNCH_HOLE = 0x02
FALLOC_FL_ZERO_RANGE = 0x10


def fallocate(fd, mode, off, length):
    """fallocate(2) (os.posix_fallocate has no mode)."""
    import ctypes
    import ctypes.util
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
    if libc.fallocate(fd, mode, off, length) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))

_live_volumes = set()


# ----- shared servers (started by ctest, see tests/servers.py) ----------------------------

# Redis databases of the integration scripts, so that ctest -j runs them side by side.
REDIS_DB = {"shared_cli": 3, "multi_client": 4, "migrate": 5, "backend_faults": 6, "shared_mount": 7,
            "io_stress": 8, "pack": 9, "rmr": 10, "clone": 11,
            "trash": 12, "quota": 13, "subdir": 14, "backup": 15}
REDIS_DB.update({"damaged": 16})  # the test servers have 32 databases
REDIS_DB.update({"gateway": 17})
REDIS_DB.update({"sync": 18})
REDIS_DB.update({"mirror": 19, "mirror_regions": 20})


def servers():
    """The TIERFS_TEST_* addresses of the throwaway servers; skips when run outside ctest."""
    if not os.environ.get("TIERFS_TEST_REDIS_URL"):
        raise unittest.SkipTest("no test servers: run through ctest, or export the output of "
                                "`tests/servers.py env --dir DIR` after `tests/servers.py up all --dir DIR`")
    return {k[len("TIERFS_TEST_"):].lower(): v for k, v in os.environ.items() if k.startswith("TIERFS_TEST_")}


def unique(prefix):
    return "%s-%d-%d" % (prefix, os.getpid(), int(time.time() * 1000) % 100000000)


def s3_storage_args(bucket_name):
    srv = servers()
    return ["--storage", "s3", "--bucket", srv["s3_endpoint"] + "/" + bucket_name,
            "--access-key", srv["s3_access_key"], "--secret-key", srv["s3_secret_key"]]


def rados_storage_args():
    srv = servers()
    return ["--storage", "rados", "--bucket", srv["rados_pool"], "--ceph-conf", srv["ceph_conf"]]


def run_mount_args():
    """Mount arguments the whole run adds to every mount (TIERFS_TEST_MOUNT_ARGS, split on
    spaces): ctest runs some suites again with `--io-uring`, for which the kernel's module
    parameter is turned on here (it changes nothing for mounts that do not ask)."""
    args = (os.environ.get("TIERFS_TEST_MOUNT_ARGS") or "").split()
    if "--io-uring" in args:
        enable_fuse_uring()
    return args


RUN_TRASH_DAYS = object()  # Volume.format: the run's setting (TIERFS_TEST_TRASH_DAYS, else 0)


class Volume:
    """One TierFS volume in a private temporary directory.

    Layout: DIR/meta.db (sqlite3), DIR/bucket (file store), DIR/mnt, DIR/client.log.
    Extra mounts of the same volume (mount_at) are tracked and unmounted on cleanup too.
    """

    def __init__(self, name="itvol", block_size=None, mount_args=(), base=None, meta_url=None, storage=None):
        """meta_url: a shared engine instead of DIR/meta.db; storage: format arguments
        (for example ["--storage", "s3", "--bucket", URL, ...]) instead of the file store."""
        self.name = name
        self.block_size = block_size
        self.mount_args = list(mount_args)
        self.dir = tempfile.mkdtemp(prefix="tierfs-it-", dir=base or os.environ.get("TIERFS_TEST_TMPDIR"))
        self.meta_db = os.path.join(self.dir, "meta.db")
        self.meta_url = meta_url or ("sqlite3://" + self.meta_db)
        self.storage = storage
        self.bucket = os.path.join(self.dir, "bucket")
        self.mnt = os.path.join(self.dir, "mnt")
        self.log = os.path.join(self.dir, "client.log")
        self.pid = None
        self._pids = set()          # every mount daemon this object started
        self._mountpoints = {self.mnt}
        self._logs = {}  # mount point -> its client log
        self.uuid = None  # from format's output
        os.mkdir(self.mnt)
        _live_volumes.add(self)

    # ----- lifecycle -------------------------------------------------------------------

    def format(self, *extra, check=True, trash_days=RUN_TRASH_DAYS):
        # Tests see removals delete at once unless they ask for the trash (trash_days, or
        # None for tierfs format's own default) or the run does: TIERFS_TEST_TRASH_DAYS (ctest
        # runs the POSIX suites a second time with 1, the default of `tierfs format`).
        if trash_days is RUN_TRASH_DAYS:
            trash_days = os.environ.get("TIERFS_TEST_TRASH_DAYS") or "0"
        args = ["format", self.meta_url, self.name] + (
            self.storage if self.storage is not None else ["--storage", "file", "--bucket", self.bucket])
        if self.block_size:
            args += ["--block-size", self.block_size]
        if trash_days is not None and "--trash-days" not in extra:
            args += ["--trash-days", str(trash_days)]
        res = tierfs(*(args + list(extra)))
        if check and res[0] != 0:
            raise AssertionError("tierfs format failed\n" + msg(*res))
        m = re.search(r"\(uuid ([0-9a-f-]{36})\)", res[1])
        if m:
            self.uuid = m.group(1)
        return res

    def mount(self, *extra, check=True):
        res = self.mount_at(self.mnt, *(self.mount_args + list(extra)), log=self.log)
        if res[0] == 0:
            self.pid = self._find_daemon_pid(self.mnt)
        if check:
            if res[0] != 0:
                raise AssertionError("tierfs mount -d failed\n" + msg(*res) + "\nlog:\n" + self.log_tail())
            if not is_mounted(self.mnt):
                raise AssertionError("tierfs mount -d returned 0 but %s is not a mount point\n" % self.mnt
                                     + msg(*res) + "\nlog:\n" + self.log_tail())
        return res

    def mount_at(self, mountpoint, *extra, log=None, prefix=(), env=None):
        """`tierfs mount -d` of this volume on any directory; returns (rc, out, err). The
        mount and its daemon are cleaned up with the volume. prefix: a command the mount
        runs under (a network namespace: netns.Network.prefix)."""
        self._mountpoints.add(mountpoint)
        self._logs[mountpoint] = log or (mountpoint + ".log")
        extra = list(extra) + [a for a in run_mount_args() if a not in extra]
        args = ["mount", self.meta_url, mountpoint, "-d", "--log", self._logs[mountpoint]] + extra
        if "--cache-dir" not in extra:
            # Each mount point its own disk cache, kept across remounts, gone with the test.
            args += ["--cache-dir", mountpoint.rstrip("/") + ".cache"]
        res = run(*(list(prefix) + [tierfs_bin()] + args), env=env)
        if res[0] == 0:
            pid = self._find_daemon_pid(mountpoint)
            if pid:
                self._pids.add(pid)
        return res

    def umount(self, check=True):
        res = tierfs("umount", self.mnt, "--wait", "60")
        if check:
            if res[0] != 0:
                raise AssertionError("tierfs umount failed\n" + msg(*res))
            if is_mounted(self.mnt):
                raise AssertionError("tierfs umount returned 0 but %s is still mounted" % self.mnt)
        # The daemon commits buffered writes and closes its session after the unmount.
        if self.pid and not wait_for(lambda: not pid_alive(self.pid), timeout=60):
            raise AssertionError("mount daemon %d still running 60 s after umount" % self.pid)
        if check and "--io-uring" in run_mount_args() and fuse_uring_enabled():
            # A run with --io-uring must not pass by falling back to /dev/fuse unseen.
            with open(self.log, errors="replace") as f:
                if "FUSE over io_uring: " not in f.read():
                    raise AssertionError("--io-uring: the mount did not start its io_uring queues\n"
                                         + self.log_tail())
        self.pid = None
        return res

    def remount(self):
        self.umount()
        self.mount()

    def cleanup(self):
        """Unmounts by any means and removes the temporary directory. Never raises."""
        try:
            self._report_dead_mounts()
            self.force_unmount()
        finally:
            _live_volumes.discard(self)
            if os.environ.get("TIERFS_TEST_KEEP"):
                sys.stderr.write("keeping %s\n" % self.dir)
            elif not any(is_mounted(m) for m in self._mountpoints):
                # A read-only tmpfs a test put over the bucket must not stop the removal.
                for m in list(mounts()):
                    if m.startswith(self.dir + os.sep):
                        run("umount", "-l", m, timeout=30)
                shutil.rmtree(self.dir, ignore_errors=True)
                # What a mount without --cache-dir left in the default cache directory.
                if self.uuid and os.geteuid() == 0:
                    shutil.rmtree(os.path.join("/var/cache/tierfs", self.uuid), ignore_errors=True)

    def _report_dead_mounts(self):
        """A mount whose daemon died is still mounted but answers ENOTCONN: show the end of
        its log (a crashed client writes its crash report there) before it is removed."""
        for mp in sorted(self._mountpoints):
            try:
                if not is_mounted(mp):
                    continue
                os.stat(mp)
            except OSError as e:
                if e.errno not in (errno.ENOTCONN, errno.ECONNABORTED):
                    continue
                try:
                    with open(self._logs.get(mp, self.log), errors="replace") as f:
                        tail = "\n".join(f.read().splitlines()[-40:])
                except OSError:
                    tail = "(no log)"
                sys.stderr.write("\nthe client of %s is gone (%s); the end of its log:\n%s\n"
                                 % (mp, os.strerror(e.errno), tail))

    def force_unmount(self, kill_first=False):
        if kill_first:
            self._kill_daemons()
        for mp in self._mountpoints:
            if is_mounted(mp) and not kill_first:
                for cmd in (["umount", mp], ["umount", "--force", mp]):
                    try:
                        tierfs(*cmd, timeout=60)
                    except Exception:
                        pass
                    if not is_mounted(mp):
                        break
            for cmd in (["fusermount3", "-uz", mp], ["umount", "-l", mp]):
                if not is_mounted(mp):
                    break
                try:
                    run(*cmd, timeout=30)
                except Exception:
                    pass
        # Daemons that did not go away with their mount.
        if not wait_for(lambda: not any(pid_alive(p) for p in self._pids), timeout=30):
            self._kill_daemons()

    def _kill_daemons(self):
        for pid in list(self._pids):
            if pid_alive(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        wait_for(lambda: not any(pid_alive(p) for p in self._pids), timeout=10)

    def _find_daemon_pid(self, mountpoint):
        """The pid of the tierfs process serving mountpoint: found in /proc by its command
        line (a process this object started), else from `tierfs status --json`."""
        mnt = os.path.realpath(mountpoint)
        # Compared as strings: resolving other processes' arguments would stat paths on their
        # mounts, and a test may hold one of those daemons stopped (SIGSTOP) meanwhile.
        targets = {mnt, os.path.normpath(os.path.abspath(mountpoint))}
        me = os.getpid()
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == me:
                continue
            try:
                with open("/proc/%s/cmdline" % entry, "rb") as f:
                    argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
            except OSError:
                continue
            if (argv and "mount" in argv and "umount" not in argv
                    and any(os.path.normpath(a) in targets for a in argv if a.startswith("/"))
                    and any("tierfs" in os.path.basename(a) for a in argv[:2])):
                if pid_alive(int(entry)):
                    found.append(int(entry))
        if len(found) == 1:
            return found[0]
        try:
            st = self.status_json()
            for s in st.get("sessions", []):
                if os.path.realpath(str(s.get("mountpoint", ""))) == mnt and pid_alive(int(s.get("pid", 0))):
                    return int(s["pid"])
        except Exception:
            pass
        return found[0] if found else None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.cleanup()
        return False

    # ----- inspection ------------------------------------------------------------------

    def status_json(self):
        rc, out, err = tierfs("status", self.meta_url, "--json")
        if rc != 0:
            raise AssertionError("tierfs status --json failed\n" + msg(rc, out, err))
        return json.loads(out)

    def info_json(self, path):
        rc, out, err = tierfs("info", path, "--json")
        if rc != 0:
            raise AssertionError("tierfs info --json %s failed\n" % path + msg(rc, out, err))
        return json.loads(out)

    def object_keys(self, path):
        info = self.info_json(path)
        keys = []
        for chunk in info.get("chunks", []):
            for sl in chunk.get("slices", []):
                keys.extend(sl.get("objects", []))
        return keys

    def read_log(self):
        try:
            with open(self.log, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def log_tail(self, n=60):
        return "\n".join(self.read_log().splitlines()[-n:])

    def path(self, *parts):
        return os.path.join(self.mnt, *parts)


class TierFSTestCase(unittest.TestCase):
    """Base class: one mounted volume per class (default) or per test.

    Subclasses may set:
      PER_TEST = True      a fresh volume for every test method
      BLOCK_SIZE = "1M"    format option
      MOUNT_ARGS = [...]   extra mount arguments
    In per-class mode each test gets its own directory self.work inside the mount.
    """

    PER_TEST = False
    BLOCK_SIZE = None
    MOUNT_ARGS = ()
    AUTO_MOUNT = True

    @classmethod
    def new_volume(cls, **kw):
        kw.setdefault("block_size", cls.BLOCK_SIZE)
        kw.setdefault("mount_args", cls.MOUNT_ARGS)
        return Volume(**kw)

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        tierfs_bin()
        cls.vol = None
        if not cls.PER_TEST and cls.AUTO_MOUNT:
            vol = cls.new_volume()
            cls.addClassCleanup(vol.cleanup)
            vol.format()
            vol.mount()
            cls.vol = vol

    def setUp(self):
        super().setUp()
        if self.PER_TEST and self.AUTO_MOUNT:
            vol = self.new_volume()
            self.addCleanup(vol.cleanup)
            vol.format()
            vol.mount()
            self.vol = vol
        if self.vol is not None:
            self.assertTrue(is_mounted(self.vol.mnt), "volume is not mounted at test start")
            self.mnt = self.vol.mnt
            self.work = os.path.join(self.mnt, self._testMethodName)
            os.mkdir(self.work)

    def local_tmpdir(self):
        d = tempfile.mkdtemp(prefix="tierfs-it-local-", dir=os.environ.get("TIERFS_TEST_TMPDIR"))
        if os.environ.get("TIERFS_TEST_KEEP"):
            sys.stderr.write("keeping %s\n" % d)
        else:
            self.addCleanup(shutil.rmtree, d, True)
        return d

    def assertFails(self, res, *substrings, what=""):
        """res is (rc, out, err): asserts rc != 0 and that the output names at least one of
        the substrings (case-insensitive)."""
        rc, out, err = res
        self.assertNotEqual(rc, 0, "%s: expected failure\n%s" % (what, msg(rc, out, err)))
        text = (out + err).lower()
        if substrings:
            self.assertTrue(any(s.lower() in text for s in substrings),
                            "%s: message should mention one of %r\n%s" % (what, substrings, msg(rc, out, err)))

    def assertOk(self, res, what=""):
        rc, out, err = res
        self.assertEqual(rc, 0, "%s failed\n%s" % (what, msg(rc, out, err)))
        return out


def make_tree(root, seed=0, nfiles=150, max_size=3 << 20, xattrs=True, specials=False):
    """Creates a varied tree under root (which must exist): nested dirs, files of many
    sizes (empty, tiny, crossing block boundaries), symlinks, hard links, modes, exact
    mtimes and user xattrs.  Deterministic for a seed.  Returns the number of entries."""
    import random
    rng = random.Random(seed)
    dirs = [root]
    count = 0
    for i in range(max(3, nfiles // 12)):
        parent = rng.choice(dirs)
        d = os.path.join(parent, "dir%03d" % i)
        os.mkdir(d)
        dirs.append(d)
        count += 1
    files = []
    sizes = [0, 1, 17, 4095, 4096, 4097, 65536, 100000, (1 << 20) + 1]
    for i in range(nfiles):
        d = rng.choice(dirs)
        p = os.path.join(d, "file%04d.bin" % i)
        if rng.random() < 0.6:
            n = rng.choice(sizes)
        else:
            n = rng.randrange(0, max_size if rng.random() < 0.1 else 20000)
        with open(p, "wb") as f:
            f.write(rng.randbytes(n))
        os.chmod(p, rng.choice([0o644, 0o600, 0o755, 0o444, 0o640]))
        if xattrs and rng.random() < 0.2:
            os.setxattr(p, "user.idx", str(i).encode())
        files.append(p)
        count += 1
    for i in range(max(1, nfiles // 15)):
        d = rng.choice(dirs)
        target = os.path.relpath(rng.choice(files), d)
        os.symlink(target, os.path.join(d, "link%03d" % i))
        count += 1
    os.symlink("does/not/exist", os.path.join(root, "dangling"))
    count += 1
    for i in range(max(1, nfiles // 20)):
        src = rng.choice(files)
        dst = os.path.join(rng.choice(dirs), "hard%03d" % i)
        os.link(src, dst)
        count += 1
    if specials:
        os.mkfifo(os.path.join(root, "fifo"))
        os.mknod(os.path.join(root, "chardev"), stat.S_IFCHR | 0o600, os.makedev(1, 7))
        count += 2
    # Exact times last, deepest first so directory times stick.
    for dirpath, dirnames, filenames in sorted(os.walk(root), key=lambda t: -t[0].count(os.sep)):
        for n in filenames:
            p = os.path.join(dirpath, n)
            t = rng.randrange(10**9, 1_700_000_000) * 10**9 + rng.randrange(10**9)
            os.utime(p, ns=(t, t), follow_symlinks=False)
        t = rng.randrange(10**9, 1_700_000_000) * 10**9 + rng.randrange(10**9)
        os.utime(dirpath, ns=(t, t))
    return count


def file_hashes(root):
    """{path relative to root: sha256 of its content} of every regular file under root."""
    import hashlib
    out = {}
    for dp, _, fs in os.walk(root):
        for f in fs:
            p = os.path.join(dp, f)
            if not os.path.islink(p):
                with open(p, "rb") as fh:
                    out[os.path.relpath(p, root)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def compare_trees(a, b, mtime=True, owner=True, xattrs=False, dir_mtime=True, content=True, hard_links=True):
    """Compares two trees entry by entry; returns a list of differences (empty if equal).
    Checks names, types, permission bits, sizes, contents, symlink targets, device
    numbers, hard-link grouping and optionally owners, mtimes and user xattrs."""
    diffs = []
    groups = {a: {}, b: {}}

    def listing(root):
        out = {}
        for dirpath, dirnames, filenames in os.walk(root):
            for n in dirnames + filenames:
                p = os.path.join(dirpath, n)
                out[os.path.relpath(p, root)] = p
        return out

    la, lb = listing(a), listing(b)
    for rel in sorted(set(la) - set(lb)):
        diffs.append("only in %s: %s" % (a, rel))
    for rel in sorted(set(lb) - set(la)):
        diffs.append("only in %s: %s" % (b, rel))
    for rel in sorted(set(la) & set(lb)):
        pa, pb = la[rel], lb[rel]
        sa, sb = os.lstat(pa), os.lstat(pb)
        if stat.S_IFMT(sa.st_mode) != stat.S_IFMT(sb.st_mode):
            diffs.append("%s: type %o != %o" % (rel, stat.S_IFMT(sa.st_mode), stat.S_IFMT(sb.st_mode)))
            continue
        if not stat.S_ISLNK(sa.st_mode) and stat.S_IMODE(sa.st_mode) != stat.S_IMODE(sb.st_mode):
            diffs.append("%s: mode %o != %o" % (rel, stat.S_IMODE(sa.st_mode), stat.S_IMODE(sb.st_mode)))
        if owner and (sa.st_uid, sa.st_gid) != (sb.st_uid, sb.st_gid):
            diffs.append("%s: owner %d:%d != %d:%d" % (rel, sa.st_uid, sa.st_gid, sb.st_uid, sb.st_gid))
        is_dir = stat.S_ISDIR(sa.st_mode)
        if mtime and (dir_mtime or not is_dir) and sa.st_mtime_ns != sb.st_mtime_ns:
            diffs.append("%s: mtime %d != %d" % (rel, sa.st_mtime_ns, sb.st_mtime_ns))
        if stat.S_ISREG(sa.st_mode):
            if sa.st_size != sb.st_size:
                diffs.append("%s: size %d != %d" % (rel, sa.st_size, sb.st_size))
            elif content and file_sha256(pa) != file_sha256(pb):
                diffs.append("%s: content differs" % rel)
            groups[a].setdefault(sa.st_ino, []).append(rel)
            groups[b].setdefault(sb.st_ino, []).append(rel)
        elif stat.S_ISLNK(sa.st_mode):
            if os.readlink(pa) != os.readlink(pb):
                diffs.append("%s: link %r != %r" % (rel, os.readlink(pa), os.readlink(pb)))
        elif stat.S_ISCHR(sa.st_mode) or stat.S_ISBLK(sa.st_mode):
            if sa.st_rdev != sb.st_rdev:
                diffs.append("%s: rdev %x != %x" % (rel, sa.st_rdev, sb.st_rdev))
        if xattrs and not stat.S_ISLNK(sa.st_mode):
            xa = {k: os.getxattr(pa, k) for k in os.listxattr(pa) if k.startswith("user.")}
            xb = {k: os.getxattr(pb, k) for k in os.listxattr(pb) if k.startswith("user.")}
            if xa != xb:
                diffs.append("%s: xattrs %r != %r" % (rel, xa, xb))
    ga = sorted(sorted(v) for v in groups[a].values() if len(v) > 1)
    gb = sorted(sorted(v) for v in groups[b].values() if len(v) > 1)
    if ga != gb and hard_links:
        diffs.append("hard-link groups differ: %r != %r" % (ga[:10], gb[:10]))
    return diffs


def snapshot(root):
    """Everything that must survive a remount, except atime (reads may update it)."""
    snap = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            rel = os.path.relpath(p, root)
            st = os.lstat(p)
            d = {"mode": st.st_mode, "uid": st.st_uid, "gid": st.st_gid, "nlink": st.st_nlink,
                 "mtime": st.st_mtime_ns, "ino": st.st_ino}
            if stat.S_ISREG(st.st_mode):
                d["size"] = st.st_size
                d["sha"] = file_sha256(p)
            if stat.S_ISLNK(st.st_mode):
                d["target"] = os.readlink(p)
            else:
                d["xattr"] = {k: os.getxattr(p, k) for k in os.listxattr(p) if k.startswith("user.")}
            if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
                d["rdev"] = st.st_rdev
            snap[rel] = d
    return snap


def diff_snapshots(a, b):
    out = []
    for k in sorted(set(a) | set(b)):
        if a.get(k) != b.get(k):
            out.append("%s: %r != %r" % (k, a.get(k), b.get(k)))
    return out


def _watchdog(seconds):
    """A hung file system would block the test process in a syscall forever and leave the
    mount behind when the runner kills us. After `seconds`, kill the daemons we started
    (which fails every pending request with ENOTCONN) and detach their mounts, so the
    tests fail and the normal teardown runs."""
    import threading

    def fire():
        sys.stderr.write("\nwatchdog: tests still running after %ds; aborting %d TierFS mount(s)\n"
                         % (seconds, len(_live_volumes)))
        for v in list(_live_volumes):
            try:
                v.force_unmount(kill_first=True)
            except Exception as e:  # keep going for the other volumes
                sys.stderr.write("watchdog: %r\n" % e)
    t = threading.Timer(seconds, fire)
    t.daemon = True
    t.start()


def _cleanup_all():
    for v in list(_live_volumes):
        v.cleanup()


def main():
    import atexit
    atexit.register(_cleanup_all)
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))
    _watchdog(int(os.environ.get("TIERFS_TEST_WATCHDOG") or 1500))
    unittest.main(verbosity=2)
