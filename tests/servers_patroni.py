#!/usr/bin/env python3
"""PostgreSQL under Patroni for the failover tests and benchmarks (tests/servers.py has the
single servers; this is its highly available PostgreSQL, kept apart for size).

    python3 tests/servers_patroni.py up   --dir DIR [--members 3]   # prints the META-URL base
    python3 tests/servers_patroni.py down --dir DIR
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from servers import PG_BIN, Etcd, _kill_pidfile, _need_free, _pid_alive, _run, _wait, free_ports  # noqa: E402


def _pid_alive_pid(pid):
    """Whether pid runs (not a zombie)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


class Patroni:
    """PostgreSQL 15 under Patroni (Debian's patroni): `members` nodes on 127.0.0.1, one
    primary and synchronous standbys, with a one-member etcd (servers.Etcd) as Patroni's
    store. Members can be killed (postgres and patroni together, as a machine crash) and
    started again; a restarted old primary rejoins as a replica (pg_rewind, wal_log_hints).

    synchronous_mode: a commit waits for a standby to flush it, and Patroni promotes only
    that synchronous standby, so an acknowledged commit survives the primary's loss.
    synchronous_mode_strict stays off: with two members (bench/engines.py) the promoted
    standby is alone until the killed member rejoins (about 10 s), and strict mode would
    stop its commits all that time; off, Patroni lets it commit alone, and the engine's
    Durability() reports that window as unsafe. Seen with Patroni 3.0.2 all the same: a
    running primary whose last standby goes away keeps synchronous_standby_names naming
    it, so its commits wait until a standby is back, as in strict mode.

    Failover settings: ttl 5 s, loop_wait 1 s, retry_timeout 2 s (the rule Patroni's
    documentation gives: loop_wait + 2 * retry_timeout <= ttl): a dead leader's key
    expires within ttl and the synchronous standby takes over a loop later (writes stop
    for about 5 s). Start: about 9 s for three members (initdb, then base backups); memory
    (PSS) about 65 MiB per member, patroni and postgres together, and 26 MiB for etcd.
    The directory's ancestors must be enterable by user postgres (o+x)."""

    PASSWORD = "tierfs-test-pw"

    def __init__(self, root, members=2, name="patroni", port=None, addrs=None, prefixes=None, dcs_addr="127.0.0.1"):
        """addrs and prefixes: member i listens on addrs[i] and runs under prefixes[i] (a
        network namespace of netns.Network, whose link a test can cut); Patroni's etcd then
        listens on dcs_addr (the network's host address)."""
        self.dir = os.path.join(root, name)
        self.n = members
        self.addrs = addrs or ["127.0.0.1"] * members
        self.prefixes = prefixes or [[]] * members
        # Per member: PostgreSQL and Patroni's REST API; then etcd's two ports.
        self.port = port or free_ports(2 * members + 2)
        self.etcd = Etcd(self.dir, port=self.port + 2 * members, members=1, name="etcd", addrs=[dcs_addr])
        self.scope = "tierfs-%s-%d" % (name, self.port)
        self.procs = {}

    def pg_port(self, i):
        return self.port + 2 * i

    def api_port(self, i):
        return self.port + 2 * i + 1

    def hosts(self):
        return ",".join("%s:%d" % (self.addrs[i], self.pg_port(i)) for i in range(self.n))

    def url(self, db=""):
        return "postgres://postgres:%s@%s/%s" % (self.PASSWORD, self.hosts(), db)

    def _mdir(self, i):
        return os.path.join(self.dir, "m%d" % i)

    def _pidfile(self, i):
        return os.path.join(self._mdir(i), "patroni.pid")

    def _log(self, i):
        return os.path.join(self._mdir(i), "patroni.log")

    def _config(self, i):
        d = self._mdir(i)
        pw = self.PASSWORD
        a = self.addrs[i]
        net = "127.0.0.1/32" if a == "127.0.0.1" else a.rsplit(".", 1)[0] + ".0/24"
        return f"""scope: {self.scope}
namespace: /tierfs-test/
name: m{i}
log:
  level: WARNING
restapi:
  listen: {a}:{self.api_port(i)}
  connect_address: {a}:{self.api_port(i)}
etcd3:
  hosts: {self.etcd.endpoint(0)}
bootstrap:
  dcs:
    ttl: 5
    loop_wait: 1
    retry_timeout: 2
    maximum_lag_on_failover: 1048576
    synchronous_mode: true
    synchronous_mode_strict: false
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        wal_log_hints: "on"
        synchronous_commit: "on"
        max_connections: 200
        max_wal_senders: 10
        max_replication_slots: 10
        wal_keep_size: 256MB
        hot_standby: "on"
  initdb:
    - encoding: UTF8
    - locale: C.UTF-8
    - auth: scram-sha-256
  pg_hba:
    - local all all trust
    - host all all {net} scram-sha-256
    - host replication replicator {net} scram-sha-256
postgresql:
  listen: {a}:{self.pg_port(i)}
  connect_address: {a}:{self.pg_port(i)}
  data_dir: {d}/data
  bin_dir: {PG_BIN}
  pgpass: {d}/pgpass
  authentication:
    superuser:
      username: postgres
      password: {pw}
    replication:
      username: replicator
      password: {pw}
  parameters:
    unix_socket_directories: {d}
"""

    def running(self, i):
        return _pid_alive(self._pidfile(i)) is not None

    def start_member(self, i):
        if self.running(i):
            return
        exe = shutil.which("patroni")
        if not exe:
            raise RuntimeError("cannot start patroni: it is not installed (scripts/install-deps.sh installs it)")
        d = self._mdir(i)
        os.makedirs(d, exist_ok=True)
        shutil.chown(d, "postgres", "postgres")
        conf = os.path.join(d, "patroni.yml")
        with open(conf, "w") as f:
            f.write(self._config(i))
        # PostgreSQL refuses to run as root: Patroni, and so postgres, run as user postgres.
        with open(self._log(i), "ab") as out:
            proc = subprocess.Popen(list(self.prefixes[i]) + ["runuser", "-u", "postgres", "--", exe, conf],
                                    stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=subprocess.STDOUT, cwd=d, start_new_session=True)
        with open(self._pidfile(i), "w") as f:
            f.write(f"{proc.pid}\n")
        self.procs[i] = proc

    def _api(self, i, path):
        import urllib.request
        with urllib.request.urlopen("http://%s:%d%s" % (self.addrs[i], self.api_port(i), path), timeout=1) as r:
            return json.loads(r.read())

    def members(self):
        """Patroni's view of the cluster ({name: member}, from the first member that answers)."""
        for i in range(self.n):
            if self.running(i):
                try:
                    return {m["name"]: m for m in self._api(i, "/cluster")["members"]}
                except Exception:
                    continue
        return {}

    def primary(self):
        """The index of the member that leads now and is running (None: none)."""
        for name, m in self.members().items():
            if m.get("role") == "leader" and m.get("state") == "running":
                return int(name[1:])
        return None

    def ready(self):
        """Whether a leader runs and every member replicates from it, one synchronously."""
        roles = [m.get("role") for m in self.members().values() if m.get("state") in ("running", "streaming")]
        return len(roles) == self.n and roles.count("leader") == 1 and "sync_standby" in roles

    def wait_ready(self, timeout=60):
        _wait("a Patroni cluster of %d with a synchronous standby" % self.n, self.ready, timeout, self._log(0))

    def wait_primary(self, other_than=None, timeout=60):
        """Until a member other than other_than leads; returns its index."""
        _wait("a new Patroni leader", lambda: self.primary() not in (None, other_than), timeout, self._log(0))
        return self.primary()

    def psql(self, db, sql):
        """Runs sql on the primary; returns what psql printed (unaligned, no headers)."""
        url = self.url(db) + "?target_session_attrs=read-write"
        return _run(["psql", url, "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-c", sql])

    def create_database(self, db):
        self.psql("postgres", "CREATE DATABASE %s" % db)

    def start(self, fresh=True):
        if fresh:
            self.stop()
            shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir, exist_ok=True)
        parent = os.path.dirname(os.path.abspath(self.dir))
        while parent != "/":
            if not os.stat(parent).st_mode & 0o001:
                raise RuntimeError("cannot start patroni under %s: user postgres cannot enter %s (chmod o+x it)"
                                   % (self.dir, parent))
            parent = os.path.dirname(parent)
        for i in range(self.n):
            _need_free(self.pg_port(i), "postgres")
        try:
            self.etcd.start(fresh=fresh)
            self.start_member(0)  # bootstraps alone, then the others copy it
            _wait("the first Patroni member", lambda: self.primary() == 0, 60, self._log(0))
            for i in range(1, self.n):
                self.start_member(i)
            self.wait_ready()
        except Exception:
            self.stop()
            raise
        return self

    def _tree(self, i):
        """Pids of member i: patroni (and runuser above it), its postmaster and every
        process of either."""
        roots = set()
        pid = _pid_alive(self._pidfile(i))
        if pid:
            roots.add(pid)
        pm = _pid_alive(os.path.join(self._mdir(i), "data", "postmaster.pid"))
        if pm:
            roots.add(pm)
        children = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open("/proc/%s/stat" % entry) as f:
                        ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                except (OSError, ValueError, IndexError):
                    continue
                children.setdefault(ppid, []).append(int(entry))
        out, todo = set(), list(roots)
        while todo:
            p = todo.pop()
            if p not in out:
                out.add(p)
                todo += children.get(p, [])
        return out

    def kill_member(self, i, sig=signal.SIGKILL):
        """Sends sig to member i's patroni and postgres processes at once; SIGTERM lets
        patroni stop postgres itself, anything else is a crash. Returns once all are gone,
        the time.monotonic() at which the signals went out."""
        if sig == signal.SIGTERM:
            _kill_pidfile(self._pidfile(i), sig, timeout=30)
        pids = self._tree(i)
        killed_at = time.monotonic()
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL if sig == signal.SIGTERM else sig)
            except OSError:
                pass
        proc = self.procs.pop(i, None)
        if proc is not None:
            proc.wait()

        def gone():
            return not any(os.path.exists("/proc/%d" % p) and _pid_alive_pid(p) for p in pids)
        _wait("member %d's processes to exit" % i, gone, 20)
        return killed_at

    def stop(self):
        for i in range(self.n):
            self.kill_member(i, signal.SIGTERM)
        self.etcd.stop()



def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", choices=["up", "down"])
    p.add_argument("--dir", required=True, help="state directory (every ancestor must be enterable by user postgres)")
    p.add_argument("--members", type=int, default=3)
    p.add_argument("--port", type=int, default=24432, help="first of 2 * members + 2 ports")
    a = p.parse_args()
    cluster = Patroni(os.path.abspath(a.dir), members=a.members, port=a.port)
    if a.action == "up":
        cluster.start()
        print(cluster.url())
    else:
        cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
