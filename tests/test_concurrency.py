"""Concurrency rules: O_APPEND from several processes loses and tears no record, and a
directory of 100,000 entries lists each of its stable names exactly once while other
entries are added and removed during the listing."""

import os
import random
import subprocess
import sys
import threading

import harness

APPENDER = r"""
import os, sys
path, tag, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
fd = os.open(path, os.O_WRONLY | os.O_APPEND)
for i in range(n):
    os.write(fd, ("%s %06d %s\n" % (tag, i, "x" * 50)).encode())
os.close(fd)
"""


class ConcurrencyTest(harness.TierFSTestCase):
    PER_TEST = True

    def test_o_append_from_several_processes(self):
        p = os.path.join(self.work, "log")
        os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o644))
        n = 2000
        procs = [subprocess.Popen([sys.executable, "-c", APPENDER, p, "w%d" % k, str(n)]) for k in range(4)]
        for pr in procs:
            self.assertEqual(pr.wait(timeout=300), 0)
        with open(p) as f:
            lines = f.read().splitlines()
        self.assertEqual(len(lines), 4 * n)
        for k in range(4):
            mine = [int(l.split()[1]) for l in lines if l.startswith("w%d " % k)]
            self.assertEqual(mine, list(range(n)), "records of writer %d lost, torn or reordered" % k)
        for l in lines:
            self.assertEqual(len(l), len("w0 000000 ") + 50, "torn record: %r" % l)

    def test_100k_directory_listing_under_churn(self):
        d = os.path.join(self.work, "big")
        os.mkdir(d)
        stable = ["stable-%06d" % i for i in range(100000)]
        for name in stable:
            os.close(os.open(os.path.join(d, name), os.O_CREAT | os.O_WRONLY, 0o644))
        stop = threading.Event()
        errors = []

        def churn():
            rng = random.Random(7)
            live = []
            i = 0
            try:
                while not stop.is_set():
                    name = os.path.join(d, "churn-%06d" % i)
                    os.close(os.open(name, os.O_CREAT | os.O_WRONLY, 0o644))
                    live.append(name)
                    i += 1
                    if len(live) > 50:
                        os.unlink(live.pop(rng.randrange(len(live))))
            except OSError as e:
                errors.append(e)

        t = threading.Thread(target=churn)
        t.start()
        try:
            for _ in range(2):
                names = os.listdir(d)
                seen = [n for n in names if n.startswith("stable-")]
                self.assertEqual(len(seen), len(set(seen)), "a name was listed twice")
                self.assertEqual(set(seen), set(stable), "stable names missing from the listing")
                self.assertEqual(len(names), len(set(names)), "a churned name was listed twice")
        finally:
            stop.set()
            t.join()
        self.assertEqual(errors, [])


if __name__ == "__main__":
    harness.main()
