"""Cache-group members under faults, on one host (README, "Cache groups"; docs/faults.md):

- a hung owner (SIGSTOP) does not make a reader start a thread per block it asks for:
  hedged asks run on a bounded pool, the rest goes to the store at once;
- 40 slow connections from one local address ("slowloris": a byte every 4 s) neither hold
  the listener's workers nor keep real members from being served, and are closed after the
  header timeout;
- `tierfs cache-server` stopped (SIGTERM) while members read from it, many times over,
  always exits cleanly, and its group refresh thread never runs once teardown began (it
  read the stats of caches being destroyed, and wrote to the closed session: the log's
  "cannot publish this member" showed it).
"""

import os
import random
import socket
import sys
import threading
import time

import harness
from group_helpers import CacheServer, free_port, stats, threads_of, wait_ring, write_files
from harness import msg

GROUP = "g"


class GroupFaultsTest(harness.TierFSTestCase):
    PER_TEST = True
    AUTO_MOUNT = False

    def setUp(self):
        super().setUp()
        self.vol = self.new_volume()
        self.addCleanup(self.vol.cleanup)

    def start(self, *format_args):
        self.vol.format(*format_args)
        self.vol.mount("--backup-meta", "0")  # the writer: outside the group
        self.servers = []
        self.addCleanup(lambda: [s.kill() for s in self.servers])

    def cache_server(self, *extra):
        s = CacheServer(self.vol, GROUP, os.path.join(self.vol.dir, "cs-cache-%d" % len(self.servers)), extra)
        self.servers.append(s)
        return s

    def member(self, name, *extra):
        mnt = os.path.join(self.vol.dir, name)
        os.mkdir(mnt)
        res = self.vol.mount_at(mnt, "--cache-group", GROUP, "--group-addr", "127.0.0.1:%d" % free_port(),
                                "--backup-meta", "0", *extra)
        self.assertEqual(res[0], 0, msg(*res))
        return mnt, self.vol._find_daemon_pid(mnt)

    def test_a_hung_owner_costs_no_thread_per_block(self):
        self.start()
        files = write_files(self.vol.mnt, 160, 256 << 10)
        owner = self.cache_server()
        mnt, pid = self.member("reader", "--cache-dir", "memory")
        wait_ring(mnt, 2)
        base = threads_of(pid)
        os.kill(owner.pid, 19)  # SIGSTOP: connections are accepted, never answered
        peak = [base]
        done = threading.Event()

        def watch():
            while not done.is_set():
                peak[0] = max(peak[0], threads_of(pid))
                time.sleep(0.02)
        w = threading.Thread(target=watch)
        w.start()
        names = sorted(files)
        errors = []

        def read(part):
            for p in part:
                rel = os.path.relpath(p, self.vol.mnt)
                with open(os.path.join(mnt, rel), "rb") as f:
                    if f.read() != files[p]:
                        errors.append(rel)
        t0 = time.monotonic()
        readers = [threading.Thread(target=read, args=(names[i::32],)) for i in range(32)]
        for t in readers:
            t.start()
        for t in readers:
            t.join(300)
        secs = time.monotonic() - t0
        done.set()
        w.join()
        g = stats(mnt)["group"]
        sys.stderr.write("hung owner: %d files read in %.1f s; reader threads %d before, %d at most; "
                         "asks %d, hedged %d, ask pool full %d\n"
                         % (len(names), secs, base, peak[0], g["asks"], g["hedged"], g.get("ask_pool_full", -1)))
        self.assertEqual(errors, [])
        self.assertLessEqual(peak[0] - base, 8, "the reader went from %d to %d threads while its blocks' owner "
                                                "was hung" % (base, peak[0]))

    def test_slow_connections_from_one_address_do_not_starve_real_members(self):
        self.start()
        owner = self.cache_server()
        mnt, _ = self.member("reader", "--cache-dir", "memory")
        wait_ring(mnt, 2)
        host, port = owner.addr.split(":")
        attackers = []
        for _ in range(40):
            s = socket.socket()
            s.bind(("127.0.0.5", 0))  # any local user can pick this source address
            s.settimeout(10)
            try:
                s.connect((host, int(port)))
                s.settimeout(None)  # blocking: recv(MSG_DONTWAIT) must not wait
                attackers.append(s)
            except OSError:
                s.close()
        stop = threading.Event()
        closed_at = {}
        t_start = time.monotonic()

        def closed(s):
            try:
                return s.recv(1, socket.MSG_DONTWAIT) == b""
            except BlockingIOError:
                return False
            except OSError:
                return True

        def drip():
            # A request line a byte at a time, every 4 s, never finished; the server's
            # closing of a connection is noticed within 0.1 s.
            line = b"GET /tierfs/v1/block?key=x HTTP/1.1\r\nHost: x\r\n"
            i = 0
            next_byte = 0
            while not stop.is_set() and i < len(line):
                for s in attackers:
                    if s not in closed_at and closed(s):
                        closed_at[s] = time.monotonic() - t_start
                if time.monotonic() - t_start >= next_byte:
                    for s in attackers:
                        if s in closed_at:
                            continue
                        try:
                            s.send(line[i:i + 1])
                        except OSError:
                            closed_at[s] = time.monotonic() - t_start
                    i += 1
                    next_byte += 4
                stop.wait(0.1)
        d = threading.Thread(target=drip)
        d.start()
        try:
            time.sleep(1)
            before = stats(mnt)["group"]
            files = write_files(self.vol.mnt, 40, 256 << 10, prefix="g")
            t0 = time.monotonic()
            for p, data in files.items():
                with open(os.path.join(mnt, os.path.relpath(p, self.vol.mnt)), "rb") as f:
                    self.assertEqual(f.read(), data)
            secs = time.monotonic() - t0
            after = stats(mnt)["group"]
            received = after["received"] - before["received"]
            hedged = after["hedged"] - before["hedged"]
            time.sleep(9)  # past the header timeout (5 s after the first byte) and a drip
        finally:
            stop.set()
            d.join()
            for s in attackers:
                s.close()
        conns = stats(mnt)  # the reader's view; the owner's counters are in its log at exit
        sys.stderr.write("40 slow connections: 40 files read in %.1f s, %d blocks from the owner, %d hedged; "
                         "attack connections closed by the owner: %d (at %s s)\n"
                         % (secs, received, hedged, len(closed_at),
                            sorted(round(v, 1) for v in closed_at.values())))
        self.assertGreater(received, 5, "the owner served %d blocks to a real member while slow connections "
                                        "were open (%d asks hedged to the store)" % (received, hedged))
        self.assertEqual(len(closed_at), len(attackers),
                         "slow connections left open by the owner: %d of %d" % (len(attackers) - len(closed_at),
                                                                               len(attackers)))
        del conns

    def test_cache_server_stopped_under_load_exits_cleanly(self):
        # A short session timeout: the group refreshes every half second, so a refresh
        # often falls in the cache server's teardown.
        self.start("--session-timeout", "2")
        files = write_files(self.vol.mnt, 64, 512 << 10)
        mnt, _ = self.member("reader", "--cache-dir", "memory")
        stop = threading.Event()
        errors = []

        def load():
            names = sorted(files)
            while not stop.is_set():
                for p in names:
                    if stop.is_set():
                        break
                    try:
                        with open(os.path.join(mnt, os.path.relpath(p, self.vol.mnt)), "rb") as f:
                            if f.read() != files[p]:
                                errors.append(p)
                    except OSError as e:
                        errors.append("%s: %s" % (p, e))
                # Evict, so that the next round asks the group again.
                harness.run(harness.tierfs_bin(), "warmup", "--evict", mnt)
        t = threading.Thread(target=load)
        t.start()
        rng = random.Random(5)
        results = []
        try:
            for i in range(20):
                s = self.cache_server()
                time.sleep(rng.uniform(0.3, 2.5))
                rc = s.stop()
                out = s.output()
                results.append(rc)
                self.assertEqual(rc, 0, "cache-server run %d exited with %d\n%s" % (i, rc, out))
                self.assertNotIn("Assertion", out)
                self.assertNotIn("fatal signal", out)
                # The group's refresh thread still running after the session closed (and
                # the caches it reads were being destroyed) says so in the log.
                stopping = out[out.find("cache server stopping"):] if "cache server stopping" in out else ""
                for sign in ("cannot publish this member", "cannot read the members"):
                    self.assertNotIn(sign, stopping, "run %d: the group refreshed during teardown\n%s" % (i, out))
        finally:
            stop.set()
            t.join(120)
        sys.stderr.write("cache-server stopped under load %d times: exit codes %s\n" % (len(results), results))
        self.assertEqual(errors, [])


if __name__ == "__main__":
    harness.main()
