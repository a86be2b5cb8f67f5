"""Writes ``corpus.jsonl`` of this judged set from the bundled sample corpus.

One entry per sample-corpus file, read by the product's own ``FileDocumentSource`` (so
the ids, titles, categories and bodies are exactly what ``lookup-knowledge ingest``
stores), marked ``"format": "markdown"`` so the eval chunks it as Markdown. The unit
test ``tests/unit/test_northwind_zh_eval_set.py`` checks the shipped file is current.

    .venv/bin/python benchmarks/datasets/northwind-zh/build_corpus.py
"""

from __future__ import annotations

import json
from pathlib import Path

from lookup_knowledge.adapters.files import FileDocumentSource
from lookup_knowledge.application.ingest import SourceDocument
from lookup_knowledge.sample_corpus import corpus_path

HERE = Path(__file__).resolve().parent


def corpus_lines() -> list[str]:
    lines: list[str] = []
    for loaded in FileDocumentSource(corpus_path(), doc_id_prefix="").documents():
        if not isinstance(loaded, SourceDocument):
            raise SystemExit(f"cannot read a sample document: {loaded}")
        entry = {
            "_id": loaded.doc_id,
            "title": loaded.title,
            "text": loaded.text,
            "metadata": {
                "format": loaded.format,
                "category": loaded.category,
                "type": loaded.source_type,
            },
        }
        lines.append(json.dumps(entry, ensure_ascii=False, sort_keys=True))
    return sorted(lines)


if __name__ == "__main__":
    (HERE / "corpus.jsonl").write_text("\n".join(corpus_lines()) + "\n", encoding="utf-8")
