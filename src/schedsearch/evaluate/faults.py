"""Tell a compile that failed because of the machine from one that failed because of its code.

A candidate whose C does not compile is data: a ``build_error`` measurement, and the search
goes on. A compile that fails because the disk is full, the compiler was killed, a tool of
the toolchain is missing or the cache cannot be written would fail for *every* candidate;
recording those as build errors would blame all of them and finish a search that never
ran. Such failures raise ``InfrastructureError`` instead, which stops the search (marked
failed, resumable).

The messages alone cannot tell the two apart: gcc reports an internal compiler error in
cc1 (a crash on one input: "internal compiler error: Segmentation fault ... terminated
program cc1") and cc1 killed for the memory one huge candidate takes in the same words as
a compiler killed from outside. So ``machine_fault`` only names a *suspect*; the build
settles it (``build.settle_fault``) by compiling known-good code - the unscheduled proc -
afresh with the same compiler and flags: only a failure that recurs there is the machine's,
otherwise it is the candidate's build error. That costs one compile, and only when a
suspect appears.
"""

from __future__ import annotations

import re

#: Messages of gcc, as, ld and collect2 that describe the machine, not the code.
_MACHINE_MESSAGES = (
    re.compile(r"No space left on device|Disk quota exceeded|Read-only file system|Input/output error"),
    re.compile(r"File too large|Too many open files"),
    re.compile(r"cannot (?:open output file|create temporary file|write)\b.*"),
    re.compile(r"[Cc]annot create temporary file"),
    re.compile(r"(?:terminated program|terminated with signal)\s*\S*"),  # cc1/ld killed: gcc reports it
    re.compile(r"fatal error: cannot (?:execute|find) \S+"),  # cc1, as, ld or collect2 missing
)


def machine_fault(returncode: int | None, output: str) -> str | None:
    """Why a finished compile may have failed for a reason outside the candidate, or None
    when its failure is plainly the candidate's (a compile error).

    ``returncode`` is the compiler's exit status (negative: killed by that signal; None:
    killed by our own timeout, which stays the candidate's). ``output`` is what it printed.
    """
    if returncode is not None and returncode < 0:
        return f"the compiler was killed by signal {-returncode}"
    for pattern in _MACHINE_MESSAGES:
        match = pattern.search(output)
        if match:
            line = next((ln for ln in output.splitlines() if match.group(0) in ln), match.group(0))
            return " ".join(line.split())
    return None
