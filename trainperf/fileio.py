"""Writing files so that a failure never leaves half a result: a temporary file beside it, then a rename.

A rename is only as durable as the folder entry that records it: every file is fsynced before it is
renamed into place, and its folder after, so a power cut or a kernel crash leaves either the old file
or the whole new one.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

from trainperf.errors import UsageError

# fsync of a folder is refused by some file systems and platforms; that is not a lost write
_FSYNC_UNSUPPORTED = (errno.EINVAL, errno.ENOTSUP, errno.EBADF, errno.EACCES, errno.EISDIR)


def fsync_dir(folder: Path) -> None:
    """Make the folder's entries (a rename, a new file) durable; OSError propagates unless fsync is unsupported."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        if e.errno in _FSYNC_UNSUPPORTED:
            return
        raise
    try:
        os.fsync(fd)
    except OSError as e:
        if e.errno not in _FSYNC_UNSUPPORTED:
            raise
    finally:
        os.close(fd)


def replace_durably(src: Path, dst: Path) -> Path:
    """Rename the finished file ``src`` to ``dst`` (same file system): fsync it first, its folder(s) after."""
    src, dst = Path(src), Path(dst)
    fd = os.open(src, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(src, dst)
    fsync_dir(dst.parent)
    if src.parent.resolve() != dst.parent.resolve():
        fsync_dir(src.parent)
    return dst


_KINDS = {
    stat.S_IFIFO: "named pipe (FIFO)",
    stat.S_IFCHR: "character device",
    stat.S_IFBLK: "block device",
    stat.S_IFSOCK: "socket",
    stat.S_IFDIR: "folder",
}


def refuse_unsafe_output(path: Path) -> None:
    """Refuse an output path that is not a regular file or a new name: the atomic write renames a new file over
    it, which would replace a device node, a FIFO or a symbolic link (``-o /dev/null`` as root) with a plain file."""
    path = Path(path)
    try:
        st = os.lstat(path)
    except OSError:
        # A new name, or a path the write itself cannot reach (a parent that is a file, no permission): the write
        # fails with its own error, which each caller reports with the path.
        return
    if stat.S_ISLNK(st.st_mode):
        raise UsageError(
            f"{path} is a symbolic link: trainperf never writes over or through a link; give the file's own path "
            "or a new one"
        )
    if not stat.S_ISREG(st.st_mode):
        kind = _KINDS.get(stat.S_IFMT(st.st_mode), "special file")
        raise UsageError(
            f"{path} is not a regular file (a {kind}): writing the output would replace it; give a regular file or "
            "a new path"
        )


def atomic_write_bytes(path: Path, data: bytes, *, mode: int = 0o644) -> Path:
    """Write ``data`` to ``path`` atomically (creating parent folders); OSError propagates to the caller, and a
    path that is not a regular file or a new name is refused (:func:`refuse_unsafe_output`)."""
    path = Path(path)
    refuse_unsafe_output(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)  # mkstemp makes files private; results are meant to be shared
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)
    return path


def atomic_write_text(path: Path, text: str, *, mode: int = 0o644) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"), mode=mode)
