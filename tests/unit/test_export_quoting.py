"""Stored text in exported code (``transforms.quoting``): plain text as it is, anything else
quoted so that it ends nothing - parsed back with Python's own parser and read back with JSON."""

from __future__ import annotations

import ast
import json

import pytest

from schedsearch.transforms.quoting import in_c_comment, in_comment, in_docstring

PLAIN = ["gcc", "-O3", "-march=native", "-mprefer-vector-width=512", "matmul.py", "sgemm[M=64,N=64,K=64]",
         "/usr/bin/x86_64-linux-gnu-gcc-12", "register_tile i #0 bcast=A cols=64", "<proc sgemm>", "it's"]
HOSTILE = [
    '"""\n__import__("os").system("touch /tmp/x")\n"""',
    "x\\",  # a backslash before the docstring's end would escape it
    'a"', "\\\"\"\"", "*/ int x; /*", "/* nested */", "line\rbreak", "tab\there", "nul\x00", "sep\u2028x",
    "\x1b[31mred", "naïve", "\ud800", "'''", "# comment",
]


@pytest.mark.parametrize("text", PLAIN)
def test_plain_text_is_pasted_as_it_is(text: str) -> None:
    assert in_docstring(text) == in_comment(text) == text
    assert in_c_comment(text) == text


@pytest.mark.parametrize("text", HOSTILE)
def test_a_docstring_keeps_hostile_text_inside_it(text: str) -> None:
    quoted = in_docstring(text)
    source = f'"""Built with: {quoted} -c x.c\n"""\nmarker = 1\n'
    tree = ast.parse(source)
    assert len(tree.body) == 2 and isinstance(tree.body[0], ast.Expr)  # the docstring, then our line
    assert quoted.isascii() and quoted.isprintable()
    assert quoted == text or json.loads(quoted) == text


@pytest.mark.parametrize("text", HOSTILE)
def test_a_comment_keeps_hostile_text_on_its_line(text: str) -> None:
    quoted = in_comment(text)
    tree = ast.parse(f"# step 0: {quoted}\nmarker = 1\n")
    assert len(tree.body) == 1
    assert quoted == text or json.loads(quoted) == text


@pytest.mark.parametrize("text", HOSTILE)
def test_a_c_comment_never_ends_early(text: str) -> None:
    quoted = in_c_comment(text)
    assert "*" not in quoted and quoted.isascii() and quoted.isprintable()
    assert quoted == text or json.loads(quoted) == text
