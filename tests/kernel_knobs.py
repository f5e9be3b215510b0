"""Kernel settings the tests read and change: FUSE over io_uring's module parameter (on
for the runs with --io-uring; tests/servers.py restores what the run found) and the page
cache."""
import os

URING_PARAM = "/sys/module/fuse/parameters/enable_uring"


def enable_fuse_uring():
    """Turns FUSE over io_uring on in the kernel; False where this kernel has no such
    parameter (before Linux 6.14, or built without it) or it cannot be set (a container)."""
    try:
        if fuse_uring_enabled():
            return True
        with open(URING_PARAM, "w") as f:
            f.write("Y\n")
        return True
    except OSError:
        return False


def fuse_uring_enabled():
    try:
        with open(URING_PARAM) as f:
            return f.read().strip() == "Y"
    except OSError:
        return False


def remember_fuse_uring(root):
    """Saves the parameter's value in root (once), for restore_fuse_uring."""
    saved = os.path.join(root, "enable_uring.before")
    if os.path.exists(URING_PARAM) and not os.path.exists(saved):
        os.makedirs(root, exist_ok=True)
        with open(URING_PARAM) as f, open(saved, "w") as out:
            out.write(f.read())


def restore_fuse_uring(root):
    saved = os.path.join(root, "enable_uring.before")
    if os.path.exists(saved):
        with open(saved) as f, open(URING_PARAM, "w") as out:
            out.write(f.read())
        os.unlink(saved)


def drop_page_cache():
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")
