"""The ``lookup_knowledge`` use case and its stages, one module each.

    query.py           the input rules: ids from the host, the agent's query text
    config.py          LookupConfig (what shapes a lookup), LookupOptions (per call)
    retriever.py       Retriever: filtered pass, unfiltered retry, late materialisation
    post_processor.py  PostProcessor: rerank -> sort -> dedup -> cap -> return-n
    projector.py       Projector: the evidence blocks the agent sees, within budgets
    context_packer.py  ContextPacker: the char-budgeted context pack of those blocks
    assembler.py       Assembler: LookupResult with traces, quality and message
    traces.py          RetrievalTrace, RerankTrace: the traces, typed, and their wire form
    recording.py       the ToolInvocation the audit store keeps, and recording it
    use_case.py        LookupKnowledge: the pipeline, top to bottom

See ``docs/architecture.md`` for the pipeline and the result contract.
"""

from lookup_knowledge.application.lookup.config import LookupConfig, LookupOptions, PayloadProfile
from lookup_knowledge.application.lookup.result import LookupResult
from lookup_knowledge.application.lookup.use_case import LookupKnowledge

__all__ = [
    "LookupConfig",
    "LookupKnowledge",
    "LookupOptions",
    "LookupResult",
    "PayloadProfile",
]
