"""The cost of access control: lookup p50 with ``access.mode=enforced`` against ``off``.

On the SciFact corpus (Milvus Lite, all-MiniLM-L6-v2 ONNX by default; ``--embedder
hashing`` for a quick run), ingested into its own collection with access metadata:
every document belongs to one of ``--tenants`` tenants (round robin by corpus order),
every fourth one is restricted to a group, a few are public. Two use cases share the
collection and differ in ``access.mode`` only; ``enforced`` runs for a principal of
tenant 0 with that group, so every search pass carries the tenant/group/public filter
(tenant is the partition key) and every hit goes through the defence-in-depth check.

Per query, after a warm-up, the two are called interleaved (off, enforced, then the
other order for the next query) so machine load hits both alike. The audit recorder is
off for both (its write is the same either way). Printed: p50/p95/mean of the whole
lookup and of the search part (retrievalTrace timingsMs.search), and the p50 ratios.

    .venv/bin/python benchmarks/bench_access.py [--queries 300] [--embedder onnx-minilm]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

from _scifact import DATASETS, DEFAULT_DATA_DIR, stats

from lookup_knowledge.adapters.api import create_app
from lookup_knowledge.adapters.config import load_settings
from lookup_knowledge.adapters.container import Container
from lookup_knowledge.adapters.evaluation.beir import load_beir
from lookup_knowledge.adapters.runtime import DisabledRecorder, InMemorySessionState
from lookup_knowledge.application.lookup import LookupConfig, LookupKnowledge, LookupOptions
from lookup_knowledge.application.ports import DocumentSource, LoadedDocument, SourceDocument
from lookup_knowledge.domain.access import AccessMode, DocumentAccess, Principal
from lookup_knowledge.domain.settings import RetrievalSettings

GROUP = "clinical"


class TenantedCorpus(DocumentSource):
    """The corpus with access metadata: tenant by position, some grouped, some public."""

    def __init__(self, inner: DocumentSource, tenants: int) -> None:
        self._inner = inner
        self._tenants = tenants

    @property
    def source_name(self) -> str:
        return self._inner.source_name

    def estimated_count(self) -> int | None:
        return self._inner.estimated_count()

    def documents(self) -> Iterator[LoadedDocument]:
        for i, loaded in enumerate(self._inner.documents()):
            if not isinstance(loaded, SourceDocument):
                yield loaded
                continue
            if i % 50 == 49:
                access = DocumentAccess(public=True)
            else:
                groups = frozenset({GROUP}) if i % 4 == 3 else frozenset()
                access = DocumentAccess(f"tenant-{i % self._tenants}", groups)
            yield replace(loaded, access=access)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--tenants", type=int, default=2)
    parser.add_argument("--embedder", default="onnx-minilm")
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    args = parser.parse_args()

    folder = DATASETS / "scifact"
    if not folder.is_dir():
        sys.exit(f"SciFact not found at {folder} (see the dataset's SOURCE.md)")
    beir = load_beir(folder, split="train", limit_queries=args.queries + args.warmup)
    collection = f"access_scifact_{args.embedder.replace('-', '_')}_{args.tenants}t"
    settings = load_settings(
        overrides={
            "data-dir": str(args.data_dir),
            "embedder.provider": args.embedder,
            "milvus.collection": collection,
            "audit.enabled": False,
        }
    ).settings
    container = Container(settings=settings)
    app = create_app(settings, container=container)
    with app:
        started = time.perf_counter()
        report = app.ingest_source(TenantedCorpus(beir.dataset.corpus, args.tenants), sync=True)
        app.seal_knowledge_store()
        print(
            f"collection {collection}: {report.documents_seen} documents, "
            f"{report.added + report.updated} (re)written in {time.perf_counter() - started:.1f} s",
            file=sys.stderr,
        )
        base = LookupConfig(retrieval=RetrievalSettings(retrieve_k=20))

        def use_case(mode: AccessMode) -> LookupKnowledge:
            return LookupKnowledge(
                search=container.search(),
                transformer=container.transformer(),
                recorder=DisabledRecorder(),
                session_state=InMemorySessionState(),
                clock=container.clock(),
                embedder=container.embedder(),
                config=replace(base, access_mode=mode),
            )

        off, enforced = use_case(AccessMode.OFF), use_case(AccessMode.ENFORCED)
        principal = Principal("tenant-0", "bench", frozenset({GROUP}))
        queries = [q.text for q in beir.dataset.queries]
        measured = run(off, enforced, principal, queries, args.warmup)
    show(measured, args, report.documents_seen)


def run(
    off: LookupKnowledge,
    enforced: LookupKnowledge,
    principal: Principal,
    queries: Sequence[str],
    warmup: int,
) -> dict[str, dict[str, list[float]]]:
    measured: dict[str, dict[str, list[float]]] = {
        name: {"total": [], "search": []} for name in ("off", "enforced")
    }
    calls = {
        "off": lambda q, s: off.execute(q, session_id=s),
        "enforced": lambda q, s: enforced.execute(
            q, session_id=s, options=LookupOptions(principal=principal)
        ),
    }
    for i, query in enumerate(queries):
        order = ("off", "enforced") if i % 2 == 0 else ("enforced", "off")
        for name in order:
            t0 = time.perf_counter()
            result = calls[name](query, f"bench-{name}")
            total = (time.perf_counter() - t0) * 1000.0
            if result.error_code is not None:
                sys.exit(f"{name} lookup failed: {result.message}")
            if i >= warmup:
                measured[name]["total"].append(total)
                measured[name]["search"].append(
                    float(result.retrieval_trace["timingsMs"].get("search", 0.0))
                )
    return measured


def show(measured: dict[str, dict[str, list[float]]], args: argparse.Namespace, docs: int) -> None:
    n = len(measured["off"]["total"])
    print(
        f"SciFact, {docs} documents in {args.tenants} tenants, embedder {args.embedder}, "
        f"{n} queries interleaved after {args.warmup} warm-up"
    )
    print(f"{'':10} {'part':7} {'p50 ms':>8} {'p95 ms':>8} {'mean ms':>8}")
    for name in ("off", "enforced"):
        for part in ("total", "search"):
            p50, p95, mean = stats(measured[name][part])
            print(f"{name:10} {part:7} {p50:8.2f} {p95:8.2f} {mean:8.2f}")
    for part in ("total", "search"):
        ratio = stats(measured["enforced"][part])[0] / stats(measured["off"][part])[0]
        print(f"p50 ratio enforced/off ({part}): {ratio:.3f}")


if __name__ == "__main__":
    main()
