"""Expansions kept on disk (``evaluate.expansions``): read back only when they are exactly
what a new expansion of the same parent would give."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from schedsearch.core import ExpandOptions, Rewrite, RewriteKind, Schedule
from schedsearch.evaluate.expansions import RememberingExpander, _write, remembering
from schedsearch.transforms import Expander, load_workload, root_candidate

MATMUL = Path(__file__).resolve().parents[2] / "examples" / "matmul.py"


@pytest.fixture(scope="module")
def workload():
    # no register tiles (scalar target, sizes they do not fit): a root that expands in well under a second
    return load_workload(MATMUL, "sgemm", {"M": 12, "N": 20, "K": 8})


@pytest.fixture()
def cache(tmp_path: Path) -> Path:
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    return folder


def kept_files(cache: Path) -> list[Path]:
    return sorted((cache / "expansions").rglob("*.json.gz"))


def never(*args, **kwargs):
    raise AssertionError("expanded again")


def test_an_expansion_is_read_back_by_the_next_expander(workload, cache, monkeypatch) -> None:
    root = root_candidate(workload)
    first = remembering(Expander(workload), cache).expand(root)
    assert not first.remembered and len(first.children) >= 5 and len(kept_files(cache)) == 1
    again = remembering(Expander(workload), cache)
    assert isinstance(again, RememberingExpander)
    monkeypatch.setattr(again._inner, "expand", never)
    second = again.expand(root)
    assert second.remembered and second.replayed == 0
    assert second.children == first.children
    assert (second.attempted, second.illegal, second.duplicates, second.order) == \
        (first.attempted, first.illegal, first.duplicates, first.order)
    # a child of a kept expansion is expanded from scratch: its proc was never built here
    child = remembering(Expander(workload), cache).expand(second.children[0])
    assert not child.remembered and not child.error and child.replayed == 1


def test_shards_and_options_are_kept_apart(workload, cache) -> None:
    root = root_candidate(workload)
    whole = remembering(Expander(workload), cache).expand(root)
    part = remembering(Expander(workload), cache).expand(root, 1, 2)
    assert not part.remembered and len(part.children) < len(whole.children)
    other = remembering(Expander(workload, ExpandOptions(allow_tails=False)), cache).expand(root)
    assert not other.remembered
    assert len(kept_files(cache)) == 3
    assert remembering(Expander(workload), cache).expand(root, 1, 2).children == part.children


def test_a_damaged_file_is_expanded_anew_and_kept_again(workload, cache) -> None:
    root = root_candidate(workload)
    first = remembering(Expander(workload), cache).expand(root)
    (path,) = kept_files(cache)
    path.write_bytes(gzip.compress(b'{"parent": "x", "children": []}'))  # its recorded sha256 no longer matches
    second = remembering(Expander(workload), cache).expand(root)
    assert not second.remembered and second.children == first.children
    assert remembering(Expander(workload), cache).expand(root).remembered


def test_an_expansion_of_another_parent_is_never_used(workload, cache) -> None:
    """A file with a valid record but the wrong content (planted, or a key clash) is refused."""
    root = root_candidate(workload)
    expander = remembering(Expander(workload), cache)
    of_root = expander.expand(root)
    child = of_root.children[0]
    _write(expander._path(child, 0, 1), of_root)  # the root's children, filed under the child
    got = remembering(Expander(workload), cache).expand(child)
    assert not got.remembered
    assert all(c.parent == child.fingerprint for c in got.children)


def test_an_expansion_that_failed_is_not_kept(workload, cache) -> None:
    bad = root_candidate(workload)
    bad = type(bad)(**{**{f: getattr(bad, f) for f in bad.__dataclass_fields__},
                       "schedule": Schedule((Rewrite.make(RewriteKind.SPLIT, "nope #0", factor=2, outer="a", inner="b",
                                                          tail="perfect"),))})
    got = remembering(Expander(workload), cache).expand(bad)
    assert got.error and kept_files(cache) == []


def test_expanders_without_a_version_and_no_folder_are_left_alone(workload, cache) -> None:
    class Unversioned:
        def expand(self, parent):
            return None

    fake = Unversioned()
    assert remembering(fake, cache) is fake
    plain = Expander(workload)
    assert remembering(plain, None) is plain


def test_the_version_names_the_workload_and_the_options(workload) -> None:
    other = load_workload(MATMUL, "sgemm", {"M": 12, "N": 20, "K": 16})
    base = Expander(workload).cache_version
    assert base == Expander(workload).cache_version
    assert base != Expander(other).cache_version
    assert base != Expander(workload, ExpandOptions(target="avx2")).cache_version
