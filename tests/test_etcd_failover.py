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
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import failover_torture  # noqa: E402
import servers  # noqa: E402
from netns import Network  # noqa: E402

TIMEOUT_S = 15  # ?timeout= of the volume's META-URL


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

        def kill_leader():
            i = self.etcd.leader()
            if i is None:
                return False
            self.etcd.kill_member(i, signal.SIGKILL)
            time.sleep(1)
            self.etcd.start_member(i)  # its data kept: it rejoins as a follower
            return True

        writers, kills = failover_torture.run_torture([self.vol.mnt, second], kill_leader)
        self.assertGreaterEqual(len(kills), 5)
        for w in writers:
            self.assertEqual(w.failed, [], "operations failed during the failovers")
        failover_torture.check_progress(self, writers, kills, TIMEOUT_S)
        failover_torture.report("etcd", writers, kills, 5.0)
        failover_torture.check_after(self, self.vol, writers, others=[second])


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
        trash_days = failover_torture.partition_start(vol)
        k = etcd.leader()
        self.assertIsNotNone(k)
        veth = "%sv%d" % (net.tag, k)
        harness.run("ip", "link", "set", veth, "down")
        try:
            # The majority elects a leader and the mount goes on.
            failover_torture.write_on_the_majority_side(vol, "the leader's link went down")
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
