"""Claude's citations round-trip: our blocks as Anthropic ``search_result`` content (checked
against the SDK's own types, offline), a Claude response citing them
(``search_result_location``, parsed by the SDK's ``Message`` model), fed to the checker.
The cited_text of a real block is supported; an altered one is not."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lookup_knowledge import create_app
from lookup_knowledge.adapters.api import LookupApp
from lookup_knowledge.application.agent_formats import anthropic_search_results, claude_citations
from lookup_knowledge.domain.answer_check import Verdict

anthropic_types = pytest.importorskip("anthropic.types")
from pydantic import TypeAdapter  # noqa: E402

RUNBOOK = (
    "# Database failover\n\n"
    "Failover takes about two minutes. Announce it in the incident channel with ticket "
    "OPS-1423 before you promote the standby.\n"
)


@pytest.fixture
def app(tmp_path: Path) -> Iterator[LookupApp]:
    corpus = tmp_path / "corpus"
    (corpus / "operations").mkdir(parents=True)
    (corpus / "operations" / "failover.md").write_text(RUNBOOK, encoding="utf-8")
    built = create_app(
        overrides={
            "data-dir": str(tmp_path / "data"),
            "embedder.provider": "hashing",
            "rag.min-relevance": 0.0,
        }
    )
    try:
        built.ingest([corpus], root=corpus)
        yield built
    finally:
        built.close()


def claude_reply(blocks: list[dict[str, Any]], cited_text: str) -> Any:
    """A Claude message as the API returns it, citing the first search result."""
    first = blocks[0]
    return anthropic_types.Message.model_validate(
        {
            "id": "msg_01",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 10},
            "content": [
                {"type": "text", "text": "According to the runbook, "},
                {
                    "type": "text",
                    "text": "failover takes about two minutes",
                    "citations": [
                        {
                            "type": "search_result_location",
                            "source": first["source"],
                            "title": first["title"],
                            "cited_text": cited_text,
                            "search_result_index": 0,
                            "start_block_index": 0,
                            "end_block_index": 1,
                        }
                    ],
                },
                {"type": "text", "text": "."},
            ],
        }
    )


def test_cited_text_of_a_real_block_is_supported_and_an_altered_one_is_not(
    app: LookupApp,
) -> None:
    result = app.lookup_result("how long does failover take", session_id="claude-1")
    blocks = anthropic_search_results(result)
    adapter = TypeAdapter(list[anthropic_types.SearchResultBlockParam])
    validated = adapter.validate_python(blocks)  # the shapes Claude accepts
    # ``content`` is an Iterable in the SDK: iterating it validates each text block.
    assert [list(b["content"]) for b in validated] == [b["content"] for b in blocks]
    assert [b["source"] for b in validated] == [b.document_id for b in result.evidence_blocks]
    # the Verifier's other reader of the same reply sees the same pair
    (passage,) = claude_citations(claude_reply(blocks, blocks[0]["content"][0]["text"]).content)
    assert passage.document_id == blocks[0]["source"]
    shown = blocks[0]["content"][0]["text"]

    real = app.check_answer("claude-1", claude_reply(blocks, shown))
    altered = app.check_answer(
        "claude-1", claude_reply(blocks, shown.replace("two minutes", "ten minutes"))
    )
    as_dict = app.check_answer(
        "claude-1", claude_reply(blocks, shown).model_dump(), answer_format="anthropic"
    )

    assert real.verdict is Verdict.SUPPORTED
    (claim,) = real.claims
    assert claim.text == "failover takes about two minutes"
    assert claim.cited_ids == (blocks[0]["source"],)
    assert claim.support is not None
    assert claim.support.document_id == blocks[0]["source"]
    assert altered.verdict is Verdict.UNSUPPORTED
    assert (
        altered.claims[0]
        .reasons[0]
        .startswith(f"quote not found in the block {blocks[0]['source']}")
    )
    assert as_dict.verdict is Verdict.SUPPORTED


def test_a_claude_citation_of_a_source_this_session_never_saw_is_invalid(app: LookupApp) -> None:
    app.lookup("how long does failover take", session_id="claude-2")
    blocks = [
        {
            "type": "search_result",
            "source": "operations/failover.md#chunk-7",
            "title": "Failover",
            "content": [{"type": "text", "text": "Failover takes about two minutes."}],
            "citations": {"enabled": True},
        }
    ]
    check = app.check_answer("claude-2", claude_reply(blocks, "Failover takes about two minutes."))
    assert check.verdict is Verdict.INVALID_CITATION
