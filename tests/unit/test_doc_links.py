"""Every relative Markdown link in README.md and docs/*.md points at a file that exists,
and a link to a section at a heading of that file (the README's sections moved to
docs/ pages; a link left behind would lead nowhere)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^```.*?^```", re.S | re.M)
_TARGET = re.compile(r"\]\(([^()\s]+)\)")  # also the image inside a linked image
_HEADING = re.compile(r"^#{1,6} +(.+?) *$", re.M)


def _prose(page: Path) -> str:
    return _FENCE.sub("", page.read_text(encoding="utf-8"))


def relative_links(page: Path) -> list[str]:
    targets = (match.group(1) for match in _TARGET.finditer(_prose(page)))
    return [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:", t)]


def anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation but - and _ dropped, - for spaces."""
    return {
        re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        for heading in _HEADING.findall(_prose(page))
    }


def test_the_pages_link_each_other() -> None:
    assert "docs/console.md" in relative_links(ROOT / "README.md")
    assert "docs/console/invocation.png" in relative_links(ROOT / "README.md")
    found_section = "../README.md#what-found-relevancelevel-and-a-blocks-relevance-mean"
    assert found_section in relative_links(ROOT / "docs" / "search.md")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_resolves(page: Path) -> None:
    for link in relative_links(page):
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        assert target.is_file(), f"{page.relative_to(ROOT)} links to {link}: no such file"
        if anchor and target.suffix == ".md":
            assert anchor in anchors(target), f"{page.relative_to(ROOT)}: no heading #{anchor}"
