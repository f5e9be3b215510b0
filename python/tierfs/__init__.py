"""TierFS from Python, without a mount.

    import tierfs
    tierfs.format("sqlite3:///data/vol.db", "vol", bucket="/data/blocks")
    fs = tierfs.Client("sqlite3:///data/vol.db", cache_dir="/nvme/tierfs", cache_size="200G")
    with fs.open("/train/shard-0001.tar", "rb") as f:
        head = f.read(512)
    for root, dirs, files in fs.walk("/train"):
        ...

A Client takes the mount's options by name (cache_dir, cache_size, mem_cache_size,
buffer_size, writeback, open_cache, cache_group, subdir, read_only, metrics, io_timeout,
...: see src/sdk/client_options.h) and acts as the calling process's user. Errors are
OSError subclasses (FileNotFoundError, PermissionError, ...) with the errno set.

fork(): a Client used in the parent keeps working in a child; the child opens a session of
its own on first use (the parent's threads and connections do not exist there). Files
opened before the fork must be opened again in the child.
"""

import atexit as _atexit
import errno as _errno
import json as _json
import os as _os
import posixpath as _posixpath
import stat as _stat
import threading as _threading
import weakref as _weakref

from . import _tierfs
from ._file import open_file as _open_file

__all__ = ["Client", "format", "DirEntry"]

_clients = _weakref.WeakSet()


def _after_fork_in_child():
    # The parent's native clients hold threads that are gone and locks that may be held:
    # never touch them again (not even to free them), and reconnect lazily.
    for c in list(_clients):
        c._forked()


_os.register_at_fork(after_in_child=_after_fork_in_child)


@_atexit.register
def _close_at_exit():
    # A client left open ends its session at a normal exit (its buffered writes commit)
    # instead of leaving the session to expire.
    for c in list(_clients):
        try:
            c.close()
        except Exception:  # noqa: B902 - exiting: nothing to report to
            pass


def _text(path):
    path = _os.fspath(path)
    if isinstance(path, bytes):
        path = _os.fsdecode(path)
    if "\0" in path:
        raise ValueError("embedded null character in path")
    return path


def format(meta_url, name, **options):
    """Creates a volume, as `tierfs format META-URL NAME`: storage ("file", "s3", "rados",
    "azure"), bucket, block_size, access_key, secret_key, trash_days, capacity, inodes,
    force... Returns the volume's format record (secrets hidden) as a dict."""
    opts = {k: v for k, v in options.items() if v is not None}
    opts["meta_url"] = meta_url
    opts["name"] = name
    record, warning = _tierfs.format(opts)
    if warning:
        import warnings
        warnings.warn(warning)
    return _json.loads(record)


class DirEntry:
    """What Client.scandir yields, like os.DirEntry."""
    __slots__ = ("name", "path", "inode_number", "_type", "_client", "_stat", "_lstat")

    def __init__(self, client, directory, name, ino, type_bits):
        self.name = name
        self.path = directory.rstrip("/") + "/" + name if directory not in ("", ".") else name
        self.inode_number = ino
        self._type = type_bits
        self._client = client
        self._stat = None
        self._lstat = None

    def inode(self):
        return self.inode_number

    def is_dir(self, follow_symlinks=True):
        if follow_symlinks and self._type == _stat.S_IFLNK:
            try:
                return _stat.S_ISDIR(self.stat().st_mode)
            except FileNotFoundError:
                return False
        return self._type == _stat.S_IFDIR

    def is_file(self, follow_symlinks=True):
        if follow_symlinks and self._type == _stat.S_IFLNK:
            try:
                return _stat.S_ISREG(self.stat().st_mode)
            except FileNotFoundError:
                return False
        return self._type == _stat.S_IFREG

    def is_symlink(self):
        return self._type == _stat.S_IFLNK

    def stat(self, follow_symlinks=True):
        if follow_symlinks:
            if self._stat is None:
                self._stat = self._client.stat(self.path)
            return self._stat
        if self._lstat is None:
            self._lstat = self._client.lstat(self.path)
        return self._lstat

    def __fspath__(self):
        return self.path

    def __repr__(self):
        return "<tierfs.DirEntry %r>" % self.name


class Client:
    """One volume, opened as a mount would open it, used by path."""

    def __init__(self, meta_url, **options):
        self._options = {k: v for k, v in options.items() if v is not None}
        self._options["meta_url"] = meta_url
        self._lock = _threading.Lock()
        self._generation = 0
        self._closed = False
        self._pid = _os.getpid()
        try:
            self._handle = _tierfs.NativeClient(dict(self._options))
        except OSError as e:
            if (e.strerror or "").startswith("unknown option"):
                raise TypeError("tierfs.Client: " + e.strerror) from None
            raise
        _clients.add(self)

    # -- the native client, reopened in a forked child ------------------------------------

    def _forked(self):
        if self._handle is not None:
            self._handle.abandon()
            self._parent_holds_cache = True
        self._handle = None
        self._generation += 1
        self._lock = _threading.Lock()  # another thread of the parent may have held it

    def _native(self):
        h = self._handle
        if h is not None and self._pid == _os.getpid():
            return h
        if self._closed:
            raise ValueError("the TierFS client is closed")
        with self._lock:
            if self._handle is None or self._pid != _os.getpid():
                if self._handle is not None:  # a fork the at-fork hook did not see
                    self._forked()
                self._handle = _tierfs.NativeClient(self._options_here())
                self._pid = _os.getpid()
            return self._handle

    def _options_here(self):
        # A forked child (or a process the client was pickled to) whose parent holds the disk
        # cache directory keeps its caches in memory: the directory serves one process, and
        # asking for it would only log that it is in use, once per DataLoader worker.
        options = dict(self._options)
        if getattr(self, "_parent_holds_cache", False):
            options["cache_dir"] = "memory"
        return options

    # -- pickling: a Client sent to another process (multiprocessing's spawn and forkserver,
    # a DataLoader's workers) opens a session of its own there --------------------------

    def __getstate__(self):
        if self._closed:
            raise ValueError("a closed TierFS client cannot be pickled")
        return {"options": dict(self._options), "holds_cache": self._handle is not None}

    def __setstate__(self, state):
        self._options = dict(state["options"])
        self._parent_holds_cache = state.get("holds_cache", False)
        self._lock = _threading.Lock()
        self._generation = 0
        self._closed = False
        self._pid = _os.getpid()
        self._handle = None  # opened on first use
        _clients.add(self)

    def close(self):
        """Commits what is buffered and ends the session; later calls raise ValueError."""
        self._closed = True
        h, self._handle = self._handle, None
        if h is not None and self._pid == _os.getpid():
            h.close()

    @property
    def closed(self):
        return self._closed

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        # No META-URL: it may hold a password.
        return "<tierfs.Client %s%s>" % (self.volume_name if not self._closed else "", " (closed)" if self._closed else "")

    @property
    def volume_name(self):
        return self.format_record().get("name", "")

    def format_record(self):
        """The volume's format record with its secrets hidden."""
        return _json.loads(self._native().format_json())

    # -- files --------------------------------------------------------------------------

    def open(self, path, mode="r", buffering=-1, encoding=None, errors=None, newline=None):
        """Like the built-in open(): binary or text, buffered (buffering=0 for raw binary)."""
        return _open_file(self, _text(path), mode, buffering, encoding, errors, newline)

    def _stat_result(self, t):
        mode, ino, nlink, uid, gid, size, at, mt, ct, rdev, blocks = t
        return _os.stat_result((mode, ino, 0, nlink, uid, gid, size, at // 10**9, mt // 10**9, ct // 10**9,
                                at / 1e9, mt / 1e9, ct / 1e9, at, mt, ct, 4096, blocks, rdev))

    def stat(self, path, follow_symlinks=True):
        return self._stat_result(self._native().stat(_text(path), follow_symlinks))

    def lstat(self, path):
        return self.stat(path, follow_symlinks=False)

    # What os.path.exists and os.access answer False for: the path names nothing reachable.
    # Failures of the volume itself (EIO, a closed client, ...) still raise: on a shared
    # volume, "no" for "the metadata server did not answer" would be a lie.
    _NO_SUCH_PATH = (_errno.ENOENT, _errno.ENOTDIR, _errno.EACCES, _errno.EPERM, _errno.ELOOP,
                     _errno.ENAMETOOLONG)

    def _is(self, path, test):
        try:
            return test(self.stat(path).st_mode)
        except OSError as e:
            if e.errno in self._NO_SUCH_PATH:
                return False
            raise

    def exists(self, path):
        return self._is(path, lambda mode: True)

    def isdir(self, path):
        return self._is(path, _stat.S_ISDIR)

    def isfile(self, path):
        return self._is(path, _stat.S_ISREG)

    def access(self, path, mode):
        try:
            return self._native().access(_text(path), mode)
        except OSError as e:
            if e.errno in self._NO_SUCH_PATH:
                return False
            raise

    def truncate(self, path, length):
        self._native().truncate(_text(path), length)

    # -- directories --------------------------------------------------------------------

    def listdir(self, path="/"):
        return [_os.fsdecode(name) for name, _, _ in self._native().listdir(_text(path))]

    def scandir(self, path="/"):
        p = _text(path)
        return iter([DirEntry(self, p, _os.fsdecode(name), ino, t) for name, ino, t in self._native().listdir(p)])

    def walk(self, top="/", topdown=True, onerror=None, followlinks=False):
        """os.walk over the volume."""
        top = _text(top)
        try:
            entries = list(self.scandir(top))
        except OSError as e:
            if onerror is not None:
                onerror(e)
            return
        dirs, files, links = [], [], set()
        for e in entries:
            # As os.walk: a link to a directory is listed with the directories, and entered
            # only with followlinks.
            (dirs if e.is_dir() else files).append(e.name)
            if e.is_symlink():
                links.add(e.name)
        if topdown:
            yield top, dirs, files
        for d in dirs:
            if followlinks or d not in links:
                yield from self.walk(top.rstrip("/") + "/" + d, topdown, onerror, followlinks)
        if not topdown:
            yield top, dirs, files

    def mkdir(self, path, mode=0o777):
        self._native().mkdir(_text(path), mode)

    def makedirs(self, path, mode=0o777, exist_ok=False):
        # os.makedirs step by step, so that the errors are its own (a file on the way:
        # NotADirectoryError from the mkdir below it, not FileExistsError).
        path = _text(path)
        head, tail = _posixpath.split(path)
        if not tail:
            head, tail = _posixpath.split(head)
        if head and tail and not self.exists(head):
            try:
                self.makedirs(head, exist_ok=exist_ok)
            except FileExistsError:
                pass  # made meanwhile by another
            if tail == ".":
                return
        try:
            self.mkdir(path, mode)
        except OSError:
            if not exist_ok or not self.isdir(path):
                raise

    def rmdir(self, path):
        self._native().rmdir(_text(path))

    def remove(self, path):
        self._native().unlink(_text(path))

    unlink = remove

    def rmr(self, path):
        """Removes a tree, as `tierfs rmr` (in the engine, without listing it here)."""
        self._native().rmr(_text(path))

    def rename(self, src, dst):
        self._native().rename(_text(src), _text(dst), 0)

    replace = rename

    def link(self, src, dst):
        self._native().link(_text(src), _text(dst))

    def symlink(self, target, path):
        self._native().symlink(_text(target), _text(path))

    def readlink(self, path):
        return _os.fsdecode(self._native().readlink(_text(path)))

    def chmod(self, path, mode, follow_symlinks=True):
        self._native().chmod(_text(path), mode, follow_symlinks)

    def chown(self, path, uid, gid, follow_symlinks=True):
        self._native().chown(_text(path), uid, gid, follow_symlinks)

    def utime(self, path, times=None, ns=None, follow_symlinks=True):
        if times is not None and ns is not None:
            raise ValueError("utime: you may specify either 'times' or 'ns' but not both")
        if times is not None:
            ns = (int(times[0] * 1e9), int(times[1] * 1e9))
        if ns is None:
            self._native().utime(_text(path), 0, 0, True, follow_symlinks)
        else:
            self._native().utime(_text(path), ns[0], ns[1], False, follow_symlinks)

    # -- xattrs -------------------------------------------------------------------------

    def getxattr(self, path, attribute, follow_symlinks=True):
        return self._native().getxattr(_text(path), attribute, follow_symlinks)

    def setxattr(self, path, attribute, value, flags=0, follow_symlinks=True):
        self._native().setxattr(_text(path), attribute, bytes(value), flags, follow_symlinks)

    def listxattr(self, path="/", follow_symlinks=True):
        return list(self._native().listxattr(_text(path), follow_symlinks))

    def removexattr(self, path, attribute, follow_symlinks=True):
        self._native().removexattr(_text(path), attribute, follow_symlinks)

    # -- TierFS's own -------------------------------------------------------------------

    def clone(self, src, dst):
        """A copy that shares src's blocks (`tierfs clone`): metadata only, no data moved."""
        self._native().clone(_text(src), _text(dst))

    def warmup(self, path):
        """Reads a file's or a tree's blocks into the caches; returns what it did."""
        return _json.loads(self._native().warmup(_text(path)))

    def summary(self, path="/"):
        """Bytes, files and directories under path (`tierfs summary`)."""
        return _json.loads(self._native().summary(_text(path)))

    # -- quotas ---------------------------------------------------------------------------

    @staticmethod
    def _quota_target(path, uid, gid):
        given = [x is not None for x in (path, uid, gid)]
        if sum(given) != 1:
            raise TypeError("name the quota with one of path=, uid= and gid=")
        if path is not None:
            return "D", _text(path), 0
        return ("U", "", uid) if uid is not None else ("G", "", gid)

    def get_quota(self, path=None, uid=None, gid=None):
        """{"max_bytes", "max_inodes", "used_bytes", "used_inodes"} of the directory's, user's
        or group's quota (0: no limit), or None when there is none."""
        q = self._native().get_quota(*self._quota_target(path, uid, gid))
        if q is None:
            return None
        return dict(zip(("max_bytes", "max_inodes", "used_bytes", "used_inodes"), q))

    def set_quota(self, path=None, uid=None, gid=None, max_bytes=None, max_inodes=None):
        """Sets a quota's limits (None: unchanged, 0: no limit), as `tierfs quota set`. Root only."""
        self._native().set_quota(*self._quota_target(path, uid, gid), max_bytes, max_inodes)

    def delete_quota(self, path=None, uid=None, gid=None):
        self._native().delete_quota(*self._quota_target(path, uid, gid))

    def list_quotas(self):
        kinds = {"D": "dir", "U": "user", "G": "group"}
        out = []
        for kind, qid, where, mb, mi, ub, ui in self._native().list_quotas():
            q = {"kind": kinds.get(kind, kind), "max_bytes": mb, "max_inodes": mi, "used_bytes": ub,
                 "used_inodes": ui}
            q.update({"path": where} if kind == "D" else {"id": qid})
            out.append(q)
        return out

    def statvfs(self):
        """The volume's space: {"capacity", "used", "available", "inodes", "max_inodes"}."""
        cap, used, avail, inodes, max_inodes = self._native().statvfs()
        return {"capacity": cap, "used": used, "available": avail, "inodes": inodes, "max_inodes": max_inodes}


def _register_fsspec():
    # Installed with pip, the "fsspec.specs" entry point names the protocol; imported from
    # a build tree (PYTHONPATH) there is no entry point, so say it here too.
    try:
        import fsspec
    except ImportError:
        return
    fsspec.register_implementation("tierfs", "tierfs.fsspec_fs.TierFSFileSystem", clobber=True)


_register_fsspec()
