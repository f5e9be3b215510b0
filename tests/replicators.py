"""`tierfs mirror` processes a test starts: each logs to its own file under a directory,
and every one still running is killed at cleanup.

    reps = Replicators(tmpdir)            # test.addCleanup(reps.stop_all)
    p = reps.start(["tierfs", "mirror", PRIMARY, MIRROR, "--interval", "0.05"])
    reps.log_of(p)                        # what it printed so far
"""
import os
import subprocess


class Replicators:
    def __init__(self, log_dir):
        self.log_dir = log_dir
        self.procs = []

    def start(self, cmd):
        log = open(os.path.join(self.log_dir, "replicator-%d.log" % len(self.procs)), "w+")
        p = subprocess.Popen(list(cmd), stdout=log, stderr=subprocess.STDOUT)
        p.log = log
        self.procs.append(p)
        return p

    def log_of(self, p):
        p.log.flush()
        with open(p.log.name) as f:
            return f.read()

    def stop_all(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
            p.log.close()
