#!/usr/bin/env python3
"""Throwaway Redis, PostgreSQL, Ceph (mon + memstore OSD + radosgw), Azurite (the Azure
Blob Storage emulator), etcd (a cluster of three members) and redis-ha (a Redis master, a
replica and three Sentinels, redis_ha.py) servers on 127.0.0.1.

Each server keeps all its state under its own directory and listens on its own ports, so
tests never touch a system-wide server. ctest starts them once per run as fixtures and
passes their addresses to the tests through the environment (see env()):

    python3 tests/servers.py up   redis|postgres|ceph|azurite|etcd|redis-ha|all  --dir DIR
    python3 tests/servers.py down redis|postgres|ceph|azurite|etcd|redis-ha|all  --dir DIR
    python3 tests/servers.py env  --dir DIR      # prints TIERFS_TEST_* assignments

The Ceph OSD keeps its data in RAM (memstore) by default. Benchmarks that store GiBs use
`up ceph --bluestore` (or TIERFS_CEPH_BLUESTORE=1) instead: a bluestore OSD over a sparse
file under DIR (TIERFS_CEPH_OSD_BYTES bytes, default 32 GiB, allocated as written).

Tests can also import this module and start, stop and restart servers themselves.
"""
import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid

from kernel_knobs import remember_fuse_uring, restore_fuse_uring

# Ports used by ctest's fixtures; chosen away from the usual defaults so a developer's own
# servers keep working alongside.
# TIERFS_TEST_PORT_OFFSET moves them all, so that a second set can run beside ctest's.
_OFF = int(os.environ.get("TIERFS_TEST_PORT_OFFSET", "0"))
REDIS_PORT = 26379 + _OFF
PG_PORT = 25432 + _OFF
CEPH_MON_V2 = 23300 + _OFF
CEPH_MON_V1 = 26789 + _OFF
RGW_PORT = 27480 + _OFF
AZURITE_PORT = 27500 + _OFF
ETCD_PORT = 22379 + _OFF  # member i: client port ETCD_PORT + 2i, peer port one above
REDIS_HA_PORT = 26400 + _OFF  # master, replica, then three Sentinels (redis_ha.py)
S3_ACCESS_KEY = "TIERFSTESTACCESSKEY1"
S3_SECRET_KEY = "tierfs-test-secret-key-0000000000000001"
RADOS_POOL = "tierfs"
# Azurite's account and its well-known development key (public: the same in every Azurite).
AZURE_ACCOUNT = "devstoreaccount1"
AZURE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
# Databases the PostgreSQL fixture creates: one per test binary/script that needs one.
PG_DATABASES = ["tierfs_meta_test", "tierfs_kv_test", "tierfs_cli", "tierfs_multi", "tierfs_migrate",
                "tierfs_bench"]
PG_DATABASES += ["tierfs_damaged", "tierfs_watch"]
PG_BIN = "/usr/lib/postgresql/15/bin"
# Opt-in bluestore OSD (see the module docstring); the test suite keeps memstore.
CEPH_BLUESTORE = os.environ.get("TIERFS_CEPH_BLUESTORE", "") not in ("", "0")
CEPH_OSD_BYTES = int(os.environ.get("TIERFS_CEPH_OSD_BYTES", str(32 << 30)))
# Redis and radosgw also listen on this address (same ports), for clients in network
# namespaces that cannot reach 127.0.0.1 (bench/group.py); it must exist when they start.
EXTRA_ADDR = os.environ.get("TIERFS_TEST_EXTRA_ADDR", "")


def _wait(what, check, timeout, log=None):
    end = time.time() + timeout
    while time.time() < end:
        try:
            if check():
                return
        except Exception:
            pass
        time.sleep(0.05)
    msg = f"timed out after {timeout}s waiting for {what}"
    if log and os.path.exists(log):
        with open(log, errors="replace") as f:
            msg += "\n--- " + log + " (tail) ---\n" + "".join(f.readlines()[-30:])
    raise RuntimeError(msg)


def _port_open(port):
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _pid_alive(pidfile):
    """The pid in pidfile when that process runs (a zombie, dead but not yet reaped by the
    process that started it, does not)."""
    try:
        with open(pidfile) as f:
            pid = int(f.readline().strip())
        os.kill(pid, 0)
        with open("/proc/%d/stat" % pid) as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                return None
        return pid
    except (OSError, ValueError, IndexError):
        return None


def _kill_pidfile(pidfile, sig=signal.SIGTERM, timeout=20):
    pid = _pid_alive(pidfile)
    if not pid:
        return
    try:
        os.kill(pid, sig)
    except OSError:
        return
    end = time.time() + timeout
    while time.time() < end:
        if _pid_alive(pidfile) != pid:  # gone, or a zombie of this process's
            return
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def free_ports(n):
    """A base port with n consecutive free ports from it on (an etcd member takes two).

    Below the kernel's ephemeral range (32768 up, net.ipv4.ip_local_port_range): a port
    from that range, once its server is killed, can be taken by a client's own outgoing
    connection to it (a TCP self-connect on loopback), and the restarted server then
    fails with "address already in use". And below the fixed ports of the shared servers
    and of the scripts that move them by an offset (22379 and up): a random port there
    once took test_fault_bounds's own Ceph monitor port while it was starting."""
    import random
    rng = random.Random(os.getpid() ^ time.monotonic_ns())
    for _ in range(200):
        base = rng.randrange(10000, 22000 - n)
        if all(not _port_open(base + i) and _bindable(base + i) for i in range(n)):
            return base
    raise RuntimeError("no %d consecutive free ports" % n)


def _bindable(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def _need_free(port, what):
    if _port_open(port):
        raise RuntimeError(f"cannot start {what}: 127.0.0.1:{port} is already in use by another process")


def _run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stdout}{r.stderr}")
    return r.stdout


class Redis:
    """addr and prefix: a server in a network namespace (netns.Network.prefix) listening on
    the namespace's address, as another region's own server (tests/regions.py)."""

    def __init__(self, root, port=REDIS_PORT, password=None, addr="127.0.0.1", prefix=()):
        self.dir = os.path.join(root, "redis")
        self.port = port
        self.password = password
        self.addr, self.prefix = addr, list(prefix)
        self.pidfile = os.path.join(self.dir, "redis.pid")

    def url(self):
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}{self.addr}:{self.port}"

    def _open(self):
        with socket.socket() as s:
            s.settimeout(0.5)
            return s.connect_ex((self.addr, self.port)) == 0

    def running(self):
        return _pid_alive(self.pidfile) is not None

    def start(self, fresh=True):
        if self.running():
            return self
        if not self.prefix:
            _need_free(self.port, "redis")
        if fresh:
            shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir, exist_ok=True)
        bind = ["127.0.0.1"] + ([EXTRA_ADDR] if EXTRA_ADDR else [])
        if self.addr != "127.0.0.1":
            bind.append(self.addr)
        cmd = self.prefix + ["redis-server", "--bind"] + bind + ["--port", str(self.port), "--dir", self.dir,
               "--daemonize", "yes", "--pidfile", self.pidfile, "--logfile", os.path.join(self.dir, "redis.log"),
               "--save", "", "--appendonly", "yes", "--appendfsync", "everysec", "--databases", "32"]
        if EXTRA_ADDR or self.addr != "127.0.0.1":
            cmd += ["--protected-mode", "no"]
        if self.password:
            cmd += ["--requirepass", self.password]
        _run(cmd)
        _wait(f"redis on {self.addr}:{self.port}", lambda: self._open() and self.running(), 20,
              os.path.join(self.dir, "redis.log"))
        return self

    def stop(self):
        _kill_pidfile(self.pidfile)

    def restart(self):
        """Stops and starts again on the same port, keeping the data (append-only file)."""
        self.stop()
        _wait("redis to exit", lambda: not self._open(), 20)
        self.start(fresh=False)


class Postgres:
    def __init__(self, root, port=PG_PORT):
        self.dir = os.path.join(root, "postgres")
        self.port = port
        self.data = os.path.join(self.dir, "data")

    def url(self, db=""):
        return f"postgres://postgres:tierfs-test-pw@127.0.0.1:{self.port}" + (f"/{db}" if db else "")

    def running(self):
        return _pid_alive(os.path.join(self.data, "postmaster.pid")) is not None

    def _as_pg(self, cmd):
        return _run(["runuser", "-u", "postgres", "--"] + cmd)

    def start(self, fresh=True):
        if self.running():
            return self
        _need_free(self.port, "postgres")
        if fresh or not os.path.exists(self.data):
            shutil.rmtree(self.dir, ignore_errors=True)
            os.makedirs(self.dir)
            shutil.chown(self.dir, "postgres", "postgres")
            pwfile = os.path.join(self.dir, "pw")
            with open(pwfile, "w") as f:
                f.write("tierfs-test-pw\n")
            shutil.chown(pwfile, "postgres", "postgres")
            self._as_pg([f"{PG_BIN}/initdb", "-D", self.data, "-U", "postgres", "--pwfile", pwfile,
                         "-A", "scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"])
        self._as_pg([f"{PG_BIN}/pg_ctl", "-D", self.data, "-l", os.path.join(self.dir, "pg.log"), "-w", "-o",
                     f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.dir} -c fsync=off "
                     "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200", "start"])
        if fresh:
            env = dict(os.environ, PGPASSWORD="tierfs-test-pw")
            for db in PG_DATABASES:
                _run(["psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-q", "-c",
                      f"CREATE DATABASE {db}"], env=env)
        return self

    def stop(self):
        if self.running():
            self._as_pg([f"{PG_BIN}/pg_ctl", "-D", self.data, "-m", "fast", "-w", "stop"])

    def restart(self):
        self.stop()
        self.start(fresh=False)


class Ceph:
    """One monitor, one OSD and radosgw (the S3 gateway), auth none. The OSD is memstore
    (data in RAM, 6 GiB at most) unless bluestore is set: then bluestore over a sparse file
    of osd_bytes in the OSD's folder, with the OSD's memory target at 896 MiB."""

    def __init__(self, root, mon_v2=CEPH_MON_V2, mon_v1=CEPH_MON_V1, rgw_port=RGW_PORT,
                 bluestore=None, osd_bytes=CEPH_OSD_BYTES, extra_addr=None):
        self.dir = os.path.join(root, "ceph")
        self.conf = os.path.join(self.dir, "ceph.conf")
        self.mon_v2, self.mon_v1, self.rgw_port = mon_v2, mon_v1, rgw_port
        # radosgw also listens here (same port), for clients in network namespaces.
        self.extra_addr = EXTRA_ADDR if extra_addr is None else extra_addr
        self.bluestore = CEPH_BLUESTORE if bluestore is None else bluestore
        self.osd_bytes = osd_bytes

    def endpoint(self):
        return f"http://127.0.0.1:{self.rgw_port}"

    def _pid(self, name):
        return os.path.join(self.dir, "run", f"{name}.pid")

    def running(self):
        return all(_pid_alive(self._pid(n)) for n in ("mon.a", "osd.0", "client.rgw.a")) and _port_open(self.rgw_port)

    def _ceph(self, *args, timeout=30):
        return _run(["ceph", "-c", self.conf, "--connect-timeout", "10"] + list(args), timeout=timeout)

    def _write_conf(self, fsid):
        d = self.dir
        if self.bluestore:
            # Known to work on Ceph 16 with a plain file as the block device; no separate
            # db/wal, no fsck at each start.
            store = f"""osd objectstore = bluestore
bluestore block path = {d}/osd/$cluster-$id/block.file
bluestore block create = true
bluestore block size = {self.osd_bytes}
bluestore block db create = false
bluestore block wal create = false
bluestore fsck on mount = false
osd memory target = 939524096"""
        else:
            store = """osd objectstore = memstore
memstore device bytes = 6442450944"""
        extra_endpoint = f" endpoint={self.extra_addr}:{self.rgw_port}" if self.extra_addr else ""
        conf = f"""[global]
fsid = {fsid}
mon initial members = a
mon host = [v2:127.0.0.1:{self.mon_v2},v1:127.0.0.1:{self.mon_v1}]
public addr = 127.0.0.1
public network = 127.0.0.0/8
ms bind ipv6 = false
# radosgw asks for secure monitor connections by default, which auth none cannot give
ms mon client mode = crc secure
auth cluster required = none
auth service required = none
auth client required = none
auth supported = none
run dir = {d}/run
pid file = {d}/run/$name.pid
admin socket = {d}/run/$cluster-$name.asok
log file = {d}/log/$name.log
mon cluster log file = {d}/log/cluster.log
crash dir = {d}/crash
log to stderr = false
err to stderr = true
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon max pg per osd = 1000
mon warn on pool no redundancy = false
mon data avail warn = 1
mon data avail crit = 0
# commit monitor map changes quickly (the 1 s default makes every pool creation slow)
paxos propose interval = 0.05
paxos min wait = 0.01
mgr initial modules =

[mon]
mon data = {d}/mon/$cluster-$id

[osd]
osd data = {d}/osd/$cluster-$id
{store}
osd op num shards = 1
osd op num threads per shard = 2
osd class update on start = false
osd max object name len = 256
osd max object namespace len = 64

[client.rgw.a]
# without tcp_nodelay every small request waits for a delayed ACK (about 40 ms)
rgw frontends = beast endpoint=127.0.0.1:{self.rgw_port}{extra_endpoint} tcp_nodelay=1
rgw gc obj min wait = 60
rgw gc processor period = 60
rgw data = {d}/rgw
rgw dns name = localhost
rgw thread pool size = 64
"""
        with open(self.conf, "w") as f:
            f.write(conf)

    def start(self):
        if self.running():
            return self
        self.stop()
        for port in (self.mon_v2, self.mon_v1, self.rgw_port):
            _need_free(port, "ceph")
        d = self.dir
        shutil.rmtree(d, ignore_errors=True)
        for sub in ("run", "log", "mon/ceph-a", "osd/ceph-0", "rgw", "crash"):
            os.makedirs(os.path.join(d, sub), exist_ok=True)
        fsid = str(uuid.uuid4())
        self._write_conf(fsid)
        monmap = os.path.join(d, "monmap")
        _run(["monmaptool", "--create", "--fsid", fsid, "--addv", "a",
              f"[v2:127.0.0.1:{self.mon_v2},v1:127.0.0.1:{self.mon_v1}]", monmap])
        _run(["ceph-mon", "-c", self.conf, "--mkfs", "-i", "a", "--monmap", monmap])
        _run(["ceph-mon", "-c", self.conf, "-i", "a"])
        _wait("ceph monitor", lambda: subprocess.run(
            ["ceph", "-c", self.conf, "--connect-timeout", "2", "mon", "stat"],
            capture_output=True, timeout=10).returncode == 0, 60, os.path.join(d, "log", "mon.a.log"))
        osd_uuid = str(uuid.uuid4())
        osd_id = self._ceph("osd", "new", osd_uuid).strip()
        _run(["ceph-osd", "-c", self.conf, "-i", osd_id, "--mkfs", "--osd-uuid", osd_uuid, "--no-mon-config"])
        _run(["ceph-osd", "-c", self.conf, "-i", osd_id])
        _wait("ceph osd", lambda: f"osd.{osd_id} up" in self._ceph("osd", "dump"), 90,
              os.path.join(d, "log", f"osd.{osd_id}.log"))
        self._ceph("osd", "pool", "create", RADOS_POOL, "8", "8")
        self._ceph("osd", "pool", "application", "enable", RADOS_POOL, "rados")
        probe = os.path.join(d, "probe")
        with open(probe, "w") as f:
            f.write("probe")
        _wait(f"pool {RADOS_POOL}", lambda: subprocess.run(
            ["rados", "-c", self.conf, "-p", RADOS_POOL, "put", "__probe__", probe],
            capture_output=True, timeout=10).returncode == 0, 90)
        subprocess.run(["rados", "-c", self.conf, "-p", RADOS_POOL, "rm", "__probe__"], capture_output=True)
        self.start_rgw()
        if subprocess.run(["radosgw-admin", "-c", self.conf, "user", "info", "--uid=tester"],
                          capture_output=True).returncode != 0:
            _run(["radosgw-admin", "-c", self.conf, "user", "create", "--uid=tester", "--display-name=TierFS tests",
                  f"--access-key={S3_ACCESS_KEY}", f"--secret-key={S3_SECRET_KEY}"])
        return self

    def start_rgw(self):
        if _pid_alive(self._pid("client.rgw.a")):
            return
        _run(["radosgw", "-c", self.conf, "-n", "client.rgw.a"])

        def answers():
            import urllib.request
            urllib.request.urlopen(self.endpoint(), timeout=2).read()
            return True
        _wait(f"radosgw on port {self.rgw_port}", answers, 120, os.path.join(self.dir, "log", "client.rgw.a.log"))

    def rgw_counters(self):
        """radosgw's own request counters (`perf dump`, section rgw): get, get_b, put, ..."""
        out = _run(["ceph", "--admin-daemon", os.path.join(self.dir, "run", "ceph-client.rgw.a.asok"), "perf", "dump"])
        return json.loads(out)["rgw"]

    def stop_rgw(self):
        _kill_pidfile(self._pid("client.rgw.a"))
        _wait("radosgw to exit", lambda: not _port_open(self.rgw_port), 30)

    def stop(self):
        for name in ("client.rgw.a", "osd.0", "mon.a"):
            _kill_pidfile(self._pid(name))


class Azurite:
    """The Blob service of Azurite (npm package azurite, scripts/install-deps.sh), keeping its
    blobs under its folder; account AZURE_ACCOUNT with key AZURE_KEY, path-style URLs
    (http://127.0.0.1:PORT/ACCOUNT/CONTAINER)."""

    def __init__(self, root, port=AZURITE_PORT):
        self.dir = os.path.join(root, "azurite")
        self.port = port
        self.pidfile = os.path.join(self.dir, "azurite.pid")
        self.log = os.path.join(self.dir, "azurite.log")

    def endpoint(self):
        return f"http://127.0.0.1:{self.port}"

    def container_url(self, container):
        return f"{self.endpoint()}/{AZURE_ACCOUNT}/{container}"

    def running(self):
        return _pid_alive(self.pidfile) is not None

    def start(self, fresh=True):
        if self.running():
            return self
        exe = shutil.which("azurite-blob")
        if not exe:
            raise RuntimeError("cannot start azurite: azurite-blob is not installed (scripts/install-deps.sh "
                               "installs it: npm install -g azurite)")
        _need_free(self.port, "azurite")
        if fresh:
            shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(os.path.join(self.dir, "data"), exist_ok=True)
        # --skipApiVersionCheck: clients may speak a newer x-ms-version than this Azurite;
        # --loose: headers Azurite does not implement are ignored rather than refused.
        cmd = [exe, "--silent", "--disableTelemetry", "--location", os.path.join(self.dir, "data"),
               "--blobHost", "127.0.0.1", "--blobPort", str(self.port), "--skipApiVersionCheck", "--loose"]
        with open(self.log, "ab") as log:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    cwd=self.dir, start_new_session=True)
        with open(self.pidfile, "w") as f:
            f.write(f"{proc.pid}\n")

        def answers():
            if proc.poll() is not None:
                raise RuntimeError(f"azurite exited with status {proc.returncode}")
            return _port_open(self.port)
        _wait(f"azurite on port {self.port}", answers, 60, self.log)
        return self

    def stop(self):
        _kill_pidfile(self.pidfile)

    def restart(self):
        """Stops and starts again on the same port, keeping the blobs."""
        self.stop()
        _wait("azurite to exit", lambda: not _port_open(self.port), 20)
        self.start(fresh=False)


class Etcd:
    """A cluster of `members` etcd members (Debian's etcd-server) on 127.0.0.1, each with its
    own data directory under the cluster's folder; members can be killed and restarted one
    by one (a leader's loss). addrs and prefixes: member i listens on addrs[i] and runs under
    prefixes[i] (a network namespace of its own, netns.Network: its link can be cut). Default cluster settings but a short heartbeat and election
    timeout, so that a test's failover takes well under a second."""

    def __init__(self, root, port=ETCD_PORT, members=3, name="etcd", addrs=None, prefixes=None, tls=None):
        """tls: {"ca": CA.pem, "cert": SERVER.pem, "key": SERVER-KEY.pem, "client_cert": ...,
        "client_key": ...}: clients speak TLS to the members (https), which require a client
        certificate signed by the CA (--client-cert-auth)."""
        self.tls = tls
        self.dir = os.path.join(root, name)
        self.port, self.n = port, members
        self.addrs = addrs or ["127.0.0.1"] * members
        self.prefixes = prefixes or [[]] * members
        self.token = "tierfs-%s-%d" % (name, port)
        self.procs = {}  # member -> Popen, when this process started it

    def client_port(self, i):
        return self.port + 2 * i

    def peer_port(self, i):
        return self.port + 2 * i + 1

    def endpoints(self):
        return ",".join(self.endpoint(i) for i in range(self.n))

    def endpoint(self, i):
        return "%s:%d" % (self.addrs[i], self.client_port(i))

    def url(self, prefix=""):
        return "etcd://%s/%s" % (self.endpoints(), prefix)

    def _pidfile(self, i):
        return os.path.join(self.dir, "m%d.pid" % i)

    def _log(self, i):
        return os.path.join(self.dir, "m%d.log" % i)

    def running(self, i=0):
        return _pid_alive(self._pidfile(i)) is not None

    def start_member(self, i, fresh=False):
        if self.running(i):
            return
        exe = shutil.which("etcd")
        if not exe:
            raise RuntimeError("cannot start etcd: it is not installed (scripts/install-deps.sh installs etcd-server)")
        data = os.path.join(self.dir, "m%d" % i)
        if fresh:
            shutil.rmtree(data, ignore_errors=True)
        cluster = ",".join("m%d=http://%s:%d" % (j, self.addrs[j], self.peer_port(j)) for j in range(self.n))
        me = self.addrs[i]
        cmd = list(self.prefixes[i]) + [
               exe, "--name", "m%d" % i, "--data-dir", data,
               "--listen-client-urls", "%s://%s:%d" % (self._scheme(), me, self.client_port(i)),
               "--advertise-client-urls", "%s://%s:%d" % (self._scheme(), me, self.client_port(i)),
               "--listen-peer-urls", "http://%s:%d" % (me, self.peer_port(i)),
               "--initial-advertise-peer-urls", "http://%s:%d" % (me, self.peer_port(i)),
               "--initial-cluster", cluster, "--initial-cluster-state", "new",
               "--initial-cluster-token", self.token,
               "--heartbeat-interval", "50", "--election-timeout", "500",
               # What TierFS needs of a cluster (README): a metadata operation is one
               # transaction, however many keys it writes; history compacted hourly.
               "--max-txn-ops", "100000", "--max-request-bytes", str(32 << 20),
               "--auto-compaction-mode", "periodic", "--auto-compaction-retention", "1h",
               "--quota-backend-bytes", str(2 << 30), "--logger", "zap", "--log-outputs", self._log(i)]
        if self.tls:
            cmd += ["--cert-file", self.tls["cert"], "--key-file", self.tls["key"], "--trusted-ca-file",
                    self.tls["ca"], "--client-cert-auth"]
        with open(self._log(i) + ".out", "ab") as out:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    cwd=self.dir, start_new_session=True)
        with open(self._pidfile(i), "w") as f:
            f.write(f"{proc.pid}\n")
        self.procs[i] = proc

    def _scheme(self):
        return "https" if self.tls else "http"

    def _ssl(self):
        if not self.tls:
            return None
        import ssl
        ctx = ssl.create_default_context(cafile=self.tls["ca"])
        ctx.load_cert_chain(self.tls["client_cert"], self.tls["client_key"])
        return ctx

    def healthy(self, i):
        import urllib.request
        try:
            with urllib.request.urlopen("%s://%s/health" % (self._scheme(), self.endpoint(i)), timeout=1,
                                        context=self._ssl()) as r:
                return b'"health":"true"' in r.read()
        except Exception:
            return False

    def start(self, fresh=True):
        if all(self.running(i) for i in range(self.n)):
            return self
        for i in range(self.n):
            if not self.prefixes[i]:
                _need_free(self.client_port(i), "etcd")
        if fresh:
            shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir, exist_ok=True)
        for i in range(self.n):
            self.start_member(i, fresh=fresh)
        _wait("etcd cluster on ports %s" % self.endpoints(), lambda: all(self.healthy(i) for i in range(self.n)), 60,
              self._log(0))
        return self

    def leader(self):
        """The index of the member that leads now, as the running members report it (None:
        none says)."""
        import urllib.request
        ids, lead = {}, None
        for i in range(self.n):
            if not self.running(i):
                continue
            try:
                req = urllib.request.Request("%s://%s/v3/maintenance/status" % (self._scheme(), self.endpoint(i)),
                                             data=b"{}", method="POST")
                with urllib.request.urlopen(req, timeout=2, context=self._ssl()) as r:
                    st = json.loads(r.read())
            except Exception:
                continue
            ids[st["header"]["member_id"]] = i
            lead = st.get("leader", lead)
        return ids.get(lead)

    def kill_member(self, i, sig=signal.SIGKILL):
        _kill_pidfile(self._pidfile(i), sig)
        proc = self.procs.pop(i, None)
        if proc is not None:
            proc.wait()  # reaped: a test process that restarts members leaves no zombies

    def stop(self):
        for i in range(self.n):
            self.kill_member(i, signal.SIGTERM)


def env(root):
    """The environment variables through which tests find the servers."""
    ceph = Ceph(root)
    return {
        "TIERFS_TEST_SERVERS": root,
        "TIERFS_TEST_REDIS_URL": Redis(root).url(),
        "TIERFS_TEST_PG_URL": Postgres(root).url(),
        "TIERFS_TEST_S3_ENDPOINT": ceph.endpoint(),
        "TIERFS_TEST_S3_ACCESS_KEY": S3_ACCESS_KEY,
        "TIERFS_TEST_S3_SECRET_KEY": S3_SECRET_KEY,
        "TIERFS_TEST_CEPH_CONF": ceph.conf,
        "TIERFS_TEST_RADOS_POOL": RADOS_POOL,
        "TIERFS_TEST_AZURE_ENDPOINT": Azurite(root).endpoint(),
        "TIERFS_TEST_AZURE_ACCOUNT": AZURE_ACCOUNT,
        "TIERFS_TEST_AZURE_KEY": AZURE_KEY,
        "TIERFS_TEST_ETCD_URL": Etcd(root).url(),
        "TIERFS_TEST_REDIS_SENTINEL_URL": _redis_ha(root).url().rsplit("/", 1)[0],
    }


def _redis_ha(root):
    import redis_ha  # it imports this module
    return redis_ha.RedisSentinel(root, port=REDIS_HA_PORT)


def _servers(root, which, bluestore=None):
    table = {"redis": Redis(root), "postgres": Postgres(root), "ceph": Ceph(root, bluestore=bluestore),
             "azurite": Azurite(root), "etcd": Etcd(root), "redis-ha": _redis_ha(root)}
    names = list(table) if which == "all" else [which]
    return [(n, table[n]) for n in names]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", choices=["up", "down", "env"])
    p.add_argument("which", nargs="?", default="all", choices=["redis", "postgres", "ceph", "azurite", "etcd", "redis-ha", "all"])
    p.add_argument("--dir", required=True, help="state directory of the servers")
    p.add_argument("--cmake", action="store_true", help="env: print a CMake list of K=V")
    p.add_argument("--bluestore", action="store_true",
                   help="up: Ceph OSD on bluestore over a sparse file instead of memstore "
                        "(same as TIERFS_CEPH_BLUESTORE=1; size TIERFS_CEPH_OSD_BYTES)")
    a = p.parse_args()
    root = os.path.abspath(a.dir)
    if a.action == "env":
        if a.cmake:
            print(";".join(f"{k}={v}" for k, v in env(root).items()), end="")
        else:
            for k, v in env(root).items():
                print(f"export {k}={v}")
        return
    if a.which == "all":
        # The kernel's switch for FUSE over io_uring: the run leaves it as it found it.
        remember_fuse_uring(root) if a.action == "up" else restore_fuse_uring(root)
    for name, server in _servers(root, a.which, bluestore=True if a.bluestore else None):
        t0 = time.time()
        if a.action == "up":
            server.start()
            print(f"{name} up in {time.time() - t0:.1f} s")
        else:
            server.stop()
            print(f"{name} stopped")


if __name__ == "__main__":
    sys.exit(main())
