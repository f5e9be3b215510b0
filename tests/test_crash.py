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
import time

import harness
from harness import is_mounted, msg, pid_alive, run, tierfs, wait_for

MiB = 1 << 20

# The writer runs in its own process so that the kill reaches it through the dead mount
# (ENOTCONN), like any application. It prints "name sha256" only after fsync and close.
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
        if i % 3 == 0:
            os.fsync(fd)
        os.close(fd)
    except OSError:
        sys.exit(0)
    print(name, hashlib.sha256(data).hexdigest(), flush=True)
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
                    name, digest = line.split()
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
    """A SIGKILL of the client loses nothing committed, but a power loss also drops what
    the kernel had not written back. fsync of a file must therefore reach the disks: its
    objects (syncfs of the bucket's file system) before the metadata that points to them
    (fdatasync of the SQLite log and database). Watched with strace on the mount daemon."""

    def traced(self, action):
        out = os.path.join(self.vol.dir, "strace.out")
        tracer = subprocess.Popen(["strace", "-f", "-y", "-qq", "-e", "trace=syncfs,fdatasync,fsync",
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
        with open(out) as f:
            return [line for line in f.read().splitlines() if "= 0" in line]

    def test_fsync_syncs_objects_then_metadata(self):
        if not shutil.which("strace"):
            self.fail("strace is required (scripts/install-deps.sh installs it)")
        p = os.path.join(self.work, "durable")

        def write_and_fsync():
            fd = os.open(p, os.O_CREAT | os.O_WRONLY, 0o644)
            os.write(fd, b"x" * 100000)
            os.fsync(fd)
            os.close(fd)

        calls = self.traced(write_and_fsync)
        bucket = os.path.realpath(self.vol.bucket)
        db = os.path.realpath(self.vol.meta_db)
        objects = [i for i, c in enumerate(calls) if c.split("(")[0].split()[-1] == "syncfs" and bucket in c]
        wal = [i for i, c in enumerate(calls) if "fdatasync" in c and db + "-wal>" in c]
        main = [i for i, c in enumerate(calls) if "fdatasync" in c and db + ">" in c]
        self.assertTrue(objects, "no syncfs of the bucket during fsync:\n" + "\n".join(calls))
        self.assertTrue(wal and main, "no fdatasync of the SQLite log and database:\n" + "\n".join(calls))
        self.assertLess(objects[0], wal[0], "metadata synced before the objects it points to")

        # fsync of the directory makes the new entry durable too.
        def fsync_dir():
            fd = os.open(self.work, os.O_RDONLY | os.O_DIRECTORY)
            os.fsync(fd)
            os.close(fd)

        calls = self.traced(fsync_dir)
        self.assertTrue(any("fdatasync" in c and db + "-wal>" in c for c in calls),
                        "directory fsync did not sync the metadata:\n" + "\n".join(calls))
        with open(p, "rb") as f:
            self.assertEqual(f.read(), b"x" * 100000)

        # The sync must not disturb SQLite's own locks: fcntl locks belong to the process,
        # so a stray open+close of the database drops them, and the next process to close
        # the database deletes the log the client still writes to. Then another process
        # opening the volume would no longer see the client's commits.
        self.assertOk(tierfs("status", self.vol.meta_url))
        self.assertTrue(os.path.exists(db + "-wal") and os.path.exists(db + "-shm"),
                        "the SQLite log was deleted while the client had it open")
        before = self.vol.status_json()["inodes"]
        with open(os.path.join(self.work, "after"), "w") as f:
            f.write("after")
        self.assertTrue(wait_for(lambda: self.vol.status_json()["inodes"] > before, timeout=10),
                        "another process no longer sees the client's commits")

if __name__ == "__main__":
    harness.main()
