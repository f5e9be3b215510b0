"""Metrics, live statistics and the access log of a real mount: /metrics parses as the Prometheus text format
(python3-prometheus-client's parser) and its counters move with a workload (FUSE requests,
metadata transactions, object store requests and bytes, cache levels, process CPU and
memory), every series names the volume and mount point; a taken port makes the mount use
the next free one; `tierfs stats --once --json` reports rates and totals; a slow request is
logged with its path and the time it spent in metadata and the object store;
MOUNTPOINT/.accesslog streams requests made after it was opened, with paths, to root only,
and `tierfs profile` aggregates it live and from a saved copy.
"""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:  # a Python of its own (pyenv): Debian's python3-prometheus-client is pure Python
    import sys
    sys.path.append("/usr/lib/python3/dist-packages")
    from prometheus_client.parser import text_string_to_metric_families

import harness
from harness import msg, tierfs


def slurp(path):
    with open(path) as f:
        return f.read()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(addr):
    with urllib.request.urlopen("http://%s/metrics" % addr, timeout=10) as r:
        text = r.read().decode()
    samples = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            samples.setdefault(s.name, []).append((s.labels, s.value))
    return samples


def total(samples, name, **match):
    return sum(v for labels, v in samples.get(name, []) if all(labels.get(k) == x for k, x in match.items()))


class MetricsTest(harness.TierFSTestCase):
    PER_TEST = True
    AUTO_MOUNT = False

    def stats_json(self, mnt):
        return json.loads(os.getxattr(mnt, "tierfs.stats"))

    def test_metrics_parse_and_move_with_a_workload(self):
        vol = self.new_volume()
        self.addCleanup(vol.cleanup)
        vol.format()
        # The asked-for port is taken: the mount serves on the next free one.
        blocker = socket.socket()
        blocker.bind(("127.0.0.1", free_port()))
        blocker.listen(1)
        self.addCleanup(blocker.close)
        port = blocker.getsockname()[1]
        vol.mount("--metrics", "127.0.0.1:%d" % port, "--cache-dir", os.path.join(vol.dir, "cache"))
        addr = self.stats_json(vol.mnt)["metrics_addr"]
        self.assertTrue(addr.startswith("127.0.0.1:"), addr)
        self.assertGreater(int(addr.rsplit(":", 1)[1]), port)
        before = scrape(addr)
        data = os.urandom(3 << 20)
        for i in range(20):
            with open(os.path.join(vol.mnt, "f%d" % i), "wb") as f:
                f.write(data[: (i + 1) * 100000])
        os.sync()
        harness.run("sh", "-c", "echo 3 > /proc/sys/vm/drop_caches")
        for i in range(20):
            with open(os.path.join(vol.mnt, "f%d" % i), "rb") as f:
                self.assertEqual(f.read(), data[: (i + 1) * 100000])
        after = scrape(addr)
        moved = lambda name, **m: total(after, name, **m) - total(before, name, **m)  # noqa: E731
        self.assertGreaterEqual(moved("tierfs_fuse_op_duration_seconds_count", op="create"), 20)
        self.assertGreater(moved("tierfs_fuse_op_duration_seconds_count", op="write"), 0)
        self.assertGreater(moved("tierfs_fuse_op_duration_seconds_count", op="read"), 0)
        self.assertGreater(moved("tierfs_meta_txn_duration_seconds_count", kind="rw"), 20)
        self.assertGreater(moved("tierfs_object_request_duration_seconds_count", kind="put"), 0)
        self.assertGreaterEqual(moved("tierfs_object_bytes_total", direction="upload"), sum((i + 1) * 100000 for i in range(20)))
        self.assertGreater(moved("process_cpu_seconds_total"), 0)
        self.assertGreater(total(after, "process_resident_memory_bytes"), 1 << 20)
        # The reads after dropping the page cache went to the memory or disk cache, or the store.
        hits = sum(moved("tierfs_cache_hits_total", level=lv) for lv in ("memory", "disk"))
        gets = moved("tierfs_object_request_duration_seconds_count", kind="get")
        self.assertGreater(hits + gets, 0)
        self.assertGreater(total(after, "tierfs_cache_capacity_bytes", level="disk"), 0)
        # Histogram buckets are cumulative and end at the count.
        buckets = [(float(lb["le"]), v) for lb, v in after["tierfs_fuse_op_duration_seconds_bucket"]
                   if lb.get("op") == "write"]
        buckets.sort()
        self.assertEqual([v for _, v in buckets], sorted(v for _, v in buckets))
        self.assertEqual(buckets[-1][1], total(after, "tierfs_fuse_op_duration_seconds_count", op="write"))
        # Every series names the volume and the mount point.
        for name, series in after.items():
            for labels, _ in series:
                self.assertEqual(labels.get("volume"), vol.name, name)
                self.assertEqual(labels.get("mountpoint"), vol.mnt, name)

        # tierfs stats: rates over one interval and totals.
        rc, out, err = tierfs("stats", vol.mnt, "--once", "--json", "--interval", "0.5")
        self.assertEqual(rc, 0, msg(rc, out, err))
        st = json.loads(out)
        for section, fields in (("fuse", ("ops_per_s", "avg_ms")), ("meta", ("txns_per_s", "avg_ms", "retries_per_s")),
                                ("store", ("gets_per_s", "puts_per_s", "download_bytes_per_s", "upload_bytes_per_s")),
                                ("cache", ("memory_hit_pct", "disk_hit_pct")),
                                ("buffer", ("bytes", "uploads_in_flight")), ("process", ("cpu_pct", "rss_bytes"))):
            for field in fields:
                self.assertIn(field, st[section], (section, st))
        self.assertGreaterEqual(st["totals"]["upload_bytes"], sum((i + 1) * 100000 for i in range(20)))
        self.assertGreater(st["process"]["rss_bytes"], 1 << 20)
        rc, out, err = tierfs("stats", vol.mnt, "--count", "2", "--interval", "0.2")
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.assertEqual(len(out.strip().splitlines()), 3, out)  # header and two lines
        rc, out, err = tierfs("stats", vol.dir)
        self.assertNotEqual(rc, 0)
        self.assertIn("not the root of a TierFS mount", err)

    def test_a_second_mount_and_other_commands_take_the_next_port(self):
        vol = self.new_volume()
        self.addCleanup(vol.cleanup)
        vol.format()
        port = free_port()
        vol.mount("--metrics", "127.0.0.1:%d" % port)
        first = self.stats_json(vol.mnt)["metrics_addr"]
        self.assertEqual(first, "127.0.0.1:%d" % port)
        other = os.path.join(vol.dir, "other")
        os.mkdir(other)
        self.assertOk(vol.mount_at(other, "--metrics", "127.0.0.1:%d" % port), "second mount")
        second = self.stats_json(other)["metrics_addr"]
        self.assertNotEqual(second, first)  # not the same port shared (SO_REUSEPORT)
        self.assertEqual({lb["mountpoint"] for lb, _ in scrape(second)["process_threads"]}, {other})
        self.assertEqual({lb["mountpoint"] for lb, _ in scrape(first)["process_threads"]}, {vol.mnt})
        tierfs("umount", other)
        # Long-running commands serve the same while they run.
        rc, out, err = tierfs("fsck", vol.meta_url, "--metrics", "127.0.0.1:%d" % port)
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.assertRegex(err, r"tierfs fsck: metrics on http://127\.0\.0\.1:\d+/metrics")
        self.assertNotIn("127.0.0.1:%d/" % port, err)
        dump = os.path.join(vol.dir, "dump.json")
        rc, out, err = tierfs("dump", vol.meta_url, dump, "--metrics", "127.0.0.1:%d" % port)
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.assertRegex(err, r"tierfs dump: metrics on http://127\.0\.0\.1:\d+/metrics")
        rc, out, err = tierfs("load", "sqlite3://" + os.path.join(vol.dir, "copy.db"), dump,
                              "--metrics", "127.0.0.1:%d" % port)
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.assertRegex(err, r"tierfs load: metrics on http://127\.0\.0\.1:\d+/metrics")
        rc, out, err = tierfs("dump", vol.meta_url, dump, "--metrics", "nonsense")
        self.assertNotEqual(rc, 0)
        self.assertIn("--metrics", err)
        server = subprocess.Popen([harness.tierfs_bin(), "cache-server", vol.meta_url, "--cache-group", "m",
                                   "--cache-dir", os.path.join(vol.dir, "cs"), "--metrics", "127.0.0.1:%d" % port],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: server.poll() is None and server.kill())
        self.assertIn("serving cache group", server.stdout.readline())
        addr = None
        for line in server.stderr:
            if "metrics on http://" in line:
                addr = line.split("http://")[1].split("/metrics")[0]
                break
        samples = scrape(addr)
        self.assertEqual({lb["mountpoint"] for lb, _ in samples["process_threads"]}, {"cache-server"})
        self.assertIn("tierfs_cache_capacity_bytes", samples)
        server.terminate()
        server.wait(timeout=30)

    def test_metrics_off_and_a_bad_address(self):
        vol = self.new_volume()
        self.addCleanup(vol.cleanup)
        vol.format()
        res = vol.mount("--metrics", "nonsense", check=False)
        self.assertNotEqual(res[0], 0)
        self.assertIn("--metrics", res[2])
        vol.mount("--metrics", "0")
        self.assertEqual(self.stats_json(vol.mnt)["metrics_addr"], "")
        rc, out, err = tierfs("stats", vol.mnt, "--once", "--json", "--interval", "0.2")
        self.assertEqual(rc, 0, msg(rc, out, err))  # stats work without an HTTP endpoint

    def test_slow_requests_are_logged_with_their_path(self):
        vol = self.new_volume()
        self.addCleanup(vol.cleanup)
        vol.format()
        vol.mount("--metrics", "0", "--slow-op", "0.000001")
        os.makedirs(os.path.join(vol.mnt, "team", "data"))
        with open(os.path.join(vol.mnt, "team", "data", "model.bin"), "wb") as f:
            f.write(b"w" * 100000)
        os.rename(os.path.join(vol.mnt, "team", "data", "model.bin"), os.path.join(vol.mnt, "team", "model.bin"))
        with open(os.path.join(vol.mnt, "team", "model.bin"), "rb") as f:
            f.read()
        vol.umount()
        log = vol.read_log()
        self.assertIn("slow request: create /team/data/model.bin", log)
        self.assertIn("slow request: write /team/data/model.bin", log)
        # After the rename the file's path is its new one.
        self.assertIn("slow request: open /team/model.bin", log)
        self.assertRegex(log, r"slow request: mkdir /team/data \(inode \d+\) took [0-9.]+ s: [0-9.]+ s in metadata "
                              r"transactions, [0-9.]+ s in object store requests")

    def test_the_access_log_streams_requests_with_paths(self):
        vol = self.new_volume()
        self.addCleanup(vol.cleanup)
        vol.format()
        vol.mount("--metrics", "0")
        os.makedirs(os.path.join(vol.mnt, "proj"))
        self.assertNotIn(".accesslog", os.listdir(vol.mnt))  # hidden, like .trash
        saved = os.path.join(vol.dir, "access.log")
        reader = subprocess.Popen(["sh", "-c", "exec cat %s/.accesslog > %s" % (vol.mnt, saved)])
        self.addCleanup(lambda: reader.poll() is None and reader.kill())
        self.assertTrue(harness.wait_for(lambda: os.path.exists(saved), timeout=5))
        time.sleep(0.5)
        with open(os.path.join(vol.mnt, "proj", "weights.bin"), "wb") as f:
            f.write(b"x" * 10000)
        with open(os.path.join(vol.mnt, "proj", "weights.bin"), "rb") as f:
            f.read()
        self.assertTrue(harness.wait_for(lambda: "read /proj/weights.bin" in slurp(saved), timeout=10),
                        slurp(saved))
        reader.kill()
        reader.wait()
        log = slurp(saved)
        self.assertRegex(log, r"\d{4}\.\d\d\.\d\d [0-9:.]+ \[uid:0,gid:0,pid:\d+\] create /proj/weights.bin "
                              r"\(\d+\): OK <[0-9.]+>")
        self.assertRegex(log, r"write /proj/weights.bin \(\d+,0,10000\): OK")
        self.assertNotIn(" mkdir /proj", log)  # made before the log was opened
        # Only root may read it (it shows every user's requests); nobody writes it.
        other = subprocess.run([sys.executable, "-c", "import os,sys; os.setuid(1000); open(sys.argv[1], 'rb')",
                                os.path.join(vol.mnt, ".accesslog")], capture_output=True, text=True)
        self.assertIn("PermissionError", other.stderr)
        with self.assertRaises(OSError):
            open(os.path.join(vol.mnt, ".accesslog"), "wb")
        # profile: a saved log, and the live one.
        rc, out, err = tierfs("profile", saved, "--json")
        self.assertEqual(rc, 0, msg(rc, out, err))
        prof = json.loads(out)
        ops = {o["op"]: o for o in prof["ops"]}
        self.assertGreaterEqual(ops["write"]["count"], 1)
        self.assertIn("/proj/weights.bin", [p["path"] for p in prof["paths"]])
        live = subprocess.Popen([harness.tierfs_bin(), "profile", vol.mnt, "--duration", "2", "--json"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(0.7)
        for _ in range(5):
            os.listdir(os.path.join(vol.mnt, "proj"))
        out, err = live.communicate(timeout=30)
        self.assertEqual(live.returncode, 0, err)
        prof = json.loads(out)
        self.assertGreaterEqual({o["op"]: o for o in prof["ops"]}["opendir"]["count"], 5)


    def test_access_log_paths_come_from_names_the_kernel_was_given(self):
        # A path found by scanning the parent's entries costs a read of the whole directory:
        # files listed (readdirplus) or looked up by this mount are named from what it told
        # the kernel instead, checked with one read.
        vol = self.new_volume()
        self.addCleanup(vol.cleanup)
        vol.format()
        vol.mount()
        d = os.path.join(vol.mnt, "dataset")
        os.mkdir(d)
        for i in range(300):
            with open(os.path.join(d, "s%04d" % i), "wb") as f:
                f.write(b"%d" % i)
        vol.umount()
        addr = "127.0.0.1:%d" % free_port()
        vol.mount("--metrics", addr)
        saved = os.path.join(vol.dir, "access.log")
        reader = subprocess.Popen(["sh", "-c", "exec cat %s/.accesslog > %s" % (vol.mnt, saved)])
        self.addCleanup(lambda: reader.poll() is None and reader.kill())
        # The reader is attached once a request made after it started shows in the log.
        marker = os.path.join(vol.mnt, "marker")

        def attached():
            with open(marker, "wb"):
                pass
            return os.path.exists(saved) and "/marker" in slurp(saved)
        self.assertTrue(harness.wait_for(attached, timeout=10))
        names = sorted(os.listdir(d))
        for n in names:
            with open(os.path.join(d, n), "rb") as f:
                self.assertEqual(f.read(), b"%d" % int(n[1:]))
        self.assertTrue(harness.wait_for(lambda: "read /dataset/s0299" in slurp(saved), timeout=10))
        reader.kill()
        reader.wait()
        samples = scrape(addr)
        self.assertEqual(total(samples, "tierfs_path_resolutions_total", by="scan"), 0)
        self.assertGreaterEqual(total(samples, "tierfs_path_resolutions_total", by="name_hint"), 300)
        log = slurp(saved)
        for n in ("s0000", "s0150", "s0299"):
            self.assertRegex(log, r"open /dataset/%s \(\d+\): OK" % n)


    def test_more_access_log_readers_than_fuse_threads(self):
        # A reader waiting for lines must not hold a FUSE worker: with as many readers as
        # workers, the requests that make the lines could never be served (the mount hung).
        vol = self.new_volume()
        self.addCleanup(vol.cleanup)
        vol.format()
        vol.mount("--fuse-threads", "2", "--metrics", "0")
        saved = [os.path.join(vol.dir, "reader%d.log" % i) for i in range(3)]
        readers = [subprocess.Popen(["sh", "-c", "exec cat %s/.accesslog > %s" % (vol.mnt, p)]) for p in saved]
        for r in readers:
            self.addCleanup(lambda r=r: r.poll() is None and r.kill())
        time.sleep(1)
        work = subprocess.run([sys.executable, "-c", """if True:
            import os, sys
            m = sys.argv[1]
            for i in range(20):
                os.listdir(m)
                with open(os.path.join(m, "f%d" % i), "wb") as f:
                    f.write(b"x" * 100)
                with open(os.path.join(m, "f%d" % i), "rb") as f:
                    assert f.read() == b"x" * 100
            """, vol.mnt], capture_output=True, text=True, timeout=60)
        self.assertEqual(work.returncode, 0, work.stderr)
        for p in saved:
            self.assertTrue(harness.wait_for(lambda p=p: "create /f19" in slurp(p), timeout=10), slurp(p))
        for r in readers:  # readers stop at once when killed, and the mount unmounts
            r.kill()
            r.wait(timeout=10)
        vol.umount()


    def test_listing_a_directory_costs_linear_work(self):
        """Listing N entries takes each entry from the directory snapshot and encodes it about
        once (at most once more per READDIR reply, for the entry that did not fit): N work,
        not N^2 / (entries per reply) as when every reply copied all the entries after its
        offset. Counted by tierfs_readdir_entries_total, not timed."""
        vol = self.new_volume()
        self.addCleanup(vol.cleanup)
        vol.format()
        vol.mount()
        n = 20000
        d = os.path.join(vol.mnt, "big")
        os.mkdir(d)
        for i in range(n):
            os.close(os.open(os.path.join(d, "entry-with-a-longer-name-%06d" % i), os.O_CREAT | os.O_WRONLY, 0o644))

        def counters():
            m = self.stats_json(vol.mnt)["metrics"]
            return (m.get('tierfs_readdir_entries_total{step="snapshot"}', 0),
                    m.get('tierfs_readdir_entries_total{step="encoded"}', 0),
                    m.get('tierfs_fuse_op_duration_seconds_count{op="readdir"}', 0))

        for tool in (["ls", "-f"], ["ls", "-l"]):
            before = counters()
            rc, out, err = harness.run(*tool, d)
            self.assertEqual(rc, 0, err)
            after = counters()
            taken, encoded, replies = (a - b for a, b in zip(after, before))
            lines = out.splitlines()
            self.assertEqual(len([x for x in lines if "entry-with" in x]), n, tool)
            self.assertGreater(replies, 10, "%s: a 20k listing takes many READDIR replies" % tool)
            # ".", ".." and the entries, plus one entry per reply that did not fit
            bound = n + 2 + replies
            self.assertLessEqual(taken, bound, "%s: %d entries taken from the snapshot for %d listed in %d replies"
                                 % (tool, taken, n, replies))
            self.assertLessEqual(encoded, bound, "%s: %d entries encoded for %d listed in %d replies"
                                 % (tool, encoded, n, replies))
            self.assertGreaterEqual(encoded, n, tool)


if __name__ == "__main__":
    harness.main()
