"""The docs promise what the code does: the configuration table is the model's, and it
lives in one place (docs/configuration.md; the README links there and keeps no copy)."""

from __future__ import annotations

from pathlib import Path

from lookup_knowledge.adapters.config import reference_markdown

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "README.md"
CONFIGURATION = ROOT / "docs" / "configuration.md"
START, END = "<!-- configuration-table:start -->", "<!-- configuration-table:end -->"


def test_configuration_table_matches_the_settings_model() -> None:
    text = CONFIGURATION.read_text(encoding="utf-8")
    start = text.index(START) + len(START + "\n")
    end = text.index(END)
    assert text[start:end] == reference_markdown()


def test_readme_links_the_configuration_table_and_keeps_no_copy() -> None:
    text = README.read_text(encoding="utf-8")
    assert "(docs/configuration.md)" in text
    assert START not in text
    assert "| Key | Default |" not in text
    assert "`LOOKUP_KNOWLEDGE_RAG__RETRIEVE_K`" not in text


def test_readme_names_the_two_commands_ci_runs() -> None:
    text = README.read_text(encoding="utf-8")
    assert "./scripts/quickstart" in text
    assert "./scripts/test" in text
    ci = (README.parent / ".ci" / "run").read_text(encoding="utf-8")
    assert "scripts/test" in ci
