"""Power cut of the embedded default, simulated below a real file system.

The volume's SQLite database and file bucket live on ext4, on a loop device, on a file
served by tests/powercut_disk. At a random moment during heavy writes the "power goes out":
the disk drops every later write, the client is killed, and whatever was only in the page
cache is lost. The file system is then recovered from the disk image (journal replay) as
after a reboot, and TierFS must hold its promises: every file that was fsynced is exact,
fsck finds nothing missing or inconsistent, every other file reads without error, and the
volume mounts and works again. Repeated for several rounds on the same volume.
"""

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

import harness
from harness import is_mounted, msg, pid_alive, run, tierfs, wait_for
from test_crash import WRITER


def helper_bin():
    return harness.helper_bin("powercut_disk", "TIERFS_POWERCUT_DISK")


class PowerCutTest(harness.TierFSTestCase):
    AUTO_MOUNT = False

    def sh(self, *cmd, ok=(0,)):
        rc, out, err = run(*cmd)
        if rc not in ok:
            raise AssertionError(msg(rc, out, err))
        return out.strip()

    def start_disk(self, image, raw):
        proc = subprocess.Popen([helper_bin(), image, raw], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assertEqual(proc.stdout.readline().strip(), "ready", "powercut_disk did not start")
        return proc

    def stop_disk(self, proc, raw):
        if is_mounted(raw):
            run("fusermount3", "-u", raw)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()

    def attach(self, path):
        dev = self.sh("losetup", "-f", "--show", path)
        self.addCleanup(run, "losetup", "-d", dev)
        return dev

    def test_power_cut_loop(self):
        rounds = int(os.environ.get("POWERCUT_ROUNDS", "3"))
        seed = int(os.environ.get("SEED") or random.randrange(1 << 30))
        print("power cut seed", seed, file=sys.stderr)
        rng = random.Random(seed)
        work = tempfile.mkdtemp(prefix="tierfs-powercut-", dir=os.environ.get("TIERFS_TEST_TMPDIR"))
        self.addCleanup(run, "rm", "-rf", work)
        image, raw, fs, mnt = (os.path.join(work, n) for n in ("disk.img", "raw", "fs", "mnt"))
        for d in (raw, fs, mnt):
            os.mkdir(d)
        with open(image, "wb") as f:
            f.truncate(1 << 30)
        # Cleanups run in reverse: the TierFS mount, then ext4, then the disk.
        self.addCleanup(lambda: is_mounted(raw) and run("fusermount3", "-uz", raw))
        self.addCleanup(lambda: is_mounted(fs) and run("umount", "-l", fs))
        self.addCleanup(lambda: is_mounted(mnt) and run("fusermount3", "-uz", mnt))
        meta = "sqlite3://" + os.path.join(fs, "vol", "meta.db")
        synced, closed = {}, {}
        total_synced = 0

        for r in range(rounds):
            disk = self.start_disk(image, raw)
            dev = self.attach(os.path.join(raw, "disk"))
            if r == 0:
                self.sh("mkfs.ext4", "-q", dev)
            self.sh("mount", dev, fs)
            if r == 0:
                os.mkdir(os.path.join(fs, "vol"))
                # No trash: the disk is small, and deleting must free it.
                self.assertOk(tierfs("format", meta, "pcvol", "--storage", "file", "--bucket",
                                     os.path.join(fs, "vol", "bucket"), "--block-size", "1M",
                                     "--trash-days", "0"))
            # The disk cache on the host's disk (as the default is), gone with the test.
            self.assertOk(tierfs("mount", meta, mnt, "-d", "--log", os.path.join(work, "client-%d.log" % r),
                                 "--cache-dir", os.path.join(work, "cache")))
            pid = int(self.sh("pgrep", "-n", "-f", "tierfs mount .*" + mnt))
            writers = [subprocess.Popen([sys.executable, "-c", WRITER, mnt, str(seed * 10 + r * 2 + k)],
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
                       for k in range(2)]
            time.sleep(1.0 + 2.0 * rng.random())

            # The power goes out: the disk keeps only what it received until now, and the
            # client dies with the machine.
            disk.send_signal(signal.SIGUSR1)
            os.kill(pid, signal.SIGKILL)
            self.assertTrue(wait_for(lambda: not pid_alive(pid), timeout=30))
            for w in writers:
                out, _ = w.communicate(timeout=60)
                for line in out.splitlines():
                    name, digest, how = line.split()
                    (synced if how == "synced" else closed)[name] = digest
            run("fusermount3", "-uz", mnt)
            if run("umount", fs)[0] != 0:
                run("umount", "-l", fs)
            run("losetup", "-d", dev)
            self.stop_disk(disk, raw)

            # Reboot: replay the journal from the image, then check the volume.
            dev = self.attach(image)
            rc, out, err = run("e2fsck", "-fy", dev)
            self.assertIn(rc, (0, 1), "ext4 not recoverable after the cut\n" + msg(rc, out, err))
            self.sh("mount", dev, fs)
            rc, out, err = tierfs("fsck", meta, "--json")
            self.assertEqual(rc, 0, "round %d (seed %d): fsck after the power cut\n%s" % (r, seed, msg(rc, out, err)))
            self.assertEqual(json.loads(out)["problems"], [])
            self.assertOk(tierfs("mount", meta, mnt, "-d", "--log", os.path.join(work, "check-%d.log" % r),
                                 "--cache-dir", os.path.join(work, "cache")))
            for name, digest in synced.items():
                with open(os.path.join(mnt, name), "rb") as f:
                    self.assertEqual(hashlib.sha256(f.read()).hexdigest(), digest,
                                     "round %d (seed %d): fsynced %s changed by the power cut" % (r, seed, name))
            survived = 0
            for name in os.listdir(mnt):
                with open(os.path.join(mnt, name), "rb") as f:
                    data = f.read()  # every file reads without error
                if closed.get(name) == hashlib.sha256(data).hexdigest():
                    survived += 1
            print("round %d: %d fsynced files exact; %d of %d closed-only files survived whole"
                  % (r, len(synced), survived, len(closed)), file=sys.stderr)
            # Checked: make room for the next round, so that the rounds together cannot fill
            # the 1 GiB disk however fast the writers go.
            for name in os.listdir(mnt):
                os.unlink(os.path.join(mnt, name))
            total_synced += len(synced)
            synced.clear()
            closed.clear()
            self.assertOk(tierfs("umount", mnt))
            self.sh("umount", fs)
            run("losetup", "-d", dev)
        self.assertGreater(total_synced, rounds, "the writers hardly wrote anything")


if __name__ == "__main__":
    harness.main()
