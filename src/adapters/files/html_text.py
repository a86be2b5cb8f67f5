"""HTML to Markdown with a maintained converter (``markdownify`` over BeautifulSoup).

Before conversion the page chrome goes: ``<nav>``, ``<footer>``, ``<aside>``, elements
with ``role="navigation"``/``contentinfo``/``banner``, and scripts, styles, forms and
the ``<head>``; when the page marks its content (``<main>`` or one ``<article>``), only
that is converted. Headings become ATX ``#`` lines (so the chunker follows them), tables
become Markdown tables (rows and columns kept), lists stay lists, ``<pre>`` stays a
fenced block, links keep their text (targets are dropped: they are not evidence).
"""

from __future__ import annotations

import re
from typing import Any

_CHROME_TAGS = ("script", "style", "noscript", "template", "svg", "head", "nav", "footer",
                "aside", "form", "iframe", "button")  # fmt: skip
_CHROME_ROLES = ("navigation", "contentinfo", "banner", "search")
_BLANK_RUNS = re.compile(r"\n{3,}")


def _content_root(soup: Any) -> Any:
    main = soup.find("main") or soup.find(attrs={"role": "main"})
    if main is not None:
        return main
    articles = soup.find_all("article")
    if len(articles) == 1:
        return articles[0]
    return soup.body or soup


def html_to_markdown(html: str) -> tuple[str, str]:
    """(title from ``<title>``, body as Markdown with ``#`` headings)."""
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    soup = BeautifulSoup(html, "html.parser")
    title_tag = soup.find("title")
    title = " ".join(title_tag.get_text().split()) if title_tag is not None else ""
    for element in soup.find_all(list(_CHROME_TAGS)):
        element.decompose()
    for role in _CHROME_ROLES:
        for element in soup.find_all(True, attrs={"role": role}):
            element.decompose()
    root = _content_root(soup)
    converter = MarkdownConverter(
        heading_style="ATX",
        bullets="-",
        strip=["a", "img"],
        escape_underscores=False,
        escape_asterisks=False,
        escape_misc=False,
        table_infer_header=True,
    )
    text = converter.convert_soup(root)
    lines = [line.rstrip() for line in text.splitlines()]
    body = _BLANK_RUNS.sub("\n\n", "\n".join(lines)).strip()
    return title, body + "\n"
