"""Expansions kept on disk: a node one search expanded is not expanded again by the next.

Expanding a node is Exo's work and most of a search's CPU: the root of SGEMM 512 takes
about 15 s (its register tiles), a register-tiled node 8-11 s. What an expansion gives
depends only on the parent's schedule, the shard, and what the expander names in its
``cache_version``: the workload (source, proc, sizes), the expand options, the caches its
features compare with, Exo's version and schedsearch's own code. So a search that starts
again on the same kernel - another seed, a longer budget, ``resume`` - takes the nodes
expanded before from ``cache_dir/expansions`` and starts measuring at once.

Each expansion is gzip'd JSON at ``expansions/<k[:2]>/<k>.json.gz`` with its sha256 beside
it (``cache.install``). It is used only when its bytes match that record, it parses, and it
is the expansion of the parent asked for; anything else is expanded anew and written over.
An expansion whose parent could not be replayed is not kept. The cache folder is the build
cache's, private to its user; nothing read from it is executed before it is compiled and
verified like any new candidate.
"""

from __future__ import annotations

import functools
import gzip
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from schedsearch.core import BenchConfig, Candidate, Expansion, ExpansionPart, sha256_text
from schedsearch.errors import InfrastructureError, SchedsearchError
from schedsearch.evaluate import build
from schedsearch.evaluate.build import artifact_key, kernel_flags, kernel_notes, writes_notes
from schedsearch.evaluate.cache import keep, private_cache_dir, verified

#: Bump when the stored form changes.
FORMAT = "1"


class RememberingExpander:
    """An expander whose expansions are kept in, and read back from, a cache folder."""

    def __init__(self, inner: Any, cache_dir: Path) -> None:
        self._inner = inner
        self._version = str(inner.cache_version)
        self._folder = Path(cache_dir) / "expansions"

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _path(
        self, parent: Candidate, shard: int, shards: int, lead: int = 0, part: ExpansionPart = ExpansionPart.ALL
    ) -> Path:
        text = json.dumps([FORMAT, self._version, parent.schedule.dumps(), shard, shards, lead, part.value])
        key = sha256_text(text)
        return self._folder / key[:2] / f"{key}.json.gz"

    def expand(
        self, parent: Candidate, shard: int = 0, shards: int = 1, lead: int = 0, part: ExpansionPart = ExpansionPart.ALL
    ) -> Expansion:
        """``parent``'s expansion as kept on disk, else the inner expander's (then kept)."""
        started = time.perf_counter()
        path = self._path(parent, shard, shards, lead, part)
        kept = _read(path, parent)
        if kept is not None:
            return replace(kept, seconds=time.perf_counter() - started, replayed=0, remembered=True)
        expansion = expand_part(self._inner, parent, shard, shards, lead, part)
        if not expansion.error:
            _write(path, expansion)
        return expansion


def expand_part(
    expander: Any,
    parent: Candidate,
    shard: int = 0,
    shards: int = 1,
    lead: int = 0,
    part: ExpansionPart = ExpansionPart.ALL,
) -> Expansion:
    """``expander.expand`` with only the arguments that differ from their defaults: an
    expander that never shards nor splits (a test's) takes the parent alone."""
    if part is not ExpansionPart.ALL:
        return expander.expand(parent, shard, shards, lead, part)
    if shards == 1:
        return expander.expand(parent)
    return expander.expand(parent, shard, shards, lead) if lead else expander.expand(parent, shard, shards)


def remembering(expander: Any, cache_dir: Path | None) -> Any:
    """``expander`` with its expansions kept in ``cache_dir``, when it names a
    ``cache_version`` (fakes in tests do not); as it is otherwise."""
    if cache_dir is None or not isinstance(getattr(expander, "cache_version", None), str):
        return expander
    try:
        private_cache_dir(Path(cache_dir))
    except InfrastructureError:
        return expander  # the builds say what is wrong with the folder, and stop the search
    return RememberingExpander(expander, cache_dir)


def worker_expander(factory: Any, workload: Any, options: Any, bench: BenchConfig | None, cache_dir: Path) -> Any:
    """The expander a worker keeps for ``workload``: ``factory``'s, reading the notes when
    ``options.compiler_notes`` asks for them (``noting``), its expansions kept in
    ``cache_dir`` (``remembering``)."""
    expander = factory(workload, options)
    if bench is not None and getattr(options, "compiler_notes", False):
        expander = noting(expander, bench, cache_dir)
    return remembering(expander, cache_dir)


def noting(expander: Any, bench: BenchConfig, cache_dir: Path) -> Any:
    """``expander`` reading what gcc made of each child's kernel into its features
    (``use_notes``): each child is built as it is made, into the build cache its
    measurement then takes it from (a child whose build outlasts ``NOTES_WAIT_SECONDS`` goes
    without notes). As it is when it cannot (a fake in a test) or the
    compiler writes no notes."""
    use = getattr(expander, "use_notes", None)
    if use is None:
        return expander
    try:
        if not writes_notes(bench):
            return expander
        version = artifact_key("notes", "", bench, kernel_flags(bench, False))
    except SchedsearchError:
        return expander  # the builds say what is wrong with the compiler
    use(functools.partial(_notes, config=bench, cache_dir=Path(cache_dir)), version)
    return expander


def _notes(c_source: str, openmp: bool, *, config: BenchConfig, cache_dir: Path) -> str | None:
    try:
        return kernel_notes(c_source, config, cache_dir, openmp, wait=build.NOTES_WAIT_SECONDS)
    except SchedsearchError:
        return None  # a machine fault: the build of this child for its measurement says so


def _read(path: Path, parent: Candidate) -> Expansion | None:
    if not verified(path):
        return None
    try:
        expansion = Expansion.from_json(json.loads(gzip.decompress(path.read_bytes())))
    except (OSError, ValueError, TypeError, KeyError, EOFError, gzip.BadGzipFile):
        return None
    if expansion.parent != parent.fingerprint or any(c.parent != parent.fingerprint for c in expansion.children):
        return None
    return expansion


def _write(path: Path, expansion: Expansion) -> None:
    """Keep ``expansion`` (best effort: a cache that cannot be written only costs time)."""
    keep(path, gzip.compress(json.dumps(replace(expansion, seconds=0.0, replayed=0).to_json()).encode("utf-8"), 6))
