"""The repository cites one design document, its own (issue 27): every section citation in a
tracked file names a heading of docs/design.md, and no file cites the specification the design
document replaced, which the repository does not hold.

Forms checked: ``design §n``, ``Design §n``, ``design.md §n``, ``docs/design.md §n`` with their
lists (``design §2.1, §12.1``, ``§1–§5``), Markdown links into design.md with an anchor, and bare
``(§n)`` in the README and docs/ (which say their § numbers point into docs/design.md).
"""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit  # no AWS, no network: make unit

REPO = Path(__file__).resolve().parents[2]
DESIGN = REPO / "docs" / "design.md"

NUM = r"\d+(?:\.\d+)?"
#: A citation of docs/design.md: the document's name, then its section numbers.
CITATION = re.compile(
    rf"(?<![\w/.-])(?:docs/)?(?:[Dd]esign\.md|[Dd]esign)[ \t]*(?P<refs>§\s?{NUM}(?:\s*(?:,|;|–|and|or)\s*§\s?{NUM})*)"
)
#: A Markdown link into docs/design.md with an anchor.
LINK = re.compile(r"\]\((?P<path>[^)#\s]*design\.md)#(?P<anchor>[^)\s]+)\)")
#: A bare § in prose that names no document before it (RFC 9110 §8.3.1 names one).
BARE = re.compile(rf"(?<![§\w])§\s?(?P<num>{NUM})")
#: The replaced document's name, as a citation would write it (built in two parts so that this
#: file does not match itself): the word alone or with ``.md``, but not an identifier such as
#: ``TOOL_SPECS`` or a variable named so (``X = …``, ``X["paths"]``).
_NAME = "S" + "PEC"
OLD_DOCUMENT = re.compile(
    rf"(?<![\w])({_NAME}(?:\.md)?)(?![\w])(?!\s*(?:=|\[|\]))|(?i:" + "prod" + r"uct spec(?:ification)?)"
)
BINARY_SUFFIXES = {".png", ".jpg", ".jpeg", ".gif", ".pdf", ".zip", ".gz", ".ico", ".woff", ".woff2"}


def _slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation out, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@cache
def sections() -> dict[str, str]:
    """docs/design.md's section numbers (``## n. Title``, ``### n.m Title``) and their anchors."""
    out: dict[str, str] = {}
    for line in DESIGN.read_text().splitlines():
        m = re.match(rf"^#{{2,3}} ({NUM})\.? (.+)$", line)
        if m:
            out[m.group(1)] = _slug(line.lstrip("#"))
    return out


@cache
def anchors() -> frozenset[str]:
    return frozenset(_slug(line.lstrip("#")) for line in DESIGN.read_text().splitlines() if line.startswith("#"))


@cache
def tracked_text_files() -> tuple[tuple[str, str], ...]:
    try:
        listed = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: no list of tracked files")
    out = []
    for name in listed.splitlines():
        path = REPO / name
        if path.suffix.lower() in BINARY_SUFFIXES or not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue
        try:
            out.append((name, data.decode("utf-8")))
        except UnicodeDecodeError:
            continue
    return tuple(out)


def _where(name: str, text: str, pos: int) -> str:
    line_no = text.count("\n", 0, pos) + 1
    line = text.splitlines()[line_no - 1].strip()
    return f"{name}:{line_no}: {line[:110]}"


def test_the_design_document_is_numbered_one_to_fourteen_with_the_run_and_flow_control_parts() -> None:
    expected = {str(n) for n in range(1, 15)} | {f"2.{n}" for n in range(1, 9)} | {f"12.{n}" for n in range(1, 6)}
    assert expected <= set(sections()), sorted(expected - set(sections()))


def test_no_file_cites_the_document_the_design_replaced() -> None:
    found = [_where(name, text, m.start()) for name, text in tracked_text_files() for m in OLD_DOCUMENT.finditer(text)]
    assert not found, "cite docs/design.md instead:\n" + "\n".join(found)


def test_every_design_citation_names_a_heading_of_docs_design_md() -> None:
    known = sections()
    bad = []
    for name, text in tracked_text_files():
        for m in CITATION.finditer(text):
            for number in re.findall(rf"§\s?({NUM})", m.group("refs")):
                if number not in known:
                    bad.append(_where(name, text, m.start()) + f"  (§{number})")
    assert not bad, "docs/design.md has no such section:\n" + "\n".join(bad)


def test_every_link_into_docs_design_md_names_one_of_its_headings() -> None:
    bad = [
        _where(name, text, m.start())
        for name, text in tracked_text_files()
        for m in LINK.finditer(text)
        if m.group("anchor") not in anchors()
    ]
    assert not bad, "no heading of docs/design.md has that anchor:\n" + "\n".join(bad)


def test_a_link_into_docs_design_md_goes_to_the_section_its_text_names() -> None:
    bad = []
    for name, text in tracked_text_files():
        for m in re.finditer(r"\[(?P<text>[^\]]*)\]\((?P<path>[^)#\s]*design\.md)#(?P<anchor>[^)\s]+)\)", text):
            numbers = re.findall(rf"§\s?({NUM})", m.group("text"))
            if numbers and sections().get(numbers[0]) != m.group("anchor"):
                bad.append(_where(name, text, m.start()))
    assert not bad, "the link's anchor is not the heading of the section its text names:\n" + "\n".join(bad)


def test_bare_section_numbers_in_the_readme_and_docs_name_headings_of_docs_design_md() -> None:
    known = sections()
    bad = []
    for name, text in tracked_text_files():
        if not (name == "README.md" or name.startswith("docs/")) or not name.endswith(".md"):
            continue
        for m in BARE.finditer(text):
            if re.search(r"(?:RFC|ISO)\s*[\w.-]*\s*$", text[max(0, m.start() - 20) : m.start()]):
                continue
            if m.group("num") not in known:
                bad.append(_where(name, text, m.start()) + f"  (§{m.group('num')})")
    assert not bad, "docs/design.md has no such section:\n" + "\n".join(bad)
