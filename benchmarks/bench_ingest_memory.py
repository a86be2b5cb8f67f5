"""Peak memory of embedding SciFact with the bundled ONNX embedder, as ingest does:
before (ONNX Runtime's memory pattern on, 32 texts per call, documents in the optimised
query session), the memory pattern off alone, and the default now (pattern off, documents
in the session with the graph as shipped, calls bounded by ``embedder.max-batch-tokens``
padded tokens); with ``--ingest``, the whole ingest (Milvus Lite + tantivy in process)
before and now.

Each variant runs in a process of its own that reports its peak RSS (``ru_maxrss``)
and the RSS it had once the model was loaded (or, with ``--ingest``, before the ingest),
so the difference is what the variant adds. Same texts (SciFact abstracts, title and
text, cut by the tokenizer at 256 tokens) in every variant, in ``embed`` calls of 256
texts as ingest's write batches hand them over.

    .venv/bin/python benchmarks/bench_ingest_memory.py [--docs 512] [--ingest]
"""

from __future__ import annotations

import argparse
import gzip
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SCIFACT = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "scifact"
VARIANTS = ("before: pattern on, 32 texts per call", "pattern off, 32 texts per call", "now")
#: The ingest as the CLI runs it: glibc's malloc arenas capped and its mmap threshold fixed
#: (adapters/cli/memory.py).
CLI = "now, as the CLI runs it (2 malloc arenas)"


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _patch_variant(variant: str) -> dict[str, Any]:
    """Embedder keyword arguments for the variant; re-enables the memory pattern for
    'before' (the code until this benchmark's change)."""
    from lookup_knowledge.adapters.embedders import onnx

    if variant == VARIANTS[0]:
        plain = onnx.OnnxSentenceEmbedder._session_options
        loaded = onnx.OnnxSentenceEmbedder._ensure_loaded

        def with_pattern(self: Any, onnxruntime: Any) -> Any:
            options = plain(self, onnxruntime)
            options.enable_mem_pattern = True
            return options

        def one_session(self: Any, *, documents: bool = False) -> Any:
            return loaded(self)  # documents in the optimised query session, as before

        onnx.OnnxSentenceEmbedder._session_options = with_pattern  # type: ignore[method-assign]
        onnx.OnnxSentenceEmbedder._ensure_loaded = one_session  # type: ignore[method-assign]
    return {} if variant == VARIANTS[2] else {"max_batch_tokens": 32 * 256}


def _texts(docs: int) -> list[str]:
    texts = []
    with gzip.open(SCIFACT / "corpus.jsonl.gz", "rt", encoding="utf-8") as lines:
        for line in lines:
            doc = json.loads(line)
            texts.append(f"{doc.get('title', '')}\n{doc.get('text', '')}")
            if len(texts) >= docs:
                break
    return texts


def _child_embed(variant: str, docs: int) -> dict[str, float]:
    from lookup_knowledge.adapters.embedders import OnnxMiniLMEmbedder

    embedder = OnnxMiniLMEmbedder(batch_size=32, **_patch_variant(variant))
    embedder.embed_documents(["load the session documents run in"])
    texts = _texts(docs)
    base, started = _rss_mb(), time.perf_counter()
    for start in range(0, len(texts), 256):
        embedder.embed_documents(texts[start : start + 256])
    return {"base_mb": base, "peak_mb": _rss_mb(), "seconds": time.perf_counter() - started}


def _child_ingest(variant: str, docs: int) -> dict[str, float]:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import os

    from _scifact import open_scifact

    if variant == VARIANTS[0]:
        _patch_variant(variant)
        os.environ["LOOKUP_KNOWLEDGE_EMBEDDER__MAX_BATCH_TOKENS"] = str(32 * 256)
    if variant == CLI:
        from lookup_knowledge.adapters.cli.memory import limit_malloc_arenas, tune_for_ingest

        if not limit_malloc_arenas():
            raise SystemExit("cannot cap malloc arenas here (not glibc, or MALLOC_ARENA_MAX set)")
        tune_for_ingest()  # as the ingest command does (ARROW_DEFAULT_MEMORY_POOL=mimalloc: before)
    base, started = _rss_mb(), time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-ingest-memory-") as data_dir:
        app, *_ = open_scifact(
            data_dir=Path(data_dir),
            embedder="onnx-minilm",
            corpus_sample=docs if docs > 0 else None,  # 0: the whole corpus
            audit=False,
        )
        app.close()
    return {"base_mb": base, "peak_mb": _rss_mb(), "seconds": time.perf_counter() - started}


def _run(variant: str, docs: int, ingest: bool) -> dict[str, float]:
    command = [sys.executable, __file__, "--child", variant, "--docs", str(docs)]
    if ingest:
        command.append("--ingest")
    out = subprocess.run(command, check=True, capture_output=True, text=True)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--docs",
        type=int,
        default=512,
        help="SciFact documents embedded; with --ingest, the corpus sample (0: all)",
    )
    parser.add_argument("--ingest", action="store_true", help="the whole ingest, not the embed")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child = _child_ingest if args.ingest else _child_embed
        print(json.dumps(child(args.child, args.docs)))
        return
    variants = (VARIANTS[0], VARIANTS[2], CLI) if args.ingest else VARIANTS
    results = {}
    for variant in variants:
        results[variant] = _run(variant, args.docs, args.ingest)
        print(f"  {variant}: {results[variant]}", file=sys.stderr)
    what = "ingest (corpus sample)" if args.ingest else "embed"
    print(f"SciFact {what}, {args.docs} documents, onnx-minilm")
    print(f"{'variant':<40} {'base MB':>8} {'peak MB':>8} {'added MB':>9} {'seconds':>8}")
    for variant, r in results.items():
        added = r["peak_mb"] - r["base_mb"]
        print(
            f"{variant:<40} {r['base_mb']:>8.0f} {r['peak_mb']:>8.0f} {added:>9.0f} "
            f"{r['seconds']:>8.1f}"
        )
    before, now = results[VARIANTS[0]], results[VARIANTS[2]]
    print(
        f"now / before: peak {now['peak_mb'] / before['peak_mb']:.2f}x, added "
        f"{(now['peak_mb'] - now['base_mb']) / (before['peak_mb'] - before['base_mb']):.2f}x, "
        f"time {now['seconds'] / before['seconds']:.2f}x"
    )
    if CLI in results:
        cli = results[CLI]
        print(
            f"as the CLI runs it / before: peak {cli['peak_mb'] / before['peak_mb']:.2f}x, "
            f"time {cli['seconds'] / before['seconds']:.2f}x"
        )


if __name__ == "__main__":
    main()
