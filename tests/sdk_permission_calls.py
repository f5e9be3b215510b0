"""Run by test_sdk_files.PermissionCallsTest as an unprivileged user (setpriv): seeded
random namespace and file calls with random modes (directories without search or write
permission, the sticky bit, files without read or write permission, set-ID bits that a
write, truncation or chown must drop) through the SDK on a
volume of the user's own and through os on a local directory of the user's own. Prints one
JSON line: the first call whose answers differ in each seed, if any.

Answers must be equal (the value, or the exception class and errno), except that for
rename only success or failure must agree: with dangling links and missing search
permission on the way, the order in which rename's errors come still differs (in about
one seed of six; never success against failure).

    setpriv --reuid U --regid G --clear-groups python3 sdk_permission_calls.py DIR SEEDS STEPS
"""
import errno
import json
import os
import random
import sys

import tierfs

NAMES = ["a", "b", "a/c", "a/d", "b/e", "a/c/f", ""]
MODES = [0o000, 0o100, 0o200, 0o300, 0o400, 0o500, 0o600, 0o700, 0o755, 0o1777, 0o111, 0o644,
         0o2755, 0o4755, 0o6777, 0o2765]
OPS = ["mkdir", "rmdir", "remove", "rename", "link", "symlink", "create", "read", "append", "listdir", "stat",
       "chmod", "chmod", "chmod", "utime", "utimenow", "truncate", "access", "chown", "write"]


def calls(mod, opener, root):
    def p(name):
        return root + "/" + name if name else root
    return {
        "mkdir": lambda a, b, m: mod.mkdir(p(a)), "rmdir": lambda a, b, m: mod.rmdir(p(a)),
        "remove": lambda a, b, m: mod.remove(p(a)), "rename": lambda a, b, m: mod.rename(p(a), p(b)),
        "link": lambda a, b, m: mod.link(p(a), p(b)), "symlink": lambda a, b, m: mod.symlink("x", p(b)),
        "create": lambda a, b, m: opener(p(a), "wb").close(), "read": lambda a, b, m: opener(p(a), "rb").read(),
        "append": lambda a, b, m: opener(p(a), "ab").write(b"z"), "listdir": lambda a, b, m: sorted(mod.listdir(p(a))),
        "stat": lambda a, b, m: oct(mod.stat(p(a)).st_mode), "chmod": lambda a, b, m: mod.chmod(p(a), m),
        "utime": lambda a, b, m: mod.utime(p(a), (5, 6)), "utimenow": lambda a, b, m: mod.utime(p(a)),
        "truncate": lambda a, b, m: mod.truncate(p(a), 3), "access": lambda a, b, m: mod.access(p(a), os.W_OK),
        "chown": lambda a, b, m: mod.chown(p(a), -1, os.getgid()),
        "write": lambda a, b, m: opener(p(a), "r+b").write(b"w"),
    }


def answer(table, op, a, b, m):
    try:
        return ["ok", table[op](a, b, m)]
    except OSError as e:
        return ["err", type(e).__name__, errno.errorcode.get(e.errno, e.errno)]


def main():
    work, seeds, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    out = []
    for seed in range(seeds):
        base = os.path.join(work, "s%d" % seed)
        os.mkdir(base)
        os.mkdir(base + "/local")
        tierfs.format("sqlite3://%s/meta.db" % base, "perm%d" % seed, storage="file", bucket=base + "/bucket",
                      trash_days=0)
        fs = tierfs.Client("sqlite3://%s/meta.db" % base, cache_dir="memory")
        fs.mkdir("/t")
        local = calls(os, open, base + "/local")
        sdk = calls(fs, fs.open, "/t")
        sdk["access"] = lambda a, b, m: fs.access(("/t/" + a) if a else "/t", os.W_OK)
        rng = random.Random(seed)
        for step in range(steps):
            op, a, b, m = rng.choice(OPS), rng.choice(NAMES), rng.choice(NAMES), rng.choice(MODES)
            if op == "chmod" and a == "":
                continue  # the roots must stay usable
            x, y = answer(local, op, a, b, m), answer(sdk, op, a, b, m)
            same = x[0] == y[0] if op == "rename" else x == y
            if not same:
                out.append({"seed": seed, "step": step, "call": [op, a, b, oct(m)], "local": x, "sdk": y})
                break
        fs.close()
        for root, dirs, _ in os.walk(base + "/local"):
            for d in dirs:
                os.chmod(os.path.join(root, d), 0o700)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
