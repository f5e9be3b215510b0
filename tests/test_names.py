"""Names and paths, judged against Linux itself: every case runs in the mount and in a
directory on a local file system, and the results (success or errno) must be identical.
255-byte names and ENAMETOOLONG beyond, paths far longer than PATH_MAX reached through
directory descriptors, symlink loops (ELOOP), trailing slashes, "." and "..", rename of a
directory into its own subtree, rename over empty and non-empty directories, and the
EISDIR/ENOTDIR/EEXIST/ENOTEMPTY/EPERM cases."""

import errno
import os
import shutil
import tempfile

import harness

N255 = "n" * 255
N256 = "n" * 256


def attempt(fn):
    try:
        r = fn()
        if isinstance(r, tuple):
            return r
        return "ok" if r is None or isinstance(r, int) else ("ok", r)
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


def cases(root):
    """Runs every case under root; returns [(name, outcome)]."""
    out = []
    p = lambda *a: os.path.join(root, *a)  # noqa: E731

    def case(name, fn):
        out.append((name, attempt(fn)))

    # ---- name length ----
    case("create 255", lambda: os.close(os.open(p(N255), os.O_CREAT | os.O_WRONLY, 0o644)))
    case("stat 255", lambda: os.stat(p(N255)).st_size)
    case("listdir has 255", lambda: ("ok", N255 in os.listdir(root)))
    case("create 256", lambda: os.close(os.open(p(N256), os.O_CREAT | os.O_WRONLY, 0o644)))
    case("mkdir 256", lambda: os.mkdir(p(N256)))
    case("symlink 256", lambda: os.symlink("x", p(N256)))
    case("link to 256", lambda: os.link(p(N255), p(N256)))
    case("rename to 256", lambda: os.rename(p(N255), p(N256)))
    case("rename 255 to 255", lambda: os.rename(p(N255), p("m" * 255)))
    case("stat 256", lambda: os.stat(p(N256)))
    case("unlink 255", lambda: os.unlink(p("m" * 255)))
    case("symlink target 4095", lambda: os.symlink("t" * 4095, p("longtarget")))
    case("readlink 4095", lambda: ("ok", len(os.readlink(p("longtarget")))))

    # ---- a path far longer than PATH_MAX, built one directory at a time ----
    def deep():
        fd = os.open(root, os.O_DIRECTORY)
        fds = [fd]
        try:
            for i in range(24):
                name = ("d%02d" % i) + "x" * 200
                os.mkdir(name, dir_fd=fd)
                fd = os.open(name, os.O_DIRECTORY, dir_fd=fd)
                fds.append(fd)
            f = os.open("leaf", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd)
            os.write(f, b"deep")
            os.close(f)
            return ("ok", os.stat("leaf", dir_fd=fd).st_size)
        finally:
            for f in fds:
                os.close(f)
    case("path of 4800 bytes via dir fds", deep)
    case("open path longer than PATH_MAX", lambda: os.open(p(*(["d00" + "x" * 200] * 1 + ["y" * 200] * 20)), os.O_RDONLY))

    # ---- symlink loops ----
    os.symlink("loop-b", p("loop-a"))
    os.symlink("loop-a", p("loop-b"))
    os.symlink("self", p("self"))
    case("open loop", lambda: os.open(p("loop-a"), os.O_RDONLY))
    case("stat loop", lambda: os.stat(p("loop-a")))
    case("stat self loop", lambda: os.stat(p("self")))
    case("lstat loop", lambda: os.lstat(p("loop-a")).st_size)
    case("path through loop", lambda: os.stat(p("loop-a", "x")))
    case("create through loop", lambda: os.open(p("loop-a"), os.O_CREAT | os.O_WRONLY, 0o644))
    chain = "chain0"
    os.mkdir(p("chaindir"))
    for i in range(45):
        os.symlink("chain%d" % (i + 1) if i < 44 else "../chaindir", p("chain%d" % i))
    case("41+ symlinks in a row", lambda: os.stat(p(chain)))
    case("unlink loop", lambda: os.unlink(p("self")))

    # ---- trailing slashes ----
    with open(p("file"), "w") as f:
        f.write("x")
    os.mkdir(p("dir"))
    case("open file/", lambda: os.open(p("file") + "/", os.O_RDONLY))
    case("stat file/", lambda: os.stat(p("file") + "/"))
    case("stat dir/", lambda: os.stat(p("dir") + "/").st_nlink)
    case("mkdir new/", lambda: os.mkdir(p("newdir") + "/"))
    case("create new/", lambda: os.open(p("newfile") + "/", os.O_CREAT | os.O_WRONLY, 0o644))
    case("unlink dir/", lambda: os.unlink(p("dir") + "/"))
    case("rmdir file/", lambda: os.rmdir(p("file") + "/"))
    case("rename file to x/", lambda: os.rename(p("file"), p("x") + "/"))
    case("rename dir/ to dir2/", lambda: os.rename(p("dir") + "/", p("dir2") + "/"))
    case("rmdir dir2/", lambda: os.rmdir(p("dir2") + "/"))
    case("symlink to dir, stat with /", lambda: (os.symlink("newdir", p("ldir")), os.stat(p("ldir") + "/").st_nlink)[1])

    # ---- . and .. ----
    os.mkdir(p("dots"))
    case("mkdir .", lambda: os.mkdir(p("dots", ".")))
    case("rmdir .", lambda: os.rmdir(p("dots", ".")))
    case("rmdir ..", lambda: os.rmdir(p("dots", "..")))
    case("unlink .", lambda: os.unlink(p("dots", ".")))
    case("rename . away", lambda: os.rename(p("dots", "."), p("dots2")))
    case("rename onto ..", lambda: os.rename(p("newdir"), p("dots", "..")))
    case("stat dots/../file", lambda: os.stat(p("dots", "..", "file")).st_size)
    case("create dots/./f", lambda: os.close(os.open(p("dots", ".", "f"), os.O_CREAT | os.O_WRONLY)))

    # ---- rename rules and type errors ----
    os.makedirs(p("tree", "sub", "subsub"))
    os.mkdir(p("empty"))
    os.makedirs(p("full", "child"))
    case("rename dir into own subtree", lambda: os.rename(p("tree"), p("tree", "sub", "subsub", "t")))
    case("rename dir into itself", lambda: os.rename(p("tree"), p("tree", "t")))
    case("rename dir over non-empty dir", lambda: os.rename(p("tree"), p("full")))
    case("rename dir over file", lambda: os.rename(p("empty"), p("file")))
    case("rename file over dir", lambda: os.rename(p("file"), p("full")))
    case("rename dir over empty dir", lambda: os.rename(p("tree"), p("empty")))
    case("rename onto itself", lambda: os.rename(p("file"), p("file")))
    case("rename missing", lambda: os.rename(p("missing"), p("x")))
    case("rename into missing dir", lambda: os.rename(p("file"), p("missing", "x")))
    case("rename through a file", lambda: os.rename(p("file"), p("file", "x")))
    case("mkdir existing", lambda: os.mkdir(p("full")))
    case("mkdir over file", lambda: os.mkdir(p("file")))
    case("create excl existing", lambda: os.open(p("file"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    case("rmdir non-empty", lambda: os.rmdir(p("full")))
    case("rmdir file", lambda: os.rmdir(p("file")))
    case("unlink dir", lambda: os.unlink(p("full")))
    case("link dir", lambda: os.link(p("full"), p("hard")))
    case("open dir for write", lambda: os.open(p("full"), os.O_WRONLY))
    case("open file as dir", lambda: os.open(p("file"), os.O_RDONLY | os.O_DIRECTORY))
    case("lookup under file", lambda: os.stat(p("file", "x")))
    case("symlink over existing", lambda: os.symlink("x", p("file")))
    case("link over existing", lambda: os.link(p("file"), p("full")))
    case("empty name", lambda: os.stat(""))
    return out


class NamesTest(harness.TierFSTestCase):
    def test_same_results_as_a_local_file_system(self):
        local = tempfile.mkdtemp(prefix="tierfs-names-local-")
        self.addCleanup(shutil.rmtree, local, True)
        want = cases(local)
        got = cases(self.work)
        self.assertEqual(len(want), len(got))
        diffs = ["%s: local %r, tierfs %r" % (w[0], w[1], g[1]) for w, g in zip(want, got) if w != g]
        self.assertEqual(diffs, [], "\n" + "\n".join(diffs))
        # The cases must actually exercise errors, not only successes.
        errors = {o for _, o in want if isinstance(o, str) and o != "ok"}
        for e in ("ENAMETOOLONG", "ELOOP", "ENOTDIR", "EISDIR", "EINVAL", "ENOTEMPTY", "EEXIST", "EPERM"):
            self.assertIn(e, errors)


if __name__ == "__main__":
    harness.main()
