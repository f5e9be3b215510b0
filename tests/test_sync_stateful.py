#!/usr/bin/env python3
"""tierfs sync under randomized stateful testing (hypothesis): changes to the source
(create, overwrite, append, remove, rename, mkdir, symlink, chmod, touch) are interleaved
with sync rounds into a directory and into a volume; after each round the destination
must equal what `rsync -a --delete` gives, and the round's counts must add up. The volume
keeps a change log, and a third destination is synced from it with --changes: rounds that
list only what the log names must give the same tree."""
import os
import shutil
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import hypothesis  # noqa: F401
except ImportError:  # Debian's python3-hypothesis, when the first python3 on PATH is not Debian's
    sys.path.append("/usr/lib/python3/dist-packages")
from hypothesis import HealthCheck, settings, strategies as st  # noqa: E402
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule  # noqa: E402

import harness  # noqa: E402
from sync_helpers import compare_with_rsync, rsync, sync  # noqa: E402

NAMES = st.sampled_from(["a", "a.txt", "a0", "b c", "\u00e9t\u00e9", "p%2F", "n\nl", "x-1", "d"])
PATHS = st.lists(NAMES, min_size=1, max_size=3).map(lambda parts: os.path.join(*parts))


class SyncMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.tmp = tempfile.mkdtemp(prefix="tierfs-sync-sm-", dir=os.environ.get("TIERFS_TEST_TMPDIR"))
        self.src = os.path.join(self.tmp, "src")
        os.makedirs(self.src)
        self.oracle = os.path.join(self.tmp, "oracle")
        self.dst = os.path.join(self.tmp, "dst")
        db = os.path.join(self.tmp, "meta.db")
        rc = harness.tierfs("format", "sqlite3://" + db, "sm", "--storage", "file", "--bucket",
                            os.path.join(self.tmp, "bucket"), "--block-size", "64K", "--trash-days", "0",
                            "--changelog-hours", "1")
        assert rc[0] == 0, harness.msg(*rc)
        self.vol = "sqlite3://" + db + ":/data"
        self.back = os.path.join(self.tmp, "back")
        self.inc = os.path.join(self.tmp, "inc")  # rounds from the volume's change log (--changes)
        self.inc_state = os.path.join(self.tmp, "inc.state")
        self.clock = 1600000000

    def teardown(self):
        try:
            self.sync_round()  # every example ends with a round checked against rsync
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def _p(self, rel):
        return os.path.join(self.src, rel)

    def _tick(self, path):
        self.clock += 7
        os.utime(path, (self.clock, self.clock), follow_symlinks=False)

    def _make_parents(self, rel):
        parent = os.path.dirname(self._p(rel))
        try:
            os.makedirs(parent, exist_ok=True)
            return True
        except OSError:  # a file or a (dangling) symlink on the way
            return False

    @rule(rel=PATHS, size=st.integers(0, 150000), seed=st.integers(0, 255))
    def write(self, rel, size, seed):
        if not self._make_parents(rel) or os.path.isdir(self._p(rel)):
            return
        if os.path.islink(self._p(rel)):
            os.remove(self._p(rel))
        with open(self._p(rel), "wb") as f:
            f.write(bytes([seed]) * size)
        self._tick(self._p(rel))

    @rule(rel=PATHS)
    def append_same_time(self, rel):
        p = self._p(rel)
        if os.path.isfile(p) and not os.path.islink(p):
            st_ = os.stat(p)
            with open(p, "ab") as f:
                f.write(b"+")
            os.utime(p, ns=(st_.st_atime_ns, st_.st_mtime_ns))  # size changes, time does not

    @rule(rel=PATHS)
    def mkdir(self, rel):
        if self._make_parents(rel) and not os.path.lexists(self._p(rel)):
            os.mkdir(self._p(rel))
            self._tick(self._p(rel))

    @rule(rel=PATHS, to=st.sampled_from(["t1", "../t2", "/abs/t3"]))  # no self-loops: rsync keeps no time on those
    def symlink(self, rel, to):
        if self._make_parents(rel) and not os.path.lexists(self._p(rel)):
            os.symlink(to, self._p(rel))
            self._tick(self._p(rel))  # rsync leaves a link's time alone within the second it was made

    @rule(rel=PATHS)
    def remove(self, rel):
        p = self._p(rel)
        if os.path.islink(p) or os.path.isfile(p):
            os.remove(p)
        elif os.path.isdir(p):
            shutil.rmtree(p)

    @rule(a=PATHS, b=PATHS)
    def rename(self, a, b):
        pa, pb = self._p(a), self._p(b)
        if os.path.lexists(pa) and not os.path.lexists(pb) and not pb.startswith(pa + "/") and self._make_parents(b):
            os.rename(pa, pb)

    @rule(rel=PATHS, mode=st.sampled_from([0o600, 0o644, 0o755, 0o700]))
    def chmod(self, rel, mode):
        p = self._p(rel)
        if os.path.lexists(p) and not os.path.islink(p):
            os.chmod(p, mode)

    def _settle_times(self):
        """Moves every time of the last minute into the past: rsync leaves a directory's or
        link's time alone within the second it was made, tierfs sync copies it exactly."""
        now = time.time()
        for dirpath, dirnames, filenames in os.walk(self.src, topdown=False):
            for p in [os.path.join(dirpath, n) for n in dirnames + filenames] + [dirpath]:
                if os.lstat(p).st_mtime > now - 60:
                    self._tick(p)

    @rule()
    def sync_round(self):
        self._settle_times()
        opts = ["--dirs", "--perms", "--links", "--delete-dst"]
        rsync("-a", "--delete", self.src + "/", self.oracle + "/")
        for dst in (self.dst, self.vol):
            rc, s, err = sync(self.src, dst, *opts)
            assert s["failed"] == 0, err
            assert s["found"] == s["copied"] + s["skipped"], s
        diffs = compare_with_rsync(self.oracle, self.dst, self.src)
        assert diffs == [], "\n".join(diffs[:20])
        shutil.rmtree(self.back, ignore_errors=True)
        rc, s, err = sync(self.vol, self.back, "--dirs", "--perms", "--links")
        diffs = compare_with_rsync(self.oracle, self.back, self.src)
        assert diffs == [], "volume: " + "\n".join(diffs[:20])
        rc, s, err = sync(self.vol, self.inc, "--dirs", "--perms", "--links", "--delete-dst", "--changes", self.inc_state)
        assert s["failed"] == 0, err
        diffs = compare_with_rsync(self.oracle, self.inc, self.src)
        assert diffs == [], "incremental (%s round): " % s["round"] + "\n".join(diffs[:20])


# CI runs a short search (about a minute); TIERFS_SYNC_EXAMPLES=200 makes it a soak.
SyncMachine.TestCase.settings = settings(max_examples=int(os.environ.get("TIERFS_SYNC_EXAMPLES", "8")),
                                         stateful_step_count=15, deadline=None, database=None,
                                         suppress_health_check=list(HealthCheck))


class SyncStatefulTest(SyncMachine.TestCase):
    pass


if __name__ == "__main__":
    harness.tierfs_bin()
    unittest.main(argv=[sys.argv[0], "-v"])
