#!/usr/bin/env python3
"""Snapshots of a mirror volume's namespace, read from its Redis engine, each in one atomic
script (a consistent moment of the engine: what a mirror's client can be shown at once).

    mirror_snapshots.py HOST:PORT DB TOP [--once]

Prints one JSON line per read: {"applied": SEQ, "names": [[PATH, IS_DIR], ...]} (names null
when /TOP is not there), PATH relative to /TOP. Reads every 20 ms until its stdin closes, or
once. Run in the mirror's region (`nsenter --net=...`) so that a cut link does not stop it.
Keys (docs/key-schema.md, src/meta/redis_engine.h): Redis key "k" + K holds K's value; a
directory entry is K = "A" ino(u64) "D" name -> child ino(u64), type(u8); "MS" holds the
mirror's state (JSON, "applied": the primary's sequence applied).
"""
import json
import socket
import sys
import threading
import time

ROOT_INO = 1
S_IFDIR_TYPE = 0o040000 >> 12

# The state and every directory entry, in one script: atomic on the server.
SCRIPT = b"""
local out = {redis.call('GET', 'kMS') or false}
for _, k in ipairs(redis.call('KEYS', 'kA*')) do
  if string.sub(k, 11, 11) == 'D' then
    out[#out + 1] = k
    out[#out + 1] = redis.call('GET', k) or ''
  end
end
return out
"""


class Resp:
    def __init__(self, addr):
        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.buf = self.sock.makefile("rb")

    def call(self, *args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.sock.sendall(b"".join(out))
        return self._reply()

    def _reply(self):
        line = self.buf.readline()
        if not line:
            raise ConnectionError("redis closed the connection")
        kind, rest = line[:1], line[1:-2]
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind in (b"+", b":"):
            return rest
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.buf.read(n + 2)
            return data[:-2]
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._reply() for _ in range(n)]
        raise RuntimeError("unexpected reply %r" % line)


def snapshot(conn, top):
    reply = conn.call(b"EVAL", SCRIPT, 0)
    applied = json.loads(reply[0])["applied"] if reply[0] else 0
    children = {}
    for i in range(1, len(reply), 2):
        k, v = reply[i][1:], reply[i + 1]  # K without Redis's "k"
        parent = int.from_bytes(k[1:9], "big")
        children.setdefault(parent, []).append((k[10:].decode(), int.from_bytes(v[:8], "big"), v[8]))
    top_ino = [c for n, c, t in children.get(ROOT_INO, []) if n == top]
    if not top_ino:
        return {"applied": applied, "names": None}
    out = []
    stack = [(top_ino[0], "")]
    while stack:
        ino, path = stack.pop()
        for name, child, typ in children.get(ino, []):
            p = path + "/" + name
            out.append([p, typ == S_IFDIR_TYPE])
            if typ == S_IFDIR_TYPE:
                stack.append((child, p))
    return {"applied": applied, "names": sorted(out)}


def main():
    addr, db, top = sys.argv[1], sys.argv[2], sys.argv[3]
    once = "--once" in sys.argv[4:]
    conn = Resp(addr)
    conn.call(b"SELECT", db)
    if once:
        print(json.dumps(snapshot(conn, top)), flush=True)
        return
    done = threading.Event()

    def wait_eof():
        sys.stdin.read()
        done.set()

    threading.Thread(target=wait_eof, daemon=True).start()
    while not done.is_set():
        print(json.dumps(snapshot(conn, top)), flush=True)
        time.sleep(0.02)


if __name__ == "__main__":
    main()
