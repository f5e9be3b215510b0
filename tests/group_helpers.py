"""Cache-group members on one host for fault tests: `tierfs cache-server` processes and
mounts of one SQLite volume, each listening on 127.0.0.1 and its own port."""

import json
import os
import socket
import subprocess
import time
import urllib.request

import harness


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def stats(mnt):
    return json.loads(os.getxattr(mnt, "tierfs.stats"))


def threads_of(pid):
    try:
        return len(os.listdir("/proc/%d/task" % pid))
    except OSError:
        return 0


def metrics(addr):
    """{series: value} of a process's /metrics (labels kept in the series name)."""
    text = urllib.request.urlopen("http://%s/metrics" % addr, timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        out[name] = float(value)
    return out


def metric(values, family, label=""):
    """The sum of family's series (optionally those whose labels contain `label`)."""
    total = 0.0
    for k, v in values.items():
        base = k.split("{", 1)[0]
        if base == family and label in k:
            total += v
    return total


class CacheServer:
    """A `tierfs cache-server` of vol in group, until stop()."""

    def __init__(self, vol, group, cache_dir, extra=(), metrics_port=None):
        self.port = free_port()
        self.addr = "127.0.0.1:%d" % self.port
        self.metrics_addr = "127.0.0.1:%d" % (metrics_port or free_port())
        self.log = os.path.join(vol.dir, "cache-server-%d.log" % self.port)
        self.err = open(self.log + ".stderr", "w+")
        self.proc = subprocess.Popen(
            [harness.tierfs_bin(), "cache-server", vol.meta_url, "--cache-group", group, "--group-addr", self.addr,
             "--cache-dir", cache_dir, "--cache-size", "4G", "--metrics", self.metrics_addr, "--log", self.log]
            + list(extra),
            stdout=subprocess.PIPE, stderr=self.err, text=True)
        line = self.proc.stdout.readline()
        if "serving cache group" not in line:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("cache-server did not start: %r\n%s" % (line, self.output()))

    @property
    def pid(self):
        return self.proc.pid

    def output(self):
        if not self.err.closed:
            self.err.flush()
        text = ""
        for p in (self.log + ".stderr", self.log):
            try:
                with open(p, errors="replace") as f:
                    text += f.read()[-4000:]
            except OSError:
                pass
        return text

    def stop(self, sig=15, timeout=60):
        """Sends sig and returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
            raise AssertionError("cache-server did not exit within %d s of signal %d" % (timeout, sig))
        finally:
            self.proc.stdout.close()
            self.err.close()
        return rc

    def kill(self):
        if self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, 18)  # SIGCONT: a stopped process cannot die of SIGKILL quickly otherwise
            except OSError:
                pass
            self.proc.kill()
            self.proc.wait()
        for f in (self.proc.stdout, self.err):
            try:
                f.close()
            except Exception:
                pass


def wait_ring(mnt, n, timeout=30):
    """Until the member at mnt sees n serving members."""
    ok = harness.wait_for(lambda: len(stats(mnt)["group"]["ring"]) == n, timeout=timeout)
    if not ok:
        raise AssertionError("member %s has the ring %s, want %d members" % (mnt, stats(mnt)["group"]["ring"], n))


def write_files(root, n, size, prefix="f"):
    """n files of size random bytes under root; returns {path: bytes}."""
    out = {}
    for i in range(n):
        p = os.path.join(root, "%s%04d" % (prefix, i))
        data = os.urandom(size)
        with open(p, "wb") as f:
            f.write(data)
        out[p] = data
    return out


def elapsed(t0):
    return time.monotonic() - t0
