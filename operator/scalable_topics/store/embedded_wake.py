"""Waking the change feeds of every process that shares an EmbeddedStore file, after a commit.

Next to the store file ``F`` is the directory ``F-wake``. Each store instance whose change feed
runs keeps a named pipe (FIFO) there and watches it on its event loop; a writer, after each
commit, writes one byte to every pipe there but its own, and the feed that reads the byte reads
the file. FIFOs, not sockets: opening one is a plain ``open`` (no 104-byte limit on the path of
a Unix socket, which a deep data directory passes), they exist on Linux and macOS alike, and
the kernel says when a pipe's reader is gone (opening it for writing without blocking fails
with ENXIO), so a writer removes what a killed process left behind.

No wakeup is lost between processes that follow this protocol:
- A pipe is opened for reading before it takes its name, so a writer never finds one that
  nobody reads yet. Its feed reads the file only after the pipe has its name: a commit that
  its writer signalled before that, the feed reads anyway; one signalled after, wakes it.
- A full pipe refuses the byte (EAGAIN), but its reader has bytes still to read, and drains the
  pipe before it reads the file, so that read comes after the refused commit.
- The reader keeps the pipe open for writing too, so that it never sees end of file (which
  would make it readable for ever).

What can still be missed: a writer killed between its commit and its signals, and a writer
that does not signal (an older version of this code on the same file). The feed's slow
fallback poll covers those.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
import time
from pathlib import Path

WAKE_SUFFIX = "-wake"
_HIDDEN = "."  # a pipe still being set up: writers skip it
_LEFTOVER_SECONDS = 60.0  # a hidden pipe this old belongs to a process that died setting it up


def wake_directory(store_path: str) -> Path:
    """The directory of pipes of the store file at ``store_path`` (however it is reached)."""
    return Path(os.path.realpath(store_path) + WAKE_SUFFIX)


class WakePipe:
    """This store instance's pipe in the wake directory, open for reading."""

    def __init__(self, directory: Path, name: str, read_fd: int, write_fd: int) -> None:
        self.directory, self.name = directory, name
        self._read_fd, self._write_fd = read_fd, write_fd

    @classmethod
    def create(cls, directory: Path) -> WakePipe:
        """Make and open a pipe in ``directory`` (created if missing); OSError when the file
        system has no FIFOs or the directory cannot be written."""
        directory.mkdir(exist_ok=True)
        _remove_leftovers(directory)
        name = f"{os.getpid()}-{secrets.token_hex(4)}"
        hidden = directory / (_HIDDEN + name)
        os.mkfifo(hidden, 0o666)  # the umask applies, as to the store's own files
        try:
            read_fd = os.open(hidden, os.O_RDONLY | os.O_NONBLOCK)
            try:
                write_fd = os.open(hidden, os.O_WRONLY | os.O_NONBLOCK)
            except BaseException:
                os.close(read_fd)
                raise
        except BaseException:
            hidden.unlink(missing_ok=True)
            raise
        pipe = cls(directory, name, read_fd, write_fd)
        try:
            os.rename(hidden, directory / name)
        except BaseException:
            pipe._close_fds()
            hidden.unlink(missing_ok=True)
            raise
        return pipe

    def fileno(self) -> int:
        return self._read_fd

    def drain(self) -> None:
        """Read every byte waiting: the wakeups up to now are taken."""
        with contextlib.suppress(BlockingIOError):
            while os.read(self._read_fd, 4096):
                pass

    def close(self) -> None:
        with contextlib.suppress(OSError):
            (self.directory / self.name).unlink()
        self._close_fds()

    def _close_fds(self) -> None:
        for fd in (self._read_fd, self._write_fd):
            with contextlib.suppress(OSError):
                os.close(fd)


def wake_others(directory: Path, own: str | None) -> None:
    """Signal every pipe in ``directory`` but ``own``, after a commit; remove the pipes whose
    reader is gone. Never raises: a feed that misses a signal still polls."""
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return  # no feed has made the directory yet: nobody to wake
    for entry in entries:
        if entry.name.startswith(_HIDDEN) or entry.name == own:
            continue
        try:
            fd = os.open(entry.path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as error:
            if error.errno == errno.ENXIO:  # no reader: its process is gone
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
            continue
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):  # not a file someone else put there
                os.write(fd, b"\0")
        except OSError:
            pass  # full (its reader has bytes to read yet), or its reader just closed it
        finally:
            os.close(fd)


def _remove_leftovers(directory: Path) -> None:
    """Hidden pipes of processes that died while setting one up (a window of microseconds)."""
    now = time.time()
    with contextlib.suppress(OSError):
        for entry in os.scandir(directory):
            if entry.name.startswith(_HIDDEN):
                with contextlib.suppress(OSError):
                    if now - entry.stat(follow_symlinks=False).st_mtime > _LEFTOVER_SECONDS:
                        os.unlink(entry.path)
