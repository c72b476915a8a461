"""Stored text pasted into exported code, quoted for the place it lands in.

An export (``export --format py``, ``--format c``) writes strings read from a database - a
compiler command and its flags, a workload's file name, a schedule's loop patterns and
arguments - into a Python docstring or comment and a C comment. Anyone who can write the
database chooses those strings, so none may end its place and become code: a ``\"\"\"`` in a
docstring, a line break after a ``#``, a ``*/`` in a C comment.

Each function returns the text itself when it is plain there (printable ASCII without the
characters that end or escape that place), so ordinary exports stay byte for byte what
they were; anything else becomes a JSON string literal: printable ASCII whose quotes and
backslashes are escaped, which ends nothing there and reads back to the original with
``json.loads``.
"""

from __future__ import annotations

import json


def _printable_ascii(text: str) -> bool:
    return all(" " <= ch <= "~" for ch in text)


def in_docstring(text: str) -> str:
    """``text`` as it may stand inside a (non-raw) triple-quoted Python string: plain text
    holds no ``"`` and no backslash, so it can neither close the string nor escape its end."""
    if _printable_ascii(text) and '"' not in text and "\\" not in text:
        return text
    return json.dumps(text)


def in_comment(text: str) -> str:
    """``text`` as it may follow a ``#`` on one line of Python: plain text holds no line
    break (nor anything else a terminal or the tokenizer acts on)."""
    return text if _printable_ascii(text) else json.dumps(text)


def in_c_comment(text: str) -> str:
    """``text`` as it may stand inside a C ``/* ... */`` comment: plain text holds no ``*``
    (so no ``*/`` that ends the comment, nor a ``/*`` the compiler warns about); the literal
    of any other text spells its ``*`` as ``\\u002a``."""
    if _printable_ascii(text) and "*" not in text:
        return text
    return json.dumps(text).replace("*", "\\u002a")
