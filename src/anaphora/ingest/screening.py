"""What makes a path unfit to ingest, found before it is read: odd names, links, devices, pipes, size.

Each check returns a reason (a sentence for the ingest report) or None, so that the ingestor skips the file,
reports why, and goes on with the next one. Nothing here raises for a bad file.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

MB = 1024 * 1024


def display_path(path: Path | str) -> str:
    """The path as printable text: bytes that are not UTF-8 (kept by Python as surrogate escapes) become ``\\xNN``."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def name_problem(path: Path) -> str | None:
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        return "the file name is not valid UTF-8; rename the file"
    return None


def kind_problem(path: Path) -> str | None:
    """Why ``path`` is not a regular file that can be read, following links; None when it is one."""
    try:
        info = path.stat()
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a symbolic link loop"
        if path.is_symlink():
            return f"a dangling symbolic link (its target {display_path(os.readlink(path))} does not exist)"
        return f"cannot read: {exc.strerror}"
    mode = info.st_mode
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a link to a folder, not followed (a folder is ingested by naming it)"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO), not a regular file"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device, not a regular file"
    if stat.S_ISSOCK(mode):
        return "a socket, not a regular file"
    return "not a regular file"


def size_problem(path: Path, max_bytes: int) -> str | None:
    size = path.stat().st_size
    if size > max_bytes:
        return (
            f"too large: {size / MB:.1f} MB, more than the {max_bytes / MB:.1f} MB allowed "
            "(raise the max_file_bytes setting, or split the file)"
        )
    return None


def screen(path: Path, max_bytes: int) -> str | None:
    """The first reason not to ingest ``path``, or None."""
    return name_problem(path) or kind_problem(path) or size_problem(path, max_bytes)
