"""File objects of the SDK: a raw file over a handle of the native client, wrapped by io's
buffered and text layers exactly as the built-in open() wraps an OS file descriptor."""

import io
import os


class RawFile(io.RawIOBase):
    """Unbuffered binary file over one handle of the native client. Reads and writes are
    positional (pread/pwrite on the volume), so a seek costs nothing. As the built-in
    open(), an append mode starts at the end of the file, and each O_APPEND write goes at
    the end as the file stands then (the client chooses the end and writes there in one
    step, so appends of its threads never overwrite each other) and leaves the position
    after it."""

    def __init__(self, client, path, flags, mode_text):
        super().__init__()
        self._client = client  # the tierfs.Client: it reconnects after fork()
        self._native = client._native()
        self._generation = client._generation
        self.name = path
        self.mode = mode_text
        self._flags = flags
        self._fh = None
        self._fh, self._ino = self._native.open(path, flags, 0o666)
        self._pos = 0
        acc = flags & os.O_ACCMODE
        self._readable = acc in (os.O_RDONLY, os.O_RDWR)
        self._writable = acc in (os.O_WRONLY, os.O_RDWR)
        self._append = bool(flags & os.O_APPEND)
        if self._append:  # as io.FileIO, which seeks to the end when it opens for appending
            self._pos = self._native.fstat(self._fh, self._ino)[5]

    def _live(self):
        if self.closed:
            raise ValueError("I/O operation on closed file")
        if self._client._generation != self._generation:
            raise OSError(9, "%s: this file was opened before fork() (or before the client was "
                             "reopened); open it again" % self.name)
        return self._native

    def readable(self):
        self._live()
        return self._readable

    def writable(self):
        self._live()
        return self._writable

    def seekable(self):
        return True

    def fileno(self):
        raise io.UnsupportedOperation("a TierFS SDK file has no OS file descriptor")

    def isatty(self):
        return False

    def readinto(self, b):
        native = self._live()
        if not self._readable:
            raise io.UnsupportedOperation("not readable")
        m = memoryview(b).cast("B")
        if len(m) == 0:
            return 0
        n = native.preadinto(self._fh, self._pos, m)
        self._pos += n
        return n

    def readall(self):
        native = self._live()
        if not self._readable:
            raise io.UnsupportedOperation("not readable")
        # The rest of the file in one read into one bytes object, asking for a little more
        # than its length: a short answer is the end of the file, and only a file that grew
        # past that margin meanwhile takes another round (a small file costs one stat and
        # one read, not two of each).
        chunks = []
        while True:
            size = native.fstat(self._fh, self._ino)[5]
            want = max(size - self._pos, 0) + (1 << 16)
            data = native.pread(self._fh, self._pos, want)
            chunks.append(data)
            self._pos += len(data)
            if len(data) < want:
                break
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def write(self, b):
        native = self._live()
        if not self._writable:
            raise io.UnsupportedOperation("not writable")
        m = memoryview(b).cast("B")
        if len(m) == 0:
            return 0  # as write(2): nothing written, not even an O_APPEND move to the end
        if self._append:
            at, n = native.pappend(self._fh, self._ino, m)
            self._pos = at + n
            return n
        n = native.pwrite(self._fh, self._pos, m)
        self._pos += n
        return n

    def seek(self, offset, whence=io.SEEK_SET):
        native = self._live()
        if whence == io.SEEK_SET:
            pos = offset
        elif whence == io.SEEK_CUR:
            pos = self._pos + offset
        elif whence == io.SEEK_END:
            pos = native.fstat(self._fh, self._ino)[5] + offset
        else:
            raise ValueError("invalid whence (%r)" % whence)
        if pos < 0:
            raise OSError(22, "%s: negative seek position %d" % (self.name, pos))
        self._pos = pos
        return pos

    def tell(self):
        self._live()
        return self._pos

    def truncate(self, size=None):
        native = self._live()
        if not self._writable:
            raise io.UnsupportedOperation("not writable")
        size = self._pos if size is None else size
        native.ftruncate(self._fh, self._ino, size)
        return size

    def flush(self):
        # Commits what this handle wrote so that other clients see it (as close() does).
        if (self._fh is not None and not self.closed and self._writable
                and self._client._generation == self._generation):
            self._native.flush(self._fh)

    def fsync(self):
        self._live().fsync(self._fh)

    def stat(self):
        return self._client._stat_result(self._live().fstat(self._fh, self._ino))

    def close(self):
        if self.closed:
            return
        fh, self._fh = self._fh, None
        try:
            if fh is not None and self._client._generation == self._generation and not self._native.closed:
                self._native.close_file(fh)  # commits, then releases: its error is close()'s
        finally:
            super().close()


class _Fsync:
    def fsync(self):
        """Commits what was written and waits until it is durable (os.fsync)."""
        self.flush()
        self.raw.fsync()


class BufferedReader(io.BufferedReader):
    pass


class BufferedWriter(_Fsync, io.BufferedWriter):
    pass


class BufferedRandom(_Fsync, io.BufferedRandom):
    pass


class TextFile(io.TextIOWrapper):
    def fsync(self):
        self.flush()
        self.buffer.fsync()


def parse_mode(mode):
    """open()'s mode string -> (os flags, binary?, normalized mode)."""
    chars = set(mode)
    if len(chars) != len(mode) or not chars <= set("rwxab+t") or ("b" in chars and "t" in chars):
        raise ValueError("invalid mode: %r" % mode)
    kinds = [c for c in "rwxa" if c in chars]
    if len(kinds) != 1:
        raise ValueError("must have exactly one of create/read/write/append mode")
    kind = kinds[0]
    plus = "+" in chars
    flags = {"r": 0, "w": os.O_CREAT | os.O_TRUNC, "x": os.O_CREAT | os.O_EXCL, "a": os.O_CREAT | os.O_APPEND}[kind]
    if plus:
        flags |= os.O_RDWR
    elif kind == "r":
        flags |= os.O_RDONLY
    else:
        flags |= os.O_WRONLY
    return flags, "b" in chars, kind + ("+" if plus else "")


def open_file(client, path, mode="r", buffering=-1, encoding=None, errors=None, newline=None):
    flags, binary, raw_mode = parse_mode(mode)
    if binary and (encoding is not None or errors is not None or newline is not None):
        raise ValueError("binary mode doesn't take an encoding, errors or newline argument")
    raw = RawFile(client, path, flags, raw_mode + ("b" if binary else ""))
    try:
        if buffering == 0:
            if not binary:
                raise ValueError("can't have unbuffered text I/O")
            return raw
        size = io.DEFAULT_BUFFER_SIZE * 64 if buffering in (-1, 1) else buffering
        if raw._readable and raw._writable:
            buf = BufferedRandom(raw, size)
        elif raw._writable:
            buf = BufferedWriter(raw, size)
        else:
            buf = BufferedReader(raw, size)
        if binary:
            return buf
        text = TextFile(buf, encoding or "utf-8", errors, newline, line_buffering=buffering == 1)
        text.mode = mode
        return text
    except BaseException:
        raw.close()
        raise
