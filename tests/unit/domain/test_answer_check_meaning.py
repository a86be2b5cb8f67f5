"""Checks that see meaning: sentence splitting, names, alignment, polarity, direction,
numbers bound to their span, rare words. Pure domain, identity-free stems from a tiny
suffix stripper so the rules do not lean on the Snowball adapter."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given
from hypothesis import strategies as st

from lookup_knowledge.domain.answer_check import (
    CheckThresholds,
    CitationStatus,
    CitationVerdict,
    EvidenceText,
    PreparedEvidence,
    Verdict,
    assess_claim,
    extract_facts,
    split_claims,
)
from lookup_knowledge.domain.answer_check.sentences import sentence_spans


def stem(words: Sequence[str]) -> list[str]:
    out = []
    for w in words:
        for suffix in ("ing", "ed", "es", "s", "e"):
            if w.endswith("ss") and suffix in ("s", "es"):
                continue
            if w.endswith(suffix) and len(w) > len(suffix) + 3:
                w = w[: -len(suffix)]
                break
        out.append(w)
    return out


def verdict_of(claim: str, evidence: str) -> tuple[Verdict, tuple[str, ...], str]:
    (c,) = split_claims(f"{claim} [d#chunk-0].")
    prepared = PreparedEvidence.of("d#chunk-0", evidence, stem)
    v = assess_claim(
        c,
        {"d#chunk-0": CitationVerdict("d#chunk-0", CitationStatus.VALID)},
        {"d#chunk-0": [EvidenceText("d#chunk-0", prepared)]},
        stem,
        CheckThresholds(),
    )
    assert v.span is not None
    return v.verdict, v.reasons, evidence[v.span.start : v.span.end]


ABSTRACT = (
    "Staphylococcus aureus colonises the nose. In S. aureus carriers, e.g. nurses, the "
    "risk was 2.5 times higher (Fig. 2). Dicer knockdown did not affect siRNA-mediated "
    "silencing. IFN-gamma suppressed myocarditis in mice. Survival was 30% in controls "
    "versus 60% in treated animals."
)


# ------------------------------------------------------------------ sentences


def test_genus_abbreviations_decimals_and_figure_references_do_not_end_a_sentence() -> None:
    spans = [ABSTRACT[a:b] for a, b in sentence_spans(ABSTRACT)]
    assert spans[1] == (
        "In S. aureus carriers, e.g. nurses, the risk was 2.5 times higher (Fig. 2)."
    )
    assert len(spans) == 5


def test_chinese_punctuation_ends_sentences() -> None:
    text = "退款须在14天内申请。超过期限不予受理！请联系客服？好的"
    assert [text[a:b] for a, b in sentence_spans(text)] == [
        "退款须在14天内申请。",
        "超过期限不予受理！",
        "请联系客服？",
        "好的",
    ]


_WORD = st.sampled_from(["cells", "mice", "levels", "the", "risk", "C. elegans", "e.g. rats"])
_WORD = _WORD | st.sampled_from(["vs. placebo", "Fig. 3", "3.5", "et al. reported", "S. aureus"])


@given(st.lists(st.lists(_WORD, min_size=1, max_size=6), min_size=1, max_size=6))
def test_sentences_are_found_whatever_abbreviations_and_decimals_they_hold(
    sentences: list[list[str]],
) -> None:
    text = " ".join("Results " + " ".join(words) + "." for words in sentences)
    spans = sentence_spans(text)
    assert len(spans) == len(sentences)
    assert all(text[a:b].startswith("Results ") and text[b - 1] == "." for a, b in spans)


def test_claims_split_like_the_evidence_does() -> None:
    claims = split_claims("In S. aureus carriers the risk rose [d#chunk-0]. It fell [d#chunk-1].")
    assert [c.text for c in claims] == [
        "In S. aureus carriers the risk rose [d#chunk-0].",
        "It fell [d#chunk-1].",
    ]


# ------------------------------------------------------------------ names


def test_hyphenated_and_alphanumeric_names_are_facts_and_their_digits_are_not_numbers() -> None:
    facts = {(f.kind.value, f.key) for f in extract_facts("IL-1alpha and HIV-1-producing cells")}
    assert facts == {("entity", "il-1alpha"), ("entity", "hiv-1")}


def test_a_greek_suffix_stays_part_of_the_name() -> None:
    assert [f.key for f in extract_facts("TNF-alpha rose")] == ["tnf-alpha"]


# ------------------------------------------------------------------ alignment


def test_the_claim_is_aligned_to_its_sentence_and_offsets_point_at_it() -> None:
    verdict, _, span = verdict_of("IFN-gamma suppressed myocarditis in mice", ABSTRACT)
    assert verdict is Verdict.SUPPORTED
    assert span == "IFN-gamma suppressed myocarditis in mice."


# ------------------------------------------------------------------ polarity


def test_a_negation_the_span_does_not_make_is_a_contradiction_naming_both_words() -> None:
    verdict, reasons, _ = verdict_of("IFN-gamma did not suppress myocarditis in mice", ABSTRACT)
    assert verdict is Verdict.CONTRADICTED
    assert reasons[0] == 'the claim says "not suppress" where the evidence says "suppressed"'


def test_dropping_the_spans_negation_is_a_contradiction() -> None:
    verdict, reasons, _ = verdict_of("Dicer knockdown affected siRNA-mediated silencing", ABSTRACT)
    assert verdict is Verdict.CONTRADICTED
    assert '"not affect"' in reasons[0]


def test_failed_to_and_lack_of_are_negations() -> None:
    span = "Treatment reduced mortality in the trial."
    assert verdict_of("Treatment failed to reduce mortality in the trial", span)[0] is (
        Verdict.CONTRADICTED
    )
    span = "There was a lack of association between coffee and stroke."
    assert verdict_of("Coffee intake was associated with stroke", span)[0] is (Verdict.CONTRADICTED)


def test_a_negating_prefix_flips_the_word() -> None:
    span = "Platelet counts were affected by the treatment."
    verdict, reasons, _ = verdict_of("Platelet counts were unaffected by the treatment", span)
    assert verdict is Verdict.CONTRADICTED
    assert reasons[0] == 'the claim says "unaffected" where the evidence says "affected"'


def test_a_paraphrased_negation_is_supported() -> None:
    span = "No significant difference in mortality was observed between the groups."
    verdict, _, _ = verdict_of("Mortality did not differ significantly between groups", span)
    assert verdict is Verdict.SUPPORTED


# ------------------------------------------------------------------ direction


def test_a_reversed_direction_is_a_contradiction_naming_both_words() -> None:
    verdict, reasons, _ = verdict_of("IFN-gamma enhanced myocarditis in mice", ABSTRACT)
    assert verdict is Verdict.CONTRADICTED
    assert reasons[0] == 'the claim says "enhanced" where the evidence says "suppressed"'


def test_a_synonym_of_the_same_direction_is_supported() -> None:
    assert verdict_of("IFN-gamma inhibited myocarditis in mice", ABSTRACT)[0] is (Verdict.SUPPORTED)


def test_opposite_prefixes_on_one_stem_are_a_contradiction() -> None:
    span = "Hypertension was frequent among treated patients."
    verdict, reasons, _ = verdict_of("Hypotension was frequent among treated patients", span)
    assert verdict is Verdict.CONTRADICTED
    assert '"hypotension"' in reasons[0]
    assert '"hypertension"' in reasons[0]


def test_a_word_both_texts_share_does_not_hide_a_reversed_comparative() -> None:
    span = "Olanzapine was associated with lower weight gain."
    verdict, reasons, _ = verdict_of("Olanzapine was associated with higher weight gain", span)
    assert verdict is Verdict.CONTRADICTED
    assert '"higher"' in reasons[0]
    assert '"lower"' in reasons[0]


# ------------------------------------------------------------------ numbers and words


def test_a_number_from_another_sentence_of_the_block_is_not_in_the_span() -> None:
    verdict, reasons, _ = verdict_of("In S. aureus carriers the risk was 60% higher", ABSTRACT)
    assert verdict is Verdict.UNSUPPORTED
    assert any("not in the aligned span" in r for r in reasons)


def test_numbers_swapped_within_the_span_are_unsupported() -> None:
    verdict, reasons, _ = verdict_of(
        "Survival was 60% in controls versus 30% in treated animals", ABSTRACT
    )
    assert verdict is Verdict.UNSUPPORTED
    assert any('number "60%"' in r for r in reasons)


def test_an_opposite_comparator_is_a_contradiction() -> None:
    span = "Cells were found in more than 40 patients."
    verdict, reasons, _ = verdict_of("Cells were found in fewer than 40 patients", span)
    assert verdict is Verdict.CONTRADICTED
    assert any('"less than 40"' in r and '"more than 40"' in r for r in reasons)


def test_a_rare_lowercase_word_missing_from_the_span_is_an_unsupported_fact() -> None:
    verdict, reasons, _ = verdict_of("IFN-gamma suppressed myocarditis in rats", ABSTRACT)
    assert verdict is Verdict.UNSUPPORTED
    assert reasons == ('word "rats" is not in the cited evidence (it says "mice")',)


def test_a_wrapped_markdown_line_does_not_end_a_sentence_but_a_list_item_does() -> None:
    text = "- Redirects (3xx)\n  are not followed.\n- Do the work later\n\n# Retry\nNext"
    assert [text[a:b] for a, b in sentence_spans(text)] == [
        "- Redirects (3xx)\n  are not followed.",
        "- Do the work later",
        "# Retry",
        "Next",
    ]


def test_lowercase_and_sentence_initial_drug_and_disease_names_are_facts() -> None:
    span = "Olanzapine-treated patients gained weight; lymphoma was rare."
    verdict, reasons, _ = verdict_of("Sorafenib-treated patients gained weight", span)
    assert verdict is Verdict.UNSUPPORTED
    assert 'name "sorafenib" is not in the cited evidence' in reasons
    verdict, reasons, _ = verdict_of("Olanzapine-treated patients gained weight", span)
    assert verdict is Verdict.SUPPORTED
    verdict, reasons, _ = verdict_of("Myeloma struck patients who gained weight", span)
    assert 'name "myeloma" is not in the cited evidence' in reasons


def test_chinese_negation_and_direction_against_the_span() -> None:
    span = "原支付的处理手续费不退还。退款成功率明显提高。"
    verdict, reasons, _ = verdict_of("退款会退还原支付的处理手续费", span)
    assert verdict is Verdict.CONTRADICTED
    assert reasons[0] == 'the claim says "退还" where the evidence says "不退还"'
    verdict, reasons, _ = verdict_of("退款成功率明显下降", span)
    assert verdict is Verdict.CONTRADICTED
    assert reasons[0] == 'the claim says "下降" where the evidence says "提高"'
    assert verdict_of("原支付的处理手续费不退还", span)[0] is Verdict.SUPPORTED
