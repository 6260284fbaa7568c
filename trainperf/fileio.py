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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from trainperf.errors import ResultsError, UsageError
from trainperf.text import printable

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


def link_refusal(rel: Path, link: str) -> ResultsError:
    """The error for a link met where a package or results folder is read (``rel``, relative to its top; ``link``,
    what it points to, or "?" when it turned into one while it was read): links there are never followed, by
    ``review`` and ``report`` alike."""
    if os.path.isabs(link):
        why = f"is a link to the absolute path {link!r}"
    elif ".." in Path(link).parts:
        why = f"is a link to {link!r}, a path with '..' components"
    else:
        why = f"is a link to {link!r}" if link != "?" else "turned into a link or a file while it was read"
    return ResultsError(
        f"refused: {printable(str(rel))} {printable(why)}. Links in a package are never followed: put the file or "
        "folder itself there, and run the command again"
    )


def refuse_link(path: Path, top: Path) -> Path:
    """``path`` itself, or :func:`link_refusal` when it is a symbolic link (``top``: the folder it is named from)."""
    if path.is_symlink():
        try:
            link = os.readlink(path)
        except OSError:
            link = "?"
        raise link_refusal(path.relative_to(top) if path.is_relative_to(top) else path, link)
    return path


@dataclass(frozen=True)
class Output:
    """A file a command is about to write: its path, the option that named it, and the text (``mark``) that every
    file of its kind that trainperf writes holds in its first :data:`MARK_BYTES` bytes."""

    path: Path
    option: str
    mark: bytes


MARK_BYTES = 4096


def check_outputs(outputs: Sequence[Output], *, reading: Sequence[Path] = (), force: bool = False) -> None:
    """Refuse (:class:`UsageError`) a command's outputs before it reads or writes anything: two outputs on one path
    (one would silently replace the other), an output inside a folder the command reads (it would replace or add to
    the input), a path that is not a regular file or a new name (:func:`refuse_unsafe_output`), and, without
    ``force``, an existing file that trainperf did not write (its first bytes do not hold the output's mark)."""
    seen: dict[Path, Output] = {}
    for out in outputs:
        where = Path(out.path).resolve()
        if (first := seen.get(where)) is not None:
            raise UsageError(
                f"{first.option} {_shown(first.path)} and {out.option} {_shown(out.path)} name one file: one output "
                "would replace the other; give each its own path"
            )
        seen[where] = out
        for folder in reading:
            if where.is_relative_to(Path(folder).resolve()):
                raise UsageError(
                    f"{out.option} {_shown(out.path)} is inside {_shown(folder)}, which this command reads: an output "
                    "never goes into its input (it would replace or add to what is read); write it outside that folder"
                )
        if Path(out.path).is_dir():
            raise UsageError(f"{out.option} {_shown(out.path)} is a folder; give a file name")
        refuse_unsafe_output(out.path)
        if not force and not _written_by_trainperf(Path(out.path), out.mark):
            raise UsageError(
                f"{out.option} {_shown(out.path)} exists, and trainperf did not write it (it does not hold "
                f"{out.mark.decode(errors='replace')!r}): trainperf replaces only its own outputs; give a new path, or "
                "add --force to replace it"
            )


def _shown(path: Path | str) -> str:
    return printable(str(path))


def _written_by_trainperf(path: Path, mark: bytes) -> bool:
    """Whether ``path`` is a new name or a file that holds ``mark`` in its first bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return True
    except OSError:  # unreadable: the write will say why, or it is not ours to replace
        return False
    try:
        return mark in os.read(fd, MARK_BYTES)
    except OSError:
        return False
    finally:
        os.close(fd)


def write_output(path: Path, data: bytes | str, *, what: str, mode: int = 0o644) -> Path:
    """Write a command's output atomically; an OSError (a full or read-only disk) becomes a :class:`ResultsError`
    naming the file and the fix, and nothing half-written stays."""
    try:
        return atomic_write_bytes(path, data.encode("utf-8") if isinstance(data, str) else data, mode=mode)
    except OSError as e:
        raise ResultsError(
            f"cannot write {what} {_shown(path)}: {e.strerror or e}; nothing was written there: free space on that "
            "disk or choose a path you can write to, and run the command again"
        ) from None


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
