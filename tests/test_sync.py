#!/usr/bin/env python3
"""tierfs sync, with rsync as the oracle: random trees with odd names, symlinks and hard
links synced with a table of options must give the tree `rsync -a` gives with the
corresponding options; every ordered pair of side kinds (directory, S3 on radosgw, RADOS,
Azurite, volumes on SQLite and on Redis) carries a tree intact; incremental rounds copy
exactly what changed; a run killed with SIGKILL and run again with --checkpoint ends with
rsync's tree and exact counts; bad input fails clearly and loses nothing."""
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from sync_helpers import Sides, cache_dir, compare_with_rsync, contents, make_tree, rsync, side_args, sync  # noqa: E402

# (name, tierfs sync options, rsync options, compare_trees options)
TABLE = [
    ("archive", ["--dirs", "--perms", "--links", "--list-threads", "8"], ["-a"], {}),
    ("prune-empty", ["--perms", "--links"], ["-am"], {}),
    ("no-perms", ["--dirs", "--links"], ["-rlt", "--no-perms"], {"owner": False}),
    ("hard-links", ["--dirs", "--perms", "--links", "--hard-links"], ["-aH"], {}),
    ("delete", ["--dirs", "--perms", "--links", "--delete-dst"], ["-a", "--delete"], {}),
    ("filters", ["--dirs", "--perms", "--links", "--include", "keep*.log", "--exclude", "*.log", "--exclude",
                 "deep3/", "--include", "/wide/***", "--exclude", "/w*"],
     ["-a", "--include", "keep*.log", "--exclude", "*.log", "--exclude", "deep3/", "--include", "/wide/***",
      "--exclude", "/w*"], {}),
    ("existing", ["--dirs", "--perms", "--links", "--existing"], ["-a", "--existing"], {}),
    ("ignore-existing", ["--dirs", "--perms", "--links", "--ignore-existing"], ["-a", "--ignore-existing"], {}),
    ("update", ["--dirs", "--perms", "--links", "--update"], ["-a", "--update"], {}),
    ("sizes", ["--dirs", "--perms", "--links", "--min-size", "1K", "--max-size", "100K"],
     ["-a", "--min-size=1K", "--max-size=100K"], {}),
    ("xattrs", ["--dirs", "--perms", "--links", "--xattrs"], ["-aX"], {"xattrs": True}),
    ("checksum", ["--dirs", "--perms", "--links", "--checksum"], ["-ac"], {}),
]


def prepare_dst(path, seed):
    """A destination that already holds some of the source (same, older, newer, changed)
    and things the source does not have."""
    os.makedirs(path)
    make_tree(path, seed, nfiles=30, symlinks=False, hardlinks=False)
    with open(os.path.join(path, "extra only here"), "wb") as f:
        f.write(b"extra")
    os.makedirs(os.path.join(path, "extra dir", "sub"))
    with open(os.path.join(path, "extra dir", "sub", "f"), "wb") as f:
        f.write(b"x")
    t = time.time() + 10 ** 6  # newer than anything in the source
    os.utime(os.path.join(path, "extra only here"), (t, t))


class SyncOracleTest(harness.TierFSTestCase):
    AUTO_MOUNT = False

    def setUp(self):
        super().setUp()
        self.tmp = self.local_tmpdir()
        self.src = os.path.join(self.tmp, "src")
        files = make_tree(self.src, seed=7)
        # Some names the filters care about, and xattrs.
        for name in ("keep-me.log", "drop.log"):
            with open(os.path.join(self.src, "wide", name), "wb") as f:
                f.write(name.encode())
        os.setxattr(os.path.join(self.src, files[5]), "user.origin", b"sync test")
        # A destination sharing part of the tree: made from the same seed, some files then
        # changed so that each update policy has something to decide.
        self.pre = os.path.join(self.tmp, "pre")
        prepare_dst(self.pre, seed=7)
        rng = random.Random(3)
        for dirpath, _, filenames in os.walk(self.pre):
            for n in filenames:
                if rng.random() < 0.3:
                    p = os.path.join(dirpath, n)
                    with open(p, "ab") as f:
                        f.write(b"changed")
                    if rng.random() < 0.5:
                        os.utime(p, (time.time() + 1000, time.time() + 1000))

    def test_table_against_rsync(self):
        for name, ours, theirs, cmp in TABLE:
            with self.subTest(options=name):
                dr = os.path.join(self.tmp, name + "-rsync")
                dt = os.path.join(self.tmp, name + "-tierfs")
                for d in (dr, dt):
                    subprocess.check_call(["cp", "-a", self.pre, d])
                rsync(*theirs, self.src + "/", dr + "/")
                rc, summary, err = sync(self.src, dt, *ours)
                self.assertEqual(summary["failed"], 0, err)
                self.assertEqual(summary["found"], summary["copied"] + summary["skipped"] + summary["failed"])
                diffs = compare_with_rsync(dr, dt, self.src, **cmp)
                self.assertEqual(diffs, [], "%s: tierfs sync differs from rsync %s\n%s" %
                                 (name, " ".join(theirs), "\n".join(diffs[:20])))
                # A second round finds nothing to copy.
                rc, again, err = sync(self.src, dt, *ours)
                self.assertEqual(again["copied"], 0, "%s: second round copied\n%s" % (name, err))
                self.assertEqual(again["deleted"], 0, name)
                shutil.rmtree(dr)
                shutil.rmtree(dt)

    def test_files_from_and_key_range(self):
        listed = os.path.join(self.tmp, "list")
        with open(listed, "w") as f:
            f.write("wide/w001\ndeep0/deep1\nwide/w0/inner\n")
        dr, dt = os.path.join(self.tmp, "ff-rsync"), os.path.join(self.tmp, "ff-tierfs")
        rsync("-a", "-r", "--files-from=" + listed, self.src + "/", dr + "/")
        sync(self.src, dt, "--dirs", "--perms", "--links", "--files-from", listed)
        self.assertEqual(harness.compare_trees(dr, dt, dir_mtime=False), [])
        # --start/--end: exactly the keys in the range, both ends included.
        dk = os.path.join(self.tmp, "range")
        rc, s, err = sync(self.src, dk, "--start", "wide/w010", "--end", "wide/w019")
        self.assertEqual(sorted(os.listdir(os.path.join(dk, "wide"))), ["w%03d" % i for i in range(10, 20)])
        self.assertEqual(s["copied"], 10, err)

    def test_dry_run_changes_nothing(self):
        dt = os.path.join(self.tmp, "dry")
        subprocess.check_call(["cp", "-a", self.pre, dt])
        before = harness.snapshot(dt)
        rc, out, err = harness.tierfs("sync", self.src, dt, "--dirs", "--delete-dst", "--dry-run")
        self.assertEqual(rc, 0, err)
        self.assertEqual(harness.diff_snapshots(before, harness.snapshot(dt)), [])
        self.assertIn("copy wide/w000", out)
        self.assertIn("delete extra only here", out)


class SidePairsTest(harness.TierFSTestCase):
    """Every ordered pair of side kinds carries a tree intact: one chain through all of them
    (an Eulerian circuit of the complete directed graph), each hop into a fresh location."""
    AUTO_MOUNT = False

    def test_every_pair(self):
        tmp = self.local_tmpdir()
        sides = Sides(tmp)
        kinds = sides.kinds()
        src = os.path.join(tmp, "origin")
        make_tree(src, seed=11, nfiles=40, symlinks=False, hardlinks=False, newline=False, modes=False)
        want_files, want_dirs = contents(src)
        # Hierholzer's walk over all ordered pairs.
        edges = {a: [b for b in kinds if b != a] for a in kinds}
        stack, circuit = ["dir"], []
        while stack:
            v = stack[-1]
            if edges[v]:
                stack.append(edges[v].pop())
            else:
                circuit.append(stack.pop())
        circuit.reverse()
        url, extra = src, []
        hops = 0
        for a, b in zip(circuit, circuit[1:]):
            nurl, nextra = sides.new(b)
            # --check-new reads each copy back through the destination side (from one volume
            # into another, by its own name there, not by the source's inode number).
            rc, s, err = sync(url, nurl, "--dirs", "--check-new", *side_args(extra, "src"), *side_args(nextra, "dst"))
            self.assertEqual(s["checked"], len(want_files), "%s -> %s: %r" % (a, b, s))
            self.assertEqual((s["failed"], s["copied"], s["skipped"]), (0, s["found"], 0),
                             "%s -> %s: %r\n%s" % (a, b, s, err))
            self.assertEqual(s["found"], len(want_files) + len(want_dirs), "%s -> %s" % (a, b))
            # Incremental: the same hop again copies nothing.
            rc, s2, err = sync(url, nurl, "--dirs", *side_args(extra, "src"), *side_args(nextra, "dst"))
            self.assertEqual(s2["copied"], 0, "%s -> %s again: %r\n%s" % (a, b, s2, err))
            if b == "dir":
                self.assertEqual(contents(nurl), (want_files, want_dirs), "%s -> %s" % (a, b))
            url, extra = nurl, nextra
            hops += 1
        self.assertEqual(hops, len(kinds) * (len(kinds) - 1))
        self.assertEqual(circuit[-1], "dir")
        self.assertEqual(contents(url), (want_files, want_dirs))


    def test_large_objects_go_up_in_bounded_parts(self):
        """Objects above --part-size go up as multipart uploads, --parts-in-flight parts at a
        time over all of them, and come back byte for byte (S3 on radosgw, Azurite)."""
        tmp = self.local_tmpdir()
        sides = Sides(tmp)
        kinds = [k for k in ("s3", "azure") if k in sides.kinds()]
        if not kinds:
            self.skipTest("needs the test servers (S3, Azurite)")
        src = os.path.join(tmp, "big")
        os.makedirs(src)
        rng = random.Random(4)
        for i, size in enumerate((23 << 20, 11 << 20, 5 << 20)):  # 5, 3 and 1 parts of 5 MiB
            with open(os.path.join(src, "b%d" % i), "wb") as f:
                f.write(rng.randbytes(size))
        for kind in kinds:
            with self.subTest(kind=kind):
                url, extra = sides.new(kind)
                rc, s, err = sync(src, url, "--part-size", str(5 << 20), "--parts-in-flight", "2", "--threads", "3",
                                  *side_args(extra, "dst"))
                self.assertEqual((s["copied"], s["failed"], s["bytes"]), (3, 0, 39 << 20), err)
                back = os.path.join(tmp, "back-" + kind)
                sync(url, back, *side_args(extra, "src"))
                self.assertEqual(contents(back), contents(src))


def in_a_bucket_and_back(srv, src, tmp, name):
    """src copied into a new bucket of the test S3 server and back into tmp/dst, so that a
    round from the bucket to dst only lists: (S3 port, bucket, source credentials, dst)."""
    bucket = harness.unique(name)
    port = int(srv["s3_endpoint"].rsplit(":", 1)[1])
    creds = ["--src-access-key", srv["s3_access_key"], "--src-secret-key", srv["s3_secret_key"]]
    dcreds = ["--dst-access-key", srv["s3_access_key"], "--dst-secret-key", srv["s3_secret_key"]]
    sync(src, "%s/%s/" % (srv["s3_endpoint"], bucket), *dcreds)
    dst = os.path.join(tmp, "dst")
    sync("%s/%s/" % (srv["s3_endpoint"], bucket), dst, *creds)
    return port, bucket, creds, dst


class ParallelListingTest(harness.TierFSTestCase):
    """--list-threads on object stores: the first level is listed with the delimiter '/' and
    each prefix on a listing thread; the stream must be the flat listing's (S3 on radosgw and
    Azurite list by level; RADOS cannot and lists flat)."""
    AUTO_MOUNT = False

    def test_same_tree_as_a_flat_listing(self):
        tmp = self.local_tmpdir()
        sides = Sides(tmp)
        src = os.path.join(tmp, "origin")
        make_tree(src, seed=5, nfiles=120, symlinks=False, hardlinks=False, newline=False, modes=False)
        for i in range(40):  # more top-level prefixes than are read ahead (8 threads x 4)
            os.makedirs(os.path.join(src, "p%02d" % i, "q"))
            for name in ("f", "q/g", "f.txt"):
                with open(os.path.join(src, "p%02d" % i, name), "wb") as f:
                    f.write(b"%d" % i)
        kinds = [k for k in ("s3", "azure", "rados") if k in sides.kinds()]
        if not kinds:
            self.skipTest("needs the test servers (S3, RADOS, Azurite)")
        for kind in kinds:
            with self.subTest(kind=kind):
                url, extra = sides.new(kind)
                rc, s, err = sync(src, url, "--dirs", *side_args(extra, "dst"))
                self.assertEqual(s["failed"], 0, err)
                got = []
                for threads in ("1", "8"):
                    d = os.path.join(tmp, "%s-%s" % (kind, threads))
                    rc, s, err = sync(url, d, "--dirs", "--list-threads", threads, *side_args(extra, "src"))
                    self.assertEqual(s["failed"], 0, err)
                    got.append((s["found"], contents(d)))
                self.assertEqual(got[1], got[0])
                self.assertEqual(got[1][1], contents(src))

    def test_a_prefix_that_fails_to_list_deletes_nothing(self):
        srv = harness.servers()
        from s3proxy import S3Proxy
        tmp = self.local_tmpdir()
        src = os.path.join(tmp, "src")
        for i in range(30):
            os.makedirs(os.path.join(src, "d%02d" % i))
            for j in range(20):
                with open(os.path.join(src, "d%02d" % i, "f%02d" % j), "wb") as f:
                    f.write(b"%d" % j)
        port, bucket, creds, dst = in_a_bucket_and_back(srv, src, tmp, "synclvl")
        proxy = S3Proxy(port)
        self.addCleanup(proxy.close)
        proxy.fail_after = {"GET": 6}  # the probe, the level and a few prefixes pass
        rc, s, err = sync("http://127.0.0.1:%d/%s/" % (proxy.port, bucket), dst, "--delete-dst", "--list-threads",
                          "4", *creds, "--io-timeout", "5", check=False)
        self.assertEqual(rc, 2, err)
        self.assertEqual(sum(len(f) for _, _, f in os.walk(dst)), 600, "a failed listing deleted files:\n" + err)
        self.assertIn("list", err.lower())
        self.assertTrue(any("delimiter" in p for _, p in proxy.paths), "the listing was not by level")


class IncrementalTest(harness.TierFSTestCase):
    AUTO_MOUNT = False

    def test_rounds_copy_exactly_what_changed(self):
        tmp = self.local_tmpdir()
        src = os.path.join(tmp, "src")
        files = make_tree(src, seed=5, symlinks=False, hardlinks=False)
        vol = Sides(tmp).volume("sqlite") + ":/data"
        rc, s, err = sync(src, vol, "--dirs", "--perms")
        n = s["found"]
        self.assertEqual(s["copied"], n)
        rng = random.Random(1)
        changed = rng.sample(sorted(set(files)), 7)
        for rel in changed:
            with open(os.path.join(src, rel), "ab") as f:
                f.write(b"more")
        os.remove(os.path.join(src, "wide", "w100"))
        rc, s, err = sync(src, vol, "--dirs", "--perms", "--delete-dst", "--check-new")
        self.assertEqual((s["found"], s["copied"], s["deleted"], s["failed"]), (n - 1, 7, 1, 0), err)
        self.assertEqual(s["checked"], 7)
        self.assertEqual(s["skipped"], n - 1 - 7)
        back = os.path.join(tmp, "back")
        sync(vol, back, "--dirs", "--perms")
        self.assertEqual(harness.compare_trees(src, back), [])


    def test_a_directory_larger_than_one_sorted_run(self):
        """A local directory past 65,536 names is sorted in runs spilled to $TMPDIR and
        merged (sorted_names.h): both sides of this round are such directories, and the
        merge must be exact (nothing copied twice, nothing deleted that should stay), and
        the spill must leave nothing behind."""
        tmp = self.local_tmpdir()
        src, dst, spill = (os.path.join(tmp, d) for d in ("src", "dst", "spill"))
        os.makedirs(src)
        os.makedirs(spill)
        names = ["n%06d %s" % (i, "\u00e9" if i % 7 else "%") for i in range(70000)]
        random.Random(3).shuffle(names)  # created in no order, so readdir's order is no help
        for n in names:
            open(os.path.join(src, n), "wb").close()
        subprocess.check_call(["cp", "-a", src, dst])
        for n in names[:100]:
            os.remove(os.path.join(dst, n))
        for i in range(50):
            open(os.path.join(dst, "n%06d extra" % (i * 1000)), "wb").close()
        env = dict(os.environ, TMPDIR=spill)
        rc, s, err = sync(src, dst, "--delete-dst", env=env)
        self.assertEqual((s["found"], s["copied"], s["skipped"], s["deleted"], s["failed"]),
                         (70000, 100, 69900, 50, 0), err)
        self.assertEqual(sorted(os.listdir(dst)), sorted(names))
        self.assertEqual(os.listdir(spill), [])

    def test_removing_a_directory_keeps_its_parents_time(self):
        """A directory --delete-dst removes is gone before its parent's time is set
        (removing it changes the parent's time; found by the stateful rounds)."""
        tmp = self.local_tmpdir()
        src = os.path.join(tmp, "src")
        os.makedirs(os.path.join(src, "keep", "gone", "deeper"))
        rc, s, err = sync(src, os.path.join(tmp, "dst"), "--dirs", "--perms")
        vol = Sides(tmp).volume("sqlite") + ":/data"
        rc, s, err = sync(src, vol, "--dirs", "--perms")
        shutil.rmtree(os.path.join(src, "keep", "gone"))
        os.utime(os.path.join(src, "keep"), (1600000000, 1600000000))
        for dst in (os.path.join(tmp, "dst"), vol):
            rc, s, err = sync(src, dst, "--dirs", "--perms", "--delete-dst")
            self.assertEqual((s["deleted"], s["failed"]), (2, 0), err)
        back = os.path.join(tmp, "back")
        sync(vol, back, "--dirs", "--perms")
        for tree in (os.path.join(tmp, "dst"), back):
            self.assertEqual(os.lstat(os.path.join(tree, "keep")).st_mtime_ns, 1600000000 * 10 ** 9, tree)
            self.assertFalse(os.path.lexists(os.path.join(tree, "keep", "gone")))


class ChangesTest(harness.TierFSTestCase):
    """--changes: rounds from a volume read its change log and list only what changed;
    changes made through a real mount (renames of directories, removals, appends, modes,
    links) come out as rsync of the mount would have them."""
    AUTO_MOUNT = False

    OPTS = ["--dirs", "--perms", "--links", "--delete-dst", "--list-threads", "4"]

    def round(self, vol, back, state, compare=True):
        rc, s, err = sync(vol.meta_url + ":/data", back, *(self.OPTS + ["--changes", state]))
        self.assertEqual(s["failed"], 0, err)
        self.assertEqual(s["found"], s["copied"] + s["skipped"], s)
        if compare:
            # Without --hard-links a file's second name is a copy, as with rsync -a.
            self.assertEqual(harness.compare_trees(os.path.join(vol.mnt, "data"), back, hard_links=False), [])
        return s

    def test_rounds_list_only_what_the_log_names(self):
        tmp = self.local_tmpdir()
        vol = harness.Volume(name="chg")
        self.addCleanup(vol.cleanup)
        vol.format("--changelog-hours", "1")
        vol.mount()
        data = os.path.join(vol.mnt, "data")
        make_tree(data, seed=11, nfiles=120, hardlinks=False)
        for i in range(30):  # directories nobody touches: an incremental round must not list them
            d = os.path.join(data, "still", "s%02d" % i)
            os.makedirs(d)
            for j in range(10):
                with open(os.path.join(d, "f" if j == 0 else "g%d" % j), "wb") as f:
                    f.write(b"%d" % i)
        os.sync()
        back, state = os.path.join(tmp, "back"), os.path.join(tmp, "state")
        s = self.round(vol, back, state)
        self.assertEqual(s["round"], "full")
        total = s["found"]
        s = self.round(vol, back, state)
        self.assertEqual((s["round"], s["found"], s["copied"], s["change_records"]), ("incremental", 0, 0, 0))

        # Changes through the mount.
        with open(os.path.join(data, "wide", "w007"), "ab") as f:
            f.write(b"appended")
        os.rename(os.path.join(data, "deep0", "deep1", "deep2", "deep3", "deep4", "deep5"),
                  os.path.join(data, "wide", "moved deep5"))
        shutil.rmtree(os.path.join(data, "empty"))
        os.makedirs(os.path.join(data, "new dir", "inner"))
        with open(os.path.join(data, "new dir", "inner", "n"), "wb") as f:
            f.write(b"new")
        os.chmod(os.path.join(data, "wide", "w008"), 0o600)
        os.symlink("wide/w009", os.path.join(data, "new link"))
        os.truncate(os.path.join(data, "wide", "w010"), 0)
        os.rename(os.path.join(data, "wide", "w011"), os.path.join(data, "still", "s03", "w011 moved"))
        os.setxattr(os.path.join(data, "wide", "w012"), "user.k", b"v")
        os.utime(os.path.join(data, "still", "s04", "f"), (1500000000, 1500000000))
        s = self.round(vol, back, state)
        self.assertEqual(s["round"], "incremental")
        self.assertGreater(s["change_records"], 8)
        self.assertLess(s["found"], total // 2, s)  # untouched directories were not listed
        self.assertGreater(s["copied"], 0)
        self.assertGreater(s["deleted"], 0)
        s = self.round(vol, back, state)
        self.assertEqual((s["round"], s["found"], s["copied"], s["deleted"]), ("incremental", 0, 0, 0))

        # One file changed in a wide directory: only it and its directory are looked at.
        with open(os.path.join(data, "wide", "w030"), "ab") as f:
            f.write(b"one more")
        s = self.round(vol, back, state)
        self.assertEqual((s["round"], s["found"], s["copied"]), ("incremental", 2, 1), s)
        # A directory moved in, then a file in it changed: the directory is on the source
        # only, so all of it is copied, not just the file the log names below it.
        os.rename(os.path.join(data, "still", "s07"), os.path.join(data, "moved s07"))
        s = self.round(vol, back, state)
        os.rename(os.path.join(data, "moved s07"), os.path.join(data, "wide", "s07 again"))
        with open(os.path.join(data, "wide", "s07 again", "g3"), "ab") as f:
            f.write(b"changed after the move")
        s = self.round(vol, back, state)
        self.assertEqual(s["copied"], 10 + 1, s)  # its 10 files, and the directory itself

        # The destination changed behind sync's back: incremental rounds trust it, a round
        # without --changes repairs it.
        os.remove(os.path.join(back, "still", "s05", "f"))
        s = self.round(vol, back, state, compare=False)
        self.assertEqual((s["round"], s["found"]), ("incremental", 0))
        self.assertFalse(os.path.exists(os.path.join(back, "still", "s05", "f")))
        rc, s, err = sync(vol.meta_url + ":/data", back, *(self.OPTS + ["--changes", state, "--exclude", "/x/"]))
        self.assertEqual((s["round"], s["copied"], s["failed"]), ("full", 1, 0), err)  # other options: full

        # A file with two names changed: its second name's directory is not in the log.
        os.link(os.path.join(data, "wide", "w020"), os.path.join(data, "still", "s06", "second name"))
        s = self.round(vol, back, state)
        with open(os.path.join(data, "wide", "w020"), "ab") as f:
            f.write(b"both names")
        s = self.round(vol, back, state)
        self.assertEqual(s["round"], "full")
        s = self.round(vol, back, state)
        self.assertEqual(s["round"], "incremental")

        # changelog prints the records as JSON lines, in order.
        rc, out, err = harness.tierfs("changelog", vol.meta_url, "--from", "1", "--limit", "5")
        self.assertEqual(rc, 0, err)
        seqs = [json.loads(line)["seq"] for line in out.splitlines()]
        self.assertEqual(seqs, [1, 2, 3, 4, 5])

    def test_a_redis_volume_as_the_source(self):
        """The change log on Redis (WATCH/MULTI numbering): rounds from a Redis volume changed
        through the client library (sync into it) are incremental and exact."""
        tmp = self.local_tmpdir()
        sides = Sides(tmp)
        if "redis" not in sides.kinds():
            self.skipTest("needs the test Redis server")
        vol = sides.volume("redis") + ":/data"
        src = os.path.join(tmp, "src")
        make_tree(src, seed=17, nfiles=80, symlinks=False, hardlinks=False)
        opts = ["--dirs", "--delete-dst"]
        sync(src, vol, *opts)
        back, state = os.path.join(tmp, "back"), os.path.join(tmp, "state")
        rc, s, err = sync(vol, back, *opts, "--changes", state)
        self.assertEqual(s["round"], "full", err)
        total = s["found"]
        rc, s, err = sync(vol, back, *opts, "--changes", state)
        self.assertEqual((s["round"], s["found"], s["copied"]), ("incremental", 0, 0), err)
        # Change the source tree and carry the changes into the volume: appends, a removal,
        # a new directory.
        files = sorted(os.path.join(d, f) for d, _, fs in os.walk(src) for f in fs)
        for p in files[:5]:
            with open(p, "ab") as f:
                f.write(b"more")
        os.remove(files[7])
        os.makedirs(os.path.join(src, "added", "deeper"))
        with open(os.path.join(src, "added", "deeper", "n"), "wb") as f:
            f.write(b"new")
        sync(src, vol, *opts)
        rc, s, err = sync(vol, back, *opts, "--changes", state)
        self.assertEqual(s["round"], "incremental", err)
        self.assertGreater(s["copied"], 5, s)
        self.assertEqual(s["deleted"], 1, s)
        self.assertLess(s["found"], total // 2, s)
        self.assertEqual(contents(back), contents(src))

    def test_status_and_fsck_know_the_log(self):
        tmp = self.local_tmpdir()
        vol = harness.Volume(name="chgfsck")
        self.addCleanup(vol.cleanup)
        vol.format("--changelog-hours", "1")
        src = os.path.join(tmp, "src")
        make_tree(src, seed=4, nfiles=20, symlinks=False, hardlinks=False)
        sync(src, vol.meta_url + ":/data", "--dirs")
        rc, out, err = harness.tierfs("changelog", vol.meta_url)
        self.assertEqual(rc, 0, err)
        seqs = [json.loads(line)["seq"] for line in out.splitlines()]
        self.assertGreater(len(seqs), 20)
        rc, out, err = harness.tierfs("status", vol.meta_url, "--json")
        log = json.loads(out)["changelog"]
        self.assertEqual((log["hours"], log["first_seq"], log["last_seq"]), (1, seqs[0], seqs[-1]))

        def problems():
            rc, out, err = harness.tierfs("fsck", vol.meta_url, "--json", "--skip-objects")
            return json.loads(out)["problems"]

        self.assertEqual(problems(), [])
        # A record gone from the middle of the log, and a later one damaged: fsck names both.
        import sqlite3
        db = sqlite3.connect(vol.meta_db)
        # The SQLite engine keeps the records ("H" seq) in a table of their own (sqlite_txn.h).
        gone = seqs[len(seqs) // 2]
        self.assertEqual(db.execute("DELETE FROM log WHERE seq = ?", (gone,)).rowcount, 1)
        self.assertEqual(db.execute("UPDATE log SET v = ? WHERE seq = ?", (b"\x00", seqs[-2])).rowcount, 1)
        db.commit()
        db.close()
        found = problems()
        self.assertEqual(sorted(p["kind"] for p in found), ["change-log-gap", "damaged-record"], found)
        gap = [p for p in found if p["kind"] == "change-log-gap"][0]
        self.assertIn("records %d to %d are missing" % (gone, gone), gap["detail"])

    def test_sources_without_a_log(self):
        tmp = self.local_tmpdir()
        vol = harness.Volume(name="nolog")
        self.addCleanup(vol.cleanup)
        vol.format()
        src = os.path.join(tmp, "src")
        make_tree(src, seed=3, nfiles=10)
        sync(src, vol.meta_url + ":/data", "--dirs")
        rc, s, err = sync(vol.meta_url + ":/data", os.path.join(tmp, "b"), "--dirs", "--changes", os.path.join(tmp, "st"))
        self.assertEqual((rc, s["round"]), (0, "full"))
        self.assertIn("keeps no change log", err)
        rc, out, err = harness.tierfs("sync", src, os.path.join(tmp, "c"), "--changes", os.path.join(tmp, "st2"))
        self.assertEqual(rc, 2)
        self.assertIn("--changes needs a TierFS volume as the source", err)
        rc, out, err = harness.tierfs("changelog", vol.meta_url)
        self.assertNotEqual(rc, 0)
        self.assertIn("keeps no change log", err)


class CheckpointTest(harness.TierFSTestCase):
    AUTO_MOUNT = False

    def test_kill_9_and_resume_is_exact(self):
        tmp = self.local_tmpdir()
        src = os.path.join(tmp, "src")
        make_tree(src, seed=21, nfiles=120)
        oracle = os.path.join(tmp, "oracle")
        rsync("-aH", src + "/", oracle + "/")
        for trial, dst_kind in enumerate(["dir", "sqlite"]):
            with self.subTest(dst=dst_kind):
                sides = Sides(os.path.join(tmp, "t%d" % trial))
                os.makedirs(sides.tmp)
                dst, _ = sides.new(dst_kind)
                cp = os.path.join(tmp, "cp%d" % trial)
                args = [harness.tierfs_bin(), "sync", src, dst, "--dirs", "--perms", "--links", "--hard-links",
                        "--checkpoint", cp, "--threads", "3", "--bwlimit", "2M", "--json", "--cache-dir", cache_dir()]
                rng = random.Random(trial)
                kills = 0
                for attempt in range(4):
                    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    time.sleep(rng.uniform(0.3, 1.5))
                    if p.poll() is None:
                        p.send_signal(signal.SIGKILL)
                        kills += 1
                    p.wait()
                self.assertGreater(kills, 0, "the runs ended before any kill: slow them down")
                rc, s, err = sync(src, dst, "--dirs", "--perms", "--links", "--hard-links", "--checkpoint", cp)
                self.assertFalse(os.path.exists(cp), "the checkpoint is removed when the run ends")
                n_keys = sum(len(d) + len(f) for _, d, f in os.walk(src))
                self.assertEqual(s["found"], n_keys, err)
                self.assertEqual((s["copied"], s["skipped"], s["failed"]), (n_keys, 0, 0),
                                 "every key was copied once over the killed runs: %r\n%s" % (s, err))
                inodes = {}
                for d, _, fs in os.walk(src):
                    for f in fs:
                        st = os.lstat(os.path.join(d, f))
                        if not os.path.islink(os.path.join(d, f)):
                            inodes[st.st_ino] = st.st_size
                self.assertEqual(s["bytes"], sum(inodes.values()), "each hard-link group's data counted once")
                back = dst
                if dst_kind != "dir":
                    back = os.path.join(tmp, "back%d" % trial)
                    sync(dst, back, "--dirs", "--perms", "--links", "--hard-links")
                self.assertEqual(harness.compare_trees(oracle, back), [])


class BadInputTest(harness.TierFSTestCase):
    AUTO_MOUNT = False

    def test_unreachable_and_wrong_credentials(self):
        tmp = self.local_tmpdir()
        src = os.path.join(tmp, "src")
        make_tree(src, seed=2, nfiles=5, symlinks=False, hardlinks=False)
        rc, s, err = sync(src, "http://127.0.0.1:1/bucket/p/", "--dst-access-key", "a", "--dst-secret-key", "b",
                          "--io-timeout", "3", check=False)
        self.assertEqual(rc, 2, err)
        self.assertIn("127.0.0.1:1", err)
        rc, s, err = sync("/nonexistent/dir", os.path.join(tmp, "d"), check=False)
        self.assertEqual(rc, 2)
        self.assertIn("/nonexistent/dir", err)
        self.assertFalse(os.path.exists(os.path.join(tmp, "d")))
        rc, s, err = sync(src, "sqlite3://" + os.path.join(tmp, "none.db") + ":/x", check=False)
        self.assertEqual(rc, 2)
        self.assertIn("format", err.lower())
        if os.environ.get("TIERFS_TEST_REDIS_URL"):
            srv = harness.servers()
            rc, s, err = sync(src, "%s/%s/p/" % (srv["s3_endpoint"], harness.unique("bad")),
                              "--dst-access-key", srv["s3_access_key"], "--dst-secret-key", "wrong", check=False)
            self.assertEqual(rc, 2, err)
            self.assertRegex(err.lower(), "signature|denied|refused|forbidden|403")

    def test_full_destination_loses_nothing(self):
        tmp = self.local_tmpdir()
        src = os.path.join(tmp, "src")
        os.makedirs(src)
        for i in range(20):
            with open(os.path.join(src, "f%02d" % i), "wb") as f:
                f.write(os.urandom(200 << 10))
        small = os.path.join(tmp, "small")
        os.makedirs(small)
        harness.run("mount", "-t", "tmpfs", "-o", "size=1M", "tmpfs", small)
        self.addCleanup(harness.run, "umount", "-l", small)
        rc, s, err = sync(src, small, check=False)
        self.assertEqual(rc, 1, err)
        self.assertGreater(s["failed"], 0)
        self.assertEqual(s["found"], s["copied"] + s["failed"])
        self.assertIn("No space left", err)
        landed = sorted(os.listdir(small))
        self.assertEqual(len(landed), s["copied"], "every file reported copied is there, and only those")
        for n in landed:
            self.assertFalse(n.startswith(".tierfs-sync."), "a half-written temporary file was left: " + n)
            with open(os.path.join(src, n), "rb") as a, open(os.path.join(small, n), "rb") as b:
                self.assertEqual(a.read(), b.read(), n)

    def test_listing_that_fails_halfway_deletes_nothing(self):
        srv = harness.servers()
        from s3proxy import S3Proxy
        tmp = self.local_tmpdir()
        src = os.path.join(tmp, "src")
        os.makedirs(src)
        for i in range(2500):  # three pages of 1000 keys
            with open(os.path.join(src, "k%04d" % i), "wb") as f:
                f.write(b"%d" % i)
        port, bucket, creds, dst = in_a_bucket_and_back(srv, src, tmp, "syncfail")  # only listing is left
        proxy = S3Proxy(port)
        self.addCleanup(proxy.close)
        # The S3 source fails after its first page: the sync must stop, not delete the rest.
        proxy.fail_after = {"GET": 2}  # the probe and the first page pass
        rc, s, err = sync("http://127.0.0.1:%d/%s/" % (proxy.port, bucket), dst, "--delete-dst", *creds,
                          "--io-timeout", "5", check=False)
        self.assertEqual(rc, 2, err)
        self.assertEqual(len(os.listdir(dst)), 2500, "a failed listing deleted files:\n" + err)
        self.assertIn("list", err.lower())

    def test_source_changing_during_copy(self):
        tmp = self.local_tmpdir()
        src = os.path.join(tmp, "src")
        os.makedirs(src)
        big = os.path.join(src, "growing")
        with open(big, "wb") as f:
            f.write(os.urandom(16 << 20))  # read in 4 MiB pieces, each followed by 4 s of --bwlimit
        dst = os.path.join(tmp, "dst")
        p = subprocess.Popen([harness.tierfs_bin(), "sync", src, dst, "--bwlimit", "1M", "--json"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(1.0)
        os.truncate(big, 1 << 20)  # shrinks under the copy
        out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 1, err)
        self.assertIn(b"became shorter while it was copied", err)
        self.assertEqual(os.listdir(dst), [], "nothing half-copied is visible")


if __name__ == "__main__":
    harness.main()
