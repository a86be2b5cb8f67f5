"""The tamper-evident trail: ``verify-log`` rate, and what chaining costs the writer.

(a) Write: N records (5 evidence blocks of ~500 characters shown text each, ~13 KB of
    retrieval details like a real lookup's) moved into the store in batches of 1024 by
    ``SqlBatchWriter`` (what the journal mover's thread does), without and with the
    chain (hashing, the chain rows, the head row); interleaved rounds, best of each.
    The lookup itself never waits for this: it returns once the journal append is
    durable (``audit.durability=fsync``), so the ratio is the writer thread's, not the
    lookup's.
(c) The lookup's side: ``record`` as the container builds the recorder (journal
    fsync'd, write-behind, the mover lingering 50 ms), without and with the chain, on
    two SQLite files, interleaved in blocks of 50 records in rotating order; p50/p95 of
    what ``record`` costs the caller while the mover thread (hashing, chaining, signing)
    runs beside it.
(b) Verify: ``SqlAuditTrail.verify_log`` over the whole chain (every record rehashed
    with its evidence rows, every link, the checkpoint's signature); records/s of wall
    time and per CPU second of the verifying process (SQLite runs in it; on a machine
    shared with other work the second is the one that compares).

(d) With ``--baseline REV``: verify-log of the same chain by the code of git revision
    REV (its ``src`` extracted to a temp folder, run with ``PYTHONPATH``) and by this
    tree's, each in a fresh process, interleaved rounds, best of each: records/s wall
    and per CPU second, and the ratio. ``--verify-only`` skips (a) and (c).

Usage:
    .venv/bin/python benchmarks/bench_verify_log.py [--records 50000] [--url URL]
        [--baseline REV] [--verify-only]

Without ``--url`` a temp SQLite file; a PostgreSQL URL names a database whose tables the
benchmark creates (in a private schema, dropped afterwards).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from lookup_knowledge.adapters.audit import create_audit_engine, upgrade_database
from lookup_knowledge.adapters.audit.chain import AuditChain
from lookup_knowledge.adapters.audit.sql_writer import BATCH_SIZE, SqlBatchWriter
from lookup_knowledge.adapters.audit.trail import SqlAuditTrail
from lookup_knowledge.adapters.signing import TrailSigner
from lookup_knowledge.application.ports import EvidenceRecord, ToolInvocation

WORDS = [
    "refund",
    "invoice",
    "payment",
    "failover",
    "replica",
    "pool",
    "connection",
    "timeout",
    "webhook",
    "retry",
]


def details(rng: random.Random) -> dict[str, object]:
    """~13 KB of nested trace, the size a real lookup's retrieval details have."""
    hits = [
        {
            "document_id": f"doc-{rng.randrange(10_000)}.md#chunk-{i}",
            "dense": rng.random(),
            "sparse": rng.random() * 20,
            "rank": i,
            "reasons": ["dense", "sparse"],
            "title": " ".join(rng.choices(WORDS, k=6)),
        }
        for i in range(40)
    ]
    return {
        "version": 1,
        "retrievalTrace": {"passes": [{"filter": None, "hits": 40}], "hits": hits},
        "timingsMs": {"embed": rng.random() * 10, "search": rng.random() * 20},
    }


def make_records(n: int, seed: int = 7) -> list[ToolInvocation]:
    rng = random.Random(seed)
    base = datetime(2030, 1, 1, tzinfo=UTC)
    out = []
    for i in range(n):
        s = f"bench-{i // 20}"
        evidence = tuple(
            EvidenceRecord(
                rank=r,
                document_id=f"doc-{rng.randrange(10_000)}.md#chunk-{r}",
                doc_id="doc",
                chunk_index=r,
                source="doc.md",
                category="billing",
                score_before=rng.random(),
                score_after=rng.random(),
                projected=True,
                in_context_pack=r <= 3,
                content_hash=uuid.uuid4().hex * 2,
                shown_text=" ".join(rng.choices(WORDS, k=60)),
                row_tenant="",
            )
            for r in range(1, 6)
        )
        out.append(
            ToolInvocation(
                id=str(uuid.uuid4()),
                session_id=s,
                query=" ".join(rng.choices(WORDS, k=6)),
                status="ok",
                started_at=base + timedelta(milliseconds=i),
                duration_ms=rng.random() * 50,
                returned_count=5,
                retrieval_details=details(rng),
                evidence=evidence,
            )
        )
    return out


def fresh(url: str | None, folder: Path, name: str) -> tuple[object, str | None]:
    if url is None:
        return create_audit_engine(f"sqlite:///{folder / name}.db"), None
    schema = f"bench_trail_{name}_{uuid.uuid4().hex[:8]}"
    admin = create_engine(make_url(url), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    admin.dispose()
    return create_audit_engine(
        make_url(url).update_query_dict({"options": f"-csearch_path={schema}"})
    ), schema


def drop(url: str | None, schema: str | None) -> None:
    if url is None or schema is None:
        return
    admin = create_engine(make_url(url), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
    admin.dispose()


def write(engine: object, records: list[ToolInvocation], chain: AuditChain | None) -> float:
    writer = SqlBatchWriter(engine, chain=chain)  # type: ignore[arg-type]
    started = time.perf_counter()
    for start in range(0, len(records), BATCH_SIZE):
        writer.write(records[start : start + BATCH_SIZE])
    return time.perf_counter() - started


def bench_record(records: list[ToolInvocation], folder: Path, signer: TrailSigner) -> None:
    from lookup_knowledge.adapters import builders
    from lookup_knowledge.adapters.audit import build_sql_recorder

    systems = {}
    engines = []
    for label in ("without", "with"):
        e = create_audit_engine(f"sqlite:///{folder / ('rec-' + label)}.db")
        upgrade_database(e)
        engines.append(e)
        chain = AuditChain(e, signer) if label == "with" else None
        systems[label] = build_sql_recorder(
            e,
            folder / f"journal-{label}",
            write_behind=True,
            linger_s=builders.AUDIT_LINGER_S,
            chain=chain,
        )
    times: dict[str, list[float]] = {k: [] for k in systems}
    names = list(systems)
    block = 50
    for b, start in enumerate(range(0, len(records), block)):
        order = names[b % 2 :] + names[: b % 2]
        for name in order:
            for r in records[start : start + block]:
                t0 = time.perf_counter()
                systems[name].record(dataclasses.replace(r, id=str(uuid.uuid4())))
                times[name].append((time.perf_counter() - t0) * 1000)
    for recorder in systems.values():
        assert recorder.flush(timeout_s=300)
        recorder.close()
    for e in engines:
        e.dispose()
    p50 = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
    p95 = {k: sorted(v)[int(len(v) * 0.95)] for k, v in times.items()}
    print(f"record() as a lookup pays it, {len(records)} records each, interleaved:")
    for name in names:
        print(f"  {name:7s} the chain  p50 {p50[name]:.3f} ms  p95 {p95[name]:.3f} ms")
    print(
        f"  with / without: p50 {p50['with'] / p50['without']:.2f}x, p95 {p95['with'] / p95['without']:.2f}x"
    )


# Run in a fresh process (this tree's code, or a baseline's through PYTHONPATH): one
# verify-log of the chain at argv[1] with the key at argv[2]; prints its timings.
VERIFY_ONCE = """
import json, sys, time
from pathlib import Path
from lookup_knowledge.adapters.audit import create_audit_engine
from lookup_knowledge.adapters.audit.chain import AuditChain
from lookup_knowledge.adapters.audit.trail import SqlAuditTrail
from lookup_knowledge.adapters.signing import TrailSigner
engine = create_audit_engine(sys.argv[1])
chain = AuditChain(engine, TrailSigner.load_or_create(Path(sys.argv[2])), every=10**9,
                   interval_s=3600)
started, cpu = time.perf_counter(), time.process_time()
report = SqlAuditTrail(engine, chain).verify_log()
wall, cpu = time.perf_counter() - started, time.process_time() - cpu
assert report.intact, report.problem
print(json.dumps({"records": report.records, "wall": wall, "cpu": cpu}))
"""


def baseline_tree(revision: str, folder: Path) -> Path:
    """``src`` of ``revision`` as an importable ``lookup_knowledge`` under ``folder``."""
    root = Path(__file__).resolve().parent.parent
    tree = folder / "baseline"
    tree.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(root), "archive", revision, "src"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    (tree / "src").rename(tree / "lookup_knowledge")
    return tree


def verify_once(url: str, key: Path, pythonpath: Path | None) -> dict[str, float]:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    done = subprocess.run(
        [sys.executable, "-c", VERIFY_ONCE, url, str(key)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),  # not this tree's folder: PYTHONPATH decides the code
    )
    out: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def bench_versions(url: str, key: Path, baseline: Path, rounds: int) -> None:
    best: dict[str, dict[str, float]] = {}
    for round_ in range(rounds):
        order = [("before", baseline), ("after", None)]
        for name, path in order if round_ % 2 == 0 else order[::-1]:
            got = verify_once(url, key, path)
            mine = best.setdefault(name, {"wall": float("inf"), "cpu": float("inf")})
            mine["records"] = got["records"]
            mine["wall"] = min(mine["wall"], got["wall"])
            mine["cpu"] = min(mine["cpu"], got["cpu"])
    print(f"verify-log, before (baseline) and after (this tree), best of {rounds} each:")
    for name, got in best.items():
        n = got["records"]
        print(
            f"  {name:6s} {n / got['wall']:9,.0f} records/s wall, "
            f"{n / got['cpu']:9,.0f} records/s per CPU second ({n:.0f} records)"
        )
    print(
        f"  after / before: {best['before']['wall'] / best['after']['wall']:.1f}x wall, "
        f"{best['before']['cpu'] / best['after']['cpu']:.1f}x per CPU second"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--url", default=None, help="PostgreSQL URL (default: temp SQLite)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--record-only", action="store_true", help="(c) only")
    parser.add_argument("--verify-only", action="store_true", help="(b) and (d) only")
    parser.add_argument("--baseline", default=None, help="git revision to compare with (d)")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-trail-"))
    try:
        records = make_records(args.records)
        signer = TrailSigner.load_or_create(folder / "key.pem")
        if args.verify_only:
            bench_verify_only(args, records, folder, signer)
            return
        bench_record(records[: min(len(records), 2000)], folder, signer)
        if args.record_only:
            return
        plain: list[float] = []
        chained: list[float] = []
        engine = None
        schema = None
        for round_ in range(args.rounds):
            for label, times in (("plain", plain), ("chained", chained)):
                e, sch = fresh(args.url, folder, f"{label}{round_}")
                upgrade_database(e)  # type: ignore[arg-type]
                chain = (
                    AuditChain(e, signer, every=10**9, interval_s=3600)  # type: ignore[arg-type]
                    if label == "chained"
                    else None
                )
                times.append(
                    write(e, [dataclasses.replace(r, id=str(uuid.uuid4())) for r in records], chain)
                )
                if label == "chained" and round_ == args.rounds - 1:
                    engine, schema = e, sch
                    assert chain is not None
                    chain.checkpoint("flush")
                else:
                    e.dispose()  # type: ignore[attr-defined]
                    drop(args.url, sch)
        n = args.records
        print(f"write {n} records (5 evidence rows, ~13 KB details each), batches of {BATCH_SIZE}:")
        print(f"  without the chain  {n / min(plain):9.0f} records/s")
        print(
            f"  with the chain     {n / min(chained):9.0f} records/s  ({min(chained) / min(plain):.2f}x the time)"
        )
        assert engine is not None
        assert chain is not None
        trail = SqlAuditTrail(engine, chain)  # type: ignore[arg-type]
        records_verified, best, cpu_best = time_verify(trail, args.rounds)
        print(
            f"verify-log over {records_verified} records: {best:.2f} s wall, "
            f"{records_verified / best:,.0f} records/s; {cpu_best:.2f} s of this process's CPU, "
            f"{records_verified / cpu_best:,.0f} records/s per CPU second"
        )
        if args.baseline is not None:
            bench_versions(
                engine_url(engine), folder / "key.pem", baseline_tree(args.baseline, folder),
                args.rounds,
            )  # fmt: skip
        engine.dispose()  # type: ignore[attr-defined]
        drop(args.url, schema)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def time_verify(trail: SqlAuditTrail, rounds: int) -> tuple[int, float, float]:
    """``verify_log`` ``rounds`` times: the records verified, the best wall and CPU seconds."""
    best = cpu_best = float("inf")
    records = 0
    for _ in range(rounds):
        started, cpu = time.perf_counter(), time.process_time()
        report = trail.verify_log()
        best = min(best, time.perf_counter() - started)
        cpu_best = min(cpu_best, time.process_time() - cpu)
        assert report.intact, report.problem
        records = report.records
    return records, best, cpu_best


def engine_url(engine: object) -> str:
    return engine.url.render_as_string(hide_password=False)  # type: ignore[attr-defined,no-any-return]


def bench_verify_only(
    args: argparse.Namespace, records: list[ToolInvocation], folder: Path, signer: TrailSigner
) -> None:
    """(b) and (d) only: one chained store of ``--records`` records."""
    e, schema = fresh(args.url, folder, "verify")
    try:
        upgrade_database(e)  # type: ignore[arg-type]
        chain = AuditChain(e, signer, every=10**9, interval_s=3600)  # type: ignore[arg-type]
        write(e, records, chain)
        chain.checkpoint("flush")
        trail = SqlAuditTrail(e, chain)  # type: ignore[arg-type]
        records_verified, best, cpu_best = time_verify(trail, args.rounds)
        print(
            f"verify-log in this process over {records_verified} records: "
            f"{records_verified / best:,.0f} records/s wall, "
            f"{records_verified / cpu_best:,.0f} records/s per CPU second"
        )
        if args.baseline is not None:
            bench_versions(
                engine_url(e), folder / "key.pem", baseline_tree(args.baseline, folder),
                args.rounds,
            )  # fmt: skip
    finally:
        e.dispose()  # type: ignore[attr-defined]
        drop(args.url, schema)


if __name__ == "__main__":
    main()
