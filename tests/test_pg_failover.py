#!/usr/bin/env python3
"""A volume on PostgreSQL under Patroni (three members: a primary, a synchronous standby and
a replica, servers_patroni.Patroni) keeps working while the primary is SIGKILLed again and again,
postgres and patroni together as in a machine crash; each time, once Patroni has promoted
the synchronous standby, the killed member is started again and rejoins as a replica
(pg_rewind). The META-URL names all three servers; libpq picks the one that takes writes.

Two mounts of the volume run writers that log every operation acknowledged to them
(tests/failover_torture.py, shared with the etcd failover test). Afterwards every
acknowledged operation is there exactly as acknowledged and nothing was applied twice,
`tierfs fsck` is clean, each writer made progress after every kill, and no operation took
longer than the META-URL's ?timeout= (after which the engine reports EIO instead of
hanging). An operation may fail when the primary dies between running its writes and
answering the commit marker's batch (postgres_engine.h): at most one per writer and kill.

A primary cut off from the others in a network namespace of its own serves no write
(PgPartitionTest).

And `tierfs status` reports the volume safe while a synchronous standby streams (mount
--require-safe-meta accepts it), and unsafe, naming why, when the primary is left alone."""
import os
import shutil
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import failover_torture  # noqa: E402
import servers_patroni  # noqa: E402
from netns import Network  # noqa: E402

TIMEOUT_S = 20  # ?timeout= of the volume's META-URL; an election here takes about 6 s
DB = "tierfs_failover"


class PgFailoverTest(harness.TierFSTestCase):
    AUTO_MOUNT = False

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.tmp = tempfile.mkdtemp(prefix="tierfs-it-patroni-", dir=os.environ.get("TIERFS_TEST_TMPDIR"))
        if not os.environ.get("TIERFS_TEST_KEEP"):
            cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        os.chmod(cls.tmp, 0o755)  # Patroni and postgres run as user postgres
        cls.pg = servers_patroni.Patroni(cls.tmp, members=3)
        cls.addClassCleanup(cls.pg.stop)
        t0 = time.monotonic()
        cls.pg.start()
        cls.pg.create_database(DB)
        print("Patroni cluster of 3 up in %.1f s" % (time.monotonic() - t0), file=sys.stderr)

    def volume(self, name):
        url = self.pg.url(DB) + "?timeout=%ds&options=-csearch_path%%3D%s" % (TIMEOUT_S, name)
        self.pg.psql(DB, "CREATE SCHEMA %s" % name)
        vol = harness.Volume(name, meta_url=url, base=self.tmp)
        self.addCleanup(vol.cleanup)
        vol.format()
        return vol

    def test_the_engine_suites_pass_on_the_cluster(self):
        """What every engine passes (kv_engine_test, meta_test), through the URL naming all
        three servers."""
        for db in ("tierfs_kv_test", "tierfs_meta_test"):
            self.pg.create_database(db)
        failover_torture.engine_suites(self, "TIERFS_TEST_PG_URL", self.pg.url().rstrip("/"), "Postgres")

    def test_durability_is_safe_with_a_sync_standby_and_unsafe_alone(self):
        vol = self.volume("durability")
        d = vol.status_json()["meta_durability"]
        self.assertTrue(d["safe"], d)
        self.assertIn("1 synchronous", d["summary"])
        vol.mount("--require-safe-meta")
        vol.umount()
        # The standbys gone (stopped cleanly), Patroni clears synchronous_standby_names: the
        # primary's disk is the only copy of a commit.
        p = self.pg.primary()
        others = [i for i in range(self.pg.n) if i != p]
        try:
            for i in others:
                self.pg.kill_member(i, signal.SIGTERM)
            deadline = time.monotonic() + 30
            while vol.status_json()["meta_durability"]["safe"] and time.monotonic() < deadline:
                time.sleep(0.5)
            d = vol.status_json()["meta_durability"]
            self.assertFalse(d["safe"], d)
            self.assertTrue(any("no synchronous standby" in r for r in d["risks"]), d)
            res = vol.mount("--require-safe-meta", check=False)
            self.assertNotEqual(res[0], 0, harness.msg(*res))
            self.assertIn("no synchronous standby", res[2], harness.msg(*res))
        finally:
            for i in others:
                self.pg.start_member(i)
            self.pg.wait_ready(120)

    def test_writers_lose_nothing_while_the_primary_is_killed(self):
        vol = self.volume("torture")
        vol.mount()
        second = os.path.join(self.tmp, "second")
        os.makedirs(second)
        res = vol.mount_at(second)
        self.assertEqual(res[0], 0, harness.msg(*res))

        def kill_leader():
            if not self.pg.ready():
                return False  # the last kill's member is still rejoining
            i = self.pg.primary()
            self.pg.kill_member(i, signal.SIGKILL)
            self.pg.wait_primary(other_than=i, timeout=60)
            self.pg.start_member(i)  # rejoins as a replica of the new primary
            return True

        writers, kills = failover_torture.run_torture([vol.mnt, second], kill_leader, seconds=40, period=10)
        failover_torture.report("postgres+patroni", writers, kills, 10.0)
        for w in writers:
            for f in w.failed:
                print("failed: %s" % f, file=sys.stderr)
        self.assertGreaterEqual(len(kills), 3)
        for w in writers:
            self.assertLessEqual(len(w.failed), len(kills), "more failures than kills: %r" % w.failed)
        failover_torture.check_progress(self, writers, kills, TIMEOUT_S)
        failover_torture.check_after(self, vol, writers, others=[second])
        # Commit markers do not pile up: with every client gone (unmounted, fsck done),
        # none is left, not even of the connections the kills broke.
        left = self.pg.psql(DB, "SELECT count(*) FROM torture.tierfs_commits").strip()
        self.assertEqual(int(left), 0, "commit markers left behind")


class PgPartitionTest(harness.TierFSTestCase):
    """The primary cut off from the others and from Patroni's store (its link in its
    network namespace taken down): the synchronous standby is promoted and a mount that
    reaches the majority goes on; a client that reaches only the old primary has nothing
    acknowledged (its commit waits for a standby it cannot reach, and Patroni demotes it
    when its leader key expires), and once the link is back the old primary rejoins as a
    replica, without that write."""
    AUTO_MOUNT = False

    def test_a_primary_cut_off_serves_no_writes(self):
        tmp = tempfile.mkdtemp(prefix="tierfs-it-patroni-ns-", dir=os.environ.get("TIERFS_TEST_TMPDIR"))
        if not os.environ.get("TIERFS_TEST_KEEP"):
            self.addCleanup(shutil.rmtree, tmp, True)
        os.chmod(tmp, 0o755)
        net = Network(n=3)
        self.addCleanup(net.close)
        pg = servers_patroni.Patroni(tmp, members=3, name="patroni-ns", addrs=[net.addr(i) for i in range(3)],
                                     prefixes=[net.prefix(i) for i in range(3)], dcs_addr=net.host_addr)
        self.addCleanup(pg.stop)
        pg.start()
        pg.create_database(DB)
        vol = harness.Volume("pgpart", meta_url=pg.url(DB) + "?timeout=%ds" % TIMEOUT_S, base=tmp)
        self.addCleanup(vol.cleanup)
        trash_days = failover_torture.partition_start(vol)
        k = pg.primary()
        self.assertIsNotNone(k)
        link = "%sv%d" % (net.tag, k)
        harness.run("ip", "link", "set", link, "down")
        try:
            failover_torture.write_on_the_majority_side(vol, "the primary's link went down")
            self.assertNotEqual(pg.primary(), k)
            # The old primary, alone: no write through it is acknowledged.
            alone = "postgres://postgres:%s@%s:%d/%s?timeout=8s" % (pg.PASSWORD, net.addr(k), pg.pg_port(k), DB)
            res = harness.run(*(net.prefix(k) + [harness.tierfs_bin(), "config", alone, "--trash-days",
                                                 str(trash_days + 5)]))
            self.assertNotEqual(res[0], 0, "a primary cut off from the others acknowledged a write\n" +
                                harness.msg(*res))
        finally:
            harness.run("ip", "link", "set", link, "master", net.bridge, "up")
        pg.wait_ready(120)  # the old primary rejoins as a replica (pg_rewind)
        failover_torture.partition_healed(self, vol, trash_days)


if __name__ == "__main__":
    harness.main()
