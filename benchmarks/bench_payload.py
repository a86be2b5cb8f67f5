"""Payload size: what the agent receives per lookup, per payload profile.

For each query the lookup runs once; its result is serialised in both profiles
(``agent``, ``full``) the way a host sends it (compact JSON, UTF-8). Reported per corpus:
bytes and tokens (the bundled MiniLM WordPiece tokenizer, a stand-in for an LLM's) of each
profile, and the ratio of the payload's bytes to the bytes of the excerpt text it carries
(the blocks' ``content``), for the lookups that returned 5 blocks. Target (issue 11):
agent payload <= 1.3 x its excerpt bytes. Beside it, the floor of any payload that names
each block's id and provenance: the agent profile's ``evidenceBlocks`` with only
``document_id``, ``source``/``title``/``breadcrumb`` and ``content`` (no score, no
result fields), over the same excerpt bytes.

Corpora: the bundled sample corpus with its demo questions, and SciFact (a corpus sample
plus the judged documents of the first ``--scifact-queries`` train queries), each in a
fresh data directory under benchmarks/results/payload (the ONNX MiniLM embedder, dense).

    .venv/bin/python benchmarks/bench_payload.py [--scifact-queries 100] [--scifact-sample 1500]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
from collections.abc import Sequence
from importlib.resources import files
from pathlib import Path

from tokenizers import Tokenizer

from lookup_knowledge.adapters.api import LookupApp, create_app
from lookup_knowledge.adapters.evaluation.beir import load_beir
from lookup_knowledge.application.lookup import PayloadProfile
from lookup_knowledge.sample_corpus import corpus_path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "payload"
SCIFACT = ROOT.parent / "shared" / "datasets" / "scifact"
TARGET = 1.3


def tokenizer() -> Tokenizer:
    path = files("lookup_knowledge.adapters.embedders.minilm_tokenizer") / "tokenizer.json"
    tok = Tokenizer.from_file(str(path))
    tok.no_truncation()
    tok.no_padding()
    return tok


def compact(payload: object) -> str:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


#: What a block must name to be cited and read in context (the seed: "keep
#: source/title/breadcrumb visible").
_NAMED = ("document_id", "source", "title", "breadcrumb", "content")


def measure(app: LookupApp, queries: Sequence[str], tok: Tokenizer) -> dict[str, list[float]]:
    rows: dict[str, list[float]] = {
        k: [] for k in ("agent_bytes", "full_bytes", "agent_tokens", "full_tokens", "excerpt")
    }
    rows["agent_ratio"], rows["full_ratio"], rows["floor_ratio"] = [], [], []
    for n, query in enumerate(queries):
        result = app.lookup_result(query, session_id="bench-payload", step_id=f"q{n}")
        agent_json = result.to_tool_json(PayloadProfile.AGENT)
        agent = compact(agent_json)
        full = compact(result.to_tool_json(PayloadProfile.FULL))
        excerpt = sum(len(b.content.encode("utf-8")) for b in result.evidence_blocks)
        rows["agent_bytes"].append(len(agent.encode("utf-8")))
        rows["full_bytes"].append(len(full.encode("utf-8")))
        rows["agent_tokens"].append(len(tok.encode(agent).ids))
        rows["full_tokens"].append(len(tok.encode(full).ids))
        rows["excerpt"].append(excerpt)
        if len(result.evidence_blocks) == 5 and excerpt:
            rows["agent_ratio"].append(len(agent.encode("utf-8")) / excerpt)
            rows["full_ratio"].append(len(full.encode("utf-8")) / excerpt)
            named = [
                {k: v for k, v in block.items() if k in _NAMED}
                for block in agent_json["evidenceBlocks"]
            ]
            rows["floor_ratio"].append(len(compact(named).encode("utf-8")) / excerpt)
    return rows


def report(name: str, rows: dict[str, list[float]]) -> None:
    def med(key: str) -> str:
        values = rows[key]
        return f"{statistics.median(values):8.0f}" if values else "       -"

    def ratio(key: str) -> str:
        values = rows[key]
        if not values:
            return "-"
        within = sum(v <= TARGET for v in values)
        return (
            f"median {statistics.median(values):.2f}x, max {max(values):.2f}x, "
            f"{within}/{len(values)} within {TARGET}x"
        )

    print(f"\n{name}: {len(rows['agent_bytes'])} lookups, {len(rows['agent_ratio'])} with 5 blocks")
    print("                       bytes (median)  tokens (median)")
    print(f"  agent profile        {med('agent_bytes')}        {med('agent_tokens')}")
    print(f"  full profile         {med('full_bytes')}        {med('full_tokens')}")
    print(f"  excerpt text         {med('excerpt')}")
    print(f"  agent / excerpt bytes (5 blocks): {ratio('agent_ratio')}")
    print(f"  full / excerpt bytes (5 blocks):  {ratio('full_ratio')}")
    print(f"  floor: ids + provenance + text:   {ratio('floor_ratio')}")


def fresh_app(name: str) -> LookupApp:
    data_dir = RESULTS / name
    shutil.rmtree(data_dir, ignore_errors=True)
    return create_app(overrides={"data-dir": str(data_dir), "audit.enabled": False})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scifact-queries", type=int, default=100)
    parser.add_argument("--scifact-sample", type=int, default=1500)
    args = parser.parse_args()
    tok = tokenizer()

    corpus = corpus_path()
    questions = [q["query"] for q in json.loads((corpus / "questions.json").read_text("utf-8"))]
    with fresh_app("sample") as app:
        categories = sorted(p for p in corpus.iterdir() if p.is_dir() and p.name[0] != "_")
        app.ingest(categories, root=corpus)
        report("sample corpus (demo questions)", measure(app, questions, tok))

    if not SCIFACT.is_dir():
        print(f"\nSciFact not found at {SCIFACT}: skipped", file=sys.stderr)
        return
    beir = load_beir(
        SCIFACT,
        split="train",
        limit_queries=args.scifact_queries,
        corpus_sample=args.scifact_sample,
    )
    with fresh_app("scifact") as app:
        app.ingest_source(beir.dataset.corpus)
        queries = [q.text for q in beir.dataset.queries]
        report(
            f"SciFact train ({len(beir.restricted_to or ())} documents)", measure(app, queries, tok)
        )


if __name__ == "__main__":
    main()
