"""The web dashboard on a real SQLite file: what its pages show, that database text is only
ever shown as text, that browsing writes nothing, and the CLI's errors."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import socket
import sqlite3
import time
import warnings
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from schedsearch.core import Status
from schedsearch.dashboard import fmt
from schedsearch.dashboard.routes import create_app
from schedsearch.numbers import load_declared_best
from schedsearch.store import open_store
from tests.conftest import run_cli
from tests.integration.dashboard_data import HOSTILE, NODES, RAW_MARKUP, SearchedDb, big_db, searched_db

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # starlette 1.x warns that it prefers httpx2 to httpx
    from starlette.testclient import TestClient

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> SearchedDb:
    return searched_db(tmp_path_factory.mktemp("dashboard") / "results.db")


@pytest.fixture(scope="module")
def client(data: SearchedDb) -> Iterator[TestClient]:
    store = open_store(str(data.path), create=False, read_only=True)
    try:
        with TestClient(create_app(store, label=str(data.path))) as c:
            yield c
    finally:
        store.close()


def _page(client: TestClient, url: str, status: int = 200) -> str:
    r = client.get(url)
    assert r.status_code == status, (url, r.status_code, r.text[:500])
    for raw in RAW_MARKUP:
        assert raw not in r.text, (url, raw)
    return r.text


def _declared(data: SearchedDb, search_id: int):
    with open_store(str(data.path), create=False, read_only=True) as store:
        search = store.get_search(search_id)
        return search, load_declared_best(store, search), store.candidates(search_id)


def test_the_list_shows_every_search_with_its_best(client: TestClient, data: SearchedDb) -> None:
    html = _page(client, "/")
    for sid in (*data.searches, data.running, data.hostile):
        assert f'<tr data-search="{sid}"' in html
        _, best, _ = _declared(data, sid)
        assert best is not None
        # the same best, and the same numbers, as `schedsearch list` reports
        assert f'href="/candidates/{best.record.id}">#{best.record.id}</a>' in html
        assert fmt.timed(best.seconds, best.spread) in html and fmt.num(best.speedup, "x") in html
    assert "fake_gemm[N=64]" in html and 'data-live="1"' in html  # a search is running: the page polls


def test_the_json_endpoint_matches_the_store(client: TestClient, data: SearchedDb) -> None:
    listed = client.get("/api/searches").json()
    assert [s["id"] for s in listed] == sorted((*data.searches, data.running, data.hostile))
    one = client.get(f"/api/searches/{data.searches[0]}").json()
    search, best, _ = _declared(data, data.searches[0])
    assert one["evaluated"] == search.counters.evaluated == 60
    assert one["best_id"] == best.record.id and one["best_seconds"] == best.seconds
    assert not one["running"] and client.get(f"/api/searches/{data.running}").json()["running"]
    assert client.get("/api/searches/999").status_code == 404


def test_the_search_page_plots_every_measured_candidate(client: TestClient, data: SearchedDb) -> None:
    sid = data.searches[0]
    html = _page(client, f"/searches/{sid}")
    search, best, records = _declared(data, sid)
    ok = [r for r in records if r.status is Status.OK]
    failed = [r for r in records if r.status not in (Status.OK, Status.PENDING)]
    assert html.count('<circle class="dot"') == len(ok) > 10
    assert html.count('<path class="fail"') == len(failed) > 0
    assert html.count('class="best-line"') == 1
    # the tree: every node shown (60 fit), the path to the best highlighted, the best marked
    assert html.count('<span class="node') == len(records)
    path_ids = [r.id for r in _lineage(records, best.record.id)]
    assert html.count("on-path") == len(path_ids) > 1
    assert f'class="node on-path best"><a href="/candidates/{best.record.id}">' in html
    # the fastest candidates, the best first; the best's schedule, one line per step
    top = html[html.index('<table class="numbers" id="top">'):]
    assert top.index(f"#{best.record.id}</a> best") < top.index("</tr>", top.index("<tbody>") + 10)
    assert html.count("<li><a href=\"/candidates/") >= len(best.record.schedule.steps)


def _lineage(records, cid):
    by_id = {r.id: r for r in records}
    out = []
    while cid is not None:
        out.append(by_id[cid])
        cid = by_id[cid].parent_id
    return out[::-1]


def test_a_search_page_s_live_parts_are_the_page_s_own(client: TestClient, data: SearchedDb) -> None:
    for sid in (data.running, data.searches[0]):
        html = _page(client, f"/searches/{sid}")
        live = _page(client, f"/searches/{sid}/live")
        assert "<html" not in live and "<script" not in live and "<h1>" not in live  # a fragment
        parts = ["summary", "plot", "best", "top", "tree"]
        assert re.findall(r'data-part="(\w+)"', live) == re.findall(r'data-part="(\w+)"', html) == parts
        # rendered by the same macros from the same data: the page holds every line of it
        assert [line for line in live.splitlines() if line not in html] == []
        assert live.count('<circle class="dot"') == html.count('<circle class="dot"') > 0
    search = client.get(f"/api/searches/{data.running}").json()
    # what the page script compares with the JSON to know whether to fetch the parts again
    assert f'data-version="{search["evaluated"]}/{search["generated"]}"' in _page(client, f"/searches/{data.running}")
    assert client.get(f"/searches/{data.searches[0]}/live").headers["content-security-policy"]
    assert client.get("/searches/999/live").status_code == 404


def test_the_plot_is_an_svg_document(client: TestClient, data: SearchedDb) -> None:
    r = client.get(f"/searches/{data.searches[1]}/plot.svg")
    assert r.status_code == 200 and r.headers["content-type"].startswith("image/svg+xml")
    root = ET.fromstring(r.text)
    assert root.tag == f"{SVG}svg"
    circles = root.findall(f".//{SVG}circle")
    _, _, records = _declared(data, data.searches[1])
    assert len(circles) == sum(r.status is Status.OK for r in records)
    assert all(c.get("data-candidate", "").isdigit() for c in circles)


def test_a_candidate_page_has_schedule_diff_and_c(client: TestClient, data: SearchedDb) -> None:
    _, best, records = _declared(data, data.searches[0])
    html = _page(client, f"/candidates/{best.record.id}")
    with open_store(str(data.path), create=False, read_only=True) as store:
        record = store.get_candidate(best.record.id)
        parent = store.get_candidate(record.parent_id)
    assert f'parent <a href="/candidates/{parent.id}">' in html
    assert html.count('<span class="add">') >= 1 and html.count('<span class="del">') >= 1  # the proc diff
    assert f"fake proc [{record.proc_text.split('[')[1]}" in html
    assert "/* fake kernel [" in html and "void schedsearch_kernel(void) {}" in html  # its C
    assert html.count("<li>") >= len(record.schedule.steps)
    root = next(r for r in records if r.parent_id is None)
    assert "No steps: the unscheduled proc." in _page(client, f"/candidates/{root.id}")


def _top_header(html: str) -> str:
    top = html[html.index('<table class="numbers" id="top">'):]
    return top[:top.index("</thead>")]


def test_a_search_timed_on_two_nodes_shows_them(client: TestClient, data: SearchedDb) -> None:
    search = _page(client, f"/searches/{data.hostile}")
    # the summary counts the nodes, named by host name; the table names each candidate's node
    assert 'id="nodes">timed on 2 nodes: ' in search
    assert "vm-head 1" in search and "&lt;script&gt;alert(6)&lt;/script&gt; 1" in search
    assert "<th>node</th>" in _top_header(search)
    assert "<td>vm-head</td>" in search and "<td>&lt;script&gt;alert(6)&lt;/script&gt;</td>" in search
    assert "<th>node</th>" in _top_header(_page(client, f"/searches/{data.hostile}/live"))
    # the candidate: the nodes that timed and built it, and the timing machine's fingerprint
    with open_store(str(data.path), create=False, read_only=True) as store:
        child = store.get_candidate(data.hostile_child)
    assert child.machine is not None
    html = _page(client, f"/candidates/{data.hostile_child}")
    assert f"<th>timed on</th><td>node <code>{NODES[1]}</code> (&lt;script&gt;alert(6)&lt;/script&gt;)" in html
    assert f"<th>built on</th><td>node <code>{NODES[1]}</code>" in html
    assert f"<th>machine</th><td>fingerprint <code>{child.machine.fingerprint}</code></td>" in html
    failed = _page(client, f"/candidates/{data.hostile_failed}")  # never timed: built, but on no timing node
    assert "<th>timed on</th><td>- " in failed and f"<th>built on</th><td>node <code>{NODES[1]}</code>" in failed


def test_a_search_timed_on_no_cluster_shows_no_nodes(client: TestClient, data: SearchedDb) -> None:
    search = _page(client, f"/searches/{data.searches[0]}")
    assert "<th>node</th>" not in _top_header(search) and 'id="nodes"' not in search
    _, best, _ = _declared(data, data.searches[0])
    html = _page(client, f"/candidates/{best.record.id}")
    assert "<th>timed on</th><td>- " in html and "<th>built on</th><td>-</td>" in html


def test_hostile_database_text_is_shown_as_text(client: TestClient, data: SearchedDb) -> None:
    pages = {url: _page(client, url) for url in (
        "/", f"/searches/{data.hostile}", f"/candidates/{data.hostile_child}", f"/candidates/{data.hostile_failed}",
        f"/searches/{data.hostile}/tree?root={data.hostile_child}", f"/compare?a={data.searches[0]}&b={data.hostile}",
        f"/searches/{data.hostile}/plot.svg", f"/searches/{data.hostile}/live", "/compare")}
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in pages["/"]  # the workload's path
    search = pages[f"/searches/{data.hostile}"]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in search and "&lt;script&gt;alert(2)&lt;/script&gt; #0" in search
    assert "&lt;script&gt;alert(2)&lt;/script&gt; #0" in pages[f"/searches/{data.hostile}/live"]
    child = pages[f"/candidates/{data.hostile_child}"]
    assert "/* &lt;/pre&gt;&lt;script&gt;alert(3)&lt;/script&gt; */" in child  # the C
    assert "&#39;&lt;script&gt;alert(4)&lt;/script&gt;&#39;" in child  # the proc, in the diff and whole
    assert "&lt;img src=x onerror=alert(5)&gt;" in pages[f"/candidates/{data.hostile_failed}"]  # the error
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in pages[f"/compare?a={data.searches[0]}&b={data.hostile}"]
    # JSON carries the text as data; it is served as JSON, which browsers do not sniff as HTML
    r = client.get("/api/searches")
    assert r.headers["content-type"] == "application/json" and r.headers["x-content-type-options"] == "nosniff"
    assert HOSTILE["path"] in {s["path"] for s in r.json()}


def test_pages_allow_only_their_own_scripts(client: TestClient) -> None:
    csp = client.get("/").headers["content-security-policy"]
    assert "script-src 'self'" in csp and "default-src 'none'" in csp
    js = client.get("/static/live.js")
    assert js.status_code == 200 and "innerHTML" not in js.text and "textContent" in js.text
    assert client.get("/static/dashboard.css").status_code == 200


def test_a_tampered_row_is_an_escaped_error_page(data: SearchedDb, tmp_path: Path) -> None:
    copy = tmp_path / "tampered.db"
    shutil.copy(data.path, copy)
    with sqlite3.connect(copy) as conn:  # a proc name schedsearch would never write
        conn.execute("UPDATE workloads SET proc = '<script>alert(6)</script>'")
    with open_store(str(copy), create=False, read_only=True) as store, \
            TestClient(create_app(store, label=str(copy))) as c:
        r = c.get("/")
        assert r.status_code == 500 and "cannot be read" in r.text
        assert "<script>alert(6)" not in r.text and "&lt;script&gt;alert(6)" in r.text


def test_unknown_ids_and_bad_requests(client: TestClient, data: SearchedDb) -> None:
    assert "no search 999" in _page(client, "/searches/999", 404)
    assert "no candidate 999" in _page(client, "/candidates/999", 404)
    _page(client, "/searches/999/plot.svg", 404)
    _page(client, "/searches/abc", 404)
    _page(client, f"/searches/{data.searches[0]}/tree?root=999", 404)
    _page(client, f"/searches/{data.searches[0]}/tree?root={data.hostile_child}", 404)  # another search's
    _page(client, f"/compare?a={data.searches[0]}&b=999", 404)
    assert "whole number" in _page(client, "/compare?a=1&b=%3Cscript%3Ealert(7)", 400)
    assert client.post("/").status_code == 405  # read-only: GET only


def test_compare_two_searches(client: TestClient, data: SearchedDb) -> None:
    a, b = data.searches
    html = _page(client, f"/compare?a={a}&b={b}")
    assert html.count('class="best-line"') == 2 and html.count('class="series"') == 2
    (_, best_a, _), (_, best_b, _) = _declared(data, a), _declared(data, b)
    assert fmt.num(best_a.seconds / best_b.seconds, "x") in html
    assert html.count('<ol class="steps">') == 2
    picker = _page(client, "/compare")
    assert picker.count("<option") == 2 * 4


def test_a_subtree_page(client: TestClient, data: SearchedDb) -> None:
    sid = data.searches[0]
    _, best, records = _declared(data, sid)
    path = _lineage(records, best.record.id)
    html = _page(client, f"/searches/{sid}/tree?root={path[1].id}")
    assert f'<a href="/searches/{sid}/tree?root={path[0].id}">#{path[0].id}</a>' in html  # the way back up
    assert html.count('<span class="node') == 1 + _descendants(records, path[1].id)


def _descendants(records, cid) -> int:
    kids = [r for r in records if r.parent_id == cid]
    return len(kids) + sum(_descendants(records, k.id) for k in kids)


def test_only_loopback_host_names_are_answered(data: SearchedDb) -> None:
    with open_store(str(data.path), create=False, read_only=True) as store:
        app = create_app(store, label="x", allowed_hosts=("localhost", "127.0.0.1"))
        with TestClient(app, base_url="http://127.0.0.1:8080") as c:
            assert c.get("/").status_code == 200
            # a DNS name rebound to 127.0.0.1 by some web page is refused
            assert c.get("/", headers={"host": "evil.example"}).status_code == 400


def _fingerprint(path: Path) -> tuple[str, int]:
    return hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns


def test_browsing_writes_nothing(data: SearchedDb, tmp_path: Path) -> None:
    copy = tmp_path / "browsed.db"
    shutil.copy(data.path, copy)
    before = _fingerprint(copy)
    with open_store(str(copy), create=False, read_only=True) as store, TestClient(create_app(store)) as c:
        urls = ["/", "/api/searches", "/compare", f"/compare?a={data.searches[0]}&b={data.searches[1]}"]
        for sid in (*data.searches, data.running, data.hostile):
            urls += [f"/searches/{sid}", f"/api/searches/{sid}", f"/searches/{sid}/plot.svg", f"/searches/{sid}/live"]
        urls += [f"/candidates/{cid}" for cid in range(1, 30)]
        for url in urls:
            assert c.get(url).status_code == 200, url
        assert c.post("/searches/1").status_code == 405
    assert _fingerprint(copy) == before


# ------------------------------------------------------------------ the command


def test_a_missing_database_is_one_line_and_exit_2(tmp_path: Path) -> None:
    r = run_cli("dashboard", "--db", str(tmp_path / "nope.db"), "--port", "0", timeout=60)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "nope.db" in lines[0] and "Traceback" not in r.stderr
    assert not (tmp_path / "nope.db").exists()


def test_a_file_that_is_not_a_database_is_one_line_and_exit_2(tmp_path: Path) -> None:
    bogus = tmp_path / "notes.txt"
    bogus.write_text("<script>not a database</script>\n")
    r = run_cli("dashboard", "--db", str(bogus), "--port", "0", timeout=60)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "not an SQLite database" in lines[0]
    assert bogus.read_text() == "<script>not a database</script>\n"


def test_a_port_in_use_is_one_line_and_exit_2(data: SearchedDb) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        r = run_cli("dashboard", "--db", str(data.path), "--port", str(port), timeout=60)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and f"127.0.0.1:{port}" in lines[0], r.stderr


# ------------------------------------------------------------------ speed


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    path = tmp_path_factory.mktemp("big") / "big.db"
    return path, big_db(path, n=5000)


@pytest.mark.slow
@pytest.mark.serial  # a wall-clock bound: run alone
def test_a_5000_candidate_search_page_loads_in_under_a_second(big: tuple[Path, int]) -> None:
    path, sid = big
    with open_store(str(path), create=False, read_only=True) as store, TestClient(create_app(store)) as c:
        assert c.get("/").status_code == 200  # the first request starts the client's event loop
        times = {}
        urls = (f"/searches/{sid}", f"/searches/{sid}/live", f"/searches/{sid}/plot.svg", f"/compare?a={sid}&b={sid}", "/")
        for url in urls:
            start = time.perf_counter()
            r = c.get(url)
            times[url] = time.perf_counter() - start
            assert r.status_code == 200, url
        html = c.get(f"/searches/{sid}").text
    assert html.count('<circle class="dot"') + html.count('<path class="fail"') == 5000
    assert html.count("+") and 'more</a>' in html  # the tree is cut to a page, the rest one click away
    print("page times:", json.dumps({k: round(v, 3) for k, v in times.items()}))
    assert times[f"/searches/{sid}"] < 1.0, times
    assert times[f"/searches/{sid}/live"] < 1.0, times  # what a live page fetches as the search goes on
