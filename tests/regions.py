"""Two regions on one machine: the root network namespace is region A (its servers listen on
127.0.0.1), a network namespace joined by a veth pair is region B, and the link between
them is slow.

    link = RegionLink(delay_ms=30, rate="200mbit")
    addr = link.forward(6379)     # "HOST:PORT" in region B that reaches 127.0.0.1:6379 in A
    link.prefix                   # ["nsenter", "--net=..."]: prepend to run a command in B
    link.cut(True) / cut(False)   # the link goes down (packets lost, connections hang) / up
    link.close()                  # removes the namespace, the forwards and the shaping

Latency: this kernel has no netem (CONFIG_NET_SCH_NETEM is not set), so the delay is added
by the forwarders: every chunk of bytes crossing a forward, either way, is held delay_ms
before it is passed on (order kept), which is what a link of that one-way latency does to
a TCP stream. Bandwidth: a tbf qdisc on both ends of the veth pair (the kernel has it).
"""

import collections
import os
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from netns import Network  # noqa: E402


def _tc(*args, prefix=()):
    res = subprocess.run(list(prefix) + ["tc"] + list(args), capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError("tc %s failed: %s" % (" ".join(args), res.stderr.strip()))


class _Pipe:
    """One direction of one connection: reads, holds each chunk `delay` seconds, writes."""

    def __init__(self, src, dst, delay, on_close):
        self.src, self.dst, self.delay, self.on_close = src, dst, delay, on_close
        self.queue = collections.deque()
        self.cv = threading.Condition()
        self.eof = False
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._write, daemon=True).start()

    def _read(self):
        try:
            while True:
                data = self.src.recv(1 << 16)
                if not data:
                    break
                with self.cv:
                    self.queue.append((time.monotonic() + self.delay, data))
                    self.cv.notify()
        except OSError:
            pass
        with self.cv:
            self.eof = True
            self.cv.notify()

    def _write(self):
        try:
            while True:
                with self.cv:
                    while not self.queue and not self.eof:
                        self.cv.wait()
                    if not self.queue:
                        break
                    due, data = self.queue[0]
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                with self.cv:
                    self.queue.popleft()
                self.dst.sendall(data)
            self.dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        self.on_close()


class _Forward:
    def __init__(self, listen_addr, upstream, delay):
        self.upstream, self.delay = upstream, delay
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((listen_addr, 0))
        self.sock.listen(256)
        self.port = self.sock.getsockname()[1]
        self.closed = False
        self.conns = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            try:
                u = socket.create_connection(self.upstream, timeout=10)
                u.settimeout(None)
            except OSError:
                c.close()
                continue
            for s in (c, u):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self.lock:
                self.conns += [c, u]
            done = [0]

            def closed(c=c, u=u, done=done):
                done[0] += 1
                if done[0] == 2:
                    for s in (c, u):
                        try:
                            s.close()
                        except OSError:
                            pass

            _Pipe(c, u, self.delay, closed)
            _Pipe(u, c, self.delay, closed)

    def close(self):
        self.closed = True
        try:
            self.sock.close()
        except OSError:
            pass
        with self.lock:
            conns, self.conns = self.conns, []
        for s in conns:
            try:
                s.close()
            except OSError:
                pass


class RegionLink:
    def __init__(self, delay_ms=30, rate="200mbit"):
        self.delay_ms, self.rate = delay_ms, rate
        self.net = Network(n=1)
        self.forwards = []
        self.veth = "%sv0" % self.net.tag  # region A's end of the pair
        try:
            if rate:
                shape = ["root", "tbf", "rate", rate, "burst", "256kb", "latency", "200ms"]
                _tc("qdisc", "add", "dev", self.veth, *shape)
                _tc("qdisc", "add", "dev", "eth0", *shape, prefix=self.prefix)
        except Exception:
            self.close()
            raise

    @property
    def prefix(self):
        return self.net.prefix(0)

    @property
    def b_addr(self):
        return self.net.addr(0)

    def forward(self, port, host="127.0.0.1"):
        """A forward from region B to host:port in region A, slowed by the link's latency."""
        f = _Forward(self.net.host_addr, (host, port), self.delay_ms / 1000.0)
        self.forwards.append(f)
        return "%s:%d" % (self.net.host_addr, f.port)

    def cut(self, down):
        subprocess.run(["ip", "link", "set", self.veth, "down" if down else "up"], check=True)
        if not down:
            subprocess.run(["ip", "link", "set", self.veth, "master", self.net.bridge, "up"], check=True)

    def close(self):
        """Never raises."""
        for f in self.forwards:
            f.close()
        self.forwards = []
        self.net.close()
