#!/usr/bin/env python3
"""A volume on a three-member etcd cluster of this test's own keeps working while its
leader is SIGKILLed again and again (each time restarted a second later, its data kept; a kill every 5 s).

Two mounts of the volume run writers that log every operation acknowledged to them: files
created, written and fsync'd, renamed, unlinked, and lines appended with fsync to a
journal file of each writer. Afterwards every acknowledged operation is there exactly as
acknowledged (the renamed files under their new names, the unlinked ones gone, each
journal line exactly once: nothing applied twice), `tierfs fsck` is clean, each writer
kept making progress after every kill, and no operation took longer than the META-URL's
?timeout= (the bound after which the engine reports EIO instead of hanging).

An operation that failed is allowed to have applied or not; none failed in the runs so
far (an election takes well under a second here).

And a member cut off from the others (each member in a network namespace of its own, the
leader's link taken down) serves no write: a client that reaches only it fails after its
timeout and changes nothing, while a mount that reaches the others goes on writing; once
the link is back the member holds what the majority wrote."""
import json
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import servers  # noqa: E402
from netns import Network  # noqa: E402

TIMEOUT_S = 15  # ?timeout= of the volume's META-URL


class Writer:
    def __init__(self, root, name):
        self.dir = os.path.join(root, name)
        os.mkdir(self.dir)
        self.files = {}  # name -> content, as acknowledged
        self.lines = []  # journal lines acknowledged
        self.failed = []
        self.done_at = []  # monotonic time of each acknowledged operation
        self.slowest = 0.0
        self.n = 0

    def op(self, fn):
        t0 = time.monotonic()
        try:
            fn()
        except OSError as e:
            self.failed.append(repr(e))
            return
        finally:
            self.slowest = max(self.slowest, time.monotonic() - t0)
        self.done_at.append(time.monotonic())

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
            self.op(create)
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
            self.op(append)
        elif k == 2:
            old = sorted(self.files)[n % len(self.files)]
            new = "r%d" % n

            def rename():
                os.rename(os.path.join(self.dir, old), os.path.join(self.dir, new))
                self.files[new] = self.files.pop(old)
            self.op(rename)
        elif len(self.files) > 20:
            old = sorted(self.files)[0]

            def unlink():
                os.unlink(os.path.join(self.dir, old))
                del self.files[old]
            self.op(unlink)


class EtcdFailoverTest(harness.TierFSTestCase):
    AUTO_MOUNT = False

    def setUp(self):
        super().setUp()
        self.tmp = self.local_tmpdir()
        self.etcd = servers.Etcd(self.tmp, port=servers.free_ports(6), name="etcd-own")
        self.addCleanup(self.etcd.stop)
        self.etcd.start()
        url = self.etcd.url("failover") + "?timeout=%ds" % TIMEOUT_S
        self.vol = harness.Volume("etcdvol", meta_url=url, base=self.tmp)
        self.addCleanup(self.vol.cleanup)
        self.vol.format()

    def test_writers_lose_nothing_while_the_leader_is_killed(self):
        self.vol.mount()
        second = os.path.join(self.tmp, "second")
        os.makedirs(second)
        res = self.vol.mount_at(second)
        self.assertEqual(res[0], 0, harness.msg(*res))
        writers = [Writer(self.vol.mnt, "a"), Writer(second, "b")]
        stop = threading.Event()

        def run(w):
            while not stop.is_set():
                w.step()

        threads = [threading.Thread(target=run, args=(w,)) for w in writers]
        for t in threads:
            t.start()
        kills = []
        try:
            deadline = time.monotonic() + 35
            time.sleep(2)
            while time.monotonic() < deadline:
                i = self.etcd.leader()
                if i is None:
                    time.sleep(0.2)
                    continue
                self.etcd.kill_member(i, signal.SIGKILL)
                kills.append(time.monotonic())
                time.sleep(1)
                self.etcd.start_member(i)  # its data kept: it rejoins as a follower
                time.sleep(4)
        finally:
            stop.set()
            for t in threads:
                t.join()
        self.assertGreaterEqual(len(kills), 5)
        for w in writers:
            self.assertEqual(w.failed, [], "operations failed during the failovers")
            self.assertLess(w.slowest, TIMEOUT_S, "an operation waited past the META-URL's timeout")
            # Progress between each kill and the next (5 s apart).
            for k, k_next in zip(kills, kills[1:] + [float("inf")]):
                self.assertTrue(any(k < t < k_next for t in w.done_at), "no operation completed after a kill")
        # From each kill to the first operation completed after it by each writer.
        back = sorted(min(t for t in w.done_at if t > k) - k for k in kills for w in writers)
        print("%d leader kills; %s operations; back after a kill: median %.2f s, max %.2f s; slowest operation "
              "%.2f s" % (len(kills), "+".join(str(len(w.done_at)) for w in writers), back[len(back) // 2], back[-1],
                          max(w.slowest for w in writers)), file=sys.stderr)
        harness.run("umount", second)
        self.vol.umount()
        # What was acknowledged is there, read by a fresh mount; nothing twice.
        self.vol.mount()
        for w in writers:
            d = os.path.join(self.vol.mnt, os.path.basename(w.dir))
            names = set(os.listdir(d)) - {"journal"}
            self.assertEqual(names, set(w.files))
            for name, data in w.files.items():
                with open(os.path.join(d, name), "rb") as f:
                    self.assertEqual(f.read(), data, name)
            with open(os.path.join(d, "journal")) as f:
                self.assertEqual(f.readlines(), w.lines)
        self.vol.umount()
        rc, out, err = harness.tierfs("fsck", self.vol.meta_url)
        self.assertEqual(rc, 0, harness.msg(rc, out, err))


class EtcdPartitionTest(harness.TierFSTestCase):
    AUTO_MOUNT = False

    def test_a_member_cut_off_serves_no_writes(self):
        tmp = self.local_tmpdir()
        net = Network(n=3)
        self.addCleanup(net.close)
        etcd = servers.Etcd(tmp, port=23379, name="etcd-ns", addrs=[net.addr(i) for i in range(3)],
                            prefixes=[net.prefix(i) for i in range(3)])
        self.addCleanup(etcd.stop)
        etcd.start()
        vol = harness.Volume("partvol", meta_url=etcd.url("part") + "?timeout=%ds" % TIMEOUT_S, base=tmp)
        self.addCleanup(vol.cleanup)
        vol.format()
        vol.mount()
        with open(os.path.join(vol.mnt, "before"), "w") as f:
            f.write("1")
        trash_days = vol.status_json()["trash_days"]
        k = etcd.leader()
        self.assertIsNotNone(k)
        veth = "%sv%d" % (net.tag, k)
        harness.run("ip", "link", "set", veth, "down")
        try:
            # The majority elects a leader and the mount goes on.
            t0 = time.monotonic()
            with open(os.path.join(vol.mnt, "during"), "w") as f:
                f.write("2")
            print("a write on the majority side %.2f s after the leader's link went down" %
                  (time.monotonic() - t0), file=sys.stderr)
            # The member cut off, alone: no write succeeds through it.
            alone = "etcd://%s/part?timeout=4s" % etcd.endpoint(k)
            res = harness.run(*(net.prefix(k) + [harness.tierfs_bin(), "config", alone, "--trash-days",
                                                 str(trash_days + 5)]))
            self.assertNotEqual(res[0], 0, "a member cut off from the majority served a write\n" + harness.msg(*res))
        finally:
            harness.run("ip", "link", "set", veth, "master", net.bridge, "up")
        # Healed: it catches up, and the refused write is nowhere.
        self.assertEqual(vol.status_json()["trash_days"], trash_days)
        alone = "etcd://%s/part" % etcd.endpoint(k)
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            rc, out, err = harness.tierfs("status", alone, "--json")
            if rc == 0 and json.loads(out)["inodes"] >= 3 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        self.assertEqual(rc, 0, harness.msg(rc, out, err))
        self.assertGreaterEqual(json.loads(out)["inodes"], 3, "the member did not catch up with the majority")
        self.assertEqual(json.loads(out)["trash_days"], trash_days)
        vol.umount()
        rc, out, err = harness.tierfs("fsck", vol.meta_url)
        self.assertEqual(rc, 0, harness.msg(rc, out, err))


if __name__ == "__main__":
    harness.main()
