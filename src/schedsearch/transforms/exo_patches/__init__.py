"""Patches of Exo's internals that remove costs unrelated to scheduling, behind a switch.

Each patch of ``PATCHES`` names the objects of Exo (and of pysmt and asdl_adt, which Exo's
analysis and IR are made of) that it replaces, with the fingerprint of each in the Exo it
was written for (``EXO_VERSION``; ``identity``: a function's or class's source, a module's
name). ``install`` applies them all in this process, or none:

- ``SCHEDSEARCH_EXO_PATCHES=off`` in the environment: none (``State.OFF``);
- another Exo than ``EXO_VERSION``, or any replaced object not the one fingerprinted:
  none (``State.REFUSED``, with the reason); Exo then works as it is, only slower.

Every patch gives what Exo itself would have given: procs, the legality of every rewrite
and the generated C are the same byte for byte with and without them (a test compares
them on every example, and CI runs the rewrite-space tests with them off). An exception
raised inside a patch's own code is an internal error, never Exo declining a rewrite
(``replay.rejected_by_exo``). They are installed by the processes that expand
(``Expander``), never on import: a user's process that only loads a workload or reads
results keeps Exo as it is. What each one saves: ``overheads``, and RESULTS.md.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import inspect
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

#: The Exo these patches were written for and checked against.
EXO_VERSION = "1.0.0"
#: The environment variable that turns every patch off.
SWITCH = "SCHEDSEARCH_EXO_PATCHES"


class State(StrEnum):
    """Whether this process runs Exo patched."""

    NOT_INSTALLED = "not installed"  # no expansion yet in this process
    INSTALLED = "installed"
    OFF = "off"  # turned off by ``SWITCH``
    REFUSED = "refused"  # another Exo than the one they were written for


@dataclass(frozen=True, slots=True)
class Patch:
    """One patch: its name, the objects it replaces (``"module:attribute.path"``) with
    their fingerprints in ``EXO_VERSION``, and the function that applies it (False when
    an object is not shaped as expected, having changed nothing)."""

    name: str
    replaces: tuple[tuple[str, str], ...]
    apply: Callable[[], bool] = field(compare=False, repr=False)


def resolve(location: str) -> object:
    """The object at ``"module:attribute.path"``; LookupError when there is none."""
    module_name, _, path = location.partition(":")
    try:
        obj: object = importlib.import_module(module_name)
    except ImportError as exc:
        raise LookupError(f"no module {module_name}") from exc
    for part in path.split(".") if path else ():
        try:
            obj = getattr(obj, part)
        except AttributeError as exc:
            raise LookupError(f"no {location}") from exc
    return obj


def identity(obj: object) -> str:
    """A fingerprint of ``obj``: a module's name; the sha256 of a function's or class's
    source (16 hex digits); else its type's name."""
    if inspect.ismodule(obj):
        return f"module {obj.__name__}"
    try:
        source = inspect.getsource(obj)  # type: ignore[arg-type]
    except (OSError, TypeError):
        return f"a {type(obj).__name__}"
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def mismatch(patches: tuple[Patch, ...], version: str | None) -> str | None:
    """Why ``patches`` must not be applied to this Exo (``version``: the installed one),
    or None when every object they replace is the one they were written for."""
    if version != EXO_VERSION:
        return f"they were written for exo-lang {EXO_VERSION}, and {version or 'no exo-lang'} is installed"
    for patch in patches:
        for location, expected in patch.replaces:
            try:
                found = identity(resolve(location))
            except LookupError as exc:
                return f"{patch.name}: {exc}"
            if found != expected:
                return f"{patch.name}: {location} is not the one it was written for ({found}, not {expected})"
    return None


def _exo_version() -> str | None:
    try:
        return importlib.metadata.version("exo-lang")
    except importlib.metadata.PackageNotFoundError:
        return None


_lock = threading.Lock()
_state = State.NOT_INSTALLED
_reason = ""


def state() -> tuple[State, str]:
    """This process's state and, when not installed, why; without installing anything:
    what ``install`` would do is told before it is done (``OFF`` or ``REFUSED``)."""
    if _state is not State.NOT_INSTALLED:
        return _state, _reason
    if os.environ.get(SWITCH, "").strip().lower() == "off":
        return State.OFF, f"{SWITCH}=off"
    from schedsearch.transforms.exo_patches.registry import PATCHES

    reason = mismatch(PATCHES, _exo_version())
    return (State.REFUSED, reason) if reason else (State.NOT_INSTALLED, "")


def install() -> State:
    """Apply every patch in this process, once, or none (see the module text)."""
    global _state, _reason
    with _lock:
        if _state is not State.NOT_INSTALLED:
            return _state
        found, reason = state()
        if found is not State.NOT_INSTALLED:
            _state, _reason = found, reason
            return _state
        from schedsearch.transforms.exo_patches.registry import PATCHES

        failed = [p.name for p in PATCHES if not p.apply()]
        if failed:  # shaped otherwise than its fingerprint promised: a bug of the registry
            raise RuntimeError(f"Exo patches {', '.join(failed)} did not apply though their fingerprints matched")
        _state, _reason = State.INSTALLED, ""
        return _state


def message() -> str | None:
    """One line for the user when Exo runs unpatched for a reason other than the switch."""
    found, reason = state()
    if found is State.REFUSED:
        return f"Exo runs without schedsearch's speed-ups, slower: {reason}"
    return None


__all__ = ["EXO_VERSION", "SWITCH", "Patch", "State", "identity", "install", "message", "mismatch", "state"]
