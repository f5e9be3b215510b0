"""Separate hosts on one machine: network namespaces joined to a bridge by veth pairs.

    net = Network(n=3)          # bridge 10.<a>.<b>.1/24, members .11, .12, .13
    net.run(0, "ip", "addr")    # a command in member 0's network namespace
    net.prefix(0)               # ["nsenter", "--net=/run/netns/..."]: prepend to any command
    net.add_member()            # one more namespace (a joining host)
    net.close()                 # removes the namespaces, their veth pairs and the bridge

Only the network is separate: every member sees the same files and mounts (nsenter
--net, not `ip netns exec`, which would also give each command its own mount namespace),
so a FUSE mount made inside a namespace is readable from the test. The root namespace
reaches the members through the bridge; servers the members need listen on
`net.host_addr`.
"""

import os
import subprocess


def _ip(*args, check=True):
    res = subprocess.run(["ip"] + list(args), capture_output=True, text=True)
    if check and res.returncode != 0:
        raise RuntimeError("ip %s failed: %s" % (" ".join(args), res.stderr.strip()))
    return res


class Network:
    _made = 0  # networks made by this process

    def __init__(self, n=3):
        # A /24 of 10.0.0.0/8 picked from the pid, so parallel test processes do not collide,
        # and from a count, so that a process's next network does not collide with the
        # last one's interfaces, which the kernel removes asynchronously after close().
        Network._made += 1
        k = (os.getpid() + 7919 * Network._made) % 60000
        self.tag = "tf%d" % k  # interface names must stay under 16 bytes
        self.subnet = "10.%d.%d" % (100 + k // 250 % 150, k % 250)
        self.bridge = self.tag + "br"
        self.host_addr = self.subnet + ".1"
        self.members = []
        try:
            _ip("link", "add", self.bridge, "type", "bridge")
            _ip("addr", "add", self.host_addr + "/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            for _ in range(n):
                self.add_member()
        except Exception:
            self.close()
            raise

    def ns(self, i):
        return "%sm%d" % (self.tag, i)

    def addr(self, i):
        return "%s.%d" % (self.subnet, 11 + i)

    def add_member(self):
        i = len(self.members)
        ns, veth = self.ns(i), "%sv%d" % (self.tag, i)
        self.members.append(ns)
        _ip("netns", "add", ns)
        _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
        _ip("link", "set", veth, "master", self.bridge, "up")
        _ip("-n", ns, "addr", "add", self.addr(i) + "/24", "dev", "eth0")
        _ip("-n", ns, "link", "set", "eth0", "up")
        _ip("-n", ns, "link", "set", "lo", "up")
        _ip("-n", ns, "route", "add", "default", "via", self.host_addr)
        return i

    def prefix(self, i):
        return ["nsenter", "--net=/run/netns/" + self.ns(i)]

    def run(self, i, *cmd, **kw):
        return subprocess.run(self.prefix(i) + list(cmd), capture_output=True, text=True, **kw)

    def close(self):
        """Never raises: removes what exists."""
        for ns in self.members:
            _ip("netns", "del", ns, check=False)  # takes its end of the veth pair, and so both
        self.members = []
        _ip("link", "del", self.bridge, check=False)
