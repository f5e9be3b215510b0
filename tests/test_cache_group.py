"""Cache groups across hosts: members in separate network namespaces share their caches.

Each member is a separate host (tests/netns.py): its own network namespace, address and
cache directory, mounting one volume whose Redis and object store (S3 on Ceph's radosgw,
memstore OSD) listen on the bridge address every namespace reaches. The store's GETs are
counted twice: by radosgw itself (its `perf dump` counters) and by the members
(tierfs.stats). The volume's session timeout is 5 s, so members read the group every
second.

Shown here: a data set read by every member is fetched from the store about once in total;
a reader with --no-sharing gets blocks from the group and serves none; a member killed
while others read costs no read error; a cache server that joins takes over its share and
`tierfs status` lists the group; a request without the group's MAC is refused; a member
that sends damaged blocks is never believed; `tierfs warmup --cache-group` puts each
block in its owner's cache.
"""

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request

import harness
import servers
from harness import Volume, is_mounted, msg, run, tierfs, wait_for
from netns import Network

MiB = 1 << 20


def free_port(*hosts):
    """A port free on every one of hosts (radosgw binds one port on two addresses)."""
    while True:
        s = socket.socket()
        s.bind((hosts[0], 0))
        port = s.getsockname()[1]
        s.close()
        try:
            for h in hosts[1:]:
                t = socket.socket()
                t.bind((h, port))
                t.close()
            return port
        except OSError:
            continue


def stats(mnt):
    return json.loads(os.getxattr(mnt, "tierfs.stats"))


def sha(path):
    return harness.file_sha256(path)


class CacheGroupTest(unittest.TestCase):
    MEMBERS = 3

    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0 or not shutil.which("nsenter") or not shutil.which("redis-server"):
            raise unittest.SkipTest("needs root, nsenter and redis-server")
        cls.net = Network(cls.MEMBERS)
        cls.tmp = tempfile.mkdtemp(prefix="tierfs-group-")
        cls.redis = None
        cls.ceph = None
        cls.vol = None
        try:
            port = free_port(cls.net.host_addr)
            cls.redis = subprocess.Popen(
                ["redis-server", "--bind", cls.net.host_addr, "--port", str(port), "--save", "",
                 "--appendonly", "no", "--dir", cls.tmp, "--protected-mode", "no"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            ok = wait_for(lambda: run("redis-cli", "-h", cls.net.host_addr, "-p", str(port), "ping")[1].strip() == "PONG",
                          timeout=20)
            if not ok:
                raise RuntimeError("redis did not start on %s:%d" % (cls.net.host_addr, port))
            host = cls.net.host_addr
            cls.ceph = servers.Ceph(os.path.join(cls.tmp, "srv"), mon_v2=free_port("127.0.0.1"),
                                    mon_v1=free_port("127.0.0.1"), rgw_port=free_port("127.0.0.1", host),
                                    bluestore=False, extra_addr=host).start()
            storage = ["--storage", "s3", "--bucket", "http://%s:%d/groupvol" % (host, cls.ceph.rgw_port),
                       "--access-key", servers.S3_ACCESS_KEY, "--secret-key", servers.S3_SECRET_KEY]
            cls.vol = Volume(name="groupvol", meta_url="redis://%s:%d/1" % (host, port), storage=storage)
            cls.vol.format("--session-timeout", "5")
            # The writer: a mount in the root namespace, outside the group, with no disk cache.
            cls.writer = os.path.join(cls.vol.dir, "writer")
            os.mkdir(cls.writer)
            res = cls.vol.mount_at(cls.writer, "--cache-dir", "memory")
            if res[0] != 0:
                raise RuntimeError("writer mount failed\n" + msg(*res))
            cls.mnts = {}
            for i in range(cls.MEMBERS):
                cls.mount_member(i)
            cls.wait_members(cls.MEMBERS)
        except Exception:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        for p in getattr(cls, "servers", []):
            if p.poll() is None:
                p.kill()
                p.wait()
        if cls.vol:
            cls.vol.cleanup()
        if cls.redis:
            cls.redis.kill()
            cls.redis.wait()
        if cls.ceph:
            cls.ceph.stop()
        cls.net.close()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    # ---- helpers --------------------------------------------------------------------------

    @classmethod
    def mount_member(cls, i, *extra, env=None):
        mnt = os.path.join(cls.vol.dir, "m%d" % i)
        os.makedirs(mnt, exist_ok=True)
        res = cls.vol.mount_at(mnt, "--cache-group", "g", "--cache-size", "1G", *extra,
                               prefix=cls.net.prefix(i), env=env)
        if res[0] != 0:
            raise AssertionError("member %d did not mount\n%s\n%s" % (i, msg(*res), open(mnt + ".log").read()[-3000:]))
        cls.mnts[i] = mnt
        return mnt

    @classmethod
    def unmount_member(cls, i):
        """Unmounts member i and waits for its process to leave (and its session with it)."""
        mnt = cls.mnts.pop(i)
        pid = cls.vol._find_daemon_pid(mnt)
        res = run("fusermount3", "-u", mnt)
        if res[0] != 0:
            raise AssertionError("cannot unmount member %d: %s" % (i, msg(*res)))
        if pid and not wait_for(lambda: not harness.pid_alive(pid), timeout=60):
            raise AssertionError("member %d (pid %d) still runs 60 s after its unmount" % (i, pid))

    @classmethod
    def wait_members(cls, n, mnts=None, extra=()):
        """Until every member's ring is the n serving members: the mounted ones (those
        without --no-sharing) plus `extra` addresses (cache servers)."""
        def serving():
            addrs = set(extra)
            for mnt in cls.mnts.values():
                a = stats(mnt)["group"].get("addr")
                if a:
                    addrs.add(a)
            return addrs
        for i, mnt in (mnts or cls.mnts).items():
            if not wait_for(lambda: len(serving()) == n and set(stats(mnt)["group"]["ring"]) == serving(), timeout=30):
                raise AssertionError("member %d has the ring %s; the serving members are %s (want %d)"
                                     % (i, stats(mnt)["group"]["ring"], sorted(serving()), n))

    def write_files(self, tag, sizes):
        """Files written through the writer mount; returns {name: sha256}."""
        want = {}
        for k, size in enumerate(sizes):
            data = os.urandom(size)
            name = "%s-%d" % (tag, k)
            with open(os.path.join(self.writer, name), "wb") as f:
                f.write(data)
            want[name] = hashlib.sha256(data).hexdigest()
        return want

    def total(self, key, mnts):
        return sum(stats(m)["store"][key] for m in mnts)

    def store_gets(self):
        """GETs radosgw has answered so far, as it counts them."""
        return self.ceph.rgw_counters()["get"]

    # ---- tests ----------------------------------------------------------------------------

    def test_1_every_block_is_fetched_from_the_store_once_for_the_group(self):
        sizes = [10 * MiB] * 5 + [300 << 10] * 6  # 15 blocks of big files, 6 small files
        want = self.write_files("once", sizes)
        blocks = 5 * 3 + 6
        members = [self.mnts[i] for i in range(self.MEMBERS)]
        # A reader that serves nothing: on no member's ring.
        reader_ns = self.net.add_member()
        reader = self.mount_member(reader_ns, "--no-sharing")
        self.wait_members(self.MEMBERS, {reader_ns: reader})
        everyone = members + [reader]
        before = self.total("gets", everyone)
        store_before = self.store_gets()
        threads = []
        errors = []

        def read_all(mnt):
            try:
                for name, digest in want.items():
                    if sha(os.path.join(mnt, name)) != digest:
                        errors.append("%s read wrong data from %s" % (mnt, name))
            except OSError as e:
                errors.append("%s: %s" % (mnt, e))
        for mnt in everyone:
            t = threading.Thread(target=read_all, args=(mnt,))
            t.start()
            threads.append(t)
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        # Without the group: 4 members x 21 blocks = 84 GETs. The store's count and the
        # members' agree.
        store_gets = self.store_gets() - store_before
        gets = self.total("gets", everyone) - before
        self.assertGreaterEqual(store_gets, blocks)
        self.assertLessEqual(store_gets, blocks * 1.3, "GETs radosgw answered for the whole group: %d" % store_gets)
        self.assertEqual(gets, store_gets)
        r = stats(reader)
        self.assertEqual(r["store"]["gets"], 0, r)
        self.assertGreater(r["group"]["peer_hits"], 0, r)
        self.assertEqual(r["group"]["served_blocks"], 0, r)
        served = sum(stats(m)["group"]["served_blocks"] for m in members)
        self.assertGreater(served, 0)
        self.unmount_member(reader_ns)

    def test_2_a_member_killed_mid_read_costs_no_error(self):
        want = self.write_files("kill", [48 * MiB])
        path = os.path.join(self.mnts[0], "kill-0")
        victim = self.vol._find_daemon_pid(self.mnts[1])
        self.assertIsNotNone(victim)
        result = {}

        def read():
            try:
                result["sha"] = sha(path)
            except OSError as e:
                result["error"] = e
        t = threading.Thread(target=read)
        t.start()
        time.sleep(0.05)
        os.kill(victim, signal.SIGKILL)
        t.join(120)
        self.assertNotIn("error", result)
        self.assertEqual(result.get("sha"), want["kill-0"])
        # The other member reads it all too, with the dead member still on the ring for a moment.
        self.assertEqual(sha(os.path.join(self.mnts[2], "kill-0")), want["kill-0"])
        dead = self.mnts.pop(1)
        run("fusermount3", "-uz", dead)
        wait_for(lambda: not is_mounted(dead), timeout=10)
        # Survivors drop it from the ring within a few heartbeats.
        self.wait_members(self.MEMBERS - 1, {0: self.mnts[0], 2: self.mnts[2]})
        self.mount_member(1)
        self.wait_members(self.MEMBERS)

    def test_3_a_cache_server_that_joins_takes_over_its_share(self):
        if not hasattr(type(self), "servers"):
            type(self).servers = []
        ns = self.net.add_member()
        cache = os.path.join(self.vol.dir, "server.cache")
        log = os.path.join(self.vol.dir, "server.log")
        p = subprocess.Popen(self.net.prefix(ns) + [harness.tierfs_bin(), "cache-server", self.vol.meta_url,
                                                    "--cache-group", "g", "--cache-dir", cache, "--cache-size", "1G",
                                                    "--log", log],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.servers.append(p)
        self.addCleanup(lambda: p.poll() is not None or (p.kill(), p.wait()))
        line = p.stdout.readline()
        self.assertIn("serving cache group g", line, p.stderr.read() if p.poll() is not None else "")
        server_addr = json.loads(line[line.index("{"):])["addr"]
        self.wait_members(self.MEMBERS + 1, extra=(server_addr,))
        want = self.write_files("join", [4 * MiB] * 40)  # 40 blocks, about 10 of them the server's
        for name, digest in want.items():
            self.assertEqual(sha(os.path.join(self.mnts[0], name)), digest)
        st = json.loads(tierfs("status", self.vol.meta_url, "--json")[1])
        g = st["cache_groups"]["g"]
        self.assertEqual(len(g["members"]), self.MEMBERS + 1)
        server = [m for m in g["members"] if not m["mountpoint"]]
        self.assertEqual(len(server), 1)
        self.assertTrue(server[0]["addr"].startswith(self.net.addr(ns) + ":"), server)
        text = tierfs("status", self.vol.meta_url)[1]
        self.assertIn("cache group g: %d members" % (self.MEMBERS + 1), text)
        self.assertIn("cache-server", text)
        p.send_signal(signal.SIGTERM)
        self.assertEqual(p.wait(30), 0)
        tail = open(log).read()
        served = json.loads(tail[tail.rindex("{"):tail.rindex("}") + 1])["served"]
        # Its share of 40 blocks on a ring of 4 equal members: about 10.
        self.assertGreaterEqual(served, 3, tail[-2000:])
        self.assertLessEqual(served, 25, tail[-2000:])
        self.wait_members(self.MEMBERS)

    def test_4_a_request_without_the_group_mac_is_refused(self):
        addr = stats(self.mnts[0])["group"]["addr"]
        # Every download thread of every member may connect at once: the listener's backlog
        # must hold them (cpp-httplib's default of 5 made busy owners look dead).
        rc, out, err = run(*(self.net.prefix(0) + ["ss", "-Hltn", "sport = :%s" % addr.rsplit(":", 1)[1]]))
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.assertGreaterEqual(int(out.split()[2]), 1024, out)
        before = stats(self.mnts[0])["group"]["refused_requests"]
        key = "groupvol/chunks/00/1_0_4194304"
        for headers in ({}, {"X-Tierfs-Volume": "x", "X-Tierfs-Time": str(int(time.time())), "X-Tierfs-Mac": "00" * 32}):
            req = urllib.request.Request("http://%s/tierfs/v1/block?key=%s&len=4194304" % (addr, key), headers=headers)
            with self.assertRaises(urllib.error.HTTPError) as cm:
                urllib.request.urlopen(req, timeout=10)
            self.assertIn(cm.exception.code, (400, 403))
        self.assertEqual(stats(self.mnts[0])["group"]["refused_requests"], before + 2)

    def test_5_a_damaged_block_from_a_peer_is_never_used(self):
        # Member 2 comes back damaging every block it serves.
        self.unmount_member(2)
        self.mount_member(2, env=dict(os.environ, TIERFS_FAULT_PEER_CORRUPT="1"))
        self.wait_members(self.MEMBERS)
        want = self.write_files("bad", [4 * MiB] * 24)
        before = stats(self.mnts[0])["group"]["damaged"]
        for name, digest in want.items():
            self.assertEqual(sha(os.path.join(self.mnts[0], name)), digest)
        self.assertGreater(stats(self.mnts[0])["group"]["damaged"], before)
        self.unmount_member(2)
        self.mount_member(2)
        self.wait_members(self.MEMBERS)

    def test_6_warmup_fills_the_group(self):
        # 30 blocks: with 3 equal members each is another's with chance 2/3, so all of them
        # are with chance (2/3)^30, 5e-6 (with 12 it was 0.8%, and a full run saw it).
        count = 30
        want = self.write_files("warm", [4 * MiB] * count)
        paths = [os.path.join(self.mnts[0], n) for n in want]
        res = tierfs("warmup", "--cache-group", "--json", *paths, timeout=120)
        self.assertEqual(res[0], 0, msg(*res))
        out = json.loads(res[1])
        self.assertEqual(out["blocks"], count)
        # Each block went to its owner; with 3 equal members about two thirds are the others'.
        self.assertGreater(out["owner_blocks"], 0, out)
        self.assertLess(out["owner_blocks"], count, out)
        # Every block is now in its owner's cache: another member reads them all without
        # touching the store.
        before = stats(self.mnts[2])["store"]["gets"]
        for name, digest in want.items():
            self.assertEqual(sha(os.path.join(self.mnts[2], name)), digest)
        after = stats(self.mnts[2])
        self.assertEqual(after["store"]["gets"], before, after)


if __name__ == "__main__":
    harness.main()
