"""Exo's C backend compiles each window operand of an instruction once, not twice.

Exo 1.0.0's ``Compiler.comp_s`` compiles a call of an instruction proc (every vector load,
store, FMA and broadcast of a vectorized kernel) in two passes over its arguments: first
each as a C argument (``comp_fnarg``: a window operand becomes a window struct, from
``window_struct_fields``), then each again to fill the instruction's C template, which for
a window operand calls ``window_struct_fields`` a second time for its data pointer. That
function lifts every index of the window to C (``lift_to_cir``), simplifies it, and prints
it, with the buffer's strides: on a register-tiled SGEMM node's children it was two fifths
of making their C, and the second call repeats the first exactly.

``fields_once`` makes the backend keep, while it compiles one call statement, the answer
for each window operand it has compiled (by identity): nothing it reads changes within one
statement (the names in scope and their ranges change only at loops and allocations).
Outside a call statement nothing is kept, so the same window object met again elsewhere,
where other names may be in scope, is compiled anew. The C is the same, byte for byte.
"""

from __future__ import annotations

from typing import Any


def fields_once(compiler: Any, call: type) -> None:  # Exo's Compiler class (untyped)
    """Give Exo's C ``compiler`` class ``window_struct_fields`` answers kept for the length of
    one ``call`` statement (``LoopIR.Call``) in ``comp_s``."""
    comp_s, window_struct_fields = compiler.comp_s, compiler.window_struct_fields

    def comp_s_keeping_windows(self, s):
        if type(s) is not call:
            return comp_s(self, s)
        self._windows_of_call = {}
        try:
            return comp_s(self, s)
        finally:
            self._windows_of_call = None

    def window_struct_fields_once(self, e):
        kept = getattr(self, "_windows_of_call", None)
        if kept is None:
            return window_struct_fields(self, e)
        hit = kept.get(id(e))
        # the window is held with its answer, so its id cannot be reused meanwhile
        if hit is None or hit[0] is not e:
            hit = kept[id(e)] = (e, window_struct_fields(self, e))
        return hit[1]

    comp_s_keeping_windows.__wrapped__ = comp_s  # type: ignore[attr-defined]
    window_struct_fields_once.__wrapped__ = window_struct_fields  # type: ignore[attr-defined]
    compiler.comp_s = comp_s_keeping_windows
    compiler.window_struct_fields = window_struct_fields_once


def expected(loopir_compiler) -> bool:
    """Whether Exo's C backend module has the ``Compiler`` this was written for."""
    compiler = getattr(loopir_compiler, "Compiler", None)
    return isinstance(compiler, type) and all(
        callable(getattr(compiler, name, None)) for name in ("comp_s", "window_struct_fields", "comp_fnarg")
    )
