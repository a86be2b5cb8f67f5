"""The README promises what the code does: its configuration table is the model's."""

from __future__ import annotations

from pathlib import Path

from lookup_knowledge.adapters.config import reference_markdown

README = Path(__file__).resolve().parents[3] / "README.md"


def test_readme_configuration_table_matches_the_settings_model() -> None:
    text = README.read_text(encoding="utf-8")
    start = text.index("<!-- configuration-table:start -->") + len(
        "<!-- configuration-table:start -->\n"
    )
    end = text.index("<!-- configuration-table:end -->")
    assert text[start:end] == reference_markdown()


def test_readme_names_the_two_commands_ci_runs() -> None:
    text = README.read_text(encoding="utf-8")
    assert "./scripts/quickstart" in text
    assert "./scripts/test" in text
    ci = (README.parent / ".ci" / "run").read_text(encoding="utf-8")
    assert "scripts/test" in ci
