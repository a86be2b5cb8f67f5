"""``lookup-knowledge eval ...``: the Eval harness and Replay on the command line.

    lookup-knowledge eval run ../shared/datasets/scifact --preset modes,caps
    lookup-knowledge eval run DATASET --config dense --config hybrid+cap-1 --limit-queries 100
    lookup-knowledge eval replay --session eval-<run>-dense --collection eval_scifact_onnx_minilm \\
        --set rag.max-chunks-per-document=1 --min-overlap 0.8

``run`` ingests the corpus into its own collection (``eval_<dataset>_<embedder>``,
synced to the corpus, reused by later runs), runs every judged query through the full
lookup pipeline once per configuration (one audit session each), scores what the audit
store recorded, prints the comparison table and writes ``<run>.json``, ``<run>.png`` and
``<run>.html`` under ``--out``. ``replay`` re-runs logged lookups under a changed
configuration and exits 1 when the evidence overlap falls below ``--min-overlap``.

The global ``--config``/``--data-dir`` of ``lookup-knowledge`` apply; ``--data-dir``
here wins over the global one. ``python -m lookup_knowledge.adapters.cli.eval`` runs the
group on its own.
"""

from __future__ import annotations

from lookup_knowledge.adapters.cli.context import command_group
from lookup_knowledge.adapters.cli.eval.replay import replay
from lookup_knowledge.adapters.cli.eval.run import run

eval_app = command_group(
    name="eval",
    help="Measure retrieval quality on a BEIR test collection; replay logged lookups "
    "under another configuration.",
)
eval_app.command("run")(run)
eval_app.command("replay")(replay)


def main() -> None:
    """``python -m lookup_knowledge.adapters.cli.eval``: the group on its own, with the
    exit codes and error lines of ``lookup-knowledge``."""
    from lookup_knowledge.adapters.cli.app import run as run_cli

    run_cli(eval_app)


__all__ = ["eval_app", "main"]
