"""A real, short ``schedsearch run`` followed by the read commands, export and regress."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from schedsearch.core import KERNEL_SYMBOL, sha256_text
from schedsearch.evaluate import cpu_flags
from schedsearch.search.finalists import FINALIST_GRACE_SECONDS
from schedsearch.targets import build_flags, detect
from tests.conftest import EXAMPLES, run_cli

SIZES = "M=32,N=32,K=32"


@pytest.fixture(scope="module")
def searched(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """One short in-process search (no Ray) of SGEMM 32^3, shared by the tests below, with
    a build cache of its own: it expands and builds (an earlier run's cache would hold it all).
    24 candidates: with the compiler's notes the root's children are all measured as one
    round, and the next round grows from the best of them."""
    work = tmp_path_factory.mktemp("cli")
    db = work / "s.db"
    r = run_cli("run", str(EXAMPLES / "matmul.py"), "--proc", "sgemm", "--size", SIZES, "--workers", "0",
                "--max-candidates", "24", "--budget", "240", "--db", str(db), "--json",
                "--events", str(work / "events.jsonl"), cwd=work, env={"SCHEDSEARCH_CACHE_DIR": str(work / "cache")})
    assert r.returncode == 0, r.stderr
    return db, json.loads(r.stdout)


@pytest.mark.slow
def test_run_appends_every_event_to_the_events_file(searched: tuple[Path, dict]) -> None:
    db, out = searched
    lines = [json.loads(line) for line in (db.parent / "events.jsonl").read_text().splitlines()]
    kinds = [e["kind"] for e in lines]
    assert kinds[0] == "started" and kinds[-1] == "finished" and "tick" not in kinds
    assert {"asked", "baseline", "expanded", "evaluated", "finalists"} <= set(kinds)
    assert all(e["search_id"] == out["search_id"] for e in lines)
    assert [e["elapsed"] for e in lines] == sorted(e["elapsed"] for e in lines)
    nodes = {n["candidate_id"]: n for n in json.loads(run_cli("tree", str(out["search_id"]), "--db", str(db),
                                                                  "--json").stdout)}
    assert next(e for e in lines if e["kind"] == "asked")["message"].startswith("round 1: expanding #")
    evaluated = [e["record"] for e in lines if e["kind"] == "evaluated"]
    assert len(evaluated) == out["candidates"]["evaluated"] - 1  # the root is announced as the baseline
    for rec in evaluated:  # each one as the tree has it
        node = nodes[rec["id"]]
        assert (rec["parent_id"], rec["depth"], rec["status"]) == (node["parent_id"], node["depth"], node["status"])
        assert rec["step"] and rec["measured_at"] is not None


@pytest.mark.slow
def test_run_json_has_the_documented_keys(searched: tuple[Path, dict]) -> None:
    _, out = searched
    for key in ("search_id", "file", "proc", "sizes", "status", "elapsed_seconds", "candidates", "baseline", "best"):
        assert key in out
    assert out["proc"] == "sgemm" and out["sizes"] == {"M": 32, "N": 32, "K": 32}
    assert out["status"] == "completed"
    assert set(out["candidates"]) >= {"generated", "duplicates", "illegal", "evaluated", "ok", "failed"}
    assert out["candidates"]["evaluated"] >= 14
    assert out["baseline"]["seconds"] > 0 and out["baseline"]["gflops"] > 0
    best = out["best"]
    assert set(best) >= {"candidate_id", "seconds", "gflops", "speedup", "schedule", "fingerprint"}
    assert best["speedup"] > 0 and isinstance(best["schedule"], list)


@pytest.mark.slow
def test_run_and_show_say_where_the_time_went(searched: tuple[Path, dict]) -> None:
    db, out = searched
    spent = out["time_spent"]
    assert set(spent) == {"expanding", "building", "measuring", "idle", "starting", "baseline_wait"}
    assert 0 < spent["baseline_wait"] < out["elapsed_seconds"]  # the root measured, not counted in the budget
    assert 0 < spent["starting"] < out["elapsed_seconds"]  # loading the workload, before the search's clock
    # Exo expanded, gcc built and the runner timed, each for a measurable while; with one
    # process doing everything (--workers 0), their sum cannot exceed the search's own time
    # by more than the finalists' re-measurement and the baseline timed before the clock.
    assert spent["expanding"] > 0 and spent["building"] > 0 and spent["measuring"] > 0
    assert spent["expanding"] + spent["building"] + spent["measuring"] <= out["elapsed_seconds"] * 1.5
    shown = run_cli("show", str(out["search_id"]), "--db", str(db), "--json")
    assert json.loads(shown.stdout)["time_spent"] == spent  # as stored
    text = run_cli("show", str(out["search_id"]), "--db", str(db)).stdout
    assert re.search(r"time spent\s+workers expanding \d+\.\d s and building \d+\.\d s", text)
    assert re.search(r"elapsed\s+\d+\.\d s \(after \d+\.\d s starting", text)


@pytest.mark.slow
def test_list_show_tree(searched: tuple[Path, dict]) -> None:
    db, out = searched
    sid = str(out["search_id"])
    listed = json.loads(run_cli("list", "--db", str(db), "--json").stdout)
    assert any(s["search_id"] == out["search_id"] and s["status"] == "completed" for s in listed)
    assert set(listed[0]) >= {"search_id", "proc", "sizes", "status", "best_speedup"}
    shown = run_cli("show", sid, "--db", str(db))
    assert shown.returncode == 0 and "top" in shown.stdout
    assert "strict float, auto timing" in shown.stdout  # how it was measured: the default
    nodes = json.loads(run_cli("tree", sid, "--db", str(db), "--json").stdout)
    assert len(nodes) >= 15  # the root plus at least 14 evaluated
    for n in nodes:
        assert set(n) >= {"candidate_id", "parent_id", "depth", "fingerprint", "status", "seconds", "speedup", "step",
                          "build_seconds", "run_seconds"}
    # Each measured candidate says what measuring it cost: every one was timed, and this
    # search's own cache started empty, so some were built for it.
    measured = [n for n in nodes if n["status"] == "ok"]
    assert all(n["run_seconds"] > 0 for n in measured) and any(n["build_seconds"] > 0 for n in measured)
    roots = [n for n in nodes if n["parent_id"] is None]
    assert len(roots) == 1 and roots[0]["depth"] == 0
    ids = {n["candidate_id"] for n in nodes}
    assert all(n["parent_id"] in ids for n in nodes if n["parent_id"] is not None)
    shallow = json.loads(run_cli("tree", sid, "--db", str(db), "--json", "--depth", "1").stdout)
    assert shallow and max(n["depth"] for n in shallow) <= 1


@pytest.mark.slow
def test_best_across_searches(searched: tuple[Path, dict]) -> None:
    db, out = searched
    r = run_cli("best", str(EXAMPLES / "matmul.py"), "--proc", "sgemm", "--size", SIZES, "--db", str(db), "--json")
    assert r.returncode == 0, r.stderr
    best = json.loads(r.stdout)["best"]
    assert best and best[0]["seconds"] <= min(b["seconds"] for b in best)


@pytest.mark.slow
def test_every_view_names_the_same_best_with_the_same_numbers(searched: tuple[Path, dict]) -> None:
    from schedsearch.cli.render import fmt_seconds
    from schedsearch.explore import SearchTree
    from schedsearch.store import open_store

    db, out = searched
    sid = out["search_id"]
    run = out["best"]
    # the finalists of a completed search were re-measured side by side: those are its numbers
    assert out["status"] == "completed" and run["numbers"] == "remeasured" and run["remeasured"] is True
    assert out["ended"] == "candidate_limit_reached"
    expected = (run["candidate_id"], run["seconds"], run["speedup"], run["numbers"])

    def key(best: dict) -> tuple:
        return best["candidate_id"], best["seconds"], best["speedup"], best["numbers"]

    (listed,) = [s for s in json.loads(run_cli("list", "--db", str(db), "--json").stdout) if s["search_id"] == sid]
    assert key(listed["best"]) == expected
    assert (listed["best_candidate_id"], listed["best_seconds"], listed["best_speedup"]) == expected[:3]
    shown = json.loads(run_cli("show", str(sid), "--db", str(db), "--json").stdout)
    assert key(shown["best"]) == expected
    assert all(t["declared_best"] is None or key(t["declared_best"]) == expected for t in shown["top"])
    best = json.loads(run_cli("best", str(EXAMPLES / "matmul.py"), "--proc", "sgemm", "--size", SIZES,
                              "--db", str(db), "--json").stdout)["best"]
    assert key(best[0]) == expected and best[0]["search_id"] == sid
    nodes = json.loads(run_cli("tree", str(sid), "--db", str(db), "--json").stdout)
    (declared,) = [n for n in nodes if n["declared_best"] is not None]
    assert declared["candidate_id"] == expected[0] and key(declared["declared_best"]) == expected
    assert all("spread" in n and "within_noise" in n for n in nodes)
    store = open_store(str(db), create=False, read_only=True)
    try:
        notebook = SearchTree.load(store, sid).declared_best
    finally:
        store.close()
    assert (notebook.record.id, notebook.seconds, notebook.speedup, notebook.kind.value) == expected

    # the text of every command: the same candidate, time and speedup, and which kind they are
    cid, seconds, speedup = expected[0], fmt_seconds(expected[1]), f"{expected[2]:.3g}x"
    table = run_cli("list", "--db", str(db)).stdout
    assert re.search(rf"#{cid}\s.*{re.escape(seconds)}.*{re.escape(speedup)}.*re-measured", table), table
    text = run_cli("show", str(sid), "--db", str(db)).stdout
    assert f"candidate {cid}, {seconds}" in text and f"{speedup} faster (finalists re-measured side by side" in text
    assert re.search(rf"\*\s+│\s+{cid}\s", text), text  # the table marks the best's row
    assert f"* the best: candidate {cid}, {seconds}, {speedup} when the finalists were re-measured" in text
    assert "step " in text  # the schedule lists each step's numbers
    text = run_cli("best", str(EXAMPLES / "matmul.py"), "--proc", "sgemm", "--size", SIZES, "--db", str(db)).stdout
    assert f"* best: search {sid}, candidate {cid}, {seconds}" in text and "re-measured side by side" in text
    text = run_cli("tree", str(sid), "--db", str(db)).stdout
    assert f"best: #{cid}, {seconds} {speedup} (finalists re-measured side by side" in text
    assert re.search(rf"\*#{cid} ok .*x   best: ", text), text


@pytest.mark.slow
def test_export_py_reproduces_the_fingerprint(searched: tuple[Path, dict], tmp_path: Path) -> None:
    db, out = searched
    script = tmp_path / "best_schedule.py"
    r = run_cli("export", str(out["search_id"]), "--format", "py", "-o", str(script), "--db", str(db))
    assert r.returncode == 0, r.stderr
    text = script.read_text()
    assert "import schedsearch" not in text and "from schedsearch" not in text  # plain Exo calls only
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    printed = run.stdout[:-1] if run.stdout.endswith("\n") else run.stdout  # print() adds one newline
    c = re.sub(r"\bsgemm\b", KERNEL_SYMBOL, printed)
    assert sha256_text(c) == out["best"]["fingerprint"], (out["best"]["schedule"], text)


@pytest.mark.slow
def test_export_c_compiles(searched: tuple[Path, dict], tmp_path: Path) -> None:
    db, out = searched
    r = run_cli("export", "--candidate", str(out["best"]["candidate_id"]), "--format", "c", "--db", str(db))
    assert r.returncode == 0, r.stderr
    assert "void sgemm(" in r.stdout.replace("void sgemm (", "void sgemm(")
    src = tmp_path / "k.c"
    src.write_text(r.stdout)
    # it names the flags it was built with (vector instructions need theirs), and compiles with them
    match = re.match(r"/\* .* built and measured with: (\S+) (.*) \*/\n", r.stdout)
    assert match, r.stdout[:200]
    flags = match.group(2).split()
    cc = subprocess.run(["gcc", *flags, "-c", str(src), "-o", str(tmp_path / "k.o")], capture_output=True, text=True)
    assert cc.returncode == 0, cc.stderr


@pytest.mark.slow
@pytest.mark.serial  # regress compares the speedup with the recorded one: run alone
def test_export_json_then_regress(searched: tuple[Path, dict], tmp_path: Path) -> None:
    db, out = searched
    sched = tmp_path / "sched" / "sgemm.json"
    sched.parent.mkdir()
    r = run_cli("export", str(out["search_id"]), "--format", "json", "-o", str(sched), "--db", str(db))
    assert r.returncode == 0, r.stderr
    data = json.loads(sched.read_text())
    assert data["workload"]["proc"] == "sgemm" and not Path(data["workload"]["file"]).is_absolute()
    assert data["fingerprint"] == out["best"]["fingerprint"]
    # it records the best's numbers as every command reports them, and says which kind
    assert (data["speedup"], data["seconds"]) == (out["best"]["speedup"], out["best"]["seconds"])
    assert data["origin"]["numbers"] == out["best"]["numbers"]
    assert data["machine"]["compiler_version"] and data["speedup"] > 0
    # candidates were built with the flags of the target `--target auto` chose for this CPU
    chosen = detect(cpu_flags())
    assert tuple(data["machine"]["cflags"]) == build_flags(("-O3", "-march=native"), chosen)

    junit = tmp_path / "junit.xml"
    ok = run_cli("regress", "--workloads", str(EXAMPLES), str(sched.parent), "--tolerance", "0.9", "--junit", str(junit), "--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["passed"] is True
    assert 'failures="0"' in junit.read_text()

    assert data["target"] in ("avx512", "avx2", "neon", "scalar")

    # A schedule recorded on another machine is still checked, and the report says so.
    other = dict(data, machine=dict(data["machine"], cpu_model="Some Other CPU"))
    elsewhere = sched.parent / "elsewhere.json"
    elsewhere.write_text(json.dumps(other))
    r = run_cli("regress", "--workloads", str(EXAMPLES), str(elsewhere), "--tolerance", "0.9", "--json")
    result = json.loads(r.stdout)["results"][0]
    assert r.returncode == 0 and result["machine_differs"] is True
    assert result["recorded_on"] == "Some Other CPU"
    assert r.stderr.count("recorded on another machine") == 1  # said once, not per row
    # Falling short of a timing recorded elsewhere warns; --strict-machine makes it fail.
    elsewhere.write_text(json.dumps(dict(other, speedup=data["speedup"] * 1000)))
    r = run_cli("regress", "--workloads", str(EXAMPLES), str(elsewhere), "--json")
    result = json.loads(r.stdout)["results"][0]
    assert r.returncode == 0 and result["passed"] and "another machine" in result["warning"], result
    r = run_cli("regress", "--workloads", str(EXAMPLES), str(elsewhere), "--json", "--strict-machine")
    assert r.returncode == 1 and "slower" in json.loads(r.stdout)["results"][0]["reason"]
    elsewhere.unlink()

    # A schedule for instructions this CPU lacks is skipped with the reason, not run or passed.
    foreign = sched.parent / "foreign.json"
    foreign.write_text(json.dumps(dict(data, target="neon")))
    r = run_cli("regress", "--workloads", str(EXAMPLES), str(foreign), "--json", "--junit", str(junit))
    result = json.loads(r.stdout)["results"][0]
    assert r.returncode == 0 and result["skipped"] and not result["passed"], result
    assert "neon" in result["reason"] and 'skipped="1"' in junit.read_text() and "<skipped" in junit.read_text()
    foreign.unlink()

    # A recorded speedup far above what the schedule reaches is a regression.
    data["speedup"] = data["speedup"] * 1000
    slow = sched.parent / "too_fast.json"  # same folder: the workload path is relative
    slow.write_text(json.dumps(data))
    r = run_cli("regress", "--workloads", str(EXAMPLES), str(slow), "--json")
    assert r.returncode == 1, r.stderr
    assert "slower" in json.loads(r.stdout)["results"][0]["reason"]
    # --update re-records it from this run, and it then passes as it is
    r = run_cli("regress", "--workloads", str(EXAMPLES), str(slow), "--json", "--update")
    assert r.returncode == 0, r.stdout
    updated = json.loads(slow.read_text())
    assert updated["speedup"] < data["speedup"] / 100 and "updated_at" in updated["origin"]
    assert updated["origin"]["numbers"] == "remeasured"  # regress times side by side
    assert updated["steps"] == data["steps"] and updated["machine"]["cflags"]
    assert run_cli("regress", "--workloads", str(EXAMPLES), str(slow), "--tolerance", "0.9").returncode == 0

    # A step that no longer applies fails and names the step.
    if data["steps"]:
        data["steps"][-1]["target"] = "no_such_loop"
        stale = sched.parent / "stale.json"
        stale.write_text(json.dumps(data))
        r = run_cli("regress", "--workloads", str(EXAMPLES), str(stale), "--json")
        assert r.returncode == 1
        reason = json.loads(r.stdout)["results"][0]["reason"]
        assert f"step {len(data['steps'])}" in reason or "no_such_loop" in reason


@pytest.mark.slow
def test_shared_timing_is_recorded_and_shown(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    r = run_cli("run", str(EXAMPLES / "matmul.py"), "--proc", "sgemm", "--size", SIZES, "--workers", "0",
                "--timing", "shared", "--max-candidates", "3", "--budget", "120", "--cost-model", "off",
                "--no-warm-start", "--db", str(db), "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    counts = json.loads(r.stdout)["candidates"]
    assert 1 <= counts["timed_beside"] <= counts["evaluated"]
    assert f"{counts['timed_beside']} of {counts['evaluated']} timed beside builds and expansions" in r.stderr
    shown = run_cli("show", str(json.loads(r.stdout)["search_id"]), "--db", str(db))
    assert "shared timing" in shown.stdout and "quiet timing" not in shown.stdout


@pytest.mark.slow
def test_a_search_with_early_stop_ends_when_it_stops_improving(tmp_path: Path) -> None:
    """A real search (no Ray) with a budget it does not need: it ends once four candidates
    in a row brought no new best beyond noise, re-measures its finalists, and every view
    says why it ended."""
    db = tmp_path / "e.db"
    r = run_cli("run", str(EXAMPLES / "matmul.py"), "--proc", "sgemm", "--size", "M=16,N=16,K=16", "--workers", "0",
                "--early-stop", "4", "--budget", "600", "--no-warm-start", "--db", str(db), "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["status"] == "completed" and out["ended"] == "stopped_improving"
    assert out["candidates"]["since_best"] >= 4
    assert out["elapsed_seconds"] < 0.9 * 600  # not the budget
    assert out["best"]["remeasured"] is True
    shown = run_cli("show", str(out["search_id"]), "--db", str(db))
    assert shown.returncode == 0, shown.stderr
    assert "stopped improving (no new best in the last" in shown.stdout
    # Resumed with more candidates and a shorter patience: it counts again from its best.
    r = run_cli("resume", str(out["search_id"]), "--max-candidates", "40", "--early-stop", "2", "--db", str(db),
                "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    again = json.loads(r.stdout)
    assert again["early_stop"] == 2 and again["ended"] == "stopped_improving"
    measured = lambda o: o["candidates"]["evaluated"] - o["candidates"]["reused"]  # noqa: E731
    assert 2 <= measured(again) - measured(out) < 40
    # --no-early-stop: the rest runs to its budget (here its candidates), the stored rule off.
    r = run_cli("resume", str(out["search_id"]), "--max-candidates", "6", "--no-early-stop", "--db", str(db),
                "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    last = json.loads(r.stdout)
    assert last["early_stop"] is None and last["auto_stop"] is False and last["ended"] == "candidate_limit_reached"
    assert measured(last) - measured(again) == 6


@pytest.mark.slow
@pytest.mark.ray
@pytest.mark.serial
def test_the_time_budget_counts_from_the_workers_start_which_is_reported_apart(tmp_path: Path) -> None:
    """``--budget 20`` with a private Ray cluster: the search's own clock, which the budget
    counts, starts once the workers are ready; the seconds before (the workload, the
    compiler check, the cluster's start) are said step by step on stderr (where they went,
    once the workers are ready) and kept as ``time_spent.starting``. The command takes the budget, the start and the
    cluster's shutdown after the report."""
    budget = 20.0
    started = time.monotonic()
    r = run_cli("run", str(EXAMPLES / "matmul.py"), "--proc", "sgemm", "--size", "M=128,N=128,K=128",
                "--budget", str(budget), "--workers", "2", "--no-warm-start", "--db", str(tmp_path / "b.db"), "--json",
                cwd=tmp_path, env={"SCHEDSEARCH_CACHE_DIR": str(tmp_path / "cache")})
    wall = time.monotonic() - started
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    starting = out["time_spent"]["starting"]
    assert starting >= 0.5, "a private Ray cluster takes seconds to start, and they are kept"
    assert budget * 0.8 <= out["elapsed_seconds"] <= budget + FINALIST_GRACE_SECONDS  # the whole budget searched
    assert out["status"] == "completed" and out["ended"] == "budget_reached"
    # Shutting the cluster down after the report takes a second or two.
    assert wall <= budget + starting + 8.0, f"the command took {wall:.1f} s for a {budget:.0f}-second budget"
    assert f"after {starting:.1f} s starting" in r.stderr  # the summary (on stderr with --json)
    ready = next(line for line in r.stderr.splitlines() if line.startswith("[start "))
    assert "ready: Python and imports" in ready and "checking the C compiler" in ready, ready
    assert re.search(r"; a private Ray cluster for 2 workers \d+\.\d s", ready), ready
