"""fsspec's "tierfs" protocol: a TierFS volume as an fsspec file system, without a mount.

    import fsspec
    fs = fsspec.filesystem("tierfs", meta="redis://10.0.0.5/1", cache_dir="/nvme/tierfs")
    fs.ls("/train")
    with fsspec.open("tierfs:///train/labels.csv", meta="redis://10.0.0.5/1") as f:
        ...

Every option but `meta` goes to tierfs.Client. cp_file is a clone (the copy shares the
source's blocks: no data is read or written), mv a rename, rm(recursive=True) the engine's
tree removal (`tierfs rmr`).
"""

import stat as _stat
from datetime import datetime, timezone

from fsspec.spec import AbstractFileSystem

from . import Client


class TierFSFileSystem(AbstractFileSystem):
    protocol = "tierfs"
    root_marker = "/"

    def __init__(self, meta=None, auto_mkdir=False, **options):
        if not meta:
            raise ValueError("the tierfs protocol needs meta=META-URL (the volume's metadata engine)")
        super().__init__(meta=meta, auto_mkdir=auto_mkdir, **options)
        # As fsspec's local file system: opening a file for writing makes its missing
        # parent directories only when asked.
        self.auto_mkdir = auto_mkdir
        self.client = Client(meta, **options)

    @classmethod
    def _strip_protocol(cls, path):
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]
        path = str(path)
        if path.startswith("tierfs://"):
            path = path[len("tierfs://"):]
        path = "/" + path.lstrip("/")
        return path.rstrip("/") or "/"

    # -- listing ------------------------------------------------------------------------

    def _info_from_stat(self, path, st, lst=None):
        mode = (lst or st).st_mode
        kind = "directory" if _stat.S_ISDIR(st.st_mode) else "file" if _stat.S_ISREG(st.st_mode) else "other"
        out = {"name": path, "size": st.st_size if kind != "directory" else 0, "type": kind,
               "mode": st.st_mode, "ino": st.st_ino, "nlink": st.st_nlink, "uid": st.st_uid, "gid": st.st_gid,
               "mtime": st.st_mtime, "ctime": st.st_ctime, "islink": _stat.S_ISLNK(mode)}
        if _stat.S_ISLNK(mode):
            out["destination"] = self.client.readlink(path)
        return out

    def info(self, path, **kwargs):
        path = self._strip_protocol(path)
        lst = self.client.lstat(path)
        st = lst
        if _stat.S_ISLNK(lst.st_mode):
            try:
                st = self.client.stat(path)
            except FileNotFoundError:
                st = lst
        return self._info_from_stat(path, st, lst)

    def ls(self, path, detail=True, **kwargs):
        path = self._strip_protocol(path)
        st = self.client.stat(path)
        if not _stat.S_ISDIR(st.st_mode):
            return [self.info(path)] if detail else [path]
        names = sorted(self.client.listdir(path))
        paths = [path.rstrip("/") + "/" + n for n in names]
        if not detail:
            return paths
        out = []
        for p in paths:
            try:
                out.append(self.info(p))
            except FileNotFoundError:
                continue  # removed while listing
        return out

    # -- changes ------------------------------------------------------------------------

    def mkdir(self, path, create_parents=True, **kwargs):
        path = self._strip_protocol(path)
        if create_parents:
            self.makedirs(path, exist_ok=True)
        else:
            self.client.mkdir(path)

    def makedirs(self, path, exist_ok=False):
        self.client.makedirs(self._strip_protocol(path), exist_ok=exist_ok)

    def rmdir(self, path):
        self.client.rmdir(self._strip_protocol(path))

    def rm_file(self, path):
        self.client.remove(self._strip_protocol(path))

    def _rm(self, path):
        path = self._strip_protocol(path)
        if self.client.isdir(path):
            self.client.rmdir(path)
        else:
            self.client.remove(path)

    def rm(self, path, recursive=False, maxdepth=None):
        if isinstance(path, (list, tuple)):
            for p in path:
                self.rm(p, recursive=recursive, maxdepth=maxdepth)
            return
        path = self._strip_protocol(path)
        st = self.client.lstat(path)  # FileNotFoundError for a missing path, as locally
        if recursive and maxdepth is None and _stat.S_ISDIR(st.st_mode):
            self.client.rmr(path)
            return
        super().rm(path, recursive=recursive, maxdepth=maxdepth)

    def cp_file(self, path1, path2, **kwargs):
        self.client.clone(self._strip_protocol(path1), self._strip_protocol(path2))

    def mv(self, path1, path2, recursive=False, maxdepth=None, **kwargs):
        if isinstance(path1, (list, tuple)) or isinstance(path2, (list, tuple)):
            return super().mv(path1, path2, recursive=recursive, maxdepth=maxdepth, **kwargs)
        self.client.rename(self._strip_protocol(path1), self._strip_protocol(path2))

    def touch(self, path, truncate=True, **kwargs):
        path = self._strip_protocol(path)
        if truncate or not self.exists(path):
            with self.client.open(path, "wb"):
                pass
        else:
            self.client.utime(path)

    def modified(self, path):
        return datetime.fromtimestamp(self.client.stat(self._strip_protocol(path)).st_mtime, tz=timezone.utc)

    def created(self, path):
        # No birth time is kept: the inode's change time is the closest.
        return datetime.fromtimestamp(self.client.stat(self._strip_protocol(path)).st_ctime, tz=timezone.utc)

    # -- data ---------------------------------------------------------------------------

    def _open(self, path, mode="rb", block_size=None, autocommit=True, cache_options=None, **kwargs):
        path = self._strip_protocol(path)
        if "w" in mode or "a" in mode or "x" in mode:
            parent = path.rsplit("/", 1)[0] or "/"
            if self.auto_mkdir and not self.client.exists(parent):
                self.client.makedirs(parent, exist_ok=True)
        buffering = block_size if block_size and block_size > 1 else -1
        return self.client.open(path, mode, buffering=buffering)

    def cat_file(self, path, start=None, end=None, **kwargs):
        path = self._strip_protocol(path)
        with self.client.open(path, "rb", buffering=0) as f:
            size = f.stat().st_size
            start = 0 if start is None else (start if start >= 0 else max(size + start, 0))
            end = size if end is None else (end if end >= 0 else max(size + end, 0))
            if end <= start:
                return b""
            f.seek(start)
            out = bytearray(end - start)
            got = 0
            view = memoryview(out)
            while got < len(out):
                n = f.readinto(view[got:])
                if not n:
                    break
                got += n
            return bytes(out[:got])

    def pipe_file(self, path, value, **kwargs):
        with self._open(path, "wb") as f:
            f.write(value)

    def ukey(self, path):
        st = self.client.stat(self._strip_protocol(path))
        return "%x-%x-%x" % (st.st_ino, st.st_mtime_ns, st.st_size)

    def checksum(self, path):
        return int(self.ukey(path).replace("-", ""), 16) & ((1 << 63) - 1)
