"""Advisory locks on a mounted volume: flock, POSIX record locks (fcntl F_SETLK) and open
file description locks (F_OFD_SETLK), within one mount, between threads of one process,
across processes and across two mounts of one volume; blocked lockers never hold the FUSE
workers, and locks go when their owner does (close for POSIX locks, the last close of the
open file for flock and OFD locks)."""

import ctypes
import errno
import fcntl
import os
import select
import subprocess
import sys
import textwrap
import threading
import time

import harness
from harness import in_child, is_mounted, msg, tierfs, wait_for


class Flock(ctypes.Structure):
    _fields_ = [("l_type", ctypes.c_short), ("l_whence", ctypes.c_short),
                ("l_start", ctypes.c_int64), ("l_len", ctypes.c_int64), ("l_pid", ctypes.c_int)]


def getlk(fd, ltype, start, length):
    fl = Flock(ltype, os.SEEK_SET, start, length, 0)
    res = fcntl.fcntl(fd, fcntl.F_GETLK, bytes(fl))
    return Flock.from_buffer_copy(res)


def setlk(fd, ltype, start, length, wait=False):
    fl = Flock(ltype, os.SEEK_SET, start, length, 0)
    fcntl.fcntl(fd, fcntl.F_SETLKW if wait else fcntl.F_SETLK, bytes(fl))


def _child_try_flock(path, how):
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, how | fcntl.LOCK_NB)
        return "locked"
    except BlockingIOError:
        return "busy"
    finally:
        os.close(fd)


def _child_try_setlk(path, ltype, start, length):
    fd = os.open(path, os.O_RDWR)
    try:
        setlk(fd, ltype, start, length)
        return "locked"
    except OSError as e:
        if e.errno in (errno.EAGAIN, errno.EACCES):
            return "busy"
        raise
    finally:
        os.close(fd)


def _child_getlk(path, ltype, start, length):
    fd = os.open(path, os.O_RDWR)
    try:
        fl = getlk(fd, ltype, start, length)
        return [fl.l_type, fl.l_start, fl.l_len, fl.l_pid]
    finally:
        os.close(fd)


def _lock_file_race(path, role, seconds, out):
    """One side of a lock-file race: the remover creates, locks and removes the lock file in a
    loop; the others open it (O_CREAT, for writing) and lock it, flock then fcntl. Every
    error is counted by call and errno and written to `out` as JSON."""
    import json
    errors, done = {}, 0

    def count(what, e):
        k = "%s %s" % (what, errno.errorcode.get(e.errno, e.errno))
        errors[k] = errors.get(k, 0) + 1

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
        except OSError as e:
            count("open", e)
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            fcntl.lockf(fd, fcntl.LOCK_EX)
            if role == "remover":
                try:
                    if os.stat(path).st_ino == os.fstat(fd).st_ino:
                        os.unlink(path)
                except FileNotFoundError:
                    pass
            fcntl.lockf(fd, fcntl.LOCK_UN)
            done += 1
        except OSError as e:
            count("lock", e)
        finally:
            os.close(fd)
    with open(out, "w") as f:
        json.dump({"errors": errors, "done": done}, f)


class LockTest(harness.TierFSTestCase):
    def setUp(self):
        super().setUp()
        self.p = os.path.join(self.work, "lockfile")
        with open(self.p, "wb") as f:
            f.write(b"x" * 1000)

    def test_lock_file_race(self):
        # One process removes a lock file while others open it for writing and lock it:
        # ext4 and tmpfs allow all of it (an open of the removed file gets the unlinked
        # file, or a new one), with the trash on and off.
        import json
        lock = os.path.join(self.work, "race.lock")
        outs, pids = [], []
        for i, role in enumerate(["remover", "opener", "opener", "opener"]):
            out = os.path.join(self.local_tmpdir(), "%d.json" % i)
            outs.append(out)
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    _lock_file_race(lock, role, 4.0, out)
                    code = 0
                finally:
                    os._exit(code)
            pids.append(pid)
        for pid in pids:
            self.assertEqual(os.waitpid(pid, 0)[1], 0)
        results = [json.load(open(o)) for o in outs]
        errors = [r["errors"] for r in results if r["errors"]]
        self.assertEqual(errors, [], "errors in the lock-file race: %r" % results)
        self.assertGreater(results[0]["done"], 10, results)
        self.assertGreater(sum(r["done"] for r in results[1:]), 10, results)

    def test_flock_exclusive_and_shared(self):
        fd = os.open(self.p, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            self.assertEqual(in_child(_child_try_flock, self.p, fcntl.LOCK_EX), {"ok": "busy"})
            self.assertEqual(in_child(_child_try_flock, self.p, fcntl.LOCK_SH), {"ok": "busy"})
            fcntl.flock(fd, fcntl.LOCK_UN)
            self.assertEqual(in_child(_child_try_flock, self.p, fcntl.LOCK_EX), {"ok": "locked"})
            # Non-blocking: a lock the exited child failed to release must fail the test,
            # not hang it.
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                self.fail("flock still held after the holder closed its descriptor and exited")
            self.assertEqual(in_child(_child_try_flock, self.p, fcntl.LOCK_SH), {"ok": "locked"})
            self.assertEqual(in_child(_child_try_flock, self.p, fcntl.LOCK_EX), {"ok": "busy"})
        finally:
            os.close(fd)
        # Closing the descriptor released the lock.
        self.assertEqual(in_child(_child_try_flock, self.p, fcntl.LOCK_EX), {"ok": "locked"})

    def test_fcntl_conflicts_and_getlk(self):
        fd = os.open(self.p, os.O_RDWR)
        try:
            setlk(fd, fcntl.F_WRLCK, 0, 100)
            setlk(fd, fcntl.F_RDLCK, 500, 100)
            me = os.getpid()
            self.assertEqual(in_child(_child_try_setlk, self.p, fcntl.F_WRLCK, 50, 10), {"ok": "busy"})
            self.assertEqual(in_child(_child_try_setlk, self.p, fcntl.F_RDLCK, 99, 1), {"ok": "busy"})
            self.assertEqual(in_child(_child_try_setlk, self.p, fcntl.F_WRLCK, 100, 100), {"ok": "locked"})
            self.assertEqual(in_child(_child_try_setlk, self.p, fcntl.F_RDLCK, 550, 10), {"ok": "locked"})
            self.assertEqual(in_child(_child_try_setlk, self.p, fcntl.F_WRLCK, 550, 10), {"ok": "busy"})
            got = in_child(_child_getlk, self.p, fcntl.F_WRLCK, 0, 1000)["ok"]
            self.assertEqual(got[0], fcntl.F_WRLCK, got)
            self.assertEqual(got[1:3], [0, 100], got)
            self.assertEqual(got[3], me, "F_GETLK must report the holder's pid")
            got = in_child(_child_getlk, self.p, fcntl.F_WRLCK, 200, 400)["ok"]
            self.assertEqual(got[0], fcntl.F_RDLCK, got)
            self.assertEqual(got[3], me)
            got = in_child(_child_getlk, self.p, fcntl.F_RDLCK, 200, 100)["ok"]
            self.assertEqual(got[0], fcntl.F_UNLCK, got)
            # Unlocking part of the range frees that part only.
            setlk(fd, fcntl.F_UNLCK, 0, 50)
            self.assertEqual(in_child(_child_try_setlk, self.p, fcntl.F_WRLCK, 0, 50), {"ok": "locked"})
            self.assertEqual(in_child(_child_try_setlk, self.p, fcntl.F_WRLCK, 60, 1), {"ok": "busy"})
        finally:
            os.close(fd)
        self.assertEqual(in_child(_child_try_setlk, self.p, fcntl.F_WRLCK, 0, 0), {"ok": "locked"},
                         "closing the descriptor must release the process's locks")

    def test_fcntl_blocking_lock_waits_for_release(self):
        fd = os.open(self.p, os.O_RDWR)
        setlk(fd, fcntl.F_WRLCK, 0, 0)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            try:
                cfd = os.open(self.p, os.O_RDWR)
                setlk(cfd, fcntl.F_WRLCK, 0, 0, wait=True)
                os.write(w, b"got")
                os.close(cfd)
            finally:
                os._exit(0)
        os.close(w)
        try:
            # The child is blocked while we hold the lock (it cannot have written yet).
            import select
            ready, _, _ = select.select([r], [], [], 0.5)
            self.assertEqual(ready, [], "F_SETLKW returned while a conflicting lock was held")
            setlk(fd, fcntl.F_UNLCK, 0, 0)
            ready, _, _ = select.select([r], [], [], 60)
            self.assertEqual(ready, [r], "F_SETLKW did not return after the lock was released")
            self.assertEqual(os.read(r, 3), b"got")
        finally:
            os.close(r)
            os.close(fd)
            if not wait_for(lambda: os.waitpid(pid, os.WNOHANG)[0] == pid, timeout=30):
                os.kill(pid, 9)
                os.waitpid(pid, 0)

    WAITERS = 24   # more than the mount has FUSE worker threads

    def test_more_blocked_lockers_than_fuse_threads(self):
        # Every waiter blocks in flock or F_SETLKW while this process holds both locks. The
        # mount must still serve the release (and everything else): waits do not hold the
        # FUSE workers. Then each waiter gets the lock in turn.
        fd = os.open(self.p, os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_EX)
        setlk(fd, fcntl.F_WRLCK, 0, 0)
        code = textwrap.dedent("""
            import fcntl, os, struct, sys, time
            p, kind = sys.argv[1], sys.argv[2]
            fd = os.open(p, os.O_RDWR)
            if kind == "flock":
                fcntl.flock(fd, fcntl.LOCK_EX)
            else:
                fcntl.fcntl(fd, fcntl.F_SETLKW, struct.pack("hhqqi", fcntl.F_WRLCK, 0, 0, 0, 0))
            print("got", flush=True)
            time.sleep(0.05)
            os.close(fd)
        """)
        kids = [subprocess.Popen([sys.executable, "-c", code, self.p, "flock" if i % 2 else "setlkw"],
                                 stdout=subprocess.PIPE, text=True) for i in range(self.WAITERS)]
        try:
            time.sleep(1.5)
            self.assertEqual([k.poll() for k in kids], [None] * self.WAITERS, "a waiter got a held lock")
            # The mount still answers while every waiter blocks.
            self.assertEqual(len(os.listdir(self.work)), 1)
            with open(self.p, "rb") as f:
                self.assertEqual(f.read(), b"x" * 1000)
            fcntl.flock(fd, fcntl.LOCK_UN)
            setlk(fd, fcntl.F_UNLCK, 0, 0)
            for k in kids:
                out, _ = k.communicate(timeout=120)
                self.assertEqual((k.returncode, out), (0, "got\n"))
        finally:
            os.close(fd)
            for k in kids:
                if k.poll() is None:
                    k.kill()
                    k.wait()


def _second_mount(testcase):
    mnt2 = os.path.join(testcase.vol.dir, "mnt2-" + testcase._testMethodName)
    os.mkdir(mnt2)
    res = testcase.vol.mount_at(mnt2)

    def cleanup():
        if is_mounted(mnt2):
            tierfs("umount", mnt2)
    testcase.addCleanup(cleanup)
    testcase.assertEqual(res[0], 0, msg(*res))
    return mnt2


class TwoMountLockTest(harness.TierFSTestCase):
    """Locks are held in the metadata engine, so two mounts of one volume see each other's."""

    def test_locks_conflict_across_mounts(self):
        p1 = os.path.join(self.work, "lockfile")
        with open(p1, "wb") as f:
            f.write(b"x" * 100)
        mnt2 = _second_mount(self)
        p2 = os.path.join(mnt2, os.path.relpath(p1, self.mnt))
        self.assertTrue(wait_for(lambda: os.path.exists(p2), timeout=30))
        fd = os.open(p1, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            self.assertEqual(in_child(_child_try_flock, p2, fcntl.LOCK_EX), {"ok": "busy"},
                             "flock held through one mount is not seen through the other")
            fcntl.flock(fd, fcntl.LOCK_UN)
            self.assertEqual(in_child(_child_try_flock, p2, fcntl.LOCK_EX), {"ok": "locked"})
            setlk(fd, fcntl.F_WRLCK, 10, 10)
            self.assertEqual(in_child(_child_try_setlk, p2, fcntl.F_WRLCK, 15, 1), {"ok": "busy"},
                             "fcntl lock held through one mount is not seen through the other")
            self.assertEqual(in_child(_child_try_setlk, p2, fcntl.F_WRLCK, 30, 1), {"ok": "locked"})
        finally:
            os.close(fd)
        self.assertEqual(in_child(_child_try_setlk, p2, fcntl.F_WRLCK, 15, 1), {"ok": "locked"})


def ofd(fd, cmd, ltype, start, length):
    """An F_OFD_* call; returns (type, start, len, pid) of the struct the kernel hands back."""
    res = Flock.from_buffer_copy(fcntl.fcntl(fd, cmd, bytes(Flock(ltype, os.SEEK_SET, start, length, 0))))
    return res.l_type, res.l_start, res.l_len, res.l_pid


def ofd_try(fd, ltype, start, length):
    try:
        ofd(fd, fcntl.F_OFD_SETLK, ltype, start, length)
        return "locked"
    except OSError as e:
        if e.errno in (errno.EAGAIN, errno.EACCES):
            return "busy"
        raise


class OfdLockTest(harness.TierFSTestCase):
    """Open file description locks belong to the open file, not to the process: two opens
    in one process conflict, closing another descriptor keeps them, and they go with the
    last descriptor of their open file, waking a blocked locker (which hung before)."""

    def setUp(self):
        super().setUp()
        self.p = os.path.join(self.work, "ofd")
        with open(self.p, "wb") as f:
            f.write(b"x" * 1000)

    def test_two_opens_in_one_process_conflict(self):
        a = os.open(self.p, os.O_RDWR)
        b = os.open(self.p, os.O_RDWR)
        try:
            ofd(a, fcntl.F_OFD_SETLK, fcntl.F_WRLCK, 0, 100)
            self.assertEqual(ofd_try(b, fcntl.F_WRLCK, 50, 10), "busy")
            self.assertEqual(ofd_try(b, fcntl.F_RDLCK, 100, 10), "locked")
            t, st, ln, _ = ofd(b, fcntl.F_OFD_GETLK, fcntl.F_WRLCK, 0, 1000)
            self.assertEqual((t, st, ln), (fcntl.F_WRLCK, 0, 100))
            # The same open file may change its own lock; a dup shares it.
            d = os.dup(a)
            self.assertEqual(ofd_try(d, fcntl.F_RDLCK, 0, 100), "locked")
            os.close(d)
            self.assertEqual(ofd_try(b, fcntl.F_RDLCK, 0, 10), "locked")
            # OFD and POSIX locks of one process conflict too (different owners).
            self.assertEqual(in_child(_child_try_setlk, self.p, fcntl.F_WRLCK, 0, 10), {"ok": "busy"})
            # Closing some other descriptor of the file (a POSIX close) keeps OFD locks.
            os.close(os.open(self.p, os.O_RDONLY))
            self.assertEqual(ofd_try(b, fcntl.F_WRLCK, 0, 10), "busy")
        finally:
            os.close(a)
            os.close(b)
        c = os.open(self.p, os.O_RDWR)
        try:
            self.assertEqual(ofd_try(c, fcntl.F_WRLCK, 0, 0), "locked", "an OFD lock outlived its open file")
        finally:
            os.close(c)

    def blocked_waiter(self, path, started):
        """F_OFD_SETLKW on a new open of path, in a thread (same descriptor table)."""
        result = {}

        def run():
            fd = os.open(path, os.O_RDWR)
            started.set()
            try:
                ofd(fd, fcntl.F_OFD_SETLKW, fcntl.F_WRLCK, 0, 0)
                result["got"] = True
            except OSError as e:
                result["errno"] = e.errno
            finally:
                os.close(fd)
        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t, result

    def test_waiting_thread_gets_the_lock_when_the_holder_unlocks_or_closes(self):
        for release in ("unlock", "close", "close-dup-last"):
            holder = os.open(self.p, os.O_RDWR)
            ofd(holder, fcntl.F_OFD_SETLK, fcntl.F_WRLCK, 0, 0)
            dup = os.dup(holder) if release == "close-dup-last" else None
            started = threading.Event()
            t, result = self.blocked_waiter(self.p, started)
            started.wait(10)
            time.sleep(0.3)
            self.assertEqual(result, {}, "%s: the waiter got a held lock" % release)
            if release == "unlock":
                ofd(holder, fcntl.F_OFD_SETLK, fcntl.F_UNLCK, 0, 0)
                os.close(holder)
            else:
                os.close(holder)
                if dup is not None:
                    time.sleep(0.3)
                    self.assertEqual(result, {}, "the lock went before the last descriptor of its open file")
                    os.close(dup)
            t.join(30)
            self.assertFalse(t.is_alive(), "%s: F_OFD_SETLKW still blocked after the holder let go" % release)
            self.assertEqual(result, {"got": True}, release)

    def test_blocked_ofd_lock_is_interruptible(self):
        holder = os.open(self.p, os.O_RDWR)
        try:
            ofd(holder, fcntl.F_OFD_SETLK, fcntl.F_WRLCK, 0, 0)
            code = textwrap.dedent("""
                import fcntl, os, signal, struct, sys

                class Alarm(Exception):
                    pass

                def on_alarm(*a):
                    raise Alarm()

                # The handler raises: Python would otherwise retry the interrupted call.
                signal.signal(signal.SIGALRM, on_alarm)
                signal.alarm(1)
                fd = os.open(sys.argv[1], os.O_RDWR)
                try:
                    fcntl.fcntl(fd, fcntl.F_OFD_SETLKW, struct.pack("hhxxxxqqixxxx", fcntl.F_WRLCK, 0, 0, 0, 0))
                    print("locked")
                except Alarm:
                    print("interrupted")
            """)
            out = subprocess.run([sys.executable, "-c", code, self.p], capture_output=True, text=True, timeout=60)
            self.assertEqual(out.stdout.strip(), "interrupted", out.stderr)
        finally:
            os.close(holder)


if __name__ == "__main__":
    harness.main()
