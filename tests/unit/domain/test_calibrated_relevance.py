"""The calibrated evidence scale: BM25 read against what the query could reach, cosine
against the collection's background, and a logistic per mode that is monotone in each
list's evidence and knows nothing of the corpus size."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lookup_knowledge.domain.identity import EvidenceIdentity
from lookup_knowledge.domain.model import EvidenceCandidate, RankedCandidate
from lookup_knowledge.domain.postprocess import drop_far_below_best
from lookup_knowledge.domain.relevance import (
    DEFAULT_MODEL,
    DenseBackground,
    EvidenceWeights,
    HitCalibration,
    ScoreKind,
    bm25_evidence,
    bm25_idf,
    concepts_of_terms,
    cosine_evidence,
    hit_relevance,
    measure_background,
    query_reference,
    relevance_from_evidence,
)
from lookup_knowledge.domain.settings import RetrievalSettings

K1, B = 1.2, 0.75
weights = st.builds(
    EvidenceWeights,
    dense=st.floats(0, 5),
    sparse=st.floats(0, 10),
    bias=st.floats(-10, 10),
)
evidence_z = st.floats(-20, 20)
evidence_r = st.floats(0, 1)


def bm25(documents: int, frequencies: list[int], tf: list[int], length_ratio: float) -> float:
    """Okapi BM25 of one chunk: per query term its document frequency and its count in
    the chunk; ``length_ratio`` the chunk's length over the average."""
    return sum(
        bm25_idf(documents, df) * t * (K1 + 1) / (t + K1 * (1 - B + B * length_ratio))
        for df, t in zip(frequencies, tf, strict=True)
        if t
    )


@given(w=weights, z1=evidence_z, z2=evidence_z, r1=evidence_r, r2=evidence_r)
def test_relevance_is_monotone_in_each_lists_evidence(
    w: EvidenceWeights, z1: float, z2: float, r1: float, r2: float
) -> None:
    low_z, high_z = sorted((z1, z2))
    low_r, high_r = sorted((r1, r2))
    assert relevance_from_evidence(low_z, r1, w) <= relevance_from_evidence(high_z, r1, w)
    assert relevance_from_evidence(z1, low_r, w) <= relevance_from_evidence(z1, high_r, w)
    # A list that did not find the hit adds no more than the weakest evidence it could.
    assert relevance_from_evidence(None, r1, w) <= relevance_from_evidence(z1, r1, w) or z1 < 0
    assert relevance_from_evidence(z1, None, w) <= relevance_from_evidence(z1, r1, w)
    assert 0.0 <= relevance_from_evidence(z1, r1, w) <= 1.0


@given(
    documents=st.integers(1, 10_000_000),
    scale=st.integers(1, 1000),
    shares=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=6),
)
def test_a_chunk_holding_every_query_term_once_is_full_evidence_at_any_corpus_size(
    documents: int, scale: int, shares: list[float]
) -> None:
    """The 2-document case and the million-document case alike: each term once in an
    average-length chunk reaches the query's reference, whatever the terms' rarity."""
    for n in (documents, documents * scale):
        frequencies = [max(1, round(share * n)) for share in shares]
        reference = sum(bm25_idf(n, df) for df in frequencies)
        score = bm25(n, frequencies, [1] * len(frequencies), 1.0)
        assert bm25_evidence(score, reference) == pytest.approx(1.0)


@given(
    documents=st.integers(2, 1_000_000),
    scale=st.integers(2, 1000),
    cosine=st.floats(-1, 1),
    mean=st.floats(-0.5, 0.5),
    std=st.floats(0.02, 0.5),
)
def test_relevance_depends_on_the_evidence_not_on_the_corpus_size(
    documents: int, scale: int, cosine: float, mean: float, std: float
) -> None:
    """The same share of the query matched and the same distance above the background
    give the same relevance in a small and a large collection."""
    background = DenseBackground(mean, std)
    by_size = []
    for n in (documents, documents * scale):
        frequencies = [1, max(1, n // 2)]
        reference = sum(bm25_idf(n, df) for df in frequencies)
        score = bm25(n, frequencies, [1, 0], 1.0)  # the rarer term only
        share = bm25_idf(n, 1) / reference
        calibration = HitCalibration(bm25_reference=reference, dense_background=background)
        relevance = hit_relevance(
            ((ScoreKind.COSINE, cosine), (ScoreKind.BM25, score)),
            calibration,
            DEFAULT_MODEL.hybrid,
        )
        assert relevance == pytest.approx(
            relevance_from_evidence(
                cosine_evidence(cosine, background), share, DEFAULT_MODEL.hybrid
            )
        )
        by_size.append((share, relevance))
    # rarer in a larger corpus, the term carries a larger share, never less evidence
    assert by_size[1][0] >= by_size[0][0] - 1e-12
    assert by_size[1][1] >= by_size[0][1] - 1e-12


def test_a_word_in_one_of_two_documents_is_an_exact_match() -> None:
    reference = bm25_idf(2, 1)
    score = bm25(2, [1], [1], 1.0)
    assert bm25_evidence(score, reference) == pytest.approx(1.0)
    assert bm25_evidence(-score, reference) == pytest.approx(1.0)  # Lite's sign
    relevance = hit_relevance(
        ((ScoreKind.BM25, score),), HitCalibration(bm25_reference=reference), DEFAULT_MODEL.sparse
    )
    assert relevance > 0.5


@pytest.mark.parametrize("z", [None, 0.0])
def test_an_exact_match_without_dense_support_is_found_in_hybrid_mode(z: float | None) -> None:
    # a word in one of two documents (r = 1) whose chunk the dense list did not return
    # (or returned at the background's cosine) still reaches the hybrid threshold
    relevance = relevance_from_evidence(z, 1.0, DEFAULT_MODEL.hybrid)
    assert relevance >= RetrievalSettings().min_relevance_for("hybrid")
    # and no evidence at all stays under it
    assert relevance_from_evidence(z, 0.0, DEFAULT_MODEL.hybrid) < (
        RetrievalSettings().min_relevance_for("hybrid")
    )


def test_each_mode_has_its_own_threshold_unless_one_is_set_for_all() -> None:
    own = RetrievalSettings()
    assert [own.min_relevance_for(m) for m in ("dense", "sparse", "hybrid")] == [
        own.min_relevance_dense,
        own.min_relevance_sparse,
        own.min_relevance_hybrid,
    ]
    one = RetrievalSettings(min_relevance=0.3)
    assert {one.min_relevance_for(m) for m in ("dense", "sparse", "hybrid")} == {0.3}
    with pytest.raises(ValueError):
        own.min_relevance_for("fuzzy")


@given(score=st.floats(allow_nan=True, allow_infinity=True))
def test_cosine_evidence_is_finite_and_monotone(score: float) -> None:
    background = DenseBackground(0.1, 0.1)
    z = cosine_evidence(score, background)
    assert math.isfinite(z)
    if math.isfinite(score):
        assert cosine_evidence(score + 0.01, background) >= z


def test_background_of_rows_excludes_pairs_within_a_document() -> None:
    rows = [(f"d{i}", [1.0, float(i % 3), 0.5]) for i in range(12)]
    rows += [("d0", [1.0, 0.0, 0.5])]
    background = measure_background(rows, max_pairs=10_000)
    assert background is not None
    assert background.pairs == 13 * 12 // 2 - 1
    assert measure_background(rows[:3]) is None  # too few pairs to say anything
    assert measure_background(rows, max_pairs=40) == measure_background(rows, max_pairs=40)


def _ranked(strengths: list[float]) -> list[RankedCandidate]:
    out = []
    for rank, strength in enumerate(strengths, 1):
        candidate = EvidenceCandidate(
            identity=EvidenceIdentity(f"d{rank}#chunk-0", f"d{rank}", 0),
            original_rank=rank,
            raw_score=strength,
            score_kind=ScoreKind.RRF,
            relevance=strength,
            strength=strength,
        )
        out.append(RankedCandidate(candidate, strength))
    return out


def test_blocks_far_below_the_best_are_not_padded_in() -> None:
    outcome = drop_far_below_best(_ranked([0.9, 0.5, 0.2, 0.7]), 0.5)
    assert [r.candidate.strength for r in outcome.kept] == [0.9, 0.5, 0.7]
    assert [r.candidate.strength for r in outcome.dropped] == [0.2]
    assert len(drop_far_below_best(_ranked([0.9, 0.01]), 0.0).kept) == 2


term_names = st.text(alphabet="abcdef", min_size=1, max_size=3)
forms_of = st.lists(st.lists(term_names, min_size=1, max_size=3), min_size=1, max_size=4)


@given(st.lists(term_names, min_size=1, max_size=8), st.integers(1, 10_000))
def test_the_reference_of_plain_terms_is_the_sum_of_their_idf(terms: list[str], n: int) -> None:
    def idf(term: str) -> float:
        return 1.0 + (hash(term) % 7)

    reference = query_reference(concepts_of_terms(terms), idf)
    assert reference == pytest.approx(sum(idf(t) for t in terms))


@given(st.lists(forms_of, min_size=1, max_size=5), st.lists(term_names, min_size=1, max_size=3))
def test_another_form_of_a_concept_never_raises_the_reference(
    concepts: list[list[list[str]]], extra: list[str]
) -> None:
    """A concept is held by any one of its forms: the reference counts the cheapest, so
    an added alternative (a gloss) can only make the query easier to reach, and a
    chunk holding every concept in its cheapest form reaches it exactly."""

    def idf(term: str) -> float:
        return 0.5 + len(term)

    before = query_reference(concepts, idf)
    after = query_reference([[*concepts[0], extra], *concepts[1:]], idf)
    assert before is not None
    assert after is not None
    assert after <= before + 1e-9
    cheapest = sum(min(sum(idf(t) for t in form) for form in forms) for forms in concepts)
    assert before == pytest.approx(cheapest)


def test_a_query_without_terms_has_no_reference() -> None:
    assert query_reference([], lambda _t: 1.0) is None
    assert query_reference([[[]]], lambda _t: 1.0) is None
