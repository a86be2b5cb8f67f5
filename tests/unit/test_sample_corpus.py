"""The bundled sample corpus (``lookup_knowledge.sample_corpus``) is complete and well formed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from lookup_knowledge.sample_corpus import corpus_path

CATEGORIES = {"operations", "database", "networking", "product"}
DOC_TYPES = {"runbook", "faq", "design-note", "reference", "policy"}
_CJK = re.compile(r"[\u4e00-\u9fff]")
_FRONT_MATTER = re.compile(r"\A---\n(.*?)\n---\n", re.DOTALL)


@pytest.fixture(scope="module")
def root() -> Path:
    return corpus_path()


@pytest.fixture(scope="module")
def docs(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes().decode("utf-8")
        for p in sorted(root.rglob("*.md"))
        if p.parent != root  # the corpus README is not a document
    }


def _front_matter(text: str) -> dict[str, object]:
    match = _FRONT_MATTER.match(text)
    assert match, "missing YAML front matter"
    meta = yaml.safe_load(match.group(1))
    assert isinstance(meta, dict)
    return meta


def test_corpus_path_is_the_package_folder(root: Path) -> None:
    assert root.is_dir()
    assert (root / "__init__.py").is_file()


def test_at_least_28_docs_in_exactly_four_categories(root: Path, docs: dict[str, str]) -> None:
    assert len(docs) >= 28
    folders = {p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("__")}
    assert folders == CATEGORIES
    assert {name.split("/")[0] for name in docs} == CATEGORIES
    assert all(name.count("/") == 1 for name in docs)


def test_every_doc_has_front_matter_and_a_title_heading(docs: dict[str, str]) -> None:
    for name, text in docs.items():
        meta = _front_matter(text)
        assert isinstance(meta.get("title"), str), name
        assert str(meta["title"]).strip(), name
        assert meta.get("type") in DOC_TYPES, name
        assert isinstance(meta.get("tags"), list), name
        body = _FRONT_MATTER.sub("", text, count=1)
        assert re.search(r"^# \S", body, re.MULTILINE), name
        assert re.search(r"^## \S", body, re.MULTILINE), name


def test_chinese_and_long_docs(docs: dict[str, str]) -> None:
    assert sum(1 for text in docs.values() if _CJK.search(text)) >= 4
    assert sum(1 for text in docs.values() if len(text) > 8000) >= 5
    assert all(len(text) <= 16000 for text in docs.values())


def test_total_size_is_small(root: Path) -> None:
    total = sum(
        p.stat().st_size for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts
    )
    assert total < 400 * 1024


def test_questions_point_at_existing_docs(root: Path, docs: dict[str, str]) -> None:
    questions = json.loads((root / "questions.json").read_text(encoding="utf-8"))
    assert 12 <= len(questions) <= 16
    for item in questions:
        assert set(item) >= {"query", "expected_doc", "note"}
        assert item["query"].strip()
        assert item["expected_doc"] in docs, item["expected_doc"]
    assert sum(1 for item in questions if _CJK.search(item["query"])) >= 3


def test_domains_cover_the_four_categories_without_shared_keywords(root: Path) -> None:
    domains = yaml.safe_load((root / "domains.yaml").read_text(encoding="utf-8"))
    assert set(domains) == CATEGORIES
    seen: dict[str, str] = {}
    for category, words in domains.items():
        assert 10 <= len(words) <= 25, category
        for word in words:
            key = str(word).casefold()
            assert key not in seen, f"{word!r} is in {seen.get(key)} and {category}"
            seen[key] = category
