"""A TCP proxy that slows chosen HTTP requests: a slow object store for the tests.

    proxy = DelayProxy("127.0.0.1", 27480, delays={b"DELETE ": 0.15})
    url = "http://127.0.0.1:%d/bucket" % proxy.port
    ...
    proxy.count(b"DELETE ")     # requests slowed so far
    proxy.close()

With listen="0.0.0.0" and slow_peers={addr, ...}, only connections from those addresses are
slowed (one slow host among fast ones, in network namespaces: tests/netns.py).

Every connection is forwarded byte for byte to the upstream server. A client's request on
a keep-alive connection begins a new send after the previous reply was read, so a chunk
from the client that starts with one of the methods starts a request of that kind: it is
held for the delay before it goes on. Bodies (random block data) start with such a word
only by a vanishing chance.
"""

import socket
import threading
import time


class DelayProxy:
    def __init__(self, upstream_host, upstream_port, delays, listen="127.0.0.1", slow_peers=None):
        self.upstream = (upstream_host, upstream_port)
        self.slow_peers = set(slow_peers) if slow_peers is not None else None
        self.delays = dict(delays)
        self.counts = {m: 0 for m in self.delays}
        self._lock = threading.Lock()
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((listen, 0))
        self._sock.listen(128)
        self.port = self._sock.getsockname()[1]
        self._closed = False
        self._conns = []
        threading.Thread(target=self._accept, daemon=True).start()

    def count(self, method):
        with self._lock:
            return self.counts.get(method, 0)

    def close(self):
        self._closed = True
        try:
            self._sock.close()
        except OSError:
            pass
        with self._lock:
            conns, self._conns = self._conns, []
        for c in conns:
            try:
                c.close()
            except OSError:
                pass

    def _accept(self):
        while not self._closed:
            try:
                client, peer = self._sock.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream)
            except OSError:
                client.close()
                continue
            for s in (client, server):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._conns += [client, server]
            slow = self.slow_peers is None or peer[0] in self.slow_peers
            threading.Thread(target=self._pump, args=(client, server, slow), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False), daemon=True).start()

    def _pump(self, src, dst, slow):
        try:
            while True:
                data = src.recv(1 << 16)
                if not data:
                    break
                if slow:
                    for method, delay in self.delays.items():
                        if data.startswith(method):
                            with self._lock:
                                self.counts[method] += 1
                            time.sleep(delay)
                            break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
