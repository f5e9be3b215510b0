"""Crash loop: the client is killed with SIGKILL in the middle of heavy writes, again and
again. After each restart every file whose fsync and close had returned holds exactly what
was written, the rest of the volume is consistent (fsck finds no missing object and no bad
link count), and the volume keeps working. And fsync is a power-loss barrier on the embedded
default: it syncs the bucket's file system and then the SQLite log and database."""

import errno
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import harness
from harness import is_mounted, msg, pid_alive, run, tierfs, wait_for

MiB = 1 << 20

# The writer runs in its own process so that the kill reaches it through the dead mount
# (ENOTCONN), like any application. It fsyncs every third file and prints
# "name sha256 synced|closed" only after close returned. (test_powercut uses it too.)
WRITER = r"""
import hashlib, os, random, sys
d, seed = sys.argv[1], int(sys.argv[2])
rng = random.Random(seed)
i = 0
while True:
    size = rng.choice([1000, 70000, 1 << 20, 3 << 20 | 123, 9 << 20])
    data = rng.randbytes(size)
    name = "s%d-f%04d" % (seed, i)
    try:
        fd = os.open(os.path.join(d, name), os.O_CREAT | os.O_WRONLY, 0o644)
        for off in range(0, size, 1 << 20):
            os.write(fd, data[off:off + (1 << 20)])
        synced = i % 3 == 0
        if synced:
            os.fsync(fd)
        os.close(fd)
    except OSError:
        sys.exit(0)
    print(name, hashlib.sha256(data).hexdigest(), "synced" if synced else "closed", flush=True)
    i += 1
"""


class CrashLoopTest(harness.TierFSTestCase):
    PER_TEST = True
    BLOCK_SIZE = "1M"

    def test_sigkill_loop(self):
        rounds = int(os.environ.get("CRASH_ROUNDS", "5"))
        seed = int(os.environ.get("SEED", str(random.randrange(1 << 30))))
        print("crash loop seed", seed, file=sys.stderr)
        rng = random.Random(seed)
        durable = {}
        for r in range(rounds):
            writers = [subprocess.Popen([sys.executable, "-c", WRITER, self.mnt, str(seed * 10 + r * 2 + k)],
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
                       for k in range(2)]
            time.sleep(0.3 + rng.random())
            pid = self.vol.pid
            os.kill(pid, signal.SIGKILL)
            self.assertTrue(wait_for(lambda: not pid_alive(pid), timeout=60), "daemon survived SIGKILL")
            for w in writers:
                out, _ = w.communicate(timeout=60)
                for line in out.splitlines():
                    name, digest, _ = line.split()
                    durable[name] = digest
            run("fusermount3", "-uz", self.mnt)
            if is_mounted(self.mnt):
                run("umount", "-l", self.mnt)
            self.assertFalse(is_mounted(self.mnt))
            self.vol.mount()
            # Everything acknowledged before the kill is there, byte for byte.
            for name, digest in durable.items():
                with open(os.path.join(self.mnt, name), "rb") as f:
                    self.assertEqual(hashlib.sha256(f.read()).hexdigest(), digest,
                                     "round %d: %s changed after the crash (seed %d)" % (r, name, seed))
        print("files acknowledged before the kills:", len(durable), file=sys.stderr)
        self.assertGreater(len(durable), rounds, "the writers hardly wrote anything")
        # The metadata and blocks are consistent: nothing missing, no bad link count.
        self.vol.umount()
        rc, out, err = tierfs("fsck", self.vol.meta_url, "--json")
        report = json.loads(out)
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.assertEqual(report["problems"], [])
        # Objects uploaded but never committed may be left over; gc sees them as garbage.
        rc, out, err = tierfs("gc", self.vol.meta_url, "--json", "--min-age", "0s", "--delete")
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.vol.mount()
        for name, digest in durable.items():
            with open(os.path.join(self.mnt, name), "rb") as f:
                self.assertEqual(hashlib.sha256(f.read()).hexdigest(), digest, name + " changed after gc")



class FsyncDurabilityTest(harness.TierFSTestCase):
    """A SIGKILL of the client loses nothing committed, but a power loss also drops what the
    kernel had not written back. So, on the embedded default (watched with strace on the
    mount daemon):
    - every block is fsynced before the commit that points to it, so no metadata can reach
      the disk before its blocks (unless the mount says --no-sync-blocks);
    - fsync(2) of a file reaches the disks: blocks first (per block, or one syncfs of the
      bucket's file system with --no-sync-blocks), then the SQLite log and database."""
    PER_TEST = True

    @classmethod
    def new_volume(cls, **kw):
        # Syncing is skipped for buckets in memory (tmpfs): keep this volume on a disk.
        base = os.environ.get("TIERFS_TEST_TMPDIR") or tempfile.gettempdir()
        if harness.run("stat", "-f", "-c", "%T", base)[1].strip() in ("tmpfs", "ramfs"):
            kw["base"] = os.path.dirname(os.path.realpath(harness.tierfs_bin()))
        return super().new_volume(**kw)

    def setUp(self):
        if not shutil.which("strace"):
            self.fail("strace is required (scripts/install-deps.sh installs it)")
        super().setUp()

    def traced(self, action):
        out = os.path.join(self.vol.dir, "strace.out")
        tracer = subprocess.Popen(["strace", "-f", "-y", "-qq", "-e", "trace=syncfs,fdatasync,fsync,rename,unlink",
                                   "-p", str(self.vol.pid), "-o", out],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            # strace attaches to every thread before it traces; give it a moment, then check
            # it is still running (it exits at once when it cannot attach).
            time.sleep(1.0)
            if tracer.poll() is not None:
                self.fail("strace could not attach: %s" % tracer.stderr.read())
            action()
            time.sleep(0.5)
        finally:
            tracer.terminate()
            tracer.wait(timeout=30)
            tracer.stderr.close()
        # A call interrupted by another thread's is split by strace into "<unfinished ...>"
        # and "<... NAME resumed>" lines (the disk cache's writer threads run alongside):
        # join them back.
        pending, lines = {}, []
        with open(out) as f:
            for line in f.read().splitlines():
                pid, _, rest = line.partition(" ")
                rest = rest.lstrip()
                if rest.endswith("<unfinished ...>"):
                    pending[pid] = rest[:-len("<unfinished ...>")].rstrip()
                elif rest.startswith("<... ") and pid in pending:
                    lines.append(pid + " " + pending.pop(pid) + rest.split("resumed>", 1)[1])
                else:
                    lines.append(line)
        return [line for line in lines if "= 0" in line]

    def write(self, name, fsync):
        def action():
            fd = os.open(os.path.join(self.work, name), os.O_CREAT | os.O_WRONLY, 0o644)
            os.write(fd, b"x" * 100000)
            if fsync:
                os.fsync(fd)
            os.close(fd)
        return action

    def indexes(self, calls, syscall, needle):
        return [i for i, c in enumerate(calls) if c.split("(")[0].split()[-1] == syscall and needle in c]

    def check_metadata_sync(self, calls, after, what):
        db = os.path.realpath(self.vol.meta_db)
        wal = self.indexes(calls, "fdatasync", db + "-wal>")
        main = self.indexes(calls, "fdatasync", db + ">")
        self.assertTrue(wal and main, "%s: no fdatasync of the SQLite log and database:\n%s"
                        % (what, "\n".join(calls)))
        self.assertLess(after, wal[0], "%s: metadata synced before the blocks it points to:\n%s"
                        % (what, "\n".join(calls)))

    def check_sqlite_untouched(self):
        # The sync must not disturb SQLite's own locks: fcntl locks belong to the process,
        # so a stray open+close of the database drops them, and the next process to close
        # the database deletes the log the client still writes to. Then another process
        # opening the volume would no longer see the client's commits.
        db = os.path.realpath(self.vol.meta_db)
        self.assertOk(tierfs("status", self.vol.meta_url))
        self.assertTrue(os.path.exists(db + "-wal") and os.path.exists(db + "-shm"),
                        "the SQLite log was deleted while the client had it open")
        before = self.vol.status_json()["inodes"]
        with open(os.path.join(self.work, "after"), "w") as f:
            f.write("after")
        self.assertTrue(wait_for(lambda: self.vol.status_json()["inodes"] > before, timeout=10),
                        "another process no longer sees the client's commits")

    def test_blocks_synced_before_commit_and_fsync_is_a_barrier(self):
        bucket = os.path.realpath(self.vol.bucket)
        # close without fsync: the block is fsynced (as a temporary file) before it is
        # renamed into place, and both happen before close returns.
        calls = self.traced(self.write("closed", fsync=False))
        synced = self.indexes(calls, "fsync", bucket + "/")
        renamed = self.indexes(calls, "rename", bucket + "/")
        self.assertTrue(synced and renamed, "block not fsynced before close:\n" + "\n".join(calls))
        self.assertLess(synced[0], renamed[0])

        calls = self.traced(self.write("durable", fsync=True))
        self.check_metadata_sync(calls, self.indexes(calls, "fsync", bucket + "/")[0], "fsync")
        self.assertEqual(self.indexes(calls, "syncfs", bucket), [], "blocks were already synced one by one")

        # fsync of the directory makes the new entry durable too.
        def fsync_dir():
            fd = os.open(self.work, os.O_RDONLY | os.O_DIRECTORY)
            os.fsync(fd)
            os.close(fd)

        calls = self.traced(fsync_dir)
        self.check_metadata_sync(calls, -1, "directory fsync")
        with open(os.path.join(self.work, "durable"), "rb") as f:
            self.assertEqual(f.read(), b"x" * 100000)

        # Overwriting releases the old block; it is deleted only once the metadata that no
        # longer needs it is on disk (else a rolled-back log would point at a deleted block).
        def overwrite():
            with open(os.path.join(self.work, "closed"), "wb") as f:
                f.write(b"y" * 5000)
            time.sleep(4)  # the background cleaner runs every 2 s
        calls = self.traced(overwrite)
        db = os.path.realpath(self.vol.meta_db)
        deleted = self.indexes(calls, "unlink", bucket + "/")
        self.assertTrue(deleted, "the old block was not deleted:\n" + "\n".join(calls))
        synced = [i for i in self.indexes(calls, "fdatasync", db + "-wal>") if i < deleted[0]]
        self.assertTrue(synced, "block deleted before the metadata releasing it was synced:\n" + "\n".join(calls))
        self.check_sqlite_untouched()

    def test_without_block_sync_fsync_syncs_the_bucket_first(self):
        self.vol.umount()
        self.vol.mount("--no-sync-blocks")
        bucket = os.path.realpath(self.vol.bucket)
        calls = self.traced(self.write("closed", fsync=False))
        self.assertEqual(self.indexes(calls, "fsync", bucket + "/"), [], "\n".join(calls))
        calls = self.traced(self.write("durable", fsync=True))
        objects = self.indexes(calls, "syncfs", bucket)
        self.assertTrue(objects, "no syncfs of the bucket during fsync:\n" + "\n".join(calls))
        self.check_metadata_sync(calls, objects[0], "fsync with --no-sync-blocks")
        self.check_sqlite_untouched()


class CrashReportTest(harness.TierFSTestCase):
    """A client that dies of a fatal signal writes which signal, which thread and a
    backtrace to its log (standard error of a background mount goes there), so a crash
    is explained by the log, not only by users' ENOTCONN."""

    PER_TEST = True

    def test_fatal_signals_leave_a_backtrace_in_the_log(self):
        for sig, name in ((signal.SIGSEGV, "SEGV"), (signal.SIGABRT, "ABRT")):
            p = os.path.join(self.mnt, "kept-" + name)
            with open(p, "wb") as f:
                f.write(b"x" * 100000)
                f.flush()
                os.fsync(f.fileno())
            pid = self.vol.pid
            os.kill(pid, sig)
            self.assertTrue(wait_for(lambda: not pid_alive(pid), timeout=60), "daemon survived %s" % name)
            with self.assertRaises(OSError) as cm:
                os.stat(self.mnt)
            self.assertIn(cm.exception.errno, (errno.ENOTCONN, errno.ECONNABORTED))
            log = self.vol.read_log()
            self.assertIn("tierfs: fatal signal %d (%s) in thread" % (sig, name), log)
            report = log[log.rindex("fatal signal %d" % sig):]
            self.assertIn("backtrace", report)
            frames = [l for l in report.splitlines()[1:] if "[0x" in l]
            self.assertGreater(len(frames), 2, "no backtrace frames:\n" + report)
            # The README's way to detach a dead mount.
            res = tierfs("umount", self.mnt, "--force")
            self.assertEqual(res[0], 0, msg(*res))
            self.assertFalse(is_mounted(self.mnt))
            self.vol.mount()
            with open(p, "rb") as f:
                self.assertEqual(f.read(), b"x" * 100000)
    def test_the_log_says_why_the_session_ended(self):
        with open(os.path.join(self.mnt, "f"), "wb") as f:
            f.write(b"y" * 5000)
        pid = self.vol.pid
        os.kill(pid, signal.SIGTERM)
        self.assertTrue(wait_for(lambda: not pid_alive(pid), timeout=60), "daemon survived SIGTERM")
        self.assertFalse(is_mounted(self.mnt), "SIGTERM unmounts")
        self.assertIn("FUSE session ended: got signal 15 (SIGTERM)", self.vol.read_log())
        self.vol.mount()
        with open(os.path.join(self.mnt, "f"), "rb") as f:
            self.assertEqual(f.read(), b"y" * 5000)
        self.vol.umount()
        self.assertIn("FUSE session ended: the kernel closed it", self.vol.read_log())


if __name__ == "__main__":
    harness.main()
