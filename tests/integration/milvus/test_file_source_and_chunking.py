"""Loading files and folders (front matter, categories, titles, HTML, failures) and the
heading-aware chunker."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from lookup_knowledge.adapters.files import (
    FileDocumentSource,
    MarkdownChunker,
    html_to_markdown,
    split_front_matter,
    split_sections,
)
from lookup_knowledge.adapters.memory import InMemoryKnowledgeBase
from lookup_knowledge.adapters.runtime import SystemClock
from lookup_knowledge.application.ingest import (
    IngestDocuments,
    StaticDocumentSource,
    embedding_input,
)
from lookup_knowledge.application.ports import DocumentLoadFailure, SourceDocument
from lookup_knowledge.domain.errors import IngestError, InvalidInputError
from tests.support.files import write


def docs(source: FileDocumentSource) -> dict[str, SourceDocument]:
    return {d.doc_id: d for d in source.documents() if isinstance(d, SourceDocument)}


def failures(source: FileDocumentSource) -> list[DocumentLoadFailure]:
    return [d for d in source.documents() if isinstance(d, DocumentLoadFailure)]


# ---------------------------------------------------------------------------- loader


def test_doc_ids_are_paths_relative_to_the_root(tmp_path: Path) -> None:
    write(tmp_path, "kb/runbooks/disk.md", "# Disk\n\ntext\n")
    write(tmp_path, "kb/top.md", "top\n")
    write(tmp_path, "kb/.hidden/secret.md", "no\n")
    write(tmp_path, "kb/image.png", "no\n")
    source = FileDocumentSource(tmp_path / "kb", doc_id_prefix="team/")
    assert sorted(docs(source)) == ["team/runbooks/disk.md", "team/top.md"]
    assert source.estimated_count() == 2
    assert source.in_scope("team/anything.md")
    assert not source.in_scope("other/anything.md")


def test_category_title_type_precedence(tmp_path: Path) -> None:
    write(
        tmp_path,
        "runbooks/a.md",
        "---\ncategory: storage\ntitle: Front title\ntype: runbook\nsource: https://wiki/a\n---\n"
        "# Heading title\n\nbody\n",
    )
    write(tmp_path, "runbooks/b.md", "# Heading B\n\nbody\n")
    write(tmp_path, "c.txt", "# not a title\nbody\n")
    loaded = docs(FileDocumentSource(tmp_path, doc_id_prefix=""))
    a, b, c = loaded["runbooks/a.md"], loaded["runbooks/b.md"], loaded["c.txt"]
    assert (a.category, a.title, a.source_type, a.source) == (
        "storage",
        "Front title",
        "runbook",
        "https://wiki/a",
    )
    assert a.text.startswith("# Heading title")  # front matter removed
    assert (b.category, b.title, b.source_type, b.source) == (
        "runbooks",
        "Heading B",
        "markdown",
        "runbooks/b.md",
    )
    assert (c.category, c.title, c.source_type, c.format) == ("", "c", "text", "text")
    forced = docs(FileDocumentSource(tmp_path, category="forced"))
    assert {d.category for d in forced.values()} == {"forced"}


def test_a_single_file_can_take_an_explicit_doc_id(tmp_path: Path) -> None:
    path = write(tmp_path, "x/y.md", "# Y\n\nbody\n")
    write(tmp_path, "x/z.md", "# Z\n\nbody\n")
    source = FileDocumentSource(path, doc_id="kb-42")
    assert list(docs(source)) == ["kb-42"]
    assert source.in_scope("kb-42")
    assert not source.in_scope("x/other.md")
    with pytest.raises(IngestError, match="exactly one file"):
        FileDocumentSource(tmp_path, doc_id="kb-42")


def test_unreadable_files_are_failures_with_their_doc_id(tmp_path: Path) -> None:
    write(tmp_path, "ok.md", "fine\n")
    (tmp_path / "latin1.md").write_bytes("caf\xe9".encode("latin-1"))
    (tmp_path / "binary.txt").write_bytes(b"abc\x00def")
    write(tmp_path, "bad-front.md", "---\n: [unclosed\n---\nbody\n")
    write(tmp_path, "big.md", "x" * 2000)
    source = FileDocumentSource(tmp_path, max_file_bytes=1000, doc_id_prefix="")
    assert list(docs(source)) == ["ok.md"]
    reasons = {f.doc_id: f.reason for f in failures(source)}
    assert set(reasons) == {"latin1.md", "binary.txt", "bad-front.md", "big.md"}
    assert "UTF-8" in reasons["latin1.md"]
    assert "NUL" in reasons["binary.txt"]
    assert "front matter" in reasons["bad-front.md"]
    assert "limit" in reasons["big.md"]


def test_missing_paths_and_paths_outside_the_root_are_errors(tmp_path: Path) -> None:
    with pytest.raises(IngestError, match="does not exist"):
        FileDocumentSource(tmp_path / "nope")
    write(tmp_path, "a/x.md", "x")
    (tmp_path / "b").mkdir()
    with pytest.raises(IngestError, match="not inside"):
        FileDocumentSource(tmp_path / "a", root=tmp_path / "b")


def test_html_becomes_markdown_with_headings_and_no_scripts(tmp_path: Path) -> None:
    html = (
        "<html><head><title>Page T</title><style>p{}</style></head><body>"
        "<h1>Main</h1><p>Intro   text\nhere.</p><script>alert(1)</script>"
        "<h2>Part <b>two</b></h2><ul><li>one</li><li>two</li></ul>"
        "<pre>  indented\n    code</pre></body></html>"
    )
    title, text = html_to_markdown(html)
    assert title == "Page T"
    assert "# Main" in text
    assert "## Part **two**" in text  # emphasis is kept as Markdown
    assert "Intro text\nhere." in text
    assert "alert" not in text
    assert "p{}" not in text
    assert "- one" in text
    assert "  indented\n    code" in text
    write(tmp_path, "page.html", html)
    (doc,) = docs(FileDocumentSource(tmp_path)).values()
    assert (doc.title, doc.source_type, doc.format) == ("Page T", "html", "markdown")


def test_html_drops_page_chrome_and_keeps_tables() -> None:
    html = (
        "<html><head><title>Runbook</title></head><body>"
        "<nav><a href='/'>Home</a> <a href='/docs'>Docs</a></nav>"
        "<div role='navigation'>Breadcrumbs here</div>"
        "<h1>Failover</h1><p>Promote the replica.</p>"
        "<table><tr><th>step</th><th>owner</th></tr><tr><td>promote</td><td>DBA</td></tr></table>"
        "<h2>Verify</h2><p>Check lag.</p>"
        "<footer>Copyright 2026 Example Corp</footer></body></html>"
    )
    title, text = html_to_markdown(html)
    assert title == "Runbook"
    assert "Home" not in text
    assert "Breadcrumbs" not in text
    assert "Copyright" not in text  # not glued to the last section
    assert "| step | owner |" in text
    assert "| promote | DBA |" in text
    sections = split_sections(text)
    assert [s.breadcrumb for s in sections] == ["Failover", "Failover > Verify"]
    assert sections[-1].text == "## Verify\n\nCheck lag."


def test_setext_headings_are_headings_and_give_the_title(tmp_path: Path) -> None:
    text = "Disk Runbook\n============\n\nIntro.\n\nCleanup\n-------\n\nDelete old logs.\n"
    sections = split_sections(text)
    assert [s.breadcrumb for s in sections] == ["Disk Runbook", "Disk Runbook > Cleanup"]
    write(tmp_path, "disk.md", text)
    (doc,) = docs(FileDocumentSource(tmp_path)).values()
    assert doc.title == "Disk Runbook"


def test_front_matter_parsing() -> None:
    assert split_front_matter("no front matter") == ({}, "no front matter")
    assert split_front_matter("---\na: 1\n---\nbody") == ({"a": 1}, "body")
    assert split_front_matter("---\n---\nbody") == ({}, "body")
    assert split_front_matter("---\nonly a rule") == ({}, "---\nonly a rule")
    with pytest.raises(InvalidInputError, match="mapping"):
        split_front_matter("---\n- a list\n---\nbody")


# ---------------------------------------------------------------------------- chunking


MARKDOWN = """Preamble.

# Guide

## Install

Run the installer.

```sh
# a comment, not a heading
make install
```

### Linux

Use the package.

## Empty

## Use
Call it.
"""


def test_sections_follow_headings_outside_code_fences() -> None:
    sections = split_sections(MARKDOWN)
    assert [s.breadcrumb for s in sections] == [
        "",
        "Guide > Install",
        "Guide > Install > Linux",
        "Guide > Use",
    ]
    assert sections[1].text.startswith("# Guide\n\n## Install")  # empty parent carried
    assert "# a comment, not a heading" in sections[1].text


def test_chunks_are_contiguous_token_sized_and_overlapping() -> None:
    body = " ".join(f"word{i}" for i in range(400))
    doc = SourceDocument("d", f"# T\n\n## A\n\n{body}\n\n## B\n\nshort\n", title="T")
    chunker = MarkdownChunker(chunk_size=100, chunk_overlap=20)
    chunks = chunker.chunk(doc)
    assert [c.chunk_index for c in chunks] == list(range(len(chunks)))
    assert all(chunker.count_tokens(c.text) <= 100 for c in chunks)
    a_chunks = [c for c in chunks if c.breadcrumb == "T > A"]
    assert len(a_chunks) >= 5
    assert a_chunks[0].text.startswith("# T\n\n## A\n\nword0 ")  # no heading-only chunk
    for left, right in itertools.pairwise(a_chunks):
        assert left.text.split()[-1] in right.text  # overlap carries context forward
    assert chunks[-1].breadcrumb == "T > B"
    assert chunks[-1].text == "## B\n\nshort"
    assert {c.title for c in chunks} == {"T"}
    assert "size=100" in chunker.fingerprint


def test_a_chunk_and_its_heading_path_fit_the_embedder_window() -> None:
    crumb = " ".join(f"heading{i}" for i in range(40))
    body = "\n\n".join(" ".join(f"w{p}x{i}" for i in range(90)) for p in range(8))
    doc = SourceDocument("d", f"# {crumb}\n\n{body}\n", title="T")
    chunker = MarkdownChunker()  # 256-token window of all-MiniLM-L6-v2
    chunks = chunker.chunk(doc)
    assert len(chunks) > 3
    for chunk in chunks:
        assert chunker.count_tokens(embedding_input(chunk)) + 2 <= 256  # + [CLS] [SEP]


def test_plain_text_has_no_headings() -> None:
    doc = SourceDocument("t", "# shell comment\nvalue", format="text")
    (chunk,) = MarkdownChunker().chunk(doc)
    assert (chunk.breadcrumb, chunk.text) == ("", "# shell comment\nvalue")


@pytest.mark.parametrize(("size", "overlap"), [(10, 0), (20_000, 0), (100, 50), (100, -1)])
def test_chunker_rejects_bad_settings(size: int, overlap: int) -> None:
    with pytest.raises(InvalidInputError):
        MarkdownChunker(chunk_size=size, chunk_overlap=overlap)


# ---------------------------------------------------------------------------- use case on memory


def test_ingest_into_the_in_memory_store_is_idempotent_and_reports_duplicates() -> None:
    kb = InMemoryKnowledgeBase()
    ingest = IngestDocuments(store=kb, chunker=MarkdownChunker(), clock=SystemClock())
    source = StaticDocumentSource(
        [
            SourceDocument("a", "# A\n\nalpha"),
            SourceDocument("b", "# B\n\nbeta"),
            SourceDocument("a", "# A again\n\nduplicate id"),
            DocumentLoadFailure("c.md", "unreadable", "c"),
        ]
    )
    first = ingest.execute(source)
    assert (first.added, first.chunks_written, len(first.failures)) == (2, 2, 2)
    assert "duplicate doc_id 'a'" in first.failures[0].reason
    assert ingest.execute(source).wrote_nothing
    assert {r.evidence_key for r in kb.records()} == {"a#chunk-0", "b#chunk-0"}


@pytest.mark.parametrize("doc_id", ["", " a", "a\nb", "x" * 513])
def test_unusable_doc_ids_are_rejected(doc_id: str) -> None:
    with pytest.raises(InvalidInputError):
        SourceDocument(doc_id, "text")
