"""A Redis master with replicas, watched by Redis Sentinels: a throwaway high-availability
Redis of a test's own (Debian's redis-server, which also runs Sentinels with --sentinel).

    ha = RedisSentinel(root, port=servers.free_ports(6))   # node i on port+i, Sentinel j after them
    ha.start()                      # node 0 master, the others its replicas, 3 Sentinels
    ha.url(db=0, query="wait-replicas=1")   # redis://tierfs,127.0.0.1:S0,.../0?wait-replicas=1
    ha.master()                     # index of the node the Sentinels name as master
    ha.kill_node(i); ha.start_node(i, replica_of=j)
    ha.wait_master(not_node=i)      # until the Sentinels name another master and it says so
    ha.stop()

addrs and prefixes: node i listens on addrs[i] inside prefixes[i] (a network namespace of
netns.Network, whose link a test can cut); Sentinels always run in the root namespace on
127.0.0.1. Nodes write an append-only file fsync'd at every write (appendfsync always: a
master killed and restarted keeps what it acknowledged) and run from a config file of their
own, which the Sentinels rewrite when they reconfigure a node. Failover settings are short
(down after 1 s, quorum 2) so a test's failover takes about 2-3 s; start-up about 0.3 s,
about 10 MiB per process."""
import os
import shutil
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402

MASTER_NAME = "tierfs"


def cli(host, port, *args, prefix=(), timeout=3):
    """One redis-cli command; its output stripped, or None when the server did not answer."""
    try:
        r = subprocess.run(list(prefix) + ["redis-cli", "-h", host, "-p", str(port)] + list(args),
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    if r.returncode != 0 or r.stdout.startswith("Could not connect"):
        return None
    return r.stdout.strip()


class RedisSentinel:
    def __init__(self, root, port, replicas=1, sentinels=3, name="redis-ha", addrs=None, prefixes=None):
        self.dir = os.path.join(root, name)
        self.n = replicas + 1
        self.port = port
        self.nsent = sentinels
        self.addrs = addrs or ["127.0.0.1"] * self.n
        self.prefixes = prefixes or [[]] * self.n
        self.procs = {}  # ("node"|"sentinel", i) -> Popen

    def node_port(self, i):
        return self.port + i

    def sentinel_port(self, j):
        return self.port + self.n + j

    def url(self, db=0, query="", sentinels=None):
        ports = [self.sentinel_port(j) for j in range(self.nsent)] if sentinels is None else sentinels
        return "redis://%s,%s/%d%s" % (MASTER_NAME, ",".join("127.0.0.1:%d" % p for p in ports), db,
                                       "?" + query if query else "")

    def node_url(self, i, db=0):
        return "redis://%s:%d/%d" % (self.addrs[i], self.node_port(i), db)

    def _spawn(self, key, cmd, prefix=()):
        log = os.path.join(self.dir, "%s%d.out" % key)
        with open(log, "ab") as out:
            self.procs[key] = subprocess.Popen(list(prefix) + cmd, stdin=subprocess.DEVNULL, stdout=out,
                                               stderr=subprocess.STDOUT, cwd=self.dir, start_new_session=True)

    def node_cli(self, i, *args):
        return cli(self.addrs[i], self.node_port(i), *args, prefix=self.prefixes[i])

    def start_node(self, i, replica_of=None):
        d = os.path.join(self.dir, "node%d" % i)
        os.makedirs(d, exist_ok=True)
        conf = os.path.join(d, "redis.conf")
        if not os.path.exists(conf):
            with open(conf, "w") as f:
                f.write("bind %s\nport %d\ndir %s\nappendonly yes\nappendfsync always\nsave \"\"\n"
                        "protected-mode no\nrepl-diskless-sync-delay 0\nlogfile %s\npidfile %s\n" % (
                            self.addrs[i], self.node_port(i), d, os.path.join(d, "redis.log"),
                            os.path.join(d, "redis.pid")))
        cmd = ["redis-server", conf]
        if replica_of is not None:
            cmd += ["--replicaof", self.addrs[replica_of], str(self.node_port(replica_of))]
        self._spawn(("node", i), cmd, self.prefixes[i])
        servers._wait("redis node %d on %s:%d" % (i, self.addrs[i], self.node_port(i)),
                      lambda: self.node_cli(i, "PING") == "PONG", 20, os.path.join(d, "redis.log"))

    def start_sentinel(self, j, master=0):
        d = os.path.join(self.dir, "sentinel%d" % j)
        os.makedirs(d, exist_ok=True)
        conf = os.path.join(d, "sentinel.conf")
        with open(conf, "w") as f:
            f.write("bind 127.0.0.1\nport %d\ndir %s\nlogfile %s\npidfile %s\nprotected-mode no\n"
                    "sentinel announce-ip 127.0.0.1\n"
                    "sentinel monitor %s %s %d 2\n"
                    "sentinel down-after-milliseconds %s 1000\n"
                    "sentinel failover-timeout %s 2000\n"
                    "sentinel parallel-syncs %s 1\n" % (
                        self.sentinel_port(j), d, os.path.join(d, "sentinel.log"), os.path.join(d, "sentinel.pid"),
                        MASTER_NAME,
                        self.addrs[master], self.node_port(master), MASTER_NAME, MASTER_NAME, MASTER_NAME))
        self._spawn(("sentinel", j), ["redis-server", conf, "--sentinel"])
        servers._wait("redis sentinel %d on 127.0.0.1:%d" % (j, self.sentinel_port(j)),
                      lambda: cli("127.0.0.1", self.sentinel_port(j), "PING") == "PONG", 20,
                      os.path.join(d, "sentinel.log"))

    def running_all(self):
        return all(self.node_cli(i, "PING") == "PONG" for i in range(self.n)) and all(
            cli("127.0.0.1", self.sentinel_port(j), "PING") == "PONG" for j in range(self.nsent))

    def start(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        try:
            for i in range(self.n):
                self.start_node(i, replica_of=None if i == 0 else 0)
            servers._wait("the replicas to be in sync", lambda: self.replicas_online(0) == self.n - 1, 30)
            for j in range(self.nsent):
                self.start_sentinel(j)
            # Every Sentinel knows the replicas and the other Sentinels before a test kills anything.
            servers._wait("the Sentinels to know each other and the replicas", self._sentinels_ready, 30)
        except Exception:
            self.stop()
            raise
        return self

    def _sentinels_ready(self):
        for j in range(self.nsent):
            out = cli("127.0.0.1", self.sentinel_port(j), "SENTINEL", "master", MASTER_NAME)
            if out is None:
                return False
            fields = out.split("\n")
            info = dict(zip(fields[0::2], fields[1::2]))
            if int(info.get("num-slaves", 0)) != self.n - 1 or int(info.get("num-other-sentinels", 0)) != self.nsent - 1:
                return False
        return True

    def replicas_online(self, i):
        out = self.node_cli(i, "INFO", "replication") or ""
        return sum(1 for line in out.splitlines() if line.startswith("slave") and "state=online" in line)

    def master(self):
        """The node the Sentinels name (the answer most of them give), or None."""
        votes = {}
        for j in range(self.nsent):
            out = cli("127.0.0.1", self.sentinel_port(j), "SENTINEL", "get-master-addr-by-name", MASTER_NAME,
                      timeout=1)
            if out:
                host, port = out.split("\n")[:2]
                votes[(host, int(port))] = votes.get((host, int(port)), 0) + 1
        if not votes:
            return None
        host, port = max(votes, key=votes.get)
        for i in range(self.n):
            if self.addrs[i] == host and self.node_port(i) == port:
                return i
        return None

    def role(self, i):
        out = self.node_cli(i, "ROLE")
        return out.split("\n")[0] if out else None

    def wait_master(self, not_node, timeout=30):
        """Waits until the Sentinels name a master other than not_node and it is one; returns it."""
        got = [None]

        def moved():
            m = self.master()
            got[0] = m
            return m is not None and m != not_node and self.role(m) == "master"
        servers._wait("the Sentinels to promote a replica", moved, timeout)
        return got[0]

    def running(self, i):
        p = self.procs.get(("node", i))
        return p is not None and p.poll() is None

    def kill_node(self, i, sig=signal.SIGKILL):
        self._kill(("node", i), sig)

    def _kill(self, key, sig):
        p = self.procs.pop(key, None)
        if p is None:
            return
        try:
            os.killpg(p.pid, sig)
        except OSError:
            pass
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()

    def stop(self):
        for key in list(self.procs):
            self._kill(key, signal.SIGTERM)
        # Processes another process started (servers.py up, then down).
        for pidfile in ([os.path.join(self.dir, "node%d" % i, "redis.pid") for i in range(self.n)] +
                        [os.path.join(self.dir, "sentinel%d" % j, "sentinel.pid") for j in range(self.nsent)]):
            servers._kill_pidfile(pidfile)
