"""The build cache is private, and nothing in it is loaded unless it is what was built.

The cache holds shared objects that are loaded into a process and executables that are
run, so whoever can write into it can run code as its user. It is therefore created
``0700`` and refused when it belongs to another user or is writable by group or others.
Every artifact is written with a ``.sha256`` file beside it (written first, both by atomic
rename) and checked against it before it is used: a file planted at a cache key, or one
damaged on disk, is never loaded — it is rebuilt over.
"""

from __future__ import annotations

import functools
import hashlib
import os
import secrets
import stat
from pathlib import Path

from schedsearch.errors import InfrastructureError

_SUFFIX = ".sha256"
_CHUNK = 1 << 20


def private_cache_dir(path: Path) -> Path:
    """Create the cache folder (mode 0700) or check an existing one; InfrastructureError otherwise."""
    path = Path(path)
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = path.stat()
    except OSError as exc:
        raise InfrastructureError(
            f"cannot use the build cache {path} ({exc.strerror or exc}); make it writable or set "
            "SCHEDSEARCH_CACHE_DIR to a folder of your own"
        ) from None
    if not stat.S_ISDIR(info.st_mode):
        raise InfrastructureError(f"the build cache {path} is not a folder; set SCHEDSEARCH_CACHE_DIR to a folder")
    if info.st_uid != os.getuid():
        raise InfrastructureError(
            f"the build cache {path} belongs to user id {info.st_uid}, not to you, and what it holds is run "
            "as you; set SCHEDSEARCH_CACHE_DIR to a folder of your own"
        )
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise InfrastructureError(
            f"the build cache {path} is writable by other users (mode {stat.S_IMODE(info.st_mode):o}), and what it "
            f"holds is run as you; run `chmod go-w {path}` or set SCHEDSEARCH_CACHE_DIR to a private folder"
        )
    return path


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _record_path(artifact: Path) -> Path:
    return artifact.with_name(artifact.name + _SUFFIX)


def install(tmp: Path, artifact: Path) -> None:
    """Move a finished ``tmp`` file to ``artifact``, recording its hash first.

    The hash goes in before the file, so that a reader who sees the artifact also sees
    its record (a reader who sees a record without the artifact simply builds it).
    """
    record = _record_path(artifact)
    tmp_record = record.with_name(f".{record.name}.{os.getpid()}-{secrets.token_hex(6)}")
    try:
        tmp_record.write_text(file_sha256(tmp) + "\n")
        os.replace(tmp_record, record)
    finally:
        tmp_record.unlink(missing_ok=True)
    os.replace(tmp, artifact)


def keep(artifact: Path, data: bytes) -> None:
    """Write ``data`` to ``artifact`` as ``install`` does, best effort: a cache entry that
    cannot be written only costs the time to make it again."""
    tmp = artifact.with_name(f".{artifact.name}.{os.getpid()}-{secrets.token_hex(6)}")
    try:
        artifact.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(data)
        install(tmp, artifact)
    except OSError:
        pass
    finally:
        tmp.unlink(missing_ok=True)


def verified(artifact: Path) -> bool:
    """Whether ``artifact`` exists and its bytes match the hash recorded when it was built.

    A process hashes each version of a file once: while the file keeps its identity, size
    and times (writing to it, or replacing it, changes its ctime, which no one can set back),
    the answer is remembered. Every build reads the precompiled ``<immintrin.h>``, 24 MB:
    hashing it each time was most of a build worker's own CPU."""
    try:
        expected = _record_path(artifact).read_text().strip()
        if not expected:
            return False
        info = os.stat(artifact)
        version = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
        return _bytes_match(str(artifact), version, expected)
    except (OSError, UnicodeDecodeError):
        return False


@functools.lru_cache(maxsize=1024)
def _bytes_match(path: str, version: tuple[int, ...], expected: str) -> bool:
    """Whether the file at ``path``, as it is in ``version`` (its stat), hashes to ``expected``."""
    return file_sha256(Path(path)) == expected
