"""The README and the documentation site: the README stays short and starts with the two
commands CI and users run, every relative link in the README, docs/ and RESULTS.md lands on
a file and heading that exist, and the generated CLI reference covers every command.

Markdown only (no MkDocs needed) except the last check, which renders the CLI reference
with mkdocs-click when the `docs` extra is installed.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
MKDOCS = ROOT / "mkdocs.yml"

FIRST_COMMANDS = [
    "bash scripts/setup.sh && .venv/bin/schedsearch run examples/matmul.py"
    "   # set up, then search SGEMM 256³ for 2 minutes",
    "bash scripts/test.sh                                                    # set up, then run every test",
]
MAX_README_LINES = 220
MAX_PROSE_WIDTH = 100
#: ``--8<-- "path"``: a page whose text is another file's (pymdownx.snippets, paths from the root)
SNIPPET = re.compile(r'^--8<--\s+"([^"]+)"\s*$', re.M)
LINK = re.compile(r"(?<!!)\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def markdown_files() -> list[Path]:
    return [README, RESULTS, *sorted(DOCS.glob("*.md"))]


def text_of(path: Path) -> str:
    """A page's markdown, with snippet includes replaced by the included file's text."""
    text = path.read_text(encoding="utf-8")
    return SNIPPET.sub(lambda m: (ROOT / m.group(1)).read_text(encoding="utf-8"), text)


def outside_code(text: str) -> list[str]:
    """The lines of ``text`` outside fenced code blocks."""
    lines, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    return lines


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading (and the site's toc, set up to match in mkdocs.yml)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
    text = unicodedata.normalize("NFKC", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    for line in outside_code(text_of(path)):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            base = slug(m.group(1))
            name, n = base, 0
            while name in found:  # GitHub numbers repeated headings
                n += 1
                name = f"{base}-{n}"
            found.add(name)
    return found


def relative_links(path: Path) -> list[str]:
    links = []
    for line in outside_code(path.read_text(encoding="utf-8")):
        for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: ...
                links.append(target)
    return links


def test_readme_is_short_and_starts_with_the_two_commands():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines; move detail into docs/"
    first_fence = next(i for i, line in enumerate(lines) if line.startswith("```"))
    assert lines[first_fence + 1:first_fence + 3] == FIRST_COMMANDS
    assert all(not line.strip() or line.startswith("#") for line in lines[:first_fence]), \
        "nothing but the title comes before the two commands"


def test_readme_prose_is_wrapped():
    long = [line for line in outside_code(README.read_text(encoding="utf-8"))
            if len(line) > MAX_PROSE_WIDTH and not line.lstrip().startswith("|")]
    assert not long, "README.md prose lines over 100 characters:\n" + "\n".join(long)


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_land(path: Path):
    broken = []
    for target in relative_links(path):
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            broken.append(f"{target}: no file {dest}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    assert not broken, f"{path.relative_to(ROOT)}:\n" + "\n".join(broken)


def test_every_page_is_in_the_nav_and_every_nav_entry_exists():
    nav = set(re.findall(r"^\s*-\s*(?:[^:\n]+:\s*)?([\w./-]+\.md)\s*$", MKDOCS.read_text(encoding="utf-8"), re.M))
    pages = {p.name for p in DOCS.glob("*.md")}
    assert nav == pages


def cli_directive() -> dict[str, str]:
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    m = re.search(r"^::: mkdocs-click\n((?:    :\w+:.*\n)+)", text, re.M)
    assert m, "docs/cli.md renders the CLI with the mkdocs-click directive"
    return dict(re.findall(r"^    :(\w+):\s*(.*?)\s*$", m.group(1), re.M))


def all_commands(group: click.Group, prefix: str = "schedsearch") -> list[str]:
    names = []
    for name, command in sorted(group.commands.items()):
        names.append(f"{prefix} {name}")
        if isinstance(command, click.Group):
            names.extend(all_commands(command, f"{prefix} {name}"))
    return names


def test_cli_reference_documents_the_root_group():
    options = cli_directive()
    assert options["module"] == "schedsearch.cli.main"
    from schedsearch.cli import main

    root = getattr(main, options["command"])
    assert isinstance(root, click.Group), "the directive names the root group, so every subcommand is in it"
    assert options.get("prog_name") == "schedsearch"
    assert len(all_commands(root)) >= 9


def test_every_command_is_in_the_generated_cli_reference():
    docs = pytest.importorskip("mkdocs_click._docs", reason="the docs extra renders the CLI reference")
    options = cli_directive()
    from schedsearch.cli import main

    root = getattr(main, options["command"])
    rendered = "\n".join(docs.make_command_docs(prog_name=options["prog_name"], command=root,
                                                depth=int(options.get("depth", 0)),
                                                style=options.get("style", "plain"), has_attr_list=True))
    # with attr_list (on in mkdocs.yml) a heading is the full command path: `### schedsearch run { #... }`
    headings = {re.sub(r"\{.*\}$", "", line.lstrip("#")).strip()
                for line in rendered.splitlines() if line.startswith("#")}
    missing = [name for name in all_commands(root) if name not in headings]
    assert not missing, f"not in the CLI reference: {missing}"
