"""Bad input to the real CLI: exit code 2 and exactly one line on stderr, no traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, run_cli


def assert_one_line_error(result, *needles: str) -> None:
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for n in needles:
        assert n.lower() in lines[0].lower(), lines[0]


def test_missing_file(tmp_path: Path) -> None:
    assert_one_line_error(run_cli("explain", str(tmp_path / "nope.py")), "nope.py")


def test_run_missing_file_does_not_create_database(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    assert_one_line_error(run_cli("run", str(tmp_path / "nope.py"), "--db", str(db)), "nope.py")
    assert not db.exists()


def test_bad_size_syntax() -> None:
    assert_one_line_error(run_cli("explain", str(EXAMPLES / "matmul.py"), "--size", "M64"), "NAME=INT")


def test_non_integer_size() -> None:
    assert_one_line_error(run_cli("explain", str(EXAMPLES / "matmul.py"), "--proc", "sgemm", "--size", "M=x"), "integer")


def test_unknown_proc_lists_available() -> None:
    assert_one_line_error(run_cli("explain", str(EXAMPLES / "matmul.py"), "--proc", "nosuch"), "nosuch", "sgemm")


def test_unknown_size_name() -> None:
    r = run_cli("explain", str(EXAMPLES / "matmul.py"), "--proc", "sgemm", "--size", "M=8,N=8,K=8,Q=3")
    assert_one_line_error(r, "Q")


def test_non_positive_size() -> None:
    assert_one_line_error(run_cli("explain", str(EXAMPLES / "matmul.py"), "--proc", "sgemm", "--size", "M=0,N=8,K=8"), "M")


def test_syntax_error_names_line(tmp_path: Path) -> None:
    bad = tmp_path / "broken.py"
    bad.write_text("from exo import proc\n\ndef f(:\n    pass\n")
    assert_one_line_error(run_cli("explain", str(bad)), "broken.py", "3")


@pytest.mark.parametrize("budget", ["nan", "inf", "-5", "0"])
def test_a_budget_that_is_not_a_usable_number_of_seconds(budget: str, tmp_path: Path) -> None:
    db = tmp_path / "never.db"
    r = run_cli("run", str(EXAMPLES / "matmul.py"), "--budget", budget, "--db", str(db))
    assert_one_line_error(r, "--budget")
    assert not db.exists()


@pytest.mark.parametrize("value", ["0", "-3", "many"])
def test_an_early_stop_that_is_not_a_positive_count(value: str, tmp_path: Path) -> None:
    db = tmp_path / "never.db"
    r = run_cli("run", str(EXAMPLES / "matmul.py"), "--early-stop", value, "--db", str(db))
    assert_one_line_error(r, "--early-stop")
    assert not db.exists()


def test_list_on_missing_database(tmp_path: Path) -> None:
    db = tmp_path / "none.db"
    assert_one_line_error(run_cli("list", "--db", str(db)), "none.db")
    assert not db.exists()


def test_not_a_database_is_left_untouched(tmp_path: Path) -> None:
    db = tmp_path / "notes.db"
    db.write_bytes(b"these are my notes, not a database\n" * 50)
    before = db.read_bytes()
    assert_one_line_error(run_cli("list", "--db", str(db)), "notes.db")
    assert db.read_bytes() == before


def test_unknown_search_id(tmp_path: Path, repo: Path) -> None:
    db = tmp_path / "empty.db"
    from schedsearch.store import open_store

    open_store(str(db)).close()
    assert_one_line_error(run_cli("show", "99", "--db", str(db)), "99")


def test_bad_compiler(tmp_path: Path) -> None:
    r = run_cli("run", str(EXAMPLES / "matmul.py"), "--proc", "sgemm", "--size", "M=8,N=8,K=8",
                "--cc", str(tmp_path / "no-such-cc"), "--workers", "0", "--db", str(tmp_path / "x.db"))
    assert_one_line_error(r, "no-such-cc")


def test_malformed_schedule_file_is_one_failed_case_with_a_junit_report(tmp_path: Path) -> None:
    f = tmp_path / "s.json"
    f.write_text("{not json")
    junit = tmp_path / "out.xml"
    r = run_cli("regress", str(f), "--json", "--junit", str(junit))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    (case,) = json.loads(r.stdout)["results"]
    assert case["passed"] is False and "s.json is not valid JSON" in case["reason"]
    assert 'failures="1"' in junit.read_text()


@pytest.mark.parametrize("command", ["run", "resume", "list", "show", "tree", "best", "export", "explain", "regress"])
def test_every_command_has_help(command: str) -> None:
    r = run_cli(command, "--help")
    assert r.returncode == 0 and "Usage:" in r.stdout


def test_target_choice_decides_which_register_tiles_are_offered():
    def kinds(*extra: str) -> set[str]:
        r = run_cli("explain", str(EXAMPLES / "matmul.py"), "--size", "M=24,N=16,K=8", "--json", *extra)
        assert r.returncode == 0, r.stderr
        return {(step["kind"], step["args"].get("isa")) for step in json.loads(r.stdout)["legal"]}

    avx2 = kinds("--target", "avx2")
    assert ("register_tile", "avx2") in avx2
    assert ("register_tile", "avx512") not in avx2
    # the scalar target's tile is left to gcc's vectoriser
    assert {isa for k, isa in kinds("--target", "scalar") if k == "register_tile"} == {"scalar"}
    assert_one_line_error(run_cli("explain", str(EXAMPLES / "matmul.py"), "--target", "sse9"), "--target")
