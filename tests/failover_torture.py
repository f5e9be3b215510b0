"""The failover torture shared by every replicated engine's test (etcd, PostgreSQL under
Patroni, Redis under Sentinel): writers on several mounts log every operation acknowledged
to them while a caller-supplied `kill_leader()` takes the engine's leader down again and
again; afterwards every acknowledged operation must be present exactly as acknowledged.

Writers do fsync'd creates, fsync'd appends to a journal file (a line applied twice would
show), renames and unlinks. `run_torture` returns what happened; `check_acknowledged`
reads everything back through a fresh mount."""
import os
import sys
import threading
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
        self.slowest = 0.0
        self.n = 0

    def op(self, fn):
        t0 = time.monotonic()
        try:
            fn()
        except OSError as e:
            self.failed.append(repr(e))
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
                fd = os.open(os.path.join(self.dir, name), os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644)
                try:
                    os.write(fd, data)
                    os.fsync(fd)
                finally:
                    os.close(fd)
                self.files[name] = data
            if not self.op(create):
                self._settle(name)
        elif k == 1:
            line = "line %d\n" % n

            def append():
                fd = os.open(os.path.join(self.dir, "journal"), os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)
                try:
                    os.write(fd, line.encode())
                    os.fsync(fd)
                finally:
                    os.close(fd)
                self.lines.append(line)
            if not self.op(append):
                self.maybe_lines.append(line)
        elif k == 2:
            old = sorted(self.files)[n % len(self.files)]
            new = "r%d" % n

            def rename():
                os.rename(os.path.join(self.dir, old), os.path.join(self.dir, new))
                self.files[new] = self.files.pop(old)
            if not self.op(rename):
                self._settle(old, new)
        elif len(self.files) > 20:
            old = sorted(self.files)[0]

            def unlink():
                os.unlink(os.path.join(self.dir, old))
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


def run_torture(roots, kill_leader, seconds=35, period=5.0):
    """Runs a writer under each root while kill_leader() is called every `period` seconds
    (it returns True when it killed something). Returns (writers, kill times)."""
    writers = [Writer(root, "w%d" % i) for i, root in enumerate(roots)]
    stop = threading.Event()

    def run(w):
        while not stop.is_set():
            w.step()

    threads = [threading.Thread(target=run, args=(w,)) for w in writers]
    for t in threads:
        t.start()
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
        for t in threads:
            t.join()
    return writers, kills


def report(name, writers, kills):
    """Prints, and returns, the seconds from each kill to each writer's next success."""
    back = sorted(min((t for t in w.done_at if t > k), default=float("inf")) - k for k in kills for w in writers)
    if back:
        print("%s: %d leader kills; %s operations, %d failed; back after a kill: median %.2f s, max %.2f s; "
              "slowest operation %.2f s" % (name, len(kills), "+".join(str(len(w.done_at)) for w in writers),
                                            sum(len(w.failed) for w in writers), back[len(back) // 2], back[-1],
                                            max(w.slowest for w in writers)), file=sys.stderr)
    return back


def check_progress(test, writers, kills, bound_s):
    """Each writer completed an operation between each kill and the next, and none waited
    past bound_s (the engine's retry bound, after which it must report EIO)."""
    for w in writers:
        test.assertLess(w.slowest, bound_s, "an operation waited past the engine's retry bound")
        for k, k_next in zip(kills, kills[1:] + [float("inf")]):
            test.assertTrue(any(k < t < k_next for t in w.done_at), "no operation completed after a kill")


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


def fsck_clean(test, meta_url):
    rc, out, err = harness.tierfs("fsck", meta_url)
    test.assertEqual(rc, 0, harness.msg(rc, out, err))
