// The dashboard's only script: clicking a plotted candidate opens it, and pages of running
// searches poll every 2 s. Values from the database are written with textContent, or come
// as the server's own escaped template output (a search page's live parts); a string from
// the JSON is never parsed as markup.
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

// Tree nodes whose <details> the user opened or closed (candidate id -> open). Once touched,
// a node keeps the user's state across refreshes; untouched ones follow the server's default
// (the path to the best open), so a new best's path shows up opened.
const touched = new Map();

function rememberToggles() {
  document.querySelectorAll("ul.tree details[data-node]").forEach((d) => {
    const id = d.getAttribute("data-node");
    if (touched.has(id) || d.open !== (d.getAttribute("data-open") === "1")) touched.set(id, d.open);
  });
}

function restoreToggles() {
  document.querySelectorAll("ul.tree details[data-node]").forEach((d) => {
    const id = d.getAttribute("data-node");
    if (touched.has(id)) d.open = touched.get(id);
  });
}

// The topmost rendered element with a data-anchor in the viewport, and where it is: the
// refresh puts it back there, so that what the user is reading does not move when a part
// above it grows (elements in closed <details> have no boxes and are skipped).
function viewportAnchor() {
  for (const el of document.querySelectorAll("[data-anchor]")) {
    if (el.getClientRects().length === 0) continue;
    const top = el.getBoundingClientRect().top;
    if (top >= 0) return { name: el.getAttribute("data-anchor"), top: top };
  }
  return null;
}

function restoreAnchor(anchor) {
  if (!anchor) return;
  const el = document.querySelector('[data-anchor="' + CSS.escape(anchor.name) + '"]');
  if (el && el.getClientRects().length) window.scrollBy(0, el.getBoundingClientRect().top - anchor.top);
}

// A selector for the link or tree branch that has the keyboard focus in a live part (null
// when the focus is elsewhere), to give the focus back to its replacement.
function focusedSelector() {
  const el = document.activeElement;
  const part = el && el.closest ? el.closest("[data-part]") : null;
  if (!part) return null;
  const within = '[data-part="' + CSS.escape(part.getAttribute("data-part")) + '"] ';
  if (el.getAttribute("href")) return within + 'a[href="' + CSS.escape(el.getAttribute("href")) + '"]';
  const branch = el.tagName === "SUMMARY" ? el.closest("details[data-node]") : null;
  return branch ? within + 'details[data-node="' + CSS.escape(branch.getAttribute("data-node")) + '"] > summary' : null;
}

// Swaps the page's live parts for the server's current ones. The fragment is our own
// template's output, every database string in it escaped by Jinja; DOMParser builds it
// into an inert document (no script in it runs, and the CSP allows none inline anyway).
async function refreshParts(id) {
  const response = await fetch("/searches/" + id + "/live", { cache: "no-store" });
  if (!response.ok) throw new Error("live parts: " + response.status);
  const doc = new DOMParser().parseFromString(await response.text(), "text/html");
  const anchor = viewportAnchor();
  rememberToggles();
  const focused = focusedSelector();
  for (const fresh of doc.querySelectorAll("[data-part]")) {
    const name = fresh.getAttribute("data-part");
    const old = document.querySelector('[data-part="' + CSS.escape(name) + '"]');
    if (old) old.replaceWith(document.importNode(fresh, true));
  }
  restoreToggles();
  restoreAnchor(anchor);
  const again = focused ? document.querySelector(focused) : null;
  if (again) again.focus({ preventScroll: true });
}

// Every 2 s the search's JSON line (cheap: one row and its best) updates the numbers; the
// parts are fetched again only when the search measured or generated something since, and
// no more often than ten times what the last fetch took, so a tree of thousands of
// candidates costs the server a small share of its time. Once the search has ended the
// parts are fetched one last time and polling stops.
function pollSearch(summary) {
  const id = summary.getAttribute("data-search");
  let version = summary.getAttribute("data-version");
  let nextRefresh = 0;
  const tick = async () => {
    let s;
    try {
      s = await getJson("/api/searches/" + id);
    } catch (error) {
      setTimeout(tick, POLL_MS);
      return;
    }
    const live = document.querySelector('[data-part="summary"]') || summary;
    for (const name of ["elapsed", "evaluated", "ok", "failed", "baseline", "best_time", "best_gflops",
                        "best_speedup", "numbers"]) {
      setField(live, name, s[name]);
    }
    const now = s.evaluated + "/" + s.generated;
    if (!s.running || (now !== version && Date.now() >= nextRefresh)) {
      const started = Date.now();
      try {
        await refreshParts(id);
        version = now;
      } catch (error) {
        setTimeout(tick, POLL_MS);  // try again, the final state included
        return;
      }
      nextRefresh = Date.now() + Math.max(POLL_MS, 10 * (Date.now() - started));
    }
    if (s.running) setTimeout(tick, POLL_MS);
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
