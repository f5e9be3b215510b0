#!/usr/bin/env python3
"""A volume on Redis under Sentinel (a master, a replica and three Sentinels of this test's
own): clients find the master through the Sentinels, follow it through failovers, and with
?wait-replicas=1 lose no acknowledged write when the master dies.

- Sentinel URLs: a Sentinel that refuses connections or hangs never blocks a client (all are
  dialled at once); every Sentinel down, or a master name they do not know, is a clear error.
- Failovers: two mounts' writers (fsync'd creates, fsync'd appends, renames, unlinks) run
  while the master is SIGKILLed every 8 s; the Sentinels promote the replica, the killed
  node comes back as a replica. Afterwards every acknowledged operation is there, no append
  twice, fsck is clean, no operation waited past ?timeout=, each writer went on after each kill.
- What WAIT saves, with numbers: each node in a network namespace of its own; the replica's
  link is cut for 0.6 s while the writers go on, then the master dies and the replica is
  promoted. Without WAIT the master acknowledged commits the replica never got: they are
  lost (the test requires the loss, so the scenario is known to bite). With wait-replicas=1
  nothing acknowledged is lost: those commits waited, and after the master's death the
  client found them missing on the new master and ran them again.
- A master cut off from the others (PartitionTest): the majority side goes on; a client
  that reaches only the old master has nothing acknowledged with wait-replicas=1."""
import os
import signal
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import failover_torture  # noqa: E402
import harness  # noqa: E402
import servers  # noqa: E402
from netns import Network  # noqa: E402
from redis_ha import RedisSentinel  # noqa: E402

TIMEOUT_S = 15  # ?timeout= of the volume's META-URL


def sentinel_volume(test, name, query):
    """A master, a replica and three Sentinels of the test's own, and a volume on them
    (formatted, not mounted): (tmp, cluster, volume)."""
    tmp = test.local_tmpdir()
    ha = RedisSentinel(tmp, port=servers.free_ports(6))
    test.addCleanup(ha.stop)
    ha.start()
    vol = harness.Volume(name, meta_url=ha.url(query=query), base=tmp)
    test.addCleanup(vol.cleanup)
    vol.format()
    return tmp, ha, vol


class SentinelUrlTest(harness.TierFSTestCase):
    AUTO_MOUNT = False

    def test_dead_and_hung_sentinels_do_not_block_and_errors_are_clear(self):
        tmp, ha, vol = sentinel_volume(self, "sentvol", "timeout=30s")
        # A Sentinel that refuses (nothing listens) and one that accepts but never answers,
        # listed first: the client asks all at once and the live ones answer.
        dead = servers.free_ports(2)
        hung = socket.socket()
        hung.bind(("127.0.0.1", 0))
        hung.listen(8)
        self.addCleanup(hung.close)
        live = [ha.sentinel_port(j) for j in range(3)]
        url = ha.url(query="timeout=30s", sentinels=[dead, hung.getsockname()[1]] + live)
        t0 = time.monotonic()
        rc, out, err = harness.tierfs("status", url)
        took = time.monotonic() - t0
        self.assertEqual(rc, 0, harness.msg(rc, out, err))
        self.assertIn("under 5 Sentinel(s)", out)
        # Asked one after another, the hung Sentinel alone would cost its 3 s timeout.
        self.assertLess(took, 3.0, "a hung Sentinel delayed the client")
        # Every Sentinel down: an error at once naming them.
        rc, out, err = harness.tierfs("status", ha.url(sentinels=[dead, dead + 1]))
        self.assertNotEqual(rc, 0)
        self.assertIn("no Redis Sentinel named the master", err)
        self.assertIn("127.0.0.1:%d" % dead, err)
        # A master name the Sentinels do not monitor.
        rc, out, err = harness.tierfs("status", ha.url().replace("tierfs,", "nosuch,"))
        self.assertNotEqual(rc, 0)
        self.assertIn("monitors no master named 'nosuch'", err)
        self.assertIn("sentinel monitor NAME", err)
        # Durability: without WAIT, status says what a failover may lose; with it, safe.
        rc, out, err = harness.tierfs("status", ha.url(), "--json")
        self.assertEqual(rc, 0, harness.msg(rc, out, err))
        self.assertIn("wait-replicas", out)
        rc, out, err = harness.tierfs("status", ha.url(query="wait-replicas=1"))
        self.assertIn("safe against one server's loss", out)
        # A node named directly (no Sentinel) is never safe: nothing promotes the replica.
        rc, out, err = harness.tierfs("status", ha.node_url(ha.master()) + "?wait-replicas=1")
        self.assertIn("no Sentinel", out)


class SentinelEngineSuitesTest(harness.TierFSTestCase):
    AUTO_MOUNT = False

    def test_the_engine_suites_pass_through_the_sentinels(self):
        """What every engine passes (kv_engine_test, meta_test), on a master found through
        the Sentinels."""
        tmp = self.local_tmpdir()
        ha = RedisSentinel(tmp, port=servers.free_ports(6))
        self.addCleanup(ha.stop)
        ha.start()
        failover_torture.engine_suites(self, "TIERFS_TEST_REDIS_URL", ha.url().rsplit("/", 1)[0], "Redis")


class RetryBoundTest(harness.TierFSTestCase):
    AUTO_MOUNT = False

    def test_a_mount_fails_after_its_bound_when_every_server_is_gone_and_recovers(self):
        """--meta-retry-timeout bounds how long an operation waits (the URL says 30 s);
        with every Redis node down the mount answers EIO after that, never hangs, and
        works again once they are back."""
        tmp, ha, vol = sentinel_volume(self, "boundvol", "timeout=30s")
        bound = 3.0
        vol.mount("--meta-retry-timeout", "%gs" % bound)
        with open(os.path.join(vol.mnt, "before"), "w") as f:
            f.write("1")
        for i in range(ha.n):
            ha.kill_node(i, signal.SIGKILL)
        t0 = time.monotonic()
        with self.assertRaises(OSError) as caught:
            with open(os.path.join(vol.mnt, "during"), "w") as f:
                f.write("2")
        took = time.monotonic() - t0
        self.assertEqual(caught.exception.errno, 5, caught.exception)
        # The engine gives up when its next wait (at most 1 s) would pass the bound.
        self.assertGreaterEqual(took, bound - 1.1, "failed well before the bound: it did not retry")
        self.assertLess(took, 30, "waited for the URL's timeout, not --meta-retry-timeout")
        print("EIO after %.2f s with every node down (--meta-retry-timeout %gs)" % (took, bound), file=sys.stderr)
        # Back: node 0 (the master the Sentinels still name, its acknowledged data kept), then its replica.
        ha.start_node(0)
        ha.start_node(1, replica_of=0)
        with open(os.path.join(vol.mnt, "after"), "w") as f:
            f.write("3")
        with open(os.path.join(vol.mnt, "before")) as f:
            self.assertEqual(f.read(), "1")
        vol.umount()
        failover_torture.fsck_clean(self, vol.meta_url)


class SentinelFailoverTest(harness.TierFSTestCase):
    AUTO_MOUNT = False

    def test_writers_lose_nothing_while_the_master_is_killed(self):
        tmp, ha, vol = sentinel_volume(self, "havol", "wait-replicas=1&timeout=%ds" % TIMEOUT_S)
        vol.mount()
        second = os.path.join(tmp, "second")
        os.makedirs(second)
        res = vol.mount_at(second)
        self.assertEqual(res[0], 0, harness.msg(*res))
        self.addCleanup(harness.run, "umount", second)

        def kill_master():
            old = ha.master()
            if old is None or not ha.running(old):
                return False
            t0 = time.monotonic()
            ha.kill_node(old, signal.SIGKILL)
            new = ha.wait_master(not_node=old)
            print("the Sentinels promoted node %d %.2f s after node %d was killed" % (new, time.monotonic() - t0, old),
                  file=sys.stderr)
            ha.start_node(old, replica_of=new)  # its data kept: it resynchronises as a replica
            return True

        writers, kills = failover_torture.run_torture([vol.mnt, second], kill_master, seconds=30, period=8)
        self.assertGreaterEqual(len(kills), 3)
        for w in writers:
            self.assertEqual(w.failed, [], "operations failed during the failovers")
        failover_torture.check_progress(self, writers, kills, TIMEOUT_S)
        failover_torture.report("redis sentinel, wait-replicas=1", writers, kills, 8.0)
        failover_torture.check_after(self, vol, writers, others=[second])


class WhatWaitSavesTest(harness.TierFSTestCase):
    AUTO_MOUNT = False

    def lagging_failovers(self, wait, rounds=2):
        """Runs writers through `rounds` failovers that each follow a 0.6 s cut of the
        replica's link; returns (writers, acknowledged operations lost, volume)."""
        tmp = self.local_tmpdir()
        net = Network(n=2)
        self.addCleanup(net.close)
        ha = RedisSentinel(tmp, port=servers.free_ports(6), name="redis-ns",
                           addrs=[net.addr(i) for i in range(2)], prefixes=[net.prefix(i) for i in range(2)])
        self.addCleanup(ha.stop)
        ha.start()
        query = "timeout=%ds" % TIMEOUT_S + ("&wait-replicas=1" if wait else "")
        vol = harness.Volume("lagvol%d" % wait, meta_url=ha.url(query=query), base=tmp)
        self.addCleanup(vol.cleanup)
        vol.format()
        vol.mount()
        link = ["%sv%d" % (net.tag, i) for i in range(2)]

        def lag_then_kill():
            old = ha.master()
            if old is None or not ha.running(old):
                return False
            rep = 1 - old
            harness.run("ip", "link", "set", link[rep], "down")
            time.sleep(0.6)  # the master acknowledges (without WAIT) what the replica never gets
            ha.kill_node(old, signal.SIGKILL)
            harness.run("ip", "link", "set", link[old], "down")  # nothing left in flight reaches it
            harness.run("ip", "link", "set", link[rep], "master", net.bridge, "up")
            new = ha.wait_master(not_node=old)
            harness.run("ip", "link", "set", link[old], "master", net.bridge, "up")
            ha.start_node(old, replica_of=new)
            servers._wait("the old master to resynchronise", lambda: ha.replicas_online(new) == 1, 30)
            return True

        writers, kills = failover_torture.run_torture([vol.mnt], lag_then_kill, seconds=rounds * 8 - 2, period=8)
        failover_torture.report("redis sentinel, wait-replicas=%d, replica lagging" % wait, writers, kills, 8.0)
        vol.umount()
        vol.mount()
        lost = failover_torture.count_lost(vol.mnt, writers)
        acked = sum(len(w.done_at) for w in writers)
        print("wait-replicas=%d: %d failovers after a 0.6 s replica lag; %d operations acknowledged, %d of them "
              "lost" % (wait, len(kills), acked, lost), file=sys.stderr)
        return writers, lost, vol

    def test_without_wait_a_failover_loses_acknowledged_writes(self):
        writers, lost, vol = self.lagging_failovers(wait=0)
        self.assertGreater(lost, 0, "the scenario did not make the replica miss anything: it tests nothing")
        vol.umount()

    def test_with_wait_a_failover_loses_nothing_acknowledged(self):
        writers, lost, vol = self.lagging_failovers(wait=1)
        self.assertEqual(lost, 0)
        failover_torture.check_acknowledged(self, vol.mnt, writers)
        vol.umount()
        failover_torture.fsck_clean(self, vol.meta_url)


class PartitionTest(harness.TierFSTestCase):
    """The master cut off from its two replicas and the Sentinels (its link in its namespace
    taken down): the Sentinels promote a replica and a mount on the majority side goes on.
    A client that reaches only the old master: without WAIT it is told a write succeeded,
    and that write is gone once the link is back (the old master resynchronises as a
    replica of the new one): Redis's own limit, what the README says; with wait-replicas=1
    no write through it is acknowledged (EIO: applied there, not confirmed) and none
    survives."""
    AUTO_MOUNT = False

    def test_a_master_cut_off_acknowledges_nothing_with_wait(self):
        tmp = self.local_tmpdir()
        # Two replicas: the new master needs one of its own to confirm writes (WAIT 1).
        net = Network(n=3)
        self.addCleanup(net.close)
        ha = RedisSentinel(tmp, port=servers.free_ports(6), replicas=2, name="redis-part",
                           addrs=[net.addr(i) for i in range(3)], prefixes=[net.prefix(i) for i in range(3)])
        self.addCleanup(ha.stop)
        ha.start()
        vol = harness.Volume("partvol", meta_url=ha.url(query="timeout=%ds&wait-replicas=1" % TIMEOUT_S), base=tmp)
        self.addCleanup(vol.cleanup)
        trash_days = failover_torture.partition_start(vol)
        old = ha.master()
        self.assertIsNotNone(old)
        link = "%sv%d" % (net.tag, old)
        harness.run("ip", "link", "set", link, "down")
        try:
            new = ha.wait_master(not_node=old)
            failover_torture.write_on_the_majority_side(vol, "the master's promotion")
            alone = ha.node_url(old)
            # Without WAIT the old master acknowledges...
            res = harness.run(*(net.prefix(old) + [harness.tierfs_bin(), "config", alone + "?timeout=4s",
                                                   "--trash-days", str(trash_days + 5)]))
            self.assertEqual(res[0], 0, "the scenario did not let the cut-off master take a write\n" +
                             harness.msg(*res))
            # ...with wait-replicas=1 it acknowledges nothing.
            res = harness.run(*(net.prefix(old) + [harness.tierfs_bin(), "config",
                                                   alone + "?timeout=4s&wait-replicas=1",
                                                   "--trash-days", str(trash_days + 7)]))
            self.assertNotEqual(res[0], 0, "a master cut off from its replica acknowledged a write\n" +
                                harness.msg(*res))
            self.assertIn("confirmed it before the timeout", res[2], harness.msg(*res))
        finally:
            harness.run("ip", "link", "set", link, "master", net.bridge, "up")
        # Healed: the old master becomes a replica of the new one and drops both writes,
        # the acknowledged one included.
        servers._wait("the old master to resynchronise as a replica",
                      lambda: ha.role(old) == "slave" and ha.replicas_online(new) == 2, 30)
        failover_torture.partition_healed(self, vol, trash_days)


if __name__ == "__main__":
    harness.main()
