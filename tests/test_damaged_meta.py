"""Damaged metadata is never hidden (issue 22 item 3), on SQLite, Redis and PostgreSQL, with
records damaged by each engine's own client (tests/meta_damage.py):
- `tierfs dump` fails naming every record it cannot read and writes no file (to standard
  output: a document cut short that load refuses); `--skip-damaged` writes the rest, still
  exits 1 naming each, and that dump loads with --skip-dangling;
- one damaged directory entry (a value cut short; on Redis also a value of another type, or
  a value gone with its index entry left) does not make the directory unlistable: the
  others are listed, the client logs the entry's key, `fsck` reports it and `--repair`
  removes it; an inode whose attributes are damaged is listed by name and fsck reports it;
- a damaged chunk record makes reads of that file fail (EIO) instead of returning other
  bytes, and `gc` refuses to delete anything while such records exist.
"""

import json
import os

import harness
import meta_damage
from harness import msg, tierfs


class DamagedMetaTest(harness.TierFSTestCase):
    PER_TEST = True
    AUTO_MOUNT = False

    def engine_volume(self, engine):
        if engine == "sqlite":
            vol = self.new_volume()
        elif engine == "redis":
            vol = self.new_volume(meta_url=harness.servers()["redis_url"] + "/%d" % harness.REDIS_DB["damaged"])
        else:
            vol = self.new_volume(meta_url=harness.servers()["pg_url"] + "/tierfs_damaged")
        self.addCleanup(vol.cleanup)
        vol.format("--force")
        return vol

    def populate(self, vol):
        """d/{a,b,c,e,f} with data, and ok/ with intact files; returns {name: inode}."""
        vol.mount()
        inos = {}
        for sub in ("d", "ok"):
            os.mkdir(vol.path(sub))
        for name in ("a", "b", "c", "e", "f", "g"):
            with open(vol.path("d", name), "wb") as f:
                f.write(os.urandom(5000 + len(name)))
            inos[name] = os.stat(vol.path("d", name)).st_ino
        for i in range(20):
            with open(vol.path("ok", "f%d" % i), "wb") as f:
                f.write(b"intact %d" % i)
        inos["d"] = os.stat(vol.path("d")).st_ino
        vol.umount()
        return inos

    # ----- dump -----------------------------------------------------------------------

    def check_dump(self, engine):
        vol = self.engine_volume(engine)
        inos = self.populate(vol)
        dmg = meta_damage.for_url(vol.meta_url)
        dmg.set(meta_damage.attr_key(inos["a"]), b"\x01")              # attributes cut short
        dmg.set(meta_damage.entry_key(inos["d"], "b"), b"xx")          # an entry cut short
        dmg.set_prefix(meta_damage.chunks_prefix(inos["c"]), b"zz")    # the chunk records of c
        named = ["attributes of inode %d" % inos["a"], "entry 'b' of directory inode %d" % inos["d"],
                 "of chunk 0 of inode %d" % inos["c"]]
        out = os.path.join(vol.dir, "dump.json")
        rc, so, se = tierfs("dump", vol.meta_url, out)
        self.assertNotEqual(rc, 0, "dump of damaged metadata exited 0\n" + msg(rc, so, se))
        for n in named:
            self.assertIn(n, se, msg(rc, so, se))
        self.assertFalse(os.path.exists(out), "a failed dump left its file")
        self.assertFalse(os.path.exists(out + ".tmp"))
        # To standard output: cut short, so that a pipe into load cannot take it.
        rc, so, se = tierfs("dump", vol.meta_url, "-")
        self.assertNotEqual(rc, 0)
        with self.assertRaises(ValueError):
            json.loads(so)
        # --skip-damaged: everything else, and still an error naming each.
        rc, so, se = tierfs("dump", vol.meta_url, out, "--skip-damaged")
        self.assertNotEqual(rc, 0, msg(rc, so, se))
        for n in named:
            self.assertIn(n, se, msg(rc, so, se))
        with open(out) as f:
            doc = json.load(f)
        dumped = {i["ino"] for i in doc["inodes"]}
        self.assertNotIn(inos["a"], dumped)
        self.assertTrue({inos["d"], inos["e"], inos["f"]} <= dumped)
        self.assertEqual(sum(1 for i in doc["inodes"] if any(e["name"].startswith("f") for e in i.get("entries", []))
                             and len(i.get("entries", [])) == 20), 1, "the intact directory is whole")
        copy = "sqlite3://" + os.path.join(vol.dir, "copy.db")
        rc, so, se = tierfs("load", copy, out)
        self.assertNotEqual(rc, 0, "the entry of the left-out inode dangles")
        rc, so, se = tierfs("load", copy, out, "--skip-dangling")
        self.assertEqual(rc, 0, msg(rc, so, se))

    def test_dump_sqlite(self):
        self.check_dump("sqlite")

    def test_dump_redis(self):
        self.check_dump("redis")

    def test_dump_postgres(self):
        self.check_dump("postgres")

    # ----- listing, fsck, reads -------------------------------------------------------

    def check_listing(self, engine, damage):
        vol = self.engine_volume(engine)
        inos = self.populate(vol)
        dmg = meta_damage.for_url(vol.meta_url)
        damage(dmg, inos)
        dmg.set(meta_damage.attr_key(inos["e"]), b"\x09")  # e's attributes
        dmg.set_prefix(meta_damage.chunks_prefix(inos["g"]), b"zz")
        vol.mount()
        names = sorted(os.listdir(vol.path("d")))  # failed as a whole before
        self.assertEqual(names, ["a", "c", "e", "f", "g"])
        with self.assertRaises(OSError):
            os.stat(vol.path("d", "e"))
        with open(vol.path("d", "a"), "rb") as f:
            self.assertEqual(len(f.read()), 5001)
        # A damaged chunk record is an error, never other bytes.
        with self.assertRaises(OSError) as cm:
            with open(vol.path("d", "g"), "rb") as f:
                f.read()
        self.assertEqual(cm.exception.errno, 5)
        log = vol.read_log()
        self.assertIn("damaged metadata: entry 'b' of directory inode %d" % inos["d"], log)
        self.assertIn(meta_damage.entry_key(inos["d"], "b").hex(), log)
        vol.umount()
        # gc cannot tell what the damaged records refer to: it deletes nothing.
        rc, out, err = tierfs("gc", vol.meta_url, "--delete", "--min-age", "0")
        self.assertNotEqual(rc, 0, msg(rc, out, err))
        self.assertIn("cannot be decoded", err)
        rc, out, err = tierfs("fsck", vol.meta_url, "--json")
        self.assertEqual(rc, 1, msg(rc, out, err))
        probs = json.loads(out)["problems"]
        kinds = {(p["kind"], os.path.basename(p["path"])) for p in probs}
        self.assertIn(("damaged-entry", "b"), kinds, probs)
        self.assertIn(("damaged-inode", "e"), kinds, probs)
        self.assertIn(("damaged-record", "g"), kinds, probs)
        rc, out, err = tierfs("fsck", vol.meta_url, "--repair", "--json")
        repaired = [p for p in json.loads(out)["problems"] if p["repaired"]]
        self.assertIn("damaged-entry", [p["kind"] for p in repaired], out)
        rc, out, err = tierfs("fsck", vol.meta_url, "--json")
        kinds = {p["kind"] for p in json.loads(out)["problems"]}
        self.assertNotIn("damaged-entry", kinds, out)
        self.assertIn("orphan", kinds, "b's inode lost its only entry: reported, not deleted")
        return vol

    def cut_short(self, dmg, inos):
        dmg.set(meta_damage.entry_key(inos["d"], "b"), b"xx")

    def test_listing_sqlite(self):
        self.check_listing("sqlite", self.cut_short)

    def test_listing_postgres(self):
        self.check_listing("postgres", self.cut_short)

    def test_listing_redis_value_cut_short(self):
        self.check_listing("redis", self.cut_short)

    def test_listing_redis_value_of_another_type(self):
        self.check_listing("redis", lambda dmg, inos: dmg.wrong_type(meta_damage.entry_key(inos["d"], "b")))

    def test_listing_redis_value_gone(self):
        self.check_listing("redis", lambda dmg, inos: dmg.drop_value(meta_damage.entry_key(inos["d"], "b")))


if __name__ == "__main__":
    harness.main()
