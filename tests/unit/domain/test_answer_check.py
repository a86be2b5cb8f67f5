"""The answer checker's pure rules: folding, claims and citations, facts, verdicts."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from lookup_knowledge.domain.answer_check import (
    CheckThresholds,
    CitationStatus,
    CitationSyntax,
    CitationVerdict,
    Claim,
    ClaimVerdict,
    EvidenceText,
    FactKind,
    PreparedEvidence,
    Verdict,
    assess_claim,
    claims_from_claude,
    extract_facts,
    identity_stem,
    overall_verdict,
    shown_text_from,
    split_claims,
)
from lookup_knowledge.domain.answer_check.facts import FactIndex, zh_numeral
from lookup_knowledge.domain.answer_check.text import find_folded, fold, fold_text
from lookup_knowledge.domain.answer_check.words import content_words
from lookup_knowledge.domain.projection import ELLIPSIS

POOL = (
    "PgBouncer runs in transaction mode. The default pool_size is 20 server connections per "
    "database and user pair; raise it only after checking max_connections on the primary. "
    "Error PG-53300 means too many clients. Failover takes about two minutes."
)


def naive_stem(words: list[str] | tuple[str, ...]) -> list[str]:
    """A crude stemmer for tests: enough to show that stemming is applied."""
    return [w[:-1] if w.endswith("s") and len(w) > 3 else w for w in words]


def check(
    answer: str,
    evidence: dict[str, str],
    *,
    statuses: dict[str, CitationVerdict] | None = None,
    thresholds: CheckThresholds | None = None,
) -> list[ClaimVerdict]:
    out = []
    for claim in split_claims(answer):
        cited = {
            d: (statuses or {}).get(
                d,
                CitationVerdict(
                    d, CitationStatus.VALID if d in evidence else CitationStatus.UNKNOWN
                ),
            )
            for d in claim.cited_ids
        }
        texts = {
            d: [EvidenceText(d, PreparedEvidence.of(d, t, naive_stem))] for d, t in evidence.items()
        }
        out.append(assess_claim(claim, cited, texts, naive_stem, thresholds or CheckThresholds()))
    return out


# --------------------------------------------------------------------------- folding

texts = st.text(
    alphabet=st.characters(
        codec="utf-8", categories=("L", "N", "P", "Zs", "Mn"), exclude_characters="\x00"
    ),
    max_size=80,
)


@given(texts)
def test_fold_maps_every_folded_character_back_to_the_source(source: str) -> None:
    folded = fold(source)
    assert len(folded.origin) == len(folded.text) + 1
    assert folded.origin[-1] == len(source)
    assert list(folded.origin) == sorted(folded.origin)
    assert all(0 <= i < len(source) for i in folded.origin[:-1])
    assert fold_text(folded.text) == folded.text  # folding is idempotent


@given(texts, st.data())
def test_any_slice_of_a_text_is_found_in_it_after_folding(source: str, data: st.DataObject) -> None:
    i = data.draw(st.integers(0, len(source)))
    j = data.draw(st.integers(i, len(source)))
    needle = source[i:j]
    assume(fold_text(needle).strip())
    span = find_folded(needle, fold(source))
    assert span is not None
    a, b = span
    assert 0 <= a < b <= len(source)
    # (a character that folds to several, like "¼" -> "1⁄4", is found whole)
    assert fold_text(needle).replace(" ", "") in fold_text(source[a:b]).replace(" ", "")


def test_folding_ignores_case_width_accents_typographic_quotes_and_spacing() -> None:
    shown = "Run  ＲＥＩＮＤＥＸ on the café’s   table\nthen wait."
    span = find_folded("reindex ON the cafe's table then", fold(shown))
    assert span is not None
    assert shown[span[0] : span[1]] == "ＲＥＩＮＤＥＸ on the café’s   table\nthen"
    assert find_folded("drop the table", fold(shown)) is None


# --------------------------------------------------------------------------- claims


def test_sentences_split_on_english_and_chinese_punctuation_not_on_decimals_or_abbreviations() -> (
    None
):
    answer = (
        "Set the ratio to 1.5 e.g. for bursts. Then restart PgBouncer! "
        "慢查询超过 500 毫秒需要分析。切换前必须通知值班人员；然后开始切换。"
    )
    claims = split_claims(answer)
    assert [c.text for c in claims] == [
        "Set the ratio to 1.5 e.g. for bursts.",
        "Then restart PgBouncer!",
        "慢查询超过 500 毫秒需要分析。",
        "切换前必须通知值班人员；",
        "然后开始切换。",
    ]


def test_a_citation_after_the_full_stop_belongs_to_the_sentence_before_it() -> None:
    answer = "The pool holds 20 connections. [db#chunk-1] Failover takes two minutes [ops#chunk-0]."
    first, second = split_claims(answer)
    assert first.cited_ids == ("db#chunk-1",)
    assert first.text == "The pool holds 20 connections. [db#chunk-1]"
    assert second.cited_ids == ("ops#chunk-0",)


def test_several_ids_in_one_bracket_full_width_brackets_and_what_is_not_a_citation() -> None:
    answer = (
        "Raise the pool size [db#chunk-1, db#chunk-2; ops#chunk-0] carefully.\n"
        "切换需要审批【ops/change-freeze-zh.md#chunk-3】。\n"
        "See [the runbook](https://example.org) [see below] for the full list of steps."
    )
    a, b, c = split_claims(answer)
    assert a.cited_ids == ("db#chunk-1", "db#chunk-2", "ops#chunk-0")
    assert b.cited_ids == ("ops/change-freeze-zh.md#chunk-3",)
    assert c.cited_ids == ()


def test_the_citation_pattern_is_configurable() -> None:
    syntax = CitationSyntax(r"\(source: ([^)]+)\)")
    (claim,) = split_claims("The pool holds 20 connections (source: db#chunk-1).", syntax)
    assert claim.cited_ids == ("db#chunk-1",)
    with pytest.raises(ValueError, match="invalid citation pattern"):
        CitationSyntax("([")


ids = st.text(alphabet="abcdefghij/-_.#0123456789:", min_size=1, max_size=20)


@given(st.lists(ids, min_size=1, max_size=4, unique=True))
def test_every_bracketed_id_is_cited_in_order(cited: list[str]) -> None:
    answer = f"The pool holds 20 connections [{', '.join(cited)}]. Restart it afterwards."
    claims = split_claims(answer)
    assert claims[0].cited_ids == tuple(cited)
    assert all(answer[c.start : c.end] == c.text for c in claims)


@given(
    st.lists(st.text(alphabet='abc xyz 12.。？![]【】#-\n"“”', min_size=0, max_size=30), max_size=6)
)
def test_claims_are_ordered_disjoint_spans_of_the_answer(parts: list[str]) -> None:
    answer = " ".join(parts)
    claims = split_claims(answer)
    previous_end = 0
    for index, claim in enumerate(claims):
        assert claim.index == index
        assert previous_end <= claim.start < claim.end <= len(answer)
        assert answer[claim.start : claim.end] == claim.text
        previous_end = claim.end


def test_questions_headings_and_small_talk_are_not_claims() -> None:
    answer = "## Answer\n\nHere is what I found:\n\nI hope this helps!\nAnything else?\n"
    assert split_claims(answer) == ()


def test_quotes_of_every_style_are_extracted_without_the_citation() -> None:
    (claim,) = split_claims(
        'It says "raise pool_size", “wait two minutes” and 「先通知」 [db#chunk-1].'
    )
    assert [q.text for q in claim.quotes] == ["raise pool_size", "wait two minutes", "先通知"]


# --------------------------------------------------------------------------- facts


def keys(text: str) -> list[tuple[str, str]]:
    return [(f.kind.value, f.key) for f in extract_facts(text)]


def test_facts_numbers_units_versions_codes_identifiers_and_names() -> None:
    assert keys(
        "PgBouncer 1.21.0 caps 1,000 connections at 250ms; PG-53300, ERR_TOO_MANY and "
        "max_client_conn at 10.20.0.53:6432 in /etc/pgbouncer/pgbouncer.ini on Friday."
    ) == [
        ("entity", "pgbouncer"),
        ("version", "1.21.0"),
        ("number", "1000 connections"),
        ("number", "250 ms"),
        ("code", "pg-53300"),
        ("code", "err_too_many"),
        ("identifier", "max_client_conn"),
        ("identifier", "10.20.0.53:6432"),
        ("identifier", "/etc/pgbouncer/pgbouncer.ini"),
        ("entity", "friday"),
    ]


def test_number_words_and_chinese_numerals_where_unambiguous() -> None:
    assert keys("Wait fifteen minutes, then twenty-five retries.") == [
        ("number", "15 min"),
        ("number", "25 retries"),
    ]
    assert keys("One of the replicas lags; no one noticed.") == []
    assert keys("等待十五分钟后重试三次。") == [("number", "15 min"), ("number", "3 次")]
    assert (zh_numeral("二十"), zh_numeral("三百二十"), zh_numeral("一二")) == (20, 320, None)


@given(st.integers(min_value=0, max_value=10**9))
def test_thousands_separators_do_not_change_a_number(n: int) -> None:
    assert keys(f"It took {n:,} ms.") == keys(f"It took {n} ms.") == [("number", f"{n} ms")]


@pytest.mark.parametrize(
    ("claim", "evidence", "found"),
    [
        ("wait 1 minute", "Wait 60 seconds.", True),
        ("wait 60 s", "Wait one minute.", True),
        ("wait 90 seconds", "Wait 60 seconds.", False),
        ("wait 60 minutes", "Wait 60 seconds.", False),
        ("lag of 16", "lag of 16 MB", True),
        ("lag of 16 MiB", "lag of 16 MB", False),
        ("PG-53300", "错误PG-53300表示连接过多", True),
        ("Monday", "on Mondays", True),
        ("Pool", "the spool", False),
        ("options timeout:1", "use `options timeout:1 attempts:2`", True),
        ("retried for 5 days", "| 5 | 2 hours |\n| 6 | 5 hours |", False),
        ("a timeout of 3 seconds", "reserve_pool_timeout = 3", True),
    ],
)
def test_facts_match_the_evidence_with_units_and_base_values(
    claim: str, evidence: str, found: bool
) -> None:
    index = FactIndex.of([evidence])
    facts = extract_facts(claim, skip_first_word=False)
    assert facts
    assert all(index.contains(f) for f in facts) is found


def test_content_words_drop_stop_words_and_make_chinese_bigrams() -> None:
    assert content_words("The pool is raised to the limit") == ["pool", "raised", "limit"]
    assert content_words("慢查询分析") == ["慢查", "查询", "询分", "分析"]


# --------------------------------------------------------------------------- verdicts


def test_a_claim_the_evidence_states_is_supported_with_the_sentence_that_says_it() -> None:
    (v,) = check("Failover takes about two minutes [db#chunk-1].", {"db#chunk-1": POOL})
    assert v.verdict is Verdict.SUPPORTED
    assert v.support is not None
    assert POOL[v.support.start : v.support.end] == "Failover takes about two minutes."


def test_a_changed_number_is_unsupported_and_named() -> None:
    (v,) = check(
        "The default pool_size is 25 server connections [db#chunk-1].", {"db#chunk-1": POOL}
    )
    assert v.verdict is Verdict.UNSUPPORTED
    assert v.reasons == ('number "25" is not in the cited evidence',)
    assert v.missing == ("25",)


def test_an_invented_quote_is_unsupported_and_a_real_one_reports_its_offsets() -> None:
    real, invented = check(
        'The guide says "raise it only after checking max_connections" [db#chunk-1]. '
        'The guide says "raise it whenever you like" [db#chunk-1].',
        {"db#chunk-1": POOL},
    )
    assert real.verdict is Verdict.SUPPORTED
    assert real.support is not None
    assert POOL[real.support.start : real.support.end] == (
        "raise it only after checking max_connections"
    )
    assert invented.verdict is Verdict.UNSUPPORTED
    assert invented.reasons[0].startswith("quote not found in the cited evidence")


def test_a_swapped_name_is_unsupported() -> None:
    (v,) = check(
        "Pgpool-II runs in transaction mode as PgCat does [db#chunk-1].", {"db#chunk-1": POOL}
    )
    assert v.verdict is Verdict.UNSUPPORTED
    assert any('"PgCat"' in r for r in v.reasons)


def test_uncited_facts_invalid_ids_and_ids_from_another_session() -> None:
    other = CitationVerdict("db#chunk-7", CitationStatus.NOT_IN_SESSION, ("s-2",))
    uncited, unknown, elsewhere = check(
        "Error PG-53300 means too many clients. "
        "The pool holds 20 connections [db#chunk-9]. "
        "The pool holds 20 connections [db#chunk-7].",
        {"db#chunk-1": POOL},
        statuses={"db#chunk-7": other},
    )
    assert uncited.verdict is Verdict.UNCITED
    assert unknown.verdict is Verdict.INVALID_CITATION
    assert unknown.reasons == ("db#chunk-9: never returned (unknown id)",)
    assert elsewhere.verdict is Verdict.INVALID_CITATION
    assert elsewhere.reasons == (
        "db#chunk-7: not returned in this session (returned in session s-2)",
    )


def test_a_claim_about_something_else_is_unsupported_for_low_coverage() -> None:
    (v,) = check(
        "Kafka consumers rebalance when a member leaves [db#chunk-1].", {"db#chunk-1": POOL}
    )
    assert v.verdict is Verdict.UNSUPPORTED
    assert "coverage 0.00 < 0.50" in v.reasons[0]


def test_cosine_can_carry_a_paraphrase_that_coverage_alone_would_not() -> None:
    claim = split_claims("Switching over needs roughly a couple of minutes [db#chunk-1].")[0]
    evidence = {
        "db#chunk-1": [
            EvidenceText("db#chunk-1", PreparedEvidence.of("db#chunk-1", POOL, identity_stem))
        ]
    }
    status = {"db#chunk-1": CitationVerdict("db#chunk-1", CitationStatus.VALID)}
    strict = CheckThresholds(min_coverage=0.9, min_cosine=0.8, min_coverage_with_cosine=0.0)
    without = assess_claim(claim, status, evidence, identity_stem, strict)
    with_cosine = assess_claim(claim, status, evidence, identity_stem, strict, {"db#chunk-1": 0.9})
    assert without.verdict is Verdict.UNSUPPORTED
    assert with_cosine.verdict is Verdict.SUPPORTED
    assert with_cosine.cosine == 0.9


def test_evidence_that_changed_since_it_was_shown_cannot_support_a_claim() -> None:
    (claim,) = split_claims("The pool holds 20 connections [db#chunk-1].")
    v = assess_claim(
        claim,
        {"db#chunk-1": CitationVerdict("db#chunk-1", CitationStatus.VALID)},
        {"db#chunk-1": [EvidenceText("db#chunk-1", None, "evidence changed since shown")]},
        identity_stem,
        CheckThresholds(),
    )
    assert v.verdict is Verdict.UNSUPPORTED
    assert v.reasons == ("db#chunk-1: evidence changed since shown",)


words = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=2, max_size=9)


@given(st.lists(words, min_size=1, max_size=12), st.integers(0, 10**6))
def test_a_claim_that_repeats_its_evidence_is_supported(sentence: list[str], n: int) -> None:
    text = " ".join(sentence[:3]) + f" {n} ms " + " ".join(sentence[3:])
    (v,) = check(f"{text} [d#chunk-0].", {"d#chunk-0": text + "."})
    assert v.verdict is Verdict.SUPPORTED, v.reasons


@given(st.integers(0, 10**6), st.integers(0, 10**6))
def test_a_number_absent_from_the_evidence_is_always_named(n: int, m: int) -> None:
    assume(n != m)
    (v,) = check(f"The timeout is {n} ms [d#chunk-0].", {"d#chunk-0": f"The timeout is {m} ms."})
    assert v.verdict is Verdict.UNSUPPORTED
    assert v.missing == (f"{n} ms",)


@given(st.lists(st.sampled_from(list(Verdict)), max_size=8))
def test_the_answer_verdict_is_its_worst_claims(verdicts: list[Verdict]) -> None:
    dummy = Claim(0, "x", 0, 1, (), (), (), ())
    overall = overall_verdict([ClaimVerdict(dummy, (), v) for v in verdicts])
    if all(v is Verdict.SUPPORTED for v in verdicts):
        assert overall is Verdict.SUPPORTED
    else:
        order = [
            Verdict.INVALID_CITATION,
            Verdict.CONTRADICTED,
            Verdict.UNSUPPORTED,
            Verdict.UNCITED,
        ]
        assert overall is next(v for v in order if v in verdicts)


# --------------------------------------------------------------------------- hash-only rows


@given(st.text(min_size=1, max_size=300), st.data())
def test_the_shown_text_is_rebuilt_from_the_current_block_only_when_its_hash_matches(
    full: str, data: st.DataObject
) -> None:
    stripped = full.strip()
    cut = data.draw(st.integers(0, max(len(stripped) - 1, 0)))
    shown = data.draw(st.sampled_from([full, stripped, stripped[:cut] + ELLIPSIS]))
    digest = hashlib.sha256(shown.encode("utf-8")).hexdigest()
    assert shown_text_from(full, digest) == shown
    assert shown_text_from(full + " changed", digest) in (None, shown)
    assert shown_text_from("something else entirely", digest) in (None, shown)


# --------------------------------------------------------------------------- Claude


def test_claude_text_blocks_with_search_result_citations_become_claims() -> None:
    content = [
        {"type": "text", "text": "Based on the runbook, "},
        {
            "type": "text",
            "text": "failover takes about two minutes",
            "citations": [
                {
                    "type": "search_result_location",
                    "source": "ops#chunk-0",
                    "title": "Failover",
                    "cited_text": "Failover takes about two minutes.",
                    "search_result_index": 0,
                    "start_block_index": 0,
                    "end_block_index": 1,
                }
            ],
        },
        {"type": "text", "text": ". Error PG-53300 means too many clients."},
        {"type": "tool_use", "id": "t1", "name": "lookup_knowledge", "input": {}},
    ]
    answer, claims = claims_from_claude(content)
    assert answer == (
        "Based on the runbook, failover takes about two minutes. "
        "Error PG-53300 means too many clients."
    )
    cited, uncited = claims
    assert cited.text == "failover takes about two minutes"
    assert cited.cited_ids == ("ops#chunk-0",)
    assert [(q.text, q.document_id) for q in cited.quotes] == [
        ("Failover takes about two minutes.", "ops#chunk-0")
    ]
    assert uncited.cited_ids == ()
    assert [f.kind for f in uncited.facts] == [FactKind.CODE]
