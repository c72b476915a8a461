// The dashboard's only script: clicking a plotted candidate opens it, and pages of running
// searches poll the JSON endpoints every 2 s. Values from the database are written with
// textContent only, never parsed as markup.
"use strict";

const POLL_MS = 2000;

function setField(root, name, value) {
  root.querySelectorAll('[data-field="' + name + '"]').forEach((el) => {
    el.textContent = value === null || value === undefined ? "-" : String(value);
  });
}

function showCandidateOnClick() {
  document.addEventListener("click", (event) => {
    const target = event.target.closest ? event.target.closest("[data-candidate]") : null;
    const id = target ? target.getAttribute("data-candidate") : null;
    if (id && /^[0-9]+$/.test(id)) {
      window.location.href = "/candidates/" + id;
    }
  });
}

async function getJson(url) {
  const response = await fetch(url, { cache: "no-store" });
  if (!response.ok) throw new Error(url + ": " + response.status);
  return response.json();
}

function pollList(table) {
  const ids = Array.from(table.querySelectorAll("tr[data-search]")).map((tr) => tr.getAttribute("data-search"));
  const tick = async () => {
    let searches;
    try {
      searches = await getJson("/api/searches");
    } catch (error) {
      setTimeout(tick, POLL_MS);
      return;
    }
    if (searches.map((s) => String(s.id)).join(",") !== ids.join(",")) {
      window.location.reload();  // a search was added: its row needs the server's markup
      return;
    }
    for (const s of searches) {
      const row = table.querySelector('tr[data-search="' + s.id + '"]');
      setField(row, "elapsed", s.elapsed);
      setField(row, "evaluated", s.evaluated);
      setField(row, "best_time", s.best_time);
      setField(row, "best_gflops", s.best_gflops);
      setField(row, "best_speedup", s.best_speedup);
      setField(row, "numbers", s.numbers);
      if (!s.running && row.querySelector(".badge.running")) {
        window.location.reload();  // it ended: show its final status and best
        return;
      }
    }
    if (searches.some((s) => s.running)) setTimeout(tick, POLL_MS);
  };
  setTimeout(tick, POLL_MS);
}

function pollSearch(summary) {
  const id = summary.getAttribute("data-search");
  let evaluated = summary.getAttribute("data-evaluated");
  const plot = document.getElementById("plot");
  const tick = async () => {
    let s;
    try {
      s = await getJson("/api/searches/" + id);
    } catch (error) {
      setTimeout(tick, POLL_MS);
      return;
    }
    for (const name of ["elapsed", "evaluated", "ok", "failed", "baseline", "best_time", "best_gflops",
                        "best_speedup", "numbers"]) {
      setField(summary, name, s[name]);
    }
    if (String(s.evaluated) !== evaluated && plot) {
      evaluated = String(s.evaluated);
      const response = await fetch(plot.getAttribute("data-src"), { cache: "no-store" });
      if (response.ok) {
        // Our own SVG, every database string in it escaped by the server's templates.
        const doc = new DOMParser().parseFromString(await response.text(), "image/svg+xml");
        const svg = doc.documentElement;
        if (svg && svg.nodeName === "svg") plot.replaceChildren(document.importNode(svg, true));
      }
    }
    if (s.running) {
      setTimeout(tick, POLL_MS);
    } else {
      window.location.reload();  // it ended: the tree and tables in their final state
    }
  };
  setTimeout(tick, POLL_MS);
}

document.addEventListener("DOMContentLoaded", () => {
  showCandidateOnClick();
  const list = document.getElementById("searches");
  if (list && list.getAttribute("data-live")) pollList(list);
  const summary = document.querySelector("table.summary[data-status]");
  if (summary && summary.getAttribute("data-status") === "running") pollSearch(summary);
});
