"""Checking an agent's answer against the exact text it was shown (pure policies).

``claims`` splits an answer into claims with their citations and quotes; ``facts``
extracts the numbers, versions, codes, identifiers and names a claim states; ``words``
scores lexical coverage; ``verdicts`` applies the rules. Standard library only.
"""

from lookup_knowledge.domain.answer_check.claims import (
    Citation,
    CitationSyntax,
    Claim,
    Quote,
    claims_from_claude,
    split_claims,
)
from lookup_knowledge.domain.answer_check.evidence import (
    EvidenceText,
    PreparedEvidence,
    content_hash,
    shown_text_from,
)
from lookup_knowledge.domain.answer_check.facts import Fact, FactKind, extract_facts
from lookup_knowledge.domain.answer_check.verdicts import (
    CHECKER_VERSION,
    CheckThresholds,
    CitationStatus,
    CitationVerdict,
    ClaimVerdict,
    QuoteMatch,
    SupportSpan,
    Verdict,
    assess_claim,
    bare_text,
    overall_verdict,
    worst_verdict,
)
from lookup_knowledge.domain.answer_check.words import Stem, identity_stem
from lookup_knowledge.domain.citation_marks import DEFAULT_CITATION_PATTERN

__all__ = [
    "CHECKER_VERSION",
    "DEFAULT_CITATION_PATTERN",
    "CheckThresholds",
    "Citation",
    "CitationStatus",
    "CitationSyntax",
    "CitationVerdict",
    "Claim",
    "ClaimVerdict",
    "EvidenceText",
    "Fact",
    "FactKind",
    "PreparedEvidence",
    "Quote",
    "QuoteMatch",
    "Stem",
    "SupportSpan",
    "Verdict",
    "assess_claim",
    "bare_text",
    "claims_from_claude",
    "content_hash",
    "extract_facts",
    "identity_stem",
    "overall_verdict",
    "shown_text_from",
    "split_claims",
    "worst_verdict",
]
