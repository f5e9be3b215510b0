"""What bench/gateway.py measures and how it runs commands: the TierFS volume with its FUSE
mount and its S3 gateway, Ceph with radosgw (tests/servers.py), the tmpfs of the source files,
and the stopping, unmounting and removing of all of them (Servers), with Servers.measure,
which runs one measurement and reads the server's CPU time and peak RSS around it from /proc;
and the helpers that start and reap processes (client processes still running when
Servers.close runs are killed).

Importing this module sets the environment tests/servers.py reads at its import: ports offset
by TIERFS_TEST_PORT_OFFSET (default 700 here), a bluestore OSD over a sparse file of
TIERFS_CEPH_OSD_BYTES (default 48 GiB).
"""

import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests"))
os.environ.setdefault("TIERFS_TEST_PORT_OFFSET", "700")
os.environ["TIERFS_CEPH_BLUESTORE"] = "1"
os.environ.setdefault("TIERFS_CEPH_OSD_BYTES", str(48 << 30))
import servers  # noqa: E402 (reads the environment above)

MiB = 1 << 20
TICK = os.sysconf("SC_CLK_TCK")


def log(*a):
    print("[gateway.py %s]" % time.strftime("%H:%M:%S"), *a, flush=True)


LIVE = set()  # client processes running now (killed on exit)


def popen(cmd, **kw):
    p = subprocess.Popen(cmd, **kw)
    LIVE.add(p)
    return p


def reap(p, timeout):
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        LIVE.discard(p)
        raise RuntimeError("%s: still running after %d s, killed" % (" ".join(map(str, p.args[:4])), timeout))
    LIVE.discard(p)
    return out, err


def sh(*cmd, check=True, timeout=600, env=None, stdin=subprocess.DEVNULL):
    p = popen([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=stdin, text=True, env=env)
    out, err = reap(p, timeout)
    if check and p.returncode != 0:
        raise RuntimeError("%s failed (exit %d): %s%s" % (" ".join([os.path.basename(str(cmd[0]))] + list(map(
            str, cmd[1:3]))), p.returncode, out[-2000:], err[-2000:]))
    return out


def cpu_of(pid):
    """CPU seconds (user + system, all threads) of a process so far."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            v = f.read().rsplit(")", 1)[1].split()
        return (int(v[11]) + int(v[12])) / TICK
    except (OSError, IndexError, ValueError):
        return float("nan")


def status_kib(pid, field):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def reset_hwm(pid):
    try:
        with open("/proc/%d/clear_refs" % pid, "w") as f:
            f.write("5")
    except OSError:
        pass


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Servers:
    """The servers of one run, in a scratch folder under BENCH_WORK (default build/bench).

    start() copies the tierfs binary into it, fills a tmpfs with the random source files
    (`sources`: name -> MiB), starts Ceph (unless not `radosgw`), formats the volume `volume`
    (SQLite and a `file` bucket in the scratch folder, or on a tmpfs of `tmpfs_size` when
    `bucket_on` is "tmpfs"), mounts it and starts its gateway on a free port of 127.0.0.1
    with `gw_keys` (access key, secret). close() undoes all of it, copies the gateway's and
    the mount's logs to `out`, and is safe to call twice and after a failed start()."""

    def __init__(self, out, tierfs_src, volume, gw_keys, sources, bucket_on="disk", tmpfs_size="12g",
                 radosgw=True, rgw_bucket=None, gateway_opts=(), mount_opts=()):
        self.out, self.tierfs_src, self.volume = out, tierfs_src, volume
        self.gw_ak, self.gw_sk = gw_keys
        self.sources, self.bucket_on, self.tmpfs_size = sources, bucket_on, tmpfs_size
        self.radosgw, self.rgw_bucket = radosgw, rgw_bucket or volume
        self.gateway_opts, self.mount_opts = list(gateway_opts), list(mount_opts)
        self.closed = False
        self.mounted = []       # tmpfs and FUSE mount points, in mount order
        self.gw = self.mnt_proc = self.ceph = None
        base = os.environ.get("BENCH_WORK") or os.path.join(REPO, "build", "bench")
        os.makedirs(base, exist_ok=True)
        self.work = tempfile.mkdtemp(prefix="gateway-", dir=base)
        os.makedirs(out, exist_ok=True)

    def start(self):
        w = self.work
        # A copy: the other engineer's rebuilds must not change the binary under the run.
        self.tierfs = os.path.join(w, "tierfs")
        shutil.copy2(self.tierfs_src, self.tierfs)
        self.version = sh(self.tierfs, "--version").strip()
        self.src = os.path.join(w, "src")
        os.makedirs(self.src)
        src_mib = sum(self.sources.values()) + 64
        sh("mount", "-t", "tmpfs", "-o", "size=%dm" % src_mib, "tierfs-gwbench-src", self.src)
        self.mounted.append(self.src)
        for name, mib in self.sources.items():
            with open(os.path.join(self.src, name), "wb") as f:
                for _ in range(mib):
                    f.write(os.urandom(MiB))
        self.vol = os.path.join(w, "vol")
        os.makedirs(self.vol)
        if self.bucket_on == "tmpfs":
            sh("mount", "-t", "tmpfs", "-o", "size=" + self.tmpfs_size, "tierfs-gwbench-vol", self.vol)
            self.mounted.append(self.vol)
        elif self.bucket_on != "disk":
            raise SystemExit("TIERFS_BUCKET must be disk or tmpfs")
        if self.radosgw:
            log("starting Ceph (bluestore OSD over a file in %s, radosgw on port %d)" % (w, servers.RGW_PORT))
            self.ceph = servers.Ceph(os.path.join(w, "srv"), bluestore=True)
            self.ceph.start()
            self.rgw_pid = int(open(self.ceph._pid("client.rgw.a")).read().split()[0])
            self.osd_pid = int(open(self.ceph._pid("osd.0")).read().split()[0])
        self.meta = "sqlite3://" + os.path.join(self.vol, "meta.db")
        sh(self.tierfs, "format", self.meta, self.volume, "--storage", "file", "--bucket",
           os.path.join(self.vol, "bucket"), "--trash-days", "0")
        self.mnt = os.path.join(w, "mnt")
        os.makedirs(self.mnt)
        self.mnt_log = os.path.join(w, "mount.log")
        self.mnt_proc = popen([self.tierfs, "mount", self.meta, self.mnt, "--cache-dir", "memory", "--metrics", "0",
                               "--log", self.mnt_log] + self.mount_opts,
                              stdout=subprocess.DEVNULL, stderr=open(self.mnt_log + ".stderr", "w"))
        LIVE.discard(self.mnt_proc)
        end = time.monotonic() + 60
        while not os.path.ismount(self.mnt):
            if self.mnt_proc.poll() is not None or time.monotonic() > end:
                raise RuntimeError("tierfs mount did not mount (see %s)" % self.mnt_log)
            time.sleep(0.05)
        self.mounted.append(self.mnt)
        sk = os.path.join(w, "gateway.secret")
        with open(sk, "w") as f:
            f.write(self.gw_sk + "\n")
        os.chmod(sk, 0o600)
        self.port = free_port()
        self.gw_log = os.path.join(w, "gateway.log")
        self.gw = subprocess.Popen([self.tierfs, "gateway", self.meta, "127.0.0.1:%d" % self.port, "--access-key",
                                    self.gw_ak, "--secret-key-file", sk, "--cache-dir", "memory", "--log", self.gw_log]
                                   + self.gateway_opts,
                                   stdout=subprocess.DEVNULL, stderr=open(self.gw_log + ".stderr", "w"))
        end = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if self.gw.poll() is not None or time.monotonic() > end:
                    raise RuntimeError("the gateway did not start (see %s)" % self.gw_log)
                time.sleep(0.05)
        log("volume %s (SQLite + file bucket on %s), gateway on port %d, mount on %s; %s" % (
            self.volume, self.bucket_on, self.port, self.mnt, self.version))

    def close(self):
        if self.closed:
            return
        self.closed = True
        for p in list(LIVE):
            if p.poll() is None:
                p.kill()
                p.wait()
        try:
            if self.gw is not None and self.gw.poll() is None:
                self.gw.terminate()
                try:
                    self.gw.wait(60)
                except subprocess.TimeoutExpired:
                    self.gw.kill()
                    self.gw.wait()
            mnt = getattr(self, "mnt", None)
            if mnt in self.mounted:
                subprocess.run([self.tierfs, "umount", mnt], capture_output=True, timeout=300)
                if os.path.ismount(mnt):
                    subprocess.run(["fusermount3", "-uz", mnt], capture_output=True)
            if self.mnt_proc is not None and self.mnt_proc.poll() is None:
                # Unmounted above, it ends by itself; never mounted, it is told to stop.
                if mnt not in self.mounted:
                    self.mnt_proc.terminate()
                try:
                    self.mnt_proc.wait(60)
                except subprocess.TimeoutExpired:
                    self.mnt_proc.kill()
                    self.mnt_proc.wait()
                    if os.path.ismount(mnt):
                        subprocess.run(["fusermount3", "-uz", mnt], capture_output=True)
            for m in reversed(self.mounted):  # the tmpfs
                if m != mnt and os.path.ismount(m):
                    if subprocess.run(["umount", m], capture_output=True).returncode != 0:
                        subprocess.run(["umount", "-l", m], capture_output=True)
        finally:
            try:
                if self.ceph is not None:
                    self.ceph.stop()
            finally:
                for f in ("gateway.log", "gateway.log.stderr", "mount.log", "mount.log.stderr"):
                    if os.path.exists(os.path.join(self.work, f)):
                        shutil.copy(os.path.join(self.work, f), self.out)
                busy = [m for m in self.mounted if os.path.ismount(m)]
                if busy:
                    log("still mounted, so %s is kept: %s" % (self.work, " ".join(busy)))
                else:
                    shutil.rmtree(self.work, ignore_errors=True)

    def s3args(self, target):
        """Endpoint, keys and bucket of "gateway" or "radosgw", as the load generators take them."""
        if target == "gateway":
            return {"endpoint": "http://127.0.0.1:%d" % self.port, "ak": self.gw_ak, "sk": self.gw_sk,
                    "bucket": self.volume}
        return {"endpoint": self.ceph.endpoint(), "ak": servers.S3_ACCESS_KEY, "sk": servers.S3_SECRET_KEY,
                "bucket": self.rgw_bucket}

    def drop(self):
        """Every cache between a measurement and the disk: the kernel's and the OSD's."""
        subprocess.run(["sync"], check=True)
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        if self.ceph is not None:
            sh("ceph", "-c", self.ceph.conf, "tell", "osd.0", "cache", "drop", check=False, timeout=60)

    def drop_command(self):
        """drop() as one shell command (for `tierfs objbench --before-get`)."""
        return "sync; echo 3 > /proc/sys/vm/drop_caches" + (
            "; ceph -c %s tell osd.0 cache drop >/dev/null 2>&1" % self.ceph.conf if self.ceph else "")

    def server_pid(self, target):
        return {"gateway": self.gw.pid, "mount": self.mnt_proc.pid}.get(target) or self.rgw_pid

    def alive(self):
        if self.gw.poll() is not None:
            raise RuntimeError("the gateway exited (status %s); see %s/gateway.log" % (self.gw.returncode, self.out))
        if self.mnt_proc.poll() is not None:
            raise RuntimeError("the mount exited (status %s)" % self.mnt_proc.returncode)

    def measure(self, target, fn, sample_rss=False):
        """Runs fn() with the target's server CPU, radosgw+OSD CPU, client CPU and the server's
        peak RSS around it; returns fn's dict with those added."""
        self.alive()
        pid = self.server_pid(target)
        reset_hwm(pid)
        rss0 = status_kib(pid, "VmRSS")
        c0, o0, k0 = cpu_of(pid), cpu_of(self.osd_pid) if target == "radosgw" else 0, children_cpu()
        peak = [0]
        stop = threading.Event()

        def sampler():
            while not stop.wait(0.1):
                peak[0] = max(peak[0], status_kib(pid, "VmRSS"))
        t = threading.Thread(target=sampler, daemon=True)
        if sample_rss:
            t.start()
        try:
            r = fn()
        finally:
            stop.set()
        r.update(server_cpu=cpu_of(pid) - c0, client_cpu=children_cpu() - k0,
                 osd_cpu=(cpu_of(self.osd_pid) - o0) if target == "radosgw" else None,
                 hwm_mib=status_kib(pid, "VmHWM") / 1024, rss0_mib=rss0 / 1024, rss_peak_sampled_mib=peak[0] / 1024)
        return r
