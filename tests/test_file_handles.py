"""Inodes reached without a path: file handles (name_to_handle_at / open_by_handle_at, what
an NFS server exporting a TierFS mount uses) across a remount, from another mount and for
files unlinked while open; and directories removed or replaced while a descriptor of them
is open (fstat, fchmod, listing and creating in them behave as on ext4). ctest runs it with
the trash off and on (TIERFS_TEST_TRASH_DAYS=1): a file whose last name went to the trash is,
to its handles, an unlinked file."""

import ctypes
import ctypes.util
import errno
import os
import stat
import subprocess

import harness

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
MAX_HANDLE_SZ = 128
AT_FDCWD = -100


class FileHandle(ctypes.Structure):
    _fields_ = [("handle_bytes", ctypes.c_uint), ("handle_type", ctypes.c_int),
                ("f_handle", ctypes.c_ubyte * MAX_HANDLE_SZ)]


def name_to_handle(path):
    h = FileHandle()
    h.handle_bytes = MAX_HANDLE_SZ
    mount_id = ctypes.c_int()
    if _libc.name_to_handle_at(AT_FDCWD, os.fsencode(path), ctypes.byref(h), ctypes.byref(mount_id), 0) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), path)
    return h


def open_by_handle(mount_path, h, flags=os.O_RDONLY):
    mfd = os.open(mount_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fd = _libc.open_by_handle_at(mfd, ctypes.byref(h), flags)
        if fd < 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
        return fd
    finally:
        os.close(mfd)


def drop_kernel_caches():
    """Makes the kernel forget unused dentries and inodes, so that a file handle must be
    resolved by asking the file system."""
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("2")


class FileHandleTest(harness.TierFSTestCase):
    PER_TEST = True

    def test_handles_of_files_and_directories_survive_a_remount(self):
        f = self.vol.path("data.bin")
        d = self.vol.path("dir")
        os.mkdir(d)
        with open(os.path.join(d, "inside"), "w") as fo:
            fo.write("in")
        with open(f, "wb") as fo:
            fo.write(b"handle me" * 1000)
        fh, dh = name_to_handle(f), name_to_handle(d)
        self.vol.remount()
        fd = open_by_handle(self.mnt, fh)
        try:
            self.assertEqual(os.pread(fd, 9, 0), b"handle me")
            self.assertEqual(os.fstat(fd).st_ino, os.stat(f).st_ino)
        finally:
            os.close(fd)
        fd = open_by_handle(self.mnt, dh, os.O_RDONLY | os.O_DIRECTORY)
        try:
            self.assertEqual(os.listdir(fd), ["inside"])
            # ".." of a directory reached by handle resolves too.
            self.assertEqual(os.stat("..", dir_fd=fd).st_ino, os.stat(self.mnt).st_ino)
        finally:
            os.close(fd)
        # The same after the kernel dropped everything it cached, without a remount.
        drop_kernel_caches()
        fd = open_by_handle(self.mnt, fh, os.O_RDWR)
        try:
            os.pwrite(fd, b"HANDLE", 0)
        finally:
            os.close(fd)
        with open(f, "rb") as fo:
            self.assertEqual(fo.read(9), b"HANDLE me")

    def test_unlinked_open_file_by_handle_from_another_mount(self):
        f = self.vol.path("tmp.bin")
        with open(f, "wb") as fo:
            fo.write(b"still here")
        h = name_to_handle(f)
        keep = os.open(f, os.O_RDONLY)
        os.unlink(f)
        other = os.path.join(self.vol.dir, "mnt2")
        os.mkdir(other)
        self.assertOk(self.vol.mount_at(other), "second mount")
        try:
            fd = open_by_handle(other, h)
            try:
                self.assertEqual(os.pread(fd, 100, 0), b"still here")
                self.assertEqual(os.fstat(fd).st_nlink, 0)
            finally:
                os.close(fd)
            os.close(keep)
            keep = None
            # Last close: the file is gone, and its handle is stale everywhere.
            harness.wait_for(lambda: self._stale(other, h), timeout=10)
            with self.assertRaises(OSError) as cm:
                os.close(open_by_handle(other, h))
            self.assertEqual(cm.exception.errno, errno.ESTALE)
        finally:
            if keep is not None:
                os.close(keep)
            harness.run("umount", other)

    def _stale(self, mount_path, h):
        drop_kernel_caches()
        try:
            os.close(open_by_handle(mount_path, h))
            return False
        except OSError as e:
            return e.errno == errno.ESTALE

    def test_handle_of_a_file_removed_while_open_is_stale_after_the_last_close(self):
        f = self.vol.path("held")
        with open(f, "wb") as fo:
            fo.write(b"held")
        h = name_to_handle(f)
        keep = os.open(f, os.O_RDONLY)
        try:
            os.unlink(f)
            drop_kernel_caches()
            fd = open_by_handle(self.mnt, h)  # still open: the handle resolves
            try:
                self.assertEqual(os.pread(fd, 10, 0), b"held")
                self.assertEqual(os.fstat(fd).st_nlink, 0)
            finally:
                os.close(fd)
        finally:
            os.close(keep)
        self.assertTrue(harness.wait_for(lambda: self._stale(self.mnt, h), timeout=10),
                        "the handle of a removed file still opens after its last close")

    def test_handle_of_a_deleted_file_is_stale(self):
        f = self.vol.path("gone")
        with open(f, "w") as fo:
            fo.write("x")
        h = name_to_handle(f)
        os.unlink(f)
        self.vol.remount()
        with self.assertRaises(OSError) as cm:
            os.close(open_by_handle(self.mnt, h))
        self.assertEqual(cm.exception.errno, errno.ESTALE)


class RemovedDirectoryTest(harness.TierFSTestCase):
    def check_removed(self, fd):
        st = os.fstat(fd)
        self.assertTrue(stat.S_ISDIR(st.st_mode))
        self.assertEqual(st.st_nlink, 0)
        self.assertEqual(os.listdir(fd), [])
        with self.assertRaises(FileNotFoundError):
            os.mkdir("x", dir_fd=fd)
        with self.assertRaises(FileNotFoundError):
            os.close(os.open("f", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd))
        os.fchmod(fd, 0o700)
        self.assertEqual(stat.S_IMODE(os.fstat(fd).st_mode), 0o700)

    def test_directory_replaced_by_rename_while_open(self):
        a, b = os.path.join(self.work, "a"), os.path.join(self.work, "b")
        os.mkdir(a)
        os.mkdir(b)
        with open(os.path.join(a, "kept"), "w") as f:
            f.write("k")
        fd = os.open(b, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.rename(a, b)
            self.check_removed(fd)
            self.assertEqual(os.listdir(b), ["kept"])
        finally:
            os.close(fd)

    def test_directory_removed_while_open(self):
        d = os.path.join(self.work, "d")
        os.mkdir(d)
        fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.rmdir(d)
            self.check_removed(fd)
        finally:
            os.close(fd)
        # Nothing is left behind once closed.
        self.assertEqual(os.listdir(self.work), [])


if __name__ == "__main__":
    harness.main()
