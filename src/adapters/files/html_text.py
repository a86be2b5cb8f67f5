"""HTML to Markdown-ish text with the stdlib parser: headings become ``#`` lines (so the
chunker can follow them), block elements become paragraphs, scripts and styles go."""

from __future__ import annotations

import re
from html.parser import HTMLParser

_SKIP = frozenset({"script", "style", "noscript", "template", "svg", "head"})
_BLOCK = frozenset(
    {
        "p", "div", "section", "article", "header", "footer", "main", "aside", "nav",
        "table", "tr", "ul", "ol", "dl", "dt", "dd", "blockquote", "figure", "figcaption",
        "form", "fieldset", "details", "summary", "hr", "br",
    }
)  # fmt: skip
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_SPACES = re.compile(r"[ \t\r\f\v]+")


class _Converter(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title_parts: list[str] = []
        self.skip_depth = 0
        self.in_title = False
        self.pre_depth = 0
        self.heading: int | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self.in_title = True
        if tag in _SKIP:
            self.skip_depth += 1
            return
        if self.skip_depth:
            return
        if tag in _HEADINGS:
            self.heading = _HEADINGS[tag]
            self.parts.append("\n\n" + "#" * self.heading + " ")
        elif tag == "pre":
            self.pre_depth += 1
            self.parts.append("\n\n```\n")
        elif tag == "li":
            self.parts.append("\n- ")
        elif tag in ("td", "th"):
            self.parts.append(" | ")
        elif tag in _BLOCK:
            self.parts.append("\n\n" if tag not in ("br", "tr") else "\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self.in_title = False
        if tag in _SKIP:
            self.skip_depth = max(0, self.skip_depth - 1)
            return
        if self.skip_depth:
            return
        if tag in _HEADINGS:
            self.heading = None
            self.parts.append("\n\n")
        elif tag == "pre":
            self.pre_depth = max(0, self.pre_depth - 1)
            self.parts.append("\n```\n\n")
        elif tag in _BLOCK:
            self.parts.append("\n\n")

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.title_parts.append(data)
        if self.skip_depth:
            return
        if self.pre_depth:
            self.parts.append(data)
        else:
            self.parts.append(_SPACES.sub(" ", data.replace("\n", " ")))


def html_to_markdown(html: str) -> tuple[str, str]:
    """(title from ``<title>``, body text with ``#`` headings)."""
    converter = _Converter()
    converter.feed(html)
    converter.close()
    text = "".join(converter.parts)
    lines = [line.rstrip() for line in text.splitlines()]
    cleaned: list[str] = []
    blank = 0
    fenced = False
    for line in lines:
        if line.strip() == "```":
            fenced = not fenced
            blank = 0
            cleaned.append("```")
            continue
        if fenced:
            cleaned.append(line)
            continue
        stripped = line.strip()
        if not stripped:
            blank += 1
            if blank <= 1:
                cleaned.append("")
            continue
        blank = 0
        cleaned.append(stripped)
    title = " ".join("".join(converter.title_parts).split())
    return title, "\n".join(cleaned).strip() + "\n"
