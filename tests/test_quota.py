"""Exact quotas on real mounts, on SQLite and on Redis: `format --capacity/--inodes` limits
the volume and `df` shows them; a directory quota stops writes (EDQUOT) and creates at the
exact byte and inode, and `df` inside the directory and on a `--subdir` mount of it shows
the quota; `mv` between quota trees moves the usage; user quotas follow chown; two clients
racing into one quota never overshoot by a byte or an inode; a killed client leaves the
usage exact; `quota check` finds a wrong usage (from a doctored dump) and `--repair` fixes
it; dump and load carry quotas.
"""

import errno
import json
import os
import signal
import subprocess
import sys
import threading

import harness
from harness import msg, tierfs

KiB, MiB = 1024, 1 << 20


def quota(vol_or_url, *args):
    url = vol_or_url if isinstance(vol_or_url, str) else vol_or_url.meta_url
    rc, out, err = tierfs("quota", args[0], url, *args[1:], "--json")
    if rc != 0:
        raise AssertionError("tierfs quota %s failed\n%s" % (" ".join(args), msg(rc, out, err)))
    return json.loads(out) if out.strip() else None


def write_file(path, size, mode="wb"):
    """Writes size bytes and closes; returns the errno of a failure (0: none)."""
    try:
        with open(path, mode) as f:
            f.write(b"q" * size)
        return 0
    except OSError as e:
        return e.errno


class QuotaTest(harness.TierFSTestCase):
    PER_TEST = True
    AUTO_MOUNT = False

    def check_quotas(self, vol):
        vol.format("--force", "--capacity", "64M", "--inodes", "1000")
        vol.mount()
        st = os.statvfs(vol.mnt)
        self.assertEqual(st.f_blocks * st.f_frsize, 64 * MiB)
        self.assertEqual(st.f_files, 1000)
        self.assertEqual(vol.status_json()["capacity"], 64 * MiB)

        dept = os.path.join(vol.mnt, "dept")
        os.makedirs(os.path.join(dept, "sub"))
        quota(vol, "set", "--path", "/dept", "--capacity", "8M", "--inodes", "20")
        for where in (dept, os.path.join(dept, "sub")):
            st = os.statvfs(where)
            self.assertEqual(st.f_blocks * st.f_frsize, 8 * MiB, where)
            self.assertEqual(st.f_files, 20, where)
        # Bytes: 6 MiB fit, 3 MiB more do not; the failed file keeps no data.
        self.assertEqual(write_file(os.path.join(dept, "a"), 6 * MiB), 0)
        self.assertEqual(write_file(os.path.join(dept, "sub", "b"), 3 * MiB), errno.EDQUOT)
        self.assertEqual(write_file(os.path.join(dept, "sub", "c"), 2 * MiB), 0)  # exactly full
        q = quota(vol, "get", "--path", "/dept")
        self.assertEqual(q["used_bytes"], 8 * MiB)
        self.assertEqual(q["used_inodes"], 4)  # sub, a, b (empty), c
        st = os.statvfs(dept)
        self.assertEqual(st.f_bfree, 0)
        self.assertEqual(write_file(os.path.join(dept, "sub", "c"), 1, "ab"), errno.EDQUOT)
        self.assertEqual(os.stat(os.path.join(dept, "sub", "c")).st_size, 2 * MiB)
        # Inodes: creates stop at exactly 20.
        made = 0
        for i in range(30):
            try:
                open(os.path.join(dept, "e%02d" % i), "wb").close()
                made += 1
            except OSError as e:
                self.assertEqual(e.errno, errno.EDQUOT)
        self.assertEqual(made, 16)
        with self.assertRaises(OSError) as cm:
            os.mkdir(os.path.join(dept, "more"))
        self.assertEqual(cm.exception.errno, errno.EDQUOT)

        # mv between quota trees moves the usage, refused when it does not fit.
        other = os.path.join(vol.mnt, "other")
        os.mkdir(other)
        quota(vol, "set", "--path", "/other", "--capacity", "4M")
        with self.assertRaises(OSError) as cm:
            os.rename(os.path.join(dept, "a"), os.path.join(other, "a"))
        self.assertEqual(cm.exception.errno, errno.EDQUOT)
        os.rename(os.path.join(dept, "sub"), os.path.join(other, "sub"))
        self.assertEqual(quota(vol, "get", "--path", "/other")["used_bytes"], 2 * MiB)
        self.assertEqual(quota(vol, "get", "--path", "/other")["used_inodes"], 3)
        self.assertEqual(quota(vol, "get", "--path", "/dept")["used_bytes"], 6 * MiB)
        # User quotas follow chown.
        quota(vol, "set", "--uid", "1234", "--capacity", "1M")
        os.chown(os.path.join(other, "sub", "b"), 1234, -1)
        with self.assertRaises(OSError) as cm:
            os.chown(os.path.join(other, "sub", "c"), 1234, -1)
        self.assertEqual(cm.exception.errno, errno.EDQUOT)
        self.assertEqual(quota(vol, "get", "--uid", "1234")["used_inodes"], 1)

        # A --subdir mount of the directory shows its quota.
        sub_mnt = os.path.join(vol.dir, "submnt")
        os.mkdir(sub_mnt)
        self.assertOk(vol.mount_at(sub_mnt, "--subdir", "/dept"), "mount --subdir")
        try:
            st = os.statvfs(sub_mnt)
            self.assertEqual(st.f_blocks * st.f_frsize, 8 * MiB)
            self.assertEqual(st.f_files, 20)
        finally:
            tierfs("umount", sub_mnt)
        rc, out, err = tierfs("quota", "check", vol.meta_url)
        self.assertEqual(rc, 0, msg(rc, out, err))
        listed = quota(vol, "list")
        self.assertEqual(len(listed), 4, listed)  # /, /dept, /other, uid 1234
        vol.umount()
        rc, out, err = tierfs("fsck", vol.meta_url, "--json")
        self.assertEqual(rc, 0, msg(rc, out, err))

    def test_quotas_on_sqlite(self):
        vol = self.new_volume()
        self.addCleanup(vol.cleanup)
        self.check_quotas(vol)

    def test_quotas_on_redis(self):
        url = harness.servers()["redis_url"] + "/%d" % harness.REDIS_DB["quota"]
        vol = self.new_volume(meta_url=url)
        self.addCleanup(vol.cleanup)
        self.check_quotas(vol)

    def test_two_clients_racing_never_overshoot(self):
        url = harness.servers()["redis_url"] + "/%d" % harness.REDIS_DB["quota"]
        vol = self.new_volume(meta_url=url)
        self.addCleanup(vol.cleanup)
        vol.format("--force")
        vol.mount()
        second = os.path.join(vol.dir, "second")
        os.mkdir(second)
        self.assertOk(vol.mount_at(second), "second mount")
        os.mkdir(os.path.join(vol.mnt, "race"))
        limit_files, size = 150, 8 * KiB
        quota(vol, "set", "--path", "/race", "--capacity", str(limit_files * size), "--inodes", "400")
        results = []
        lock = threading.Lock()

        def writer(mnt, tag):
            for i in range(100):
                rc = write_file(os.path.join(mnt, "race", "%s-%03d" % (tag, i)), size)
                with lock:
                    results.append(rc)

        threads = [threading.Thread(target=writer, args=(m, "%d%d" % (c, t)))
                   for c, m in enumerate((vol.mnt, second)) for t in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(set(results) - {0, errno.EDQUOT}, set())
        self.assertEqual(results.count(0), limit_files)
        race = os.path.join(vol.mnt, "race")
        sizes = [os.stat(os.path.join(race, n)).st_size for n in os.listdir(race)]
        self.assertEqual(len(sizes), 400)  # every inode the quota allows, not one more
        self.assertEqual(sum(sizes), limit_files * size)  # not one byte over
        q = quota(vol, "get", "--path", "/race")
        self.assertEqual(q["used_bytes"], limit_files * size)
        self.assertEqual(q["used_inodes"], len(sizes))
        tierfs("umount", second)
        rc, out, err = tierfs("quota", "check", vol.meta_url)
        self.assertEqual(rc, 0, msg(rc, out, err))

    def test_a_killed_client_leaves_usage_exact(self):
        vol = self.new_volume()
        self.addCleanup(vol.cleanup)
        vol.format()
        vol.mount()
        os.mkdir(os.path.join(vol.mnt, "d"))
        quota(vol, "set", "--path", "/d", "--capacity", "1G")
        code = ("import os,sys\n"
                "for i in range(100000):\n"
                "    with open(os.path.join(sys.argv[1], 'f%d' % i), 'wb') as f: f.write(b'k' * 5000)\n")
        p = subprocess.Popen([sys.executable, "-c", code, os.path.join(vol.mnt, "d")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.assertTrue(harness.wait_for(lambda: len(os.listdir(os.path.join(vol.mnt, "d"))) > 200, timeout=60))
        os.kill(vol.pid, signal.SIGKILL)
        p.wait(timeout=60)
        vol.force_unmount(kill_first=True)
        rc, out, err = tierfs("quota", "check", vol.meta_url)
        self.assertEqual(rc, 0, msg(rc, out, err))
        vol.mount()
        q = quota(vol, "get", "--path", "/d")
        names = os.listdir(os.path.join(vol.mnt, "d"))
        self.assertEqual(q["used_inodes"], len(names))
        self.assertEqual(q["used_bytes"], sum((os.stat(os.path.join(vol.mnt, "d", n)).st_size + 4095) // 4096 * 4096
                                              for n in names))

    def test_check_repairs_and_dump_load_carry_quotas(self):
        vol = self.new_volume()
        self.addCleanup(vol.cleanup)
        vol.format()
        vol.mount()
        os.mkdir(os.path.join(vol.mnt, "d"))
        self.assertEqual(write_file(os.path.join(vol.mnt, "d", "f"), 10000), 0)
        quota(vol, "set", "--path", "/d", "--capacity", "1M", "--inodes", "10")
        quota(vol, "set", "--gid", "0", "--inodes", "100")
        vol.umount()
        dump = os.path.join(vol.dir, "dump.json")
        self.assertOk(tierfs("dump", vol.meta_url, dump), "dump")
        with open(dump) as f:
            doc = json.load(f)
        self.assertEqual(len(doc["quotas"]), 2, doc["quotas"])
        for q in doc["quotas"]:
            if q[0] == "D":
                q[4] = 123  # a wrong usage
        with open(dump, "w") as f:
            json.dump(doc, f)
        loaded = "sqlite3://" + os.path.join(vol.dir, "loaded.db")
        self.assertOk(tierfs("load", loaded, dump), "load")
        self.assertEqual(len(quota(loaded, "list")), 2)
        rc, out, err = tierfs("quota", "check", loaded)
        self.assertEqual(rc, 1, msg(rc, out, err))
        self.assertIn("recorded 123 bytes", err)
        rc, out, err = tierfs("quota", "check", loaded, "--repair")
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.assertEqual(tierfs("quota", "check", loaded)[0], 0)
        self.assertEqual(quota(loaded, "get", "--path", "/d")["used_bytes"], 12288)
        rc, out, err = tierfs("quota", "delete", loaded, "--gid", "0")
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.assertEqual(len(quota(loaded, "list")), 1)
        # Clear errors for what cannot work.
        self.assertFails(tierfs("quota", "set", loaded, "--path", "/nope", "--capacity", "1M"), "nope")
        self.assertFails(tierfs("quota", "set", loaded, "--path", "/d", "--capacity", "lots"), "--capacity")
        self.assertFails(tierfs("quota", "get", loaded, "--uid", "77"), "no quota")
        self.assertFails(tierfs("quota", "set", loaded, "--path", "/d"), "--capacity")


if __name__ == "__main__":
    harness.main()
