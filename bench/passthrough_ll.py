"""libfuse3's passthrough_ll example (bench/build-passthrough.sh builds it) mounted over a
directory, the "cost of FUSE itself" reference of the Python benchmarks."""
import os
import subprocess
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class PassthroughLL:
    def __init__(self, source, mountpoint):
        self.source, self.mnt, self.proc = source, mountpoint, None

    def start(self):
        binary = subprocess.run([os.path.join(REPO, "bench", "build-passthrough.sh")], capture_output=True,
                                text=True, check=True).stdout.strip()
        os.makedirs(self.mnt, exist_ok=True)
        self.proc = subprocess.Popen([binary, "-o", "source=" + self.source, "-f", self.mnt])
        deadline = time.time() + 10
        while not os.path.ismount(self.mnt):
            if time.time() > deadline or self.proc.poll() is not None:
                raise SystemExit("passthrough_ll did not mount on " + self.mnt)
            time.sleep(0.05)
        return self

    @property
    def pid(self):
        return self.proc.pid

    def stop(self):
        if self.proc:
            subprocess.run(["fusermount3", "-u", self.mnt])
            self.proc.wait(timeout=10)
            self.proc = None
