"""Plain values every record relies on: the kernel's C name, text hashes, and the checks
that keep names and integers read from files or databases safe to paste into code.

Standard library only."""

from __future__ import annotations

import hashlib
import keyword

#: Name every candidate's C function is given before fingerprinting and building, so that
#: two schedules producing the same code have the same fingerprint.
KERNEL_SYMBOL = "schedsearch_kernel"


def sha256_text(text: str) -> str:
    """Hex sha256 of a UTF-8 string."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


#: The range of a signed 64-bit integer: what SQL INTEGER columns and C ``int64_t`` hold.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def is_identifier(name: object) -> bool:
    """Whether ``name`` may be pasted into generated Python and C as a name.

    Proc, size and argument names are written verbatim into exported scripts and into the
    benchmark driver's C; a name read from a file or a database is only used when it is a
    plain ASCII identifier that is not a Python keyword (Exo's own names always are).
    """
    return isinstance(name, str) and name.isascii() and name.isidentifier() and not keyword.iskeyword(name)


def _check_name(name: object, what: str) -> None:
    if not is_identifier(name):
        raise ValueError(f"{what} {name!r} is not an identifier")


def _check_int64(value: object, what: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"{what} {value!r} is not an integer that fits in 64 bits")
