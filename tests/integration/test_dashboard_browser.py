"""The dashboard in a real browser: ``schedsearch dashboard`` as a subprocess, Debian's
chromium driven by Playwright, clicking from the list to a search to a candidate."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.dashboard_data import SearchedDb, searched_db

CHROMIUM = Path(os.environ.get("SCHEDSEARCH_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
INSTALL = ("install Debian's chromium (apt-get install chromium, or run scripts/setup.sh) and Playwright "
           "(pip install -e '.[dev]'); Playwright's own browser download is not used")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, SearchedDb]]:
    """``schedsearch dashboard`` on a free port over a freshly searched database."""
    data = searched_db(tmp_path / "results.db")
    proc = subprocess.Popen([sys.executable, "-m", "schedsearch", "dashboard", "--db", str(data.path), "--port", "0"],
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()  # it says where it listens once it is ready
        found = re.search(r"http://127\.0\.0\.1:\d+/", line)
        assert found, (line, proc.poll())
        yield found.group(0), data
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()


@pytest.mark.slow
def test_click_from_the_list_to_a_candidate(server: tuple[str, SearchedDb], tmp_path: Path) -> None:
    if not CHROMIUM.exists():
        pytest.fail(f"no browser at {CHROMIUM}: {INSTALL}")
    try:
        from playwright.sync_api import expect, sync_playwright
    except ImportError:
        pytest.fail(f"Playwright is not installed: {INSTALL}")
    url, data = server
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
            dialogs: list[str] = []
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))

            page.goto(url)
            rows = page.locator("#searches tbody tr")
            assert rows.count() == 4
            assert page.locator("#searches").inner_text().count("fake_gemm[N=64]") == 2
            # the hostile path is text on the page, and nothing ran
            assert "<script>alert(1)</script>" in page.locator(f'tr[data-search="{data.hostile}"]').inner_text()

            page.click(f'#searches a[href="/searches/{data.searches[0]}"]')
            page.wait_for_url(f"**/searches/{data.searches[0]}")
            dots = page.locator("#plot svg circle.dot")
            assert dots.count() > 10
            assert page.locator("#plot svg path.best-line").count() == 1
            assert page.locator("ul.tree .node.on-path").count() > 1
            assert page.locator("#plot svg").bounding_box()["width"] > 300  # laid out, not empty
            page.screenshot(path=str(tmp_path / "search.png"), full_page=True)

            best = page.locator("ul.tree .node.best a").first
            best_id = best.inner_text().lstrip("#")
            best.click()
            page.wait_for_url(f"**/candidates/{best_id}")
            assert page.locator("h1").inner_text().startswith(f"Candidate {best_id}")
            assert page.locator("pre.diff .add").count() >= 1
            assert "schedsearch_kernel" in page.locator("pre.code").last.inner_text()

            # a plotted point opens its candidate
            page.go_back()
            dot = page.locator("#plot svg circle.dot").first
            cid = dot.get_attribute("data-candidate")
            dot.click(force=True)
            page.wait_for_url(f"**/candidates/{cid}")

            page.goto(url + f"candidates/{data.hostile_child}")
            assert "<script>alert(3)</script>" in page.locator("pre.code").last.inner_text()
            page.goto(url + f"compare?a={data.searches[0]}&b={data.searches[1]}")
            assert page.locator("#plot svg path.best-line").count() == 2
            page.screenshot(path=str(tmp_path / "compare.png"), full_page=True)

            # a running search's page follows it without a reload: numbers, plot, table, tree
            documents: list[str] = []
            polls: list[str] = []
            page.on("request", lambda r: documents.append(r.url) if r.resource_type == "document" else
                    polls.append(r.url) if f"/{data.running}" in r.url else None)
            page.goto(url + f"searches/{data.running}")
            root = page.locator("ul.tree li").first.get_attribute("data-anchor").split(":")[1]
            assert page.locator("#plot svg circle.dot").count() == 1
            first = _measure_one_more(data, "m1", 1e-3, evaluated=2)
            # (locator waits: the page's CSP forbids the string evaluation wait_for_function uses)
            expect(page.locator("#plot svg circle.dot")).to_have_count(2, timeout=15_000)
            expect(page.locator('[data-field="evaluated"]').first).to_have_text("2")
            expect(page.locator(f'#top a[href="/candidates/{first}"]')).to_have_count(1)
            expect(page.locator(f'ul.tree .node.best a[href="/candidates/{first}"]')).to_have_count(1)
            # the user closes the root's branch and scrolls the table's row of that candidate to
            # the top; the next refresh adds a faster row above it, and keeps both
            branch = page.locator(f'details[data-node="{root}"]')
            branch.locator("summary").click(position={"x": 3, "y": 8})
            expect(branch).not_to_have_attribute("open", "")
            page.set_viewport_size({"width": 1000, "height": 150})
            row = page.locator(f'#top tr[data-anchor="top:{first}"]')
            row.evaluate("el => window.scrollTo(0, el.getBoundingClientRect().top + window.scrollY - 5)")
            assert abs(row.bounding_box()["y"] - 5) < 2, row.bounding_box()
            second = _measure_one_more(data, "m2", 5e-4, evaluated=3)
            expect(page.locator(f'#top a[href="/candidates/{second}"]')).to_have_count(1, timeout=15_000)
            assert page.locator("#top tbody tr").count() == 3
            assert page.locator(f'ul.tree li[data-anchor="node:{second}"]').count() == 1
            assert branch.get_attribute("open") is None  # still closed
            assert abs(row.bounding_box()["y"] - 5) < 2, row.bounding_box()  # still where it was
            # it ends: the final state once (the focused link keeps the focus), then no more polling
            link = page.locator(f'#top a[href="/candidates/{second}"]')
            link.focus()
            _end(data)
            expect(page.locator('[data-part="summary"] .badge')).to_have_text("completed", timeout=15_000)
            expect(link).to_be_focused()
            seen = len(polls)
            page.wait_for_timeout(2_500)  # longer than the poll interval
            assert len(polls) == seen, polls[seen:]
            assert [u for u in documents if f"/searches/{data.running}" in u] == [url + f"searches/{data.running}"]
            assert not dialogs, dialogs  # no alert() from the database ever ran
        finally:
            browser.close()
    assert (tmp_path / "search.png").stat().st_size > 10_000
    assert not errors, errors


def _measure_one_more(data: SearchedDb, move: str, seconds: float, evaluated: int) -> int:
    """What a running search does next: record a child of the root and its measurement;
    returns the child's id."""
    from schedsearch.core import Counters, Measurement, Status
    from schedsearch.store import open_store
    from schedsearch.testing.fake_tree import fake_candidate, fake_root

    with open_store(str(data.path)) as store:
        child = fake_candidate(move, parent=fake_root())
        record = store.add_candidate(data.running, child)
        store.record_measurement(data.running, Measurement(child.fingerprint, Status.OK, _timing(seconds),
                                                           measured_at=evaluated - 0.5), 2.0, 2e-3 / seconds)
        store.update_search(data.running, counters=Counters(evaluated=evaluated, ok=evaluated),
                            elapsed_seconds=float(evaluated))
        return record.id


def _end(data: SearchedDb) -> None:
    """The running search ends."""
    from schedsearch.core import SearchStatus
    from schedsearch.store import open_store

    with open_store(str(data.path)) as store:
        store.update_search(data.running, status=SearchStatus.COMPLETED)


def _timing(seconds: float):
    from schedsearch.core import Timing

    return Timing(median=seconds, min=seconds, q1=seconds, q3=seconds)
