#!/usr/bin/env python3
"""A mirror in another region (tests/regions.py: a network namespace behind a link of 30 ms
each way and 200 Mbit/s) follows a Redis primary while a randomized writer changes the
primary (creates and writes, mkdir, renames of files and directories, unlinks, rmdir, hard
links, truncates, xattrs, overwrites). Each region has its own Redis (region B's runs in its
namespace) and its own radosgw bucket, reached across the link (the blocks the replicator
copies cross it). Two checkers in region B: one reads the mirror's engine, each time in one
atomic script (tests/mirror_snapshots.py), and every namespace it sees must be one the
primary had, in order (a consistent, monotonic prefix of the writer's states: no torn
rename, no listing mixing two moments); the other walks a read-only mount of the mirror,
and every directory listing it reads must be that directory's listing in one of the
primary's states, in order, and a file it opens must be readable. Meanwhile the replicator
is SIGKILLed and restarted again and again, the link to the primary is cut for a while,
then the primary's Redis is stopped for a while (the mirror keeps serving its last state
and says how old it is), and a mount of the mirror in region B writes through the primary
(`mount --primary`), reading each file back at once. At the end the mirror equals the
primary (trees, data, modes, xattrs), also read from region B's store alone."""
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import servers  # noqa: E402
from gateway_helpers import free_port  # noqa: E402
from regions import RegionLink  # noqa: E402
from replicators import Replicators  # noqa: E402

ROOT_INO = 1


def status(url):
    rc, out, err = harness.tierfs("status", url, "--json")
    assert rc == 0, harness.msg(rc, out, err)
    return json.loads(out)


SNAPSHOTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mirror_snapshots.py")


def parse_snapshot(line):
    """(frozenset of (path, is_dir) or None, applied) from a line of mirror_snapshots.py."""
    d = json.loads(line)
    names = None if d["names"] is None else frozenset((p, bool(x)) for p, x in d["names"])
    return names, d["applied"]


def listings(state):
    """Directory path ("" for the top) -> frozenset of its entries' names, in a writer state."""
    out = {"": set()}
    for p, is_dir in state:
        if is_dir:
            out.setdefault(p, set())
        parent, name = p.rsplit("/", 1)
        out.setdefault(parent, set()).add(name)
    return {k: frozenset(v) for k, v in out.items()}


class Writer:
    """Random namespace changes under root; states[i] is the namespace after the i-th change
    of names (operations that change no name add none)."""

    def __init__(self, root, seed):
        self.root, self.rng = root, random.Random(seed)
        self.model = {}  # path -> is_dir
        self.states = [frozenset()]
        self.ops = 0

    def dirs(self):
        return [""] + [p for p, d in self.model.items() if d]

    def files(self):
        return [p for p, d in self.model.items() if not d]

    def fresh(self, parent):
        self.ops += 1
        return "%s/n%d" % (parent, self.ops)

    def snap(self):
        self.states.append(frozenset(self.model.items()))

    def step(self):
        r, rng = self.rng.random(), self.rng
        files, full = self.files(), lambda p: self.root + p
        if r < 0.3 or not files:
            p = self.fresh(rng.choice(self.dirs()))
            with open(full(p), "wb") as f:
                f.write(os.urandom(rng.choice([0, 100, 5000, 70000, 300000])))
            self.model[p] = False
            self.snap()
        elif r < 0.4:
            p = self.fresh(rng.choice(self.dirs()))
            os.mkdir(full(p))
            self.model[p] = True
            self.snap()
        elif r < 0.55:
            src = rng.choice(files + [d for d in self.dirs() if d])
            dst_dir = rng.choice([d for d in self.dirs() if d != src and not d.startswith(src + "/")])
            dst = self.fresh(dst_dir)
            os.rename(full(src), full(dst))
            moved = {p: d for p, d in self.model.items() if p == src or p.startswith(src + "/")}
            for p in moved:
                del self.model[p]
            for p, d in moved.items():
                self.model[dst + p[len(src):]] = d
            self.snap()
        elif r < 0.65:
            p = rng.choice(files)
            os.unlink(full(p))
            del self.model[p]
            self.snap()
        elif r < 0.7:
            empty = [d for d in self.dirs() if d and not any(p.startswith(d + "/") for p in self.model)]
            if empty:
                d = rng.choice(empty)
                os.rmdir(full(d))
                del self.model[d]
                self.snap()
        elif r < 0.78:
            src = rng.choice(files)
            dst = self.fresh(rng.choice(self.dirs()))
            os.link(full(src), full(dst))
            self.model[dst] = False
            self.snap()
        elif r < 0.86:
            with open(full(rng.choice(files)), "r+b") as f:
                f.truncate(rng.randrange(0, 100000))
        elif r < 0.93:
            os.setxattr(full(rng.choice(files)), "user.k%d" % rng.randrange(3), os.urandom(8).hex().encode())
        else:
            with open(full(rng.choice(files)), "wb") as f:
                f.write(os.urandom(rng.randrange(1, 200000)))


class MirrorRegionsTest(harness.TierFSTestCase):
    AUTO_MOUNT = False

    def setUp(self):
        super().setUp()
        srv = harness.servers()
        self.tmp = self.local_tmpdir()
        # Region A's metadata server is this test's own: it is stopped for a while below.
        self.redis_a = servers.Redis(os.path.join(self.tmp, "redis-a"), port=free_port())
        self.addCleanup(self.redis_a.stop)
        self.redis_a.start()
        base = self.redis_a.url()
        self.primary_url = base + "/1"
        self.link = RegionLink(delay_ms=30, rate="200mbit")
        self.addCleanup(self.link.close)
        # Region A's and region B's buckets on radosgw, each reached through a forward of the
        # link (from both regions: the primary's store must be readable in B too), so every
        # block the replicator copies crosses it. The primary's forward is closed at the end.
        rgw = int(srv["s3_endpoint"].rsplit(":", 1)[1])
        self.store_a = "http://%s/%s" % (self.link.forward(rgw), harness.unique("region-a"))
        self.forward_a = self.link.forwards[-1]
        self.store_b = "http://%s/%s" % (self.link.forward(rgw), harness.unique("region-b"))
        self.s3_keys = ["--access-key", srv["s3_access_key"], "--secret-key", srv["s3_secret_key"]]
        self.primary = harness.Volume("prim", meta_url=self.primary_url, base=self.tmp,
                                      storage=["--storage", "s3", "--bucket", self.store_a] + self.s3_keys)
        self.addCleanup(self.primary.cleanup)
        self.primary.format("--changelog-hours", "1")
        self.primary.mount()
        port = int(base.rsplit(":", 1)[1])
        self.remote_url = "redis://%s/1" % self.link.forward(port)
        # Region B's metadata server, in its namespace: the replicator and region B's mounts
        # reach it there, untouched by a cut link; this host reaches it across the veth.
        self.redis_b = servers.Redis(os.path.join(self.tmp, "redis-b"), port=free_port(), addr=self.link.b_addr,
                                     prefix=self.link.prefix)
        self.addCleanup(self.redis_b.stop)
        self.redis_b.start()
        self.mirror_url = self.redis_b.url() + "/1"
        self.mirror = harness.Volume("mirror", meta_url=self.mirror_url, base=self.tmp)
        self.addCleanup(self.mirror.cleanup)
        self.replicators = Replicators(self.tmp)
        self.addCleanup(self.replicators.stop_all)

    def in_b(self, *args):
        """A tierfs command run in region B."""
        return harness.run(*(self.link.prefix + [harness.tierfs_bin()] + list(args)))

    def status_in_b(self):
        rc, out, err = self.in_b("status", self.mirror_url, "--json")
        self.assertEqual(rc, 0, harness.msg(rc, out, err))
        return json.loads(out)

    def snapshot_in_b(self):
        rc, out, err = harness.run(*(self.link.prefix + [sys.executable, SNAPSHOTS, "%s:%d" % (self.link.b_addr,
                                                          self.redis_b.port), "1", "w", "--once"]))
        self.assertEqual(rc, 0, harness.msg(rc, out, err))
        return parse_snapshot(out)

    def start_replicator(self):
        return self.replicators.start(self.link.prefix + [harness.tierfs_bin(), "mirror", self.remote_url,
                                                          self.mirror_url, "--interval", "0.05", "--lease-ttl", "2"])

    def test_a_randomized_writer_and_a_checker_across_regions(self):
        top = os.path.join(self.primary.mnt, "w")
        os.mkdir(top)
        # The mirror has a store of its own in region B: the replicator copies every block
        # before it applies the commit naming it, killed or not.
        res = harness.run(self.link.prefix + [harness.tierfs_bin(), "mirror", self.remote_url, self.mirror_url,
                                              "--once", "--storage", "s3", "--bucket", self.store_b] + self.s3_keys)
        self.assertEqual(res[0], 0, harness.msg(*res))
        # A job in region B writes through the mirror (mount --primary) while the primary changes.
        writer_mnt = os.path.join(self.tmp, "b-writer")
        os.makedirs(writer_mnt)
        res = self.mirror.mount_at(writer_mnt, "--primary", self.remote_url, prefix=self.link.prefix)
        self.assertEqual(res[0], 0, harness.msg(*res))
        b_out = os.path.join(writer_mnt, "from-b")
        os.mkdir(b_out)
        b_files = {}
        writer = Writer(top, seed=int(os.environ.get("TIERFS_TEST_SEED", "25")))
        # A read-only mount of the mirror in region B, with no kernel caches (a cached entry
        # would show a path the directory has left): its walker lists every directory under
        # w/, each listing kept when the path named the same directory before and after it.
        reader_mnt = os.path.join(self.tmp, "b-reader")
        os.makedirs(reader_mnt)
        res = self.mirror.mount_at(reader_mnt, "--attr-cache", "0", "--entry-cache", "0", "--dir-entry-cache", "0",
                                   prefix=self.link.prefix)
        self.assertEqual(res[0], 0, harness.msg(*res))
        seen = []  # (names, applied) in the order the engine's checker read them
        listed = []  # (path under w, names) in the order the mount's walker read them
        unreadable = []
        stop = threading.Event()
        snaps = subprocess.Popen(self.link.prefix + [sys.executable, SNAPSHOTS, "%s:%d" % (self.link.b_addr,
                                 self.redis_b.port), "1", "w"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 text=True)
        self.addCleanup(lambda: snaps.poll() is not None or snaps.kill())

        def check():
            for line in snaps.stdout:
                seen.append(parse_snapshot(line))

        def walk():
            rng = random.Random(7)
            while not stop.is_set():
                stack, files = [""], []
                while stack:
                    rel = stack.pop()
                    path = os.path.join(reader_mnt, "w") + rel
                    try:
                        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
                    except (FileNotFoundError, NotADirectoryError):
                        continue
                    try:
                        entries = list(os.scandir(fd))
                        same = os.stat(path).st_ino == os.fstat(fd).st_ino
                    except FileNotFoundError:
                        continue
                    finally:
                        os.close(fd)
                    if same:
                        listed.append((rel, frozenset(e.name for e in entries)))
                    for e in entries:
                        (stack if e.is_dir() else files).append(rel + "/" + e.name)
                if files:  # a file the mirror shows has its data readable
                    name = rng.choice(files)
                    try:
                        with open(os.path.join(reader_mnt, "w") + name, "rb") as f:
                            f.read()
                    except FileNotFoundError:
                        pass
                    except OSError as e:
                        unreadable.append("%s: %s" % (name, e))
                time.sleep(0.02)

        checker = threading.Thread(target=check)
        checker.start()
        walker = threading.Thread(target=walk)
        walker.start()
        r = self.start_replicator()
        try:
            deadline = time.monotonic() + 30
            kills = 0
            cut_done = stopped = False
            next_kill = time.monotonic() + 3
            rounds = 0
            while time.monotonic() < deadline:
                for _ in range(5):
                    writer.step()
                    time.sleep(0.02)
                rounds += 1
                if not cut_done and rounds % 3 == 0:  # each is about 0.7 s across the link
                    # Written in B, read back at once in B, whatever the mirror holds yet.
                    name = "out%03d" % len(b_files)
                    b_files[name] = os.urandom(random.randrange(1, 300000))
                    with open(os.path.join(b_out, name), "wb") as f:
                        f.write(b_files[name])
                    with open(os.path.join(b_out, name), "rb") as f:
                        self.assertEqual(f.read(), b_files[name])
                if time.monotonic() > next_kill:
                    r.send_signal(signal.SIGKILL)  # anywhere: in a batch, a copy, a lease renewal
                    r.wait()
                    kills += 1
                    r = self.start_replicator()
                    next_kill = time.monotonic() + 4
                if cut_done and not stopped and time.monotonic() > deadline - 6:
                    # The primary's metadata server stopped: the mirror keeps serving, the
                    # replicator retries, and both go on once it is back (its data kept).
                    stopped = True
                    self.redis_a.stop()
                    time.sleep(3)
                    self.assertIsNotNone(self.snapshot_in_b()[0])
                    self.assertIn("lag", self.status_in_b()["mirror"])
                    self.redis_a.start(fresh=False)
                if not cut_done and time.monotonic() > deadline - 15:
                    # The primary unreachable: the mirror keeps serving, its lag grows.
                    cut_done = True
                    self.link.cut(True)
                    before = self.snapshot_in_b()
                    for _ in range(40):
                        writer.step()
                    r.send_signal(signal.SIGKILL)  # and the replicator dies while the primary is away
                    r.wait()
                    kills += 1
                    r = self.start_replicator()
                    time.sleep(4)
                    self.assertEqual(self.snapshot_in_b()[1], before[1])
                    lag = self.status_in_b()["mirror"]["lag"]["seconds"]
                    self.assertGreater(lag, 3)
                    self.link.cut(False)
        finally:
            self.link.cut(False)
            last = status(self.primary_url)["changelog"]["last_seq"]
            res = harness.tierfs("mirror-wait", self.mirror_url, "--seq", str(last), "--timeout", "90")
            stop.set()
            snaps.stdin.close()
            checker.join()
            walker.join()
            snaps.wait()
        self.assertEqual(res[0], 0, harness.msg(*res) + "\n" + self.replicators.log_of(r)[-3000:])
        self.assertGreaterEqual(kills, 4)
        self.assertTrue(cut_done and stopped, "the cut and the stopped server both happened")
        final = self.snapshot_in_b()
        self.assertEqual(final[0], writer.states[-1])
        # Every namespace the checker saw is one of the writer's states, in order.
        positions = {}
        for i, s in enumerate(writer.states):
            positions.setdefault(s, []).append(i)
        at, applied = 0, 0
        distinct = set()
        for names, seq in seen:
            self.assertIsNotNone(names)
            self.assertGreaterEqual(seq, applied, "the mirror went back from commit %d to %d" % (applied, seq))
            applied = seq
            later = [i for i in positions.get(names, []) if i >= at]
            self.assertTrue(later, "the mirror showed a namespace the primary never had, or an older one "
                                   "(after state %d of %d)" % (at, len(writer.states)))
            at = later[0]
            distinct.add(at)
        print("%d writer states, %d checks, %d distinct states seen, %d replicator kills" %
              (len(writer.states), len(seen), len(distinct), kills), file=sys.stderr)
        # About 25 here: each batch waits for its blocks to cross the link first.
        self.assertGreater(len(distinct), 10, "the checker saw too few states to mean anything")
        # Every listing the mount showed is its directory's in one of the writer's states, in
        # order (the walker reads one directory at a time: each listing is its own moment).
        self.assertEqual(unreadable, [], "files the mirror's mount listed but could not read")
        by_state = [listings(st) for st in writer.states]
        at = 0
        moments = set()
        for rel, names in listed:
            later = [i for i in range(at, len(by_state)) if by_state[i].get(rel) == names]
            self.assertTrue(later, "the mirror's mount listed w%s as %s: no state of the primary from %d of %d on "
                                   "has it" % (rel or "/", sorted(names), at, len(by_state)))
            at = later[0]
            moments.add(at)
        print("%d listings read through the mirror's mount, %d distinct states" % (len(listed), len(moments)),
              file=sys.stderr)
        self.assertGreater(len(moments), 10, "the mount's walker saw too few states to mean anything")
        # What B wrote is on the primary, data and all.
        self.assertGreater(len(b_files), 5)
        for name, data in b_files.items():
            with open(os.path.join(self.primary.mnt, "from-b", name), "rb") as f:
                self.assertEqual(f.read(), data, name)
        harness.run("umount", writer_mnt)
        harness.run("umount", reader_mnt)
        # And the data, modes and xattrs.
        self.mirror.mount()
        diffs = harness.compare_trees(top, os.path.join(self.mirror.mnt, "w"), xattrs=True)
        self.assertEqual(diffs, [], "\n".join(diffs[:20]))
        expected = harness.file_hashes(self.primary.mnt)
        self.mirror.umount()
        # Region B on its own: every block is in its store (the primary's store unreachable, no
        # disk cache).
        self.primary.umount()
        self.forward_a.close()
        self.mirror.mount("--cache-size", "0")
        self.assertEqual(harness.file_hashes(self.mirror.mnt), expected)
        self.mirror.umount()

if __name__ == "__main__":
    harness.main()
