"""Hypothesis strategies for domain objects."""

from __future__ import annotations

from hypothesis import strategies as st

from lookup_knowledge.domain.identity import EvidenceIdentity, chunk_key
from lookup_knowledge.domain.model import EvidenceCandidate, RankedCandidate
from lookup_knowledge.domain.relevance import ScoreKind

doc_ids = st.one_of(st.none(), st.sampled_from(["a", "b", "c", "d", "文档"]))


@st.composite
def ranked_candidates(draw: st.DrawFn, max_size: int = 30) -> list[RankedCandidate]:
    n = draw(st.integers(min_value=0, max_value=max_size))
    out: list[RankedCandidate] = []
    for rank in range(1, n + 1):
        doc = draw(doc_ids)
        index = draw(st.integers(min_value=0, max_value=4))
        if doc is not None:
            identity = EvidenceIdentity(chunk_key(doc, index), doc, index)
        else:
            identity = EvidenceIdentity(f"vector:{draw(st.integers(0, 6))}", None, None)
        content = draw(st.one_of(st.none(), st.text(min_size=0, max_size=300)))
        relevance = draw(st.floats(min_value=0.0, max_value=1.0))
        candidate = EvidenceCandidate(
            identity=identity,
            original_rank=rank,
            raw_score=relevance,
            score_kind=ScoreKind.COSINE,
            relevance=relevance,
            content=content,
            source=f"{doc}.md" if doc else "",
            title=draw(st.text(max_size=40)),
            breadcrumb=draw(st.text(max_size=40)),
            hit_reasons=(draw(st.sampled_from(["dense", "sparse", "hybrid"])),),
        )
        final = draw(st.floats(min_value=0.0, max_value=2.0))
        out.append(RankedCandidate(candidate, final))
    return out
