#!/usr/bin/env python3
"""On etcd and on Redis, a mount drops what the kernel caches of other clients' changes as
the engine pushes them (fuse/remote_invalidation.h; etcd's watch, the Redis commit
script's publication), and on SQLite (mounts on one host) and PostgreSQL as the change log
is polled (volumes formatted with --changelog-hours; meta/change_log_watch.h): with
attributes and names cached for 60 s, a chmod, a write, a
rename, a removal and a new file made through another mount show within seconds; a mount
with --no-meta-watch, same caches, still shows the old state (so the kernel's caches are
really in play), and the mount that made the changes drops nothing of its own. Then the
servers fail: on etcd each member of the three in turn is SIGKILLed and restarted
(whichever member carried the watch, the stream resumes on another); on Redis a change
made while the watcher is unsubscribed (its user denied the channel for a while) shows as
soon as it subscribes again (every cached name is dropped), and after a restart of the
server changes show as before."""
import json
import os
import signal
import stat
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import servers  # noqa: E402

CACHE = ["--attr-cache", "60", "--entry-cache", "60", "--dir-entry-cache", "60"]
SEEN_WITHIN_S = 10  # a push takes milliseconds; the bound only keeps a failure from hanging


def stats(mnt):
    return json.loads(os.getxattr(mnt, "tierfs.stats"))


def invalidations(mnt):
    s = stats(mnt)["metrics"]
    return sum(v for k, v in s.items() if k.startswith("tierfs_remote_invalidations_total"))


def all_invalidations(mnt):
    return stats(mnt)["metrics"].get('tierfs_remote_invalidations_total{kind="all"}', 0)


def mode_of(path):
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return None


def size_of(path):
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return None


class MetaWatchCases:
    """The checks every watching engine passes; a subclass starts its servers and sets
    meta_url in start_servers."""
    AUTO_MOUNT = False
    FORMAT_ARGS = ()

    def setUp(self):
        super().setUp()
        self.tmp = self.local_tmpdir()
        meta_url = self.start_servers()
        self.vol = harness.Volume("watchvol", meta_url=meta_url, base=self.tmp)
        self.addCleanup(self.vol.cleanup)
        self.vol.format(*self.FORMAT_ARGS)
        self.vol.mount(*CACHE)  # the writer
        self.watching = os.path.join(self.tmp, "watching")
        self.blind = os.path.join(self.tmp, "blind")
        for mnt, extra in ((self.watching, []), (self.blind, ["--no-meta-watch"])):
            os.makedirs(mnt)
            res = self.vol.mount_at(mnt, *(CACHE + extra))
            self.assertEqual(res[0], 0, harness.msg(*res))

    def eventually(self, what, fn, want):
        deadline = time.monotonic() + SEEN_WITHIN_S
        got = fn()
        while got != want and time.monotonic() < deadline:
            time.sleep(0.05)
            got = fn()
        self.assertEqual(got, want, what)

    def check_other_clients_changes_show_at_once_with_long_caches(self):
        a = self.vol.mnt
        for name in ("f", "g", "h"):
            with open(os.path.join(a, name), "w") as f:
                f.write("x")
        os.chmod(os.path.join(a, "f"), 0o644)
        # Both readers cache f's attributes, g's and h's names, and the absence of "new".
        for m in (self.watching, self.blind):
            self.assertEqual(mode_of(os.path.join(m, "f")), 0o644)
            self.assertEqual(size_of(os.path.join(m, "g")), 1)
            self.assertEqual(size_of(os.path.join(m, "h")), 1)
            self.assertIsNone(mode_of(os.path.join(m, "new")))
        own_before = invalidations(a)

        os.chmod(os.path.join(a, "f"), 0o600)
        with open(os.path.join(a, "g"), "a") as f:
            f.write("more")
        os.rename(os.path.join(a, "h"), os.path.join(a, "h2"))
        with open(os.path.join(a, "new"), "w") as f:
            f.write("new")

        w = self.watching
        self.eventually("chmod", lambda: mode_of(os.path.join(w, "f")), 0o600)
        self.eventually("size after a write", lambda: size_of(os.path.join(w, "g")), 5)
        self.eventually("renamed away", lambda: size_of(os.path.join(w, "h")), None)
        self.eventually("renamed to", lambda: size_of(os.path.join(w, "h2")), 1)
        self.eventually("a new file over a cached absence", lambda: size_of(os.path.join(w, "new")), 3)
        self.assertGreater(invalidations(w), 0)

        # The same caches without the watch: the old state, for the caches' 60 s.
        b = self.blind
        self.assertEqual(mode_of(os.path.join(b, "f")), 0o644)
        self.assertEqual(size_of(os.path.join(b, "g")), 1)
        self.assertEqual(size_of(os.path.join(b, "h")), 1)
        self.assertIsNone(mode_of(os.path.join(b, "new")))
        self.assertEqual(invalidations(b), 0)
        # The writer dropped nothing for its own changes.
        self.assertEqual(invalidations(a), own_before)


class EtcdMetaWatchTest(MetaWatchCases, harness.TierFSTestCase):
    def start_servers(self):
        self.etcd = servers.Etcd(self.tmp, port=servers.free_ports(6), name="etcd-watch")
        self.addCleanup(self.etcd.stop)
        self.etcd.start()
        return self.etcd.url("watch") + "?timeout=15s"

    def test_changes_show_at_once_and_member_losses_lose_none(self):
        self.check_other_clients_changes_show_at_once_with_long_caches()
        a, w = self.vol.mnt, self.watching
        # Whichever member carries the stream, losing it loses no change.
        for i in range(3):
            self.etcd.kill_member(i, signal.SIGKILL)
            os.chmod(os.path.join(a, "f"), 0o640 + i)  # while the member is down
            self.eventually("chmod while member %d is down" % i, lambda: mode_of(os.path.join(w, "f")), 0o640 + i)
            self.etcd.start_member(i)
            self.assertTrue(harness.wait_for(lambda: self.etcd.healthy(i), timeout=30), "member %d did not rejoin" % i)
            os.chmod(os.path.join(a, "f"), 0o600 + i)
            self.eventually("chmod after member %d is back" % i, lambda: mode_of(os.path.join(w, "f")), 0o600 + i)


class RedisMetaWatchTest(MetaWatchCases, harness.TierFSTestCase):
    def start_servers(self):
        self.redis = servers.Redis(self.tmp, port=servers.free_ports(1))
        self.addCleanup(self.redis.stop)
        self.redis.start()
        return self.redis.url() + "/1?timeout=30s"

    def cli(self, *args):
        out = subprocess.run(["redis-cli", "-p", str(self.redis.port)] + list(args), capture_output=True,
                             text=True, timeout=10)
        self.assertEqual(out.returncode, 0, out.stderr)
        return out.stdout.strip()

    def test_changes_show_at_once_and_a_server_restart_loses_none(self):
        self.check_other_clients_changes_show_at_once_with_long_caches()
        a, w = self.vol.mnt, self.watching
        # A change made while the watcher cannot subscribe (its user denied the channel for
        # a while, its subscription cut) is never published to it: once it subscribes again
        # it drops every name the kernel caches (Linux 6.16+), so the change shows anyway.
        alls = all_invalidations(w)
        self.assertEqual(self.cli("ACL", "SETUSER", "default", "resetchannels"), "OK")
        # Cut until nobody is subscribed: a watcher that was between connections when the
        # first kill came must not be left subscribed (this failed once under load).
        deadline = time.monotonic() + SEEN_WITHIN_S
        while True:
            self.cli("CLIENT", "KILL", "TYPE", "pubsub")
            time.sleep(0.3)
            if self.cli("PUBSUB", "NUMSUB", "tierfs:changes:1").split() == ["tierfs:changes:1", "0"]:
                break
            self.assertLess(time.monotonic(), deadline, "a watcher stayed subscribed with the channel denied")
        self.assertEqual(mode_of(os.path.join(w, "f")), 0o600)  # cached again, should a late drop have come
        os.chmod(os.path.join(a, "f"), 0o604)
        with open(os.path.join(a, "gap-new"), "w") as f:
            f.write("g")
        time.sleep(0.5)
        self.assertEqual(mode_of(os.path.join(w, "f")), 0o600, "the kernel's cache is still in play")
        self.assertEqual(self.cli("ACL", "SETUSER", "default", "allchannels"), "OK")
        self.eventually("a chmod in the gap", lambda: mode_of(os.path.join(w, "f")), 0o604)
        self.eventually("a new file in the gap", lambda: size_of(os.path.join(w, "gap-new")), 1)
        self.assertGreater(all_invalidations(w), alls)
        # A restart cuts the subscription too; changes after it show as before.
        self.redis.restart()
        os.chmod(os.path.join(a, "f"), 0o602)  # waits for the server, like any commit
        self.eventually("chmod once the server is back", lambda: mode_of(os.path.join(w, "f")), 0o602)
        os.chmod(os.path.join(a, "f"), 0o606)
        self.eventually("a later chmod", lambda: mode_of(os.path.join(w, "f")), 0o606)



class SqliteMetaWatchTest(MetaWatchCases, harness.TierFSTestCase):
    """The embedded engine has no push: the change log is polled (a read of its counter
    every 100 ms), which is how mounts of one SQLite file on one host see each other."""
    FORMAT_ARGS = ("--changelog-hours", "1")

    def start_servers(self):
        return None  # the volume's own meta.db

    def test_changes_show_at_once(self):
        self.check_other_clients_changes_show_at_once_with_long_caches()

    def test_without_the_change_log_the_timeouts_rule(self):
        # A volume without the log has nothing to poll: the watching mount keeps the old
        # state for its caches' 60 s, like the blind one (so the test above is the poll's).
        self.vol.umount()
        for mnt in (self.watching, self.blind):
            subprocess.run(["umount", mnt], check=True)
        r = harness.tierfs("config", self.vol.meta_url, "--changelog-hours", "0")
        self.assertEqual(r[0], 0, harness.msg(*r))
        self.vol.mount(*CACHE)
        res = self.vol.mount_at(self.watching, *CACHE)
        self.assertEqual(res[0], 0, harness.msg(*res))
        a, w = self.vol.mnt, self.watching
        with open(os.path.join(a, "f"), "w") as f:
            f.write("x")
        os.chmod(os.path.join(a, "f"), 0o644)
        self.assertEqual(mode_of(os.path.join(w, "f")), 0o644)
        os.chmod(os.path.join(a, "f"), 0o600)
        time.sleep(1)
        self.assertEqual(mode_of(os.path.join(w, "f")), 0o644)
        self.assertEqual(invalidations(w), 0)


class PostgresMetaWatchTest(MetaWatchCases, harness.TierFSTestCase):
    FORMAT_ARGS = ("--changelog-hours", "1", "--force")

    def start_servers(self):
        return harness.servers()["pg_url"] + "/tierfs_watch"

    def test_changes_show_at_once(self):
        self.check_other_clients_changes_show_at_once_with_long_caches()


if __name__ == "__main__":
    harness.main()
