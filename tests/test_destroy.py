"""`tierfs destroy META-URL UUID`: refused with a wrong UUID, while a client is mounted
(naming it) and without --yes off a terminal, with nothing deleted; on a terminal it asks for
the volume's name; then every object of the volume goes from the bucket and the metadata
from the engine (status finds no volume), while another volume's objects in the same bucket
stay. A client cannot mount while a destroy runs: one that mounted during the
confirmation makes the destroy refuse, and a destroy that stopped half-way keeps clients
out until it is run again. Destroy removes the volume's folder from this host's cache
directories (never staged writes); a mount reports the folders of volumes it does not know,
and `tierfs gc --cache` removes those unused for long (never in use, never staged writes).
"""

import json
import os
import pty
import socket
import time

import harness
from harness import msg, run, tierfs


def files_under(d):
    return sorted(os.path.join(r, f) for r, _, fs in os.walk(d) for f in fs)


class DestroyTest(harness.TierFSTestCase):
    PER_TEST = True
    AUTO_MOUNT = False

    def test_destroy(self):
        vol = self.new_volume(name="doomed")
        self.addCleanup(vol.cleanup)
        vol.format()
        # A second volume in the same bucket directory: its objects must stay.
        other_meta = "sqlite3://" + os.path.join(vol.dir, "other.db")
        rc, out, err = tierfs("format", other_meta, "kept", "--storage", "file", "--bucket", vol.bucket)
        self.assertEqual(rc, 0, msg(rc, out, err))
        other_mnt = os.path.join(vol.dir, "other-mnt")
        os.mkdir(other_mnt)
        other = harness.Volume(name="kept", meta_url=other_meta)
        self.addCleanup(other.cleanup)
        rc, out, err = run(harness.tierfs_bin(), "mount", other_meta, other_mnt, "-d", "--cache-dir",
                           os.path.join(vol.dir, "other-cache"))
        self.assertEqual(rc, 0, msg(rc, out, err))
        other._mountpoints.add(other_mnt)
        with open(os.path.join(other_mnt, "keep"), "wb") as f:
            f.write(os.urandom(200000))
        rc, out, err = tierfs("umount", other_mnt)
        self.assertEqual(rc, 0, msg(rc, out, err))

        vol.mount()
        for i in range(20):
            with open(vol.path("f%d" % i), "wb") as f:
                f.write(os.urandom(100000 + i))
        uuid = vol.status_json()["uuid"]
        doomed_dir = os.path.join(vol.bucket, "doomed")
        kept_dir = os.path.join(vol.bucket, "kept")

        # Mounted: refused, naming the mount.
        rc, out, err = tierfs("destroy", vol.meta_url, uuid, "--yes")
        self.assertNotEqual(rc, 0)
        self.assertIn("live client", err)
        self.assertIn(vol.mnt, err)
        vol.umount()
        before = files_under(doomed_dir)
        kept = files_under(kept_dir)
        self.assertGreaterEqual(len(before), 20)
        self.assertGreater(len(kept), 0)

        # The wrong UUID, and no terminal without --yes: refused, nothing deleted.
        rc, out, err = tierfs("destroy", vol.meta_url, "00000000-0000-0000-0000-000000000000", "--yes")
        self.assertNotEqual(rc, 0)
        self.assertIn("is not the UUID of volume doomed", err)
        rc, out, err = tierfs("destroy", vol.meta_url, uuid)
        self.assertNotEqual(rc, 0)
        self.assertIn("--yes", err)
        self.assertEqual(files_under(doomed_dir), before)
        self.assertEqual(vol.status_json()["uuid"], uuid)

        # On a terminal: a wrong name cancels, the right one destroys.
        self.assertNotEqual(self.on_terminal(vol.meta_url, uuid, "kept\n")[0], 0)
        self.assertEqual(files_under(doomed_dir), before)
        rc, out = self.on_terminal(vol.meta_url, uuid, "doomed\n")
        self.assertEqual(rc, 0, out)
        self.assertIn("%d objects deleted" % len(before), out)
        self.assertEqual(files_under(doomed_dir), [])
        self.assertFalse(os.path.exists(doomed_dir))  # emptied directories go too
        self.assertEqual(files_under(kept_dir), kept)
        rc, out, err = tierfs("status", vol.meta_url)
        self.assertNotEqual(rc, 0)
        self.assertIn("no TierFS volume", err)
        # The other volume is whole.
        rc, out, err = tierfs("fsck", other_meta, "--deep")
        self.assertEqual(rc, 0, msg(rc, out, err))

    def test_no_client_starts_while_a_destroy_runs(self):
        vol = self.new_volume(name="doomed")
        self.addCleanup(vol.cleanup)
        vol.format()
        vol.mount()
        with open(vol.path("f"), "wb") as f:
            f.write(os.urandom(300000))
        uuid = vol.status_json()["uuid"]
        vol.umount()
        doomed_dir = os.path.join(vol.bucket, "doomed")
        before = files_under(doomed_dir)

        # A client that mounts while destroy waits for its confirmation is seen by the second
        # look: refused, nothing deleted, and the mount goes on working.
        rc, out = self.on_terminal(vol.meta_url, uuid, "doomed\n", before_typing=vol.mount)
        self.assertNotEqual(rc, 0, out)
        self.assertIn("live client", out)
        self.assertEqual(files_under(doomed_dir), before)
        with open(vol.path("g"), "wb") as f:
            f.write(b"still mounted")
        vol.umount()
        vol.mount()  # the mark was taken back
        vol.umount()

        # A destroy that stops half-way (deletions fail on a read-only bucket) leaves the
        # volume marked: no client may mount it until destroy is run again.
        run("mount", "--bind", vol.bucket, vol.bucket)
        self.addCleanup(run, "umount", "-l", vol.bucket)
        res = run("mount", "-o", "remount,bind,ro", vol.bucket)
        self.assertEqual(res[0], 0, msg(*res))
        rc, out, err = tierfs("destroy", vol.meta_url, uuid, "--yes")
        self.assertNotEqual(rc, 0, msg(rc, out, err))
        self.assertIn("run destroy again", err)
        res = run("umount", vol.bucket)
        self.assertEqual(res[0], 0, msg(*res))
        res = vol.mount(check=False)
        self.assertNotEqual(res[0], 0, msg(*res))
        self.assertIn("is being destroyed", res[2])
        # A long destroy serves metrics while it runs, like gc and fsck.
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        rc, out, err = tierfs("destroy", vol.meta_url, uuid, "--yes", "--metrics", "127.0.0.1:%d" % port)
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.assertIn("tierfs destroy: metrics on http://127.0.0.1:%d/metrics" % port, err)
        self.assertEqual(files_under(doomed_dir), [])

    def test_destroy_removes_this_hosts_cache_folders_but_never_staged_writes(self):
        vol = self.new_volume(name="doomed")
        self.addCleanup(vol.cleanup)
        vol.format()
        cache = os.path.join(vol.dir, "cache")
        vol.mount("--cache-dir", cache, "--cache-writes")
        for i in range(5):
            with open(vol.path("f%d" % i), "wb") as f:
                f.write(os.urandom(100000))
        uuid = vol.status_json()["uuid"]
        vol.umount()
        folder = os.path.join(cache, uuid)
        self.assertTrue(os.path.isdir(folder))
        # Another cache directory of this host where a --writeback client of the volume left
        # staged blocks: not cache, so destroy leaves it and says so.
        other = os.path.join(vol.dir, "other-cache")
        staged = os.path.join(other, uuid, "staging", "0000000000000001")
        os.makedirs(os.path.dirname(staged))
        with open(staged, "wb") as f:
            f.write(b"acknowledged, not uploaded")
        rc, out, err = tierfs("destroy", vol.meta_url, uuid, "--yes", "--cache-dir", cache + ":" + other)
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.assertFalse(os.path.exists(folder), "the volume's cache folder is gone")
        self.assertIn("removed the volume's cache folder " + folder, out)
        self.assertTrue(os.path.exists(staged))
        self.assertIn("staged", err)
        self.assertIn(os.path.join(other, uuid), err)

    def test_mount_reports_and_gc_cache_removes_folders_of_unknown_volumes(self):
        cache = os.path.join(self.local_tmpdir(), "shared-cache")
        day = 86400

        def age(path, days):
            t = time.time() - days * day
            for d, dirs, files in os.walk(path):
                for n in dirs + files:
                    os.utime(os.path.join(d, n), (t, t))
            os.utime(path, (t, t))

        def volume(name):
            v = self.new_volume(name=name)
            self.addCleanup(v.cleanup)
            v.format()
            v.mount("--cache-dir", cache, "--cache-writes")
            with open(v.path("f"), "wb") as f:
                f.write(os.urandom(200000))
            uuid = v.status_json()["uuid"]
            v.umount()
            return v, uuid

        keep, keep_uuid = volume("keep")
        gone, gone_uuid = volume("gone")
        os.unlink(gone.meta_db)  # its engine is gone: nothing on this host knows the volume
        age(os.path.join(cache, gone_uuid), 40.5)
        # A folder with staged writes of a volume of another engine, unused as long.
        staged_uuid = "5f0c3c4e-1111-4222-8333-944444444444"
        staged = os.path.join(cache, staged_uuid, "staging", "0000000000000001")
        os.makedirs(os.path.dirname(staged))
        with open(staged, "wb") as f:
            f.write(b"acknowledged, not uploaded")
        with open(os.path.join(cache, staged_uuid, "index"), "wb"):
            pass
        age(os.path.join(cache, staged_uuid), 50.5)
        # A folder used yesterday.
        recent_uuid = "6f0c3c4e-1111-4222-8333-944444444444"
        os.makedirs(os.path.join(cache, recent_uuid, "blocks"))
        with open(os.path.join(cache, recent_uuid, "index"), "wb"):
            pass
        age(os.path.join(cache, recent_uuid), 1.5)

        keep.mount("--cache-dir", cache)
        log = keep.read_log()
        self.assertIn(gone_uuid + " (unused for 40 days)", log)
        self.assertIn(staged_uuid + " (holds staged writes)", log)
        self.assertIn("tierfs gc --cache --cache-dir " + cache, log)

        rc, out, err = tierfs("gc", "--cache", "--cache-dir", cache)
        self.assertEqual(rc, 0, msg(rc, out, err))
        lines = {line.split()[0]: line for line in out.splitlines() if line.startswith(cache)}
        self.assertIn("would remove", lines[os.path.join(cache, gone_uuid)])
        self.assertIn("in use", lines[os.path.join(cache, keep_uuid)])
        self.assertIn("staged", lines[os.path.join(cache, staged_uuid)])
        self.assertIn("kept", lines[os.path.join(cache, recent_uuid)])
        self.assertTrue(os.path.isdir(os.path.join(cache, gone_uuid)), "nothing removed without --delete")

        rc, out, err = tierfs("gc", "--cache", "--cache-dir", cache, "--delete", "--json")
        self.assertEqual(rc, 0, msg(rc, out, err))
        report = json.loads(out)
        self.assertEqual(report["removed"], 1, report)
        self.assertFalse(os.path.exists(os.path.join(cache, gone_uuid)))
        for uuid in (keep_uuid, staged_uuid, recent_uuid):
            self.assertTrue(os.path.isdir(os.path.join(cache, uuid)), uuid)
        self.assertTrue(os.path.exists(staged))
        keep.umount()
        # The volume named by a META-URL is kept whatever its age.
        age(os.path.join(cache, keep_uuid), 60)
        rc, out, err = tierfs("gc", keep.meta_url, "--cache", "--cache-dir", cache, "--delete", "--unused", "0")
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.assertTrue(os.path.isdir(os.path.join(cache, keep_uuid)))
        self.assertFalse(os.path.exists(os.path.join(cache, recent_uuid)), "--unused 0: unused folders go")
        self.assertTrue(os.path.exists(staged))
        keep.mount("--cache-dir", cache)  # the kept cache still works
        with open(keep.path("f"), "rb") as f:
            self.assertEqual(len(f.read()), 200000)

    def on_terminal(self, meta_url, uuid, typed, before_typing=None):
        """Runs destroy with a terminal as stdin and stderr; returns (rc, everything printed).
        before_typing: called once destroy asks for the name, before it is typed."""
        pid, fd = pty.fork()
        if pid == 0:
            os.execv(harness.tierfs_bin(), [harness.tierfs_bin(), "destroy", meta_url, uuid])
        out = b""
        sent = False
        while True:
            try:
                b = os.read(fd, 4096)
            except OSError:
                break
            if not b:
                break
            out += b
            if not sent and b"Type the volume's name" in out:
                if before_typing:
                    before_typing()
                os.write(fd, typed.encode())
                sent = True
        _, status = os.waitpid(pid, 0)
        os.close(fd)
        return os.WEXITSTATUS(status), out.decode(errors="replace")


if __name__ == "__main__":
    harness.main()
