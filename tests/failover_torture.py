"""The failover torture shared by every replicated engine's test (etcd, PostgreSQL under
Patroni, Redis under Sentinel): writers on several mounts log every operation acknowledged
to them while a caller-supplied `kill_leader()` takes the engine's leader down again and
again; afterwards every acknowledged operation must be present exactly as acknowledged.

Writers do fsync'd creates, fsync'd appends to a journal file (a line applied twice would
show), renames and unlinks. `run_torture` returns what happened; `check_acknowledged`
reads everything back through a fresh mount."""
import multiprocessing
import os
import queue
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


class Writer:
    def __init__(self, root, name):
        self.dir = os.path.join(root, name)
        os.mkdir(self.dir)
        self.files = {}  # name -> content, as acknowledged
        self.lines = []  # journal lines acknowledged
        self.maybe_lines = []  # journal lines whose append failed: present at most once
        self.failed = []
        self.done_at = []  # monotonic time of each acknowledged operation
        self.failed_at = []
        self.slowest = 0.0  # the slowest operation (several system calls)
        self.slowest_call = (0.0, "")  # the slowest single system call, and which
        self.n = 0
        self.last_call = ""

    def call(self, fn, *args):
        """One system call of an operation, timed: no one call may wait past the engine's
        retry bound (an operation of four calls may take up to four times as long)."""
        t0 = time.monotonic()
        self.last_call = fn.__name__
        try:
            return fn(*args)
        finally:
            took = time.monotonic() - t0
            if took > self.slowest_call[0]:
                self.slowest_call = (took, fn.__name__)

    def op(self, fn):
        t0 = time.monotonic()
        try:
            fn()
        except OSError as e:
            self.failed.append("%r in %s at %.1f s" % (e, self.last_call, time.monotonic()))
            self.failed_at.append(time.monotonic())
            return False
        finally:
            self.slowest = max(self.slowest, time.monotonic() - t0)
        self.done_at.append(time.monotonic())
        return True

    def step(self):
        self.n += 1
        n = self.n
        k = n % 4
        if k == 0 or not self.files:
            name, data = "f%d" % n, os.urandom(1000 + n % 5000)

            def create():
                fd = self.call(os.open, os.path.join(self.dir, name), os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644)
                try:
                    self.call(os.write, fd, data)
                    self.call(os.fsync, fd)
                finally:
                    self.call(os.close, fd)
                self.files[name] = data
            if not self.op(create):
                self._settle(name)
        elif k == 1:
            line = "line %d\n" % n

            def append():
                fd = self.call(os.open, os.path.join(self.dir, "journal"), os.O_CREAT | os.O_WRONLY | os.O_APPEND,
                               0o644)
                try:
                    self.call(os.write, fd, line.encode())
                    self.call(os.fsync, fd)
                finally:
                    self.call(os.close, fd)
                self.lines.append(line)
            if not self.op(append):
                self.maybe_lines.append(line)
        elif k == 2:
            old = sorted(self.files)[n % len(self.files)]
            new = "r%d" % n

            def rename():
                self.call(os.rename, os.path.join(self.dir, old), os.path.join(self.dir, new))
                self.files[new] = self.files.pop(old)
            if not self.op(rename):
                self._settle(old, new)
        elif len(self.files) > 20:
            old = sorted(self.files)[0]

            def unlink():
                self.call(os.unlink, os.path.join(self.dir, old))
                del self.files[old]
            if not self.op(unlink):
                self._settle(old)

    def _settle(self, *names):
        """After a failed operation, learn from the volume which of its outcomes happened
        (a failed operation may or may not have applied), so later checks are exact."""
        for _ in range(100):
            try:
                present = set(os.listdir(self.dir))
                break
            except OSError:
                time.sleep(0.2)
        else:
            return
        if len(names) == 2:  # rename old -> new
            old, new = names
            if new in present and old not in present and old in self.files:
                self.files[new] = self.files.pop(old)
            return
        name = names[0]
        if name not in present:
            self.files.pop(name, None)
        elif name not in self.files:
            # A create that applied but failed: its content may be partial; drop it.
            try:
                os.unlink(os.path.join(self.dir, name))
            except OSError:
                pass


def _writer_main(root, name, stop, results):
    w = Writer(root, name)
    while not stop.is_set():
        w.step()
    results.put((name, w.__dict__))
    results.close()
    results.join_thread()


def run_torture(roots, kill_leader, seconds=35, period=5.0):
    """Runs a writer under each root while kill_leader() is called every `period` seconds
    (it returns True when it killed something). Returns (writers, kill times).

    Each writer runs in a process of its own. Were they threads, this process would hold
    open files of the mounts, and every program kill_leader starts (a server restarted)
    would close them on exec: a FUSE flush that waits for the metadata engine, which may
    be waiting for the very server being started (a replica that WAIT needs)."""
    # bench/failover_soak.py runs the same tests for minutes instead of CI's seconds.
    seconds = float(os.environ.get("TIERFS_TORTURE_SECONDS", seconds))
    ctx = multiprocessing.get_context("fork")
    stop, results = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_writer_main, args=(root, "w%d" % i, stop, results)) for i, root in enumerate(roots)]
    for p in procs:
        p.start()
    kills = []
    try:
        deadline = time.monotonic() + seconds
        time.sleep(2)
        while time.monotonic() < deadline:
            t0 = time.monotonic()
            if not kill_leader():
                time.sleep(0.2)
                continue
            kills.append(t0)
            time.sleep(max(0.0, period - (time.monotonic() - t0)))
    finally:
        stop.set()
        got = {}
        for _ in procs:
            try:
                name, state = results.get(timeout=120)
            except queue.Empty:
                break
            got[name] = state
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    writers = []
    for i in range(len(roots)):
        w = Writer.__new__(Writer)
        w.__dict__.update(got["w%d" % i])
        writers.append(w)
    return writers, kills


def report(name, writers, kills, period=10.0):
    """Prints, and returns, the unavailability an application saw at each kill: the longest
    wait between two acknowledged operations of a writer across the kill (the writers
    otherwise complete an operation every few milliseconds)."""
    stalls = []
    for k in kills:
        worst = 0.0
        for w in writers:
            done = sorted(w.done_at)
            for a, b in zip(done, done[1:]):
                if b > k and a < k + period:
                    worst = max(worst, b - a)
        stalls.append(worst)
    stalls.sort()
    if stalls:
        print("%s: %d leader kills; %s operations, %d failed; unavailable after a kill: median %.2f s, max %.2f s "
              "(longest wait between two acknowledged operations of a writer); slowest system call %.2f s (%s)"
              % (name, len(kills), "+".join(str(len(w.done_at)) for w in writers),
                 sum(len(w.failed) for w in writers), stalls[len(stalls) // 2], stalls[-1],
                 max(w.slowest_call for w in writers)[0], max(w.slowest_call for w in writers)[1]), file=sys.stderr)
    return stalls


def check_progress(test, writers, kills, bound_s):
    """Each writer completed an operation between each kill and the next, and no system call
    waited past bound_s (the engine's retry bound, after which it must report EIO): no mount
    hangs longer than that."""
    for w in writers:
        took, which = w.slowest_call
        test.assertLess(took, bound_s, "a system call (%s) waited past the engine's retry bound" % which)
        for n, (k, k_next) in enumerate(zip(kills, kills[1:] + [float("inf")])):
            if not any(k < t < k_next for t in w.done_at):
                before = [t - k for t in w.done_at if t <= k][-1:]
                after = [t - k for t in w.done_at if t >= k_next][:1]
                test.fail("writer %s: no operation completed between kill %d of %d and the next (%.1f s later);"
                          " its last before came %s s before, its first after %s s after the kill; slowest call"
                          " %.1f s (%s)" % (os.path.basename(w.dir), n + 1, len(kills), k_next - k,
                                           ["%.1f" % -x for x in before], ["%.1f" % x for x in after],
                                           took, which))


def check_acknowledged(test, mnt, writers):
    """Everything acknowledged is there, read through the mount at mnt; nothing twice."""
    for w in writers:
        d = os.path.join(mnt, os.path.basename(w.dir))
        names = set(os.listdir(d)) - {"journal"}
        test.assertEqual(names, set(w.files))
        for name, data in w.files.items():
            with open(os.path.join(d, name), "rb") as f:
                test.assertEqual(f.read(), data, name)
        with open(os.path.join(d, "journal")) as f:
            got = f.readlines()
        # Acknowledged lines in order, each once; a line whose append failed at most once.
        test.assertEqual([x for x in got if x not in w.maybe_lines], w.lines)
        for line in w.maybe_lines:
            test.assertLessEqual(got.count(line), 1, "a failed append applied twice")


def check_after(test, vol, writers, others=()):
    """The end of a torture: the other mount points and the volume unmounted, everything
    acknowledged read back through a fresh mount (nothing twice), and fsck clean."""
    for mnt in others:
        harness.run("umount", mnt)
    vol.umount()
    vol.mount()
    check_acknowledged(test, vol.mnt, writers)
    vol.umount()
    fsck_clean(test, vol.meta_url)


# The typed suites' names for an engine: kv_engine_test names its kinds, meta_test numbers
# them in the order of meta_test_fixture.h's EngineKinds (Mem, Sqlite, Redis, Postgres, Etcd).
SUITE_FILTERS = {
    "Redis": {"TIERFS_KV_ENGINE_TEST": "*/Redis.*", "TIERFS_META_TEST": "*/2.*"},
    "Postgres": {"TIERFS_KV_ENGINE_TEST": "*/Postgres.*", "TIERFS_META_TEST": "*/3.*"},
}


def engine_suites(test, env_var, base_url, kind):
    """Runs the typed engine suites (kv_engine_test, meta_test: what every engine passes)
    against a cluster of the test's own: env_var (TIERFS_TEST_PG_URL, TIERFS_TEST_REDIS_URL)
    set to base_url, only the suites of that engine kind (Postgres, Redis)."""
    for binary, gtest_filter in SUITE_FILTERS[kind].items():
        path = os.environ.get(binary)
        if not path:
            test.skipTest("%s is not set: run through ctest, which names the test binaries" % binary)
        env = dict(os.environ, **{env_var: base_url})
        t0 = time.monotonic()
        r = subprocess.run([path, "--gtest_filter=" + gtest_filter, "--gtest_brief=1"], env=env, capture_output=True,
                           text=True, timeout=600)
        test.assertEqual(r.returncode, 0, "%s on %s:\n%s%s" % (os.path.basename(path), base_url, r.stdout[-4000:],
                                                              r.stderr[-2000:]))
        ran = [line for line in r.stdout.splitlines() if "tests from" in line and "ran" in line]
        test.assertTrue(ran and " 0 tests" not in ran[-1], "%s ran nothing: %s" % (path, r.stdout[-1000:]))
        print("%s on %s: %s (%.0f s)" % (os.path.basename(path), kind, ran[-1].strip(), time.monotonic() - t0),
              file=sys.stderr)


def partition_start(vol):
    """A partition test's volume: formatted, mounted, a file "before" written. Returns the
    volume's trash_days: the setting a client cut off with a minority then tries to change."""
    vol.format()
    vol.mount()
    with open(os.path.join(vol.mnt, "before"), "w") as f:
        f.write("1")
    return vol.status_json()["trash_days"]


def write_on_the_majority_side(vol, since):
    """Writes "during" through the volume's mount, on the majority's side of a cut, and says
    how long it took after `since` (what was cut)."""
    t0 = time.monotonic()
    with open(os.path.join(vol.mnt, "during"), "w") as f:
        f.write("2")
    print("a write on the majority side %.2f s after %s" % (time.monotonic() - t0, since), file=sys.stderr)


def partition_healed(test, vol, trash_days):
    """After the link is back: the cut-off client's write is nowhere, both files are there,
    and fsck is clean."""
    test.assertEqual(vol.status_json()["trash_days"], trash_days)
    for name in ("before", "during"):
        test.assertTrue(os.path.exists(os.path.join(vol.mnt, name)), name)
    vol.umount()
    fsck_clean(test, vol.meta_url)


def fsck_clean(test, meta_url):
    rc, out, err = harness.tierfs("fsck", meta_url)
    test.assertEqual(rc, 0, harness.msg(rc, out, err))


def count_lost(mnt, writers):
    """How many acknowledged operations a volume does not show (for engines that may lose
    some: Redis without WAIT): files acknowledged but missing or different, names that an
    acknowledged rename or unlink removed but that are back, journal lines missing."""
    lost = 0
    for w in writers:
        d = os.path.join(mnt, os.path.basename(w.dir))
        names = set(os.listdir(d)) - {"journal"}
        for name, data in w.files.items():
            try:
                with open(os.path.join(d, name), "rb") as f:
                    lost += f.read() != data
            except OSError:
                lost += 1
        lost += len(names - set(w.files))
        try:
            with open(os.path.join(d, "journal")) as f:
                got = set(f.readlines())
        except OSError:
            got = set()
        lost += sum(1 for line in w.lines if line not in got)
    return lost
