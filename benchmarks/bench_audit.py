"""Audit store benchmark.

(a) Write cost: ``SqlToolInvocationRecorder.record`` with 5 evidence rows per record, on
    SQLite (a temp file, WAL, synchronous=FULL) and PostgreSQL; sequential (the cost a
    lookup pays, "record before return") and with concurrent writers.
(b) Read cost at scale: loads N invocations (default 1,000,000) with ~5 evidence rows
    each into a dedicated PostgreSQL database (created and dropped here), then prints
    ``EXPLAIN (ANALYZE, BUFFERS)`` of the citation-verification statement for one session
    and the median/p95 latency of ``verify_citations`` (and of the ``VerifyCitations``
    use case, which flushes the recorder first) over many calls.

(c) ``--in-lookups N``: the audit cost a lookup really pays, measured inside real lookups
    (a hot loop of ``record`` calls understates it: no embedder threads, no search, no
    background writer competing for the two cores). On the SciFact eval collection
    (``_scifact.py``), per query and interleaved in rotating order: the lookup with
    recording off, with the product recorder (SQLite in the data dir, journal fsync'd,
    write-behind), with ``audit.durability=process``, and (``--compare-inline``) with an
    inline recorder (moved into the database before ``record`` returns: the pre-journal
    contract; its fsyncs load the disk the others share). Embed time excluded as in
    ``bench_pipeline_overhead.py`` (wall - retrievalTrace timingsMs.embed); prints p50s,
    the audit-on / audit-off ratios and the disk's fsync latency. No PostgreSQL needed.

Usage:
    BENCH_DATABASE_URL=postgresql+psycopg://postgres@127.0.0.1:5432/postgres \
        python benchmarks/bench_audit.py [--invocations 1000000] [--verify-calls 200]
    python benchmarks/bench_audit.py --writes-only   # (a) only
    python benchmarks/bench_audit.py --in-lookups 300 [--data-dir DIR]   # (c) only
    python benchmarks/bench_audit.py --durability 1000   # (d) only

(d) ``--durability N``: what ``record`` costs the lookup under each ``audit.durability``,
    each recorder built as the container builds it: ``fsync`` (journal fsync'd,
    write-behind), ``process`` (journal not fsync'd, write-behind) and ``database``
    (committed in the database before it returns), on SQLite (a temp file) and, with a
    URL, PostgreSQL; N records sequentially, then N across ``--threads`` writers; runs
    interleaved per block of 50 records in rotating order; prints p50/p95 and the ratios
    to ``fsync``.

The URL names any database on the server; the benchmark connects there to create and
finally drop its own database (``--bench-db``, default ``lookup_bench``).
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import URL, make_url

from lookup_knowledge.adapters.audit import (
    SqlAuditQueries,
    SqlToolInvocationRecorder,
    build_sql_recorder,
    create_audit_engine,
    upgrade_database,
)
from lookup_knowledge.adapters.audit.models import invocation_evidence, tool_invocation
from lookup_knowledge.adapters.audit.queries import citation_sources_statement
from lookup_knowledge.adapters.durable_files import DurableFiles
from lookup_knowledge.application.ids import uuid7
from lookup_knowledge.application.ports import EvidenceRecord, RecordOutcome, ToolInvocation
from lookup_knowledge.application.verify_citations import VerifyCitations, citations_in_store

SESSION_LEN = 20  # invocations per generated session
DOCUMENTS = 200_000
EVIDENCE_PER = 5


# --------------------------------------------------------------------------- records


def make_record(session_id: str, n: int) -> ToolInvocation:
    at = datetime.now(UTC)
    docs = [f"doc-{(n * 31 + r * 17) % DOCUMENTS}#chunk-{r}" for r in range(1, EVIDENCE_PER + 1)]
    return ToolInvocation(
        id=str(uuid7(at)),
        session_id=session_id,
        query=f"benchmark query number {n} about refunds and invoices",
        status="ok",
        started_at=at,
        duration_ms=12.5,
        step_id=f"step-{n % 7}",
        tool_call_id=f"call-{n}",
        quality_score=0.7,
        relevance_level="high",
        retrieval_mode="dense",
        filter_applied="billing",
        retrieve_k=20,
        return_n=5,
        candidate_count=20,
        returned_count=EVIDENCE_PER,
        retrieval_details={
            "version": 1,
            "evidence": [
                {"document_id": d, "rank": r, "source": "guide.md", "score": 0.8}
                for r, d in enumerate(docs, 1)
            ],
            "contextPack": {"charBudget": 4000, "charsUsed": 2100, "included": docs[:3]},
            "retrievalTrace": {
                "mode": "dense",
                "passes": [{"filter": "billing", "hits": 20, "usable": 12, "durationMs": 3.2}],
                "counts": {"candidates": 20, "afterDedup": 15, "returned": 5},
            },
            "rerankTrace": [
                {"document_id": d, "relevance": 0.8, "finalScore": 0.9, "rankAfter": r}
                for r, d in enumerate(docs, 1)
            ],
        },
        evidence=tuple(
            EvidenceRecord(
                rank=r,
                document_id=d,
                doc_id=d.split("#")[0],
                chunk_index=r,
                source="guide.md",
                category="billing",
                score_before=0.8,
                score_after=0.9,
                projected=True,
                in_context_pack=r <= 3,
                content_hash="0" * 64,
            )
            for r, d in enumerate(docs, 1)
        ),
    )


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, math.ceil(p / 100 * len(ordered)) - 1))]


WRITTEN = {RecordOutcome.COMMITTED, getattr(RecordOutcome, "JOURNALED", RecordOutcome.COMMITTED)}


def bench_writes(
    label: str,
    engine: Engine,
    records: int,
    threads: int,
    *,
    write_behind: bool,
    linger_s: float = 0.0,
    fsync: bool = True,
    sequential: bool = True,
    trail: Path | None = None,
) -> None:
    """Records/s sustained (every record in the database: the clock stops after the
    final flush) and what each ``record`` call costs the caller (the lookup).
    ``trail``: a signing key file; the records are chained and checkpoints signed as the
    container's recorder does (``AuditChain``, a checkpoint every 1000 records and on the
    flush), and ``verify-log`` must pass after the run."""
    mode = "write-behind" if write_behind else "inline"
    if linger_s:
        mode += f" linger {linger_s:g} s"
    if not fsync:
        mode += " durability=process"
    with tempfile.TemporaryDirectory() as spool:
        # Only the write-behind run names the option: the inline run also runs on the
        # code before the journal (an A/B across it).
        extra: dict[str, object] = {"write_behind": True} if write_behind else {}
        if linger_s:
            extra["linger_s"] = linger_s
        if not fsync:
            extra["files"] = DurableFiles(enabled=False)
        if trail is not None:
            from lookup_knowledge.adapters.audit.chain import AuditChain

            mode += " trail"
            extra["chain"] = AuditChain(engine, AuditChain.key_file(trail))
        try:
            recorder = build_sql_recorder(engine, Path(spool), **extra)
        except TypeError:
            print(f"  {label:<11} {mode:<12} (not in this version)")
            return
        if sequential:
            bench_sequential(f"  {label:<11} {mode:<12}", recorder, records)

        per_thread = records // threads
        barrier = threading.Barrier(threads)
        errors: list[str] = []
        lock = threading.Lock()
        thread_latencies: list[float] = []
        writers_cpu: list[float] = []  # CPU seconds of each writer thread

        def work(t: int) -> None:
            sid = f"write-bench-{uuid.uuid4().hex[:8]}-{t}"
            mine: list[float] = []
            barrier.wait()
            cpu0 = time.thread_time()
            for n in range(per_thread):
                record = make_record(sid, n)
                t0 = time.perf_counter()
                if recorder.record(record) not in WRITTEN:
                    errors.append(sid)
                mine.append((time.perf_counter() - t0) * 1000)
            with lock:
                thread_latencies.extend(mine)
                writers_cpu.append(time.thread_time() - cpu0)

        workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
        start, cpu = time.perf_counter(), time.process_time()
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        if not recorder.flush(timeout_s=600):
            raise SystemExit(f"{label}: records still pending after the flush")
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
        report_threads(
            f"  {label:<11} {mode:<12}",
            per_thread * threads,
            threads,
            (elapsed, cpu, sum(writers_cpu)),
            thread_latencies,
            errors,
        )
        recorder.close()
        if trail is not None:
            check_trail(label, engine, extra["chain"])


def bench_sequential(head: str, recorder: SqlToolInvocationRecorder, records: int) -> None:
    """``records`` records one after the other: records/s sustained, ``record()``'s cost."""
    session_id = f"write-bench-{uuid.uuid4().hex[:8]}"
    latencies: list[float] = []
    start = time.perf_counter()
    for n in range(records):
        record = make_record(session_id, n)
        t0 = time.perf_counter()
        outcome = recorder.record(record)
        latencies.append((time.perf_counter() - t0) * 1000)
        if outcome not in WRITTEN:
            raise SystemExit(f"{head.strip()}: record {n} was {outcome}")
    if not recorder.flush(timeout_s=600):
        raise SystemExit(f"{head.strip()}: records still pending after the flush")
    elapsed = time.perf_counter() - start
    print(
        f"{head} sequential: {records} records x {EVIDENCE_PER} "
        f"evidence rows: {records / elapsed:,.0f} records/s sustained; record() "
        f"p50 {pct(latencies, 50):.2f} ms, p95 {pct(latencies, 95):.2f} ms"
    )


def report_threads(
    head: str,
    total: int,
    threads: int,
    times: tuple[float, float, float],
    latencies: list[float],
    errors: list[str],
) -> None:
    """A threaded run's rate, per CPU-second, the benchmark's own share (making the
    records) and the CPU per record split into the writer threads' and the others'.
    ``times``: wall seconds, process CPU seconds, the writer threads' CPU seconds."""
    elapsed, cpu, writers = times
    making = make_cost_s(total)  # the benchmark's own share of ``cpu``
    print(
        f"{head} {threads} threads: {total} records: "
        f"{total / elapsed:,.0f} records/s sustained ({total / cpu:,.0f} per CPU-second "
        f"of this process, making the records included; "
        f"{total / max(cpu - making, 1e-9):,.0f} without the {1e6 * making / total:.0f} us "
        f"per record of making them, {100 * making / cpu:.0f}% of the CPU); record() p50 "
        f"{pct(latencies, 50):.2f} ms, p95 {pct(latencies, 95):.2f} ms"
        f"{' (ERRORS: ' + str(len(errors)) + ')' if errors else ''}"
    )
    print(
        f"{' ' * len(head)} CPU per record: {1e6 * cpu / total:.0f} us, of which the "
        f"writer threads {1e6 * writers / total:.0f} us (making the records "
        f"~{1e6 * making / total:.0f}, record() the rest) and the other threads (the "
        f"journal mover: rows, COPY, chain, checkpoints) {1e6 * (cpu - writers) / total:.0f} us"
    )


def check_trail(label: str, engine: Engine, chain: object) -> None:
    """verify-log over what the runs chained: a benchmark that broke the trail fails."""
    from lookup_knowledge.adapters.audit.trail import SqlAuditTrail

    report = SqlAuditTrail(engine, chain).verify_log()  # type: ignore[arg-type]
    if not report.intact:
        raise SystemExit(f"{label}: verify-log failed: {report.problem}")
    print(f"  {label:<11} verify-log intact: {report.records} records")


def make_cost_s(records: int) -> float:
    """CPU seconds this thread spends making ``records`` records (uuid7, validation):
    the benchmark's share of a run's CPU, not the recorder's."""
    sample = min(records, 2000)
    cpu = time.process_time()
    for n in range(sample):
        make_record("make-cost", n)
    return (time.process_time() - cpu) * records / sample


def bench_transfer(label: str, engine: Engine, records: int) -> None:
    """The background writer's own rate: ``records`` entries waiting in a recorder's
    journal (appended directly, no writer running: what piles up during a burst or an
    outage) moved into the database by one ``flush``, in batches of ``BATCH_SIZE`` (one
    transaction each; COPY on PostgreSQL, executemany on SQLite). Also per CPU-second of
    this process: on a loaded machine the wall-clock rate is the share of CPU it got."""
    try:
        from lookup_knowledge.adapters.audit.sql_writer import BATCH_SIZE
    except ImportError:
        print(f"  {label:<11} batch transfer (not in this version)")
        return
    session_ids = [f"transfer-bench-{uuid.uuid4().hex[:8]}-{t}" for t in range(8)]
    pending = [make_record(session_ids[n % 8], n) for n in range(records)]
    with tempfile.TemporaryDirectory() as spool:
        recorder = build_sql_recorder(
            engine, Path(spool), background_drain_s=None, files=DurableFiles(enabled=False)
        )
        for record in pending:
            recorder._journal.append(record)
        start, cpu = time.perf_counter(), time.process_time()
        if not recorder.flush(timeout_s=600):
            raise SystemExit(f"{label}: records still pending after the flush")
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
        recorder.close()
    print(
        f"  {label:<11} batch transfer (journal -> database, {BATCH_SIZE} per transaction): "
        f"{records} records x {EVIDENCE_PER} evidence rows in {elapsed:.2f} s: "
        f"{records / elapsed:,.0f} records/s ({records / cpu:,.0f} per CPU-second "
        f"of this process); load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cpus"
    )


def bench_all_writes(
    label: str,
    engine: Engine,
    records: int,
    threads: int,
    *,
    write_behind_only: bool = False,
    trail: Path | None = None,
) -> None:
    """Inline and write-behind (no linger, and the container's linger), then the batch
    transfer; ``write_behind_only``: the write-behind runs only (the end-to-end rate)."""
    from lookup_knowledge.adapters.builders import AUDIT_LINGER_S

    if not write_behind_only:
        bench_writes(label, engine, records, threads, write_behind=False)
    sequential = not write_behind_only  # the end-to-end rate is the writers' one
    for linger_s in (0.0, AUDIT_LINGER_S):
        bench_writes(
            label,
            engine,
            records,
            threads,
            write_behind=True,
            linger_s=linger_s,
            sequential=sequential,
            trail=trail,
        )
    if write_behind_only:  # the rate without the disk's fsync: what the code allows
        bench_writes(
            label,
            engine,
            records,
            threads,
            write_behind=True,
            linger_s=AUDIT_LINGER_S,
            fsync=False,
            sequential=False,
            trail=trail,
        )
    if not write_behind_only:
        bench_transfer(label, engine, max(records, 10_000))


# --------------------------------------------------------------------------- bulk load

LOAD_INVOCATIONS = """
INSERT INTO tool_invocation (
    id, session_id, seq, step_id, tool_call_id, tool_name, query, status, error_code,
    error_message, quality_score, relevance_level, retrieval_mode, filter_applied,
    fallback_reason, retrieve_k, return_n, candidate_count, returned_count, started_at,
    duration_ms, trace_id, span_id, retrieval_details)
SELECT
    md5('inv' || g)::uuid,
    'bench-' || (g / :session_len),
    (g % :session_len) + 1,
    'step-' || (g % 7),
    'call-' || g,
    'lookup_knowledge',
    'benchmark query ' || g || ' about refunds, invoices and network access',
    CASE WHEN g % 10 = 0 THEN 'no_evidence' WHEN g % 97 = 0 THEN 'error' ELSE 'ok' END,
    CASE WHEN g % 97 = 0 AND g % 10 <> 0 THEN 'search_error' END,
    NULL,
    CASE WHEN g % 10 = 0 OR g % 97 = 0 THEN 0 ELSE 0.3 + (g % 70) / 100.0 END,
    CASE WHEN g % 10 = 0 THEN 'none' ELSE 'high' END,
    'dense',
    CASE WHEN g % 3 = 0 THEN 'billing' END,
    CASE WHEN g % 11 = 0 THEN 'filtered_pass_empty' END,
    20, 5, 20,
    CASE WHEN g % 10 = 0 OR g % 97 = 0 THEN 0 ELSE 5 END,
    :base + g * interval '1 second',
    5 + (g % 200) * 0.7,
    md5('t' || g), substr(md5('s' || g), 1, 16),
    jsonb_build_object(
        'version', 1,
        'evidence', jsonb_build_array(
            jsonb_build_object('document_id', 'doc-' || ((g * 31 + 17) % :docs) || '#chunk-1',
                               'rank', 1, 'score', 0.8),
            jsonb_build_object('document_id', 'doc-' || ((g * 31 + 34) % :docs) || '#chunk-2',
                               'rank', 2, 'score', 0.7)),
        'retrievalTrace', jsonb_build_object('mode', 'dense', 'passes', 1, 'returned', 5),
        'rerankTrace', jsonb_build_array())
FROM generate_series(:lo, :hi) AS g
"""

LOAD_EVIDENCE = """
INSERT INTO invocation_evidence (
    invocation_id, rank, session_id, document_id, doc_id, chunk_index, source, category,
    score_before, score_after, projected, in_context_pack, content_hash)
SELECT
    md5('inv' || g)::uuid,
    r,
    'bench-' || (g / :session_len),
    'doc-' || ((g * 31 + r * 17) % :docs) || '#chunk-' || r,
    'doc-' || ((g * 31 + r * 17) % :docs),
    r,
    'doc-' || ((g * 31 + r * 17) % :docs) || '.md',
    CASE WHEN g % 2 = 0 THEN 'billing' ELSE 'network' END,
    0.9 - r / 20.0, 0.95 - r / 20.0, true, r <= 3, md5('c' || g || '-' || r)
FROM generate_series(:lo, :hi) AS g, generate_series(1, :per) AS r
WHERE g % 10 <> 0 AND g % 97 <> 0
"""


def evidence_of(g: int) -> list[str]:
    if g % 10 == 0 or g % 97 == 0:
        return []
    return [f"doc-{(g * 31 + r * 17) % DOCUMENTS}#chunk-{r}" for r in range(1, EVIDENCE_PER + 1)]


def bulk_load(engine: Engine, invocations: int) -> None:
    """generate_series INSERT ... SELECT in batches, with the secondary indexes dropped
    and rebuilt (the same indexes the migration creates)."""
    secondary = [*tool_invocation.indexes, *invocation_evidence.indexes]
    with engine.begin() as conn:
        for index in secondary:
            index.drop(conn)
    params = {
        "session_len": SESSION_LEN,
        "docs": DOCUMENTS,
        "per": EVIDENCE_PER,
        "base": datetime(2030, 1, 1, tzinfo=UTC),
    }
    batch = 100_000
    t0 = time.perf_counter()
    for lo in range(0, invocations, batch):
        hi = min(invocations, lo + batch) - 1
        with engine.begin() as conn:
            conn.execute(text("SET LOCAL synchronous_commit = off"))
            conn.execute(text(LOAD_INVOCATIONS), {**params, "lo": lo, "hi": hi})
            conn.execute(text(LOAD_EVIDENCE), {**params, "lo": lo, "hi": hi})
        done = hi + 1
        rate = done / (time.perf_counter() - t0)
        print(f"    loaded {done:>9,} invocations ({rate:,.0f}/s)", flush=True)
    t1 = time.perf_counter()
    with engine.begin() as conn:
        conn.execute(text("SET LOCAL maintenance_work_mem = '512MB'"))
        for index in secondary:
            index.create(conn)
    t2 = time.perf_counter()
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("VACUUM ANALYZE tool_invocation"))
        conn.execute(text("VACUUM ANALYZE invocation_evidence"))
        counts = conn.execute(
            text(
                "SELECT (SELECT count(*) FROM tool_invocation), "
                "(SELECT count(*) FROM invocation_evidence), "
                "pg_size_pretty(pg_total_relation_size('tool_invocation')), "
                "pg_size_pretty(pg_total_relation_size('invocation_evidence'))"
            )
        ).one()
    print(
        f"  load: {t1 - t0:.1f} s rows, {t2 - t1:.1f} s indexes, "
        f"{time.perf_counter() - t2:.1f} s vacuum/analyze"
    )
    print(
        f"  tool_invocation: {counts[0]:,} rows ({counts[2]}); "
        f"invocation_evidence: {counts[1]:,} rows ({counts[3]})"
    )


def cited_for(session_index: int, rng: random.Random) -> list[str]:
    first = session_index * SESSION_LEN
    returned = [d for g in range(first, first + SESSION_LEN) for d in evidence_of(g)]
    real = rng.sample(returned, 3)
    return [*real, f"made-up-{rng.randrange(10**9)}#chunk-0", f"doc-{DOCUMENTS + 5}#chunk-1"]


def explain_citations(engine: Engine, session_index: int, cited: list[str]) -> None:
    stmt = citation_sources_statement(f"bench-{session_index}", cited).compile(
        dialect=engine.dialect, compile_kwargs={"render_postcompile": True}
    )
    with engine.connect() as conn:
        plan = conn.exec_driver_sql(
            "EXPLAIN (ANALYZE, BUFFERS) " + str(stmt), stmt.params
        ).scalars()
        print("\n  Citation verification statement (bound parameters):")
        for line in str(stmt).splitlines():
            print("    " + line)
        print(f"  parameters: {dict(stmt.params)}")
        print("\n  EXPLAIN (ANALYZE, BUFFERS):")
        for line in plan:
            print("    " + line)


def bench_verify(engine: Engine, sessions: int, calls: int) -> None:
    queries = SqlAuditQueries(engine)
    rng = random.Random(7)
    picks = [rng.randrange(sessions) for _ in range(calls)]
    cited = [cited_for(s, rng) for s in picks]
    for s, c in zip(picks[:20], cited[:20], strict=True):  # warm the pool and caches
        citations_in_store(queries, f"bench-{s}", c)
    latencies: list[float] = []
    for s, c in zip(picks, cited, strict=True):
        t0 = time.perf_counter()
        report = citations_in_store(queries, f"bench-{s}", c)
        latencies.append((time.perf_counter() - t0) * 1000)
        if len(report.valid) != 3 or len(report.unknown) != 2:
            raise SystemExit(f"unexpected verdict for bench-{s}: {report}")
    print(
        f"\n  verify_citations over {calls} calls (random sessions, 3 real + 2 unknown ids): "
        f"median {statistics.median(latencies):.3f} ms, p95 {pct(latencies, 95):.3f} ms, "
        f"max {max(latencies):.3f} ms"
    )
    with tempfile.TemporaryDirectory() as spool:
        recorder = build_sql_recorder(engine, Path(spool))
        use_case = VerifyCitations(queries, recorder)
        latencies = []
        for s, c in zip(picks, cited, strict=True):
            t0 = time.perf_counter()
            report = use_case.execute(f"bench-{s}", c)
            latencies.append((time.perf_counter() - t0) * 1000)
        recorder.close()
    print(
        f"  VerifyCitations use case (flush + verify + pending): median "
        f"{statistics.median(latencies):.3f} ms, p95 {pct(latencies, 95):.3f} ms"
    )


# --------------------------------------------------------------------------- in lookups


def probe_fsync(folder: Path, count: int = 30, *, size: int = 1024, pause_s: float = 0.0) -> float:
    """p50 ms of an append of ``size`` bytes + fsync (the journal's cost on this disk right
    now), one every ``pause_s``. Back to back (the default) is the disk's best case; a
    virtual disk can answer a paced fsync an order of magnitude slower (0.05 ms back to
    back, 0.5-0.75 ms one every 3 ms, whatever the size, seen on 2026-12-05)."""
    path = folder / "fsync-probe"
    times: list[float] = []
    with open(path, "ab") as out:
        for _ in range(count):
            if pause_s:
                time.sleep(pause_s)
            out.write(b"x" * size)
            out.flush()
            t0 = time.perf_counter()
            os.fsync(out.fileno())
            times.append((time.perf_counter() - t0) * 1000)
    path.unlink()
    return statistics.median(times)


#: A lookup's journal line in the in-lookups run (SciFact, retrieve-k 20, hybrid traces):
#: 13.6 KB p50 on 2026-12-05.
LOOKUP_LINE_BYTES = 14_000


def bench_in_lookups(
    queries_n: int,
    warmup: int,
    data_dir: Path | None,
    embedder: str,
    compare_inline: bool,
    corpus_sample: int | None = None,
) -> None:
    from _scifact import DEFAULT_DATA_DIR, open_scifact, stats

    from lookup_knowledge.adapters.runtime import DisabledRecorder, InMemorySessionState
    from lookup_knowledge.application.lookup import LookupConfig, LookupKnowledge
    from lookup_knowledge.domain.settings import RetrievalSettings

    app, container, beir, collection = open_scifact(
        data_dir=data_dir or DEFAULT_DATA_DIR,
        embedder=embedder,
        # A small corpus: the judged documents of the queries run, plus that many others.
        limit_queries=None if corpus_sample is None else warmup + queries_n,
        corpus_sample=corpus_sample,
    )
    with app, tempfile.TemporaryDirectory() as spool:
        config = LookupConfig(retrieval=RetrievalSettings(retrieve_k=20))
        product = container.lookup().with_config(config)  # the container's recorder

        def variant(recorder: object, session_state: object) -> LookupKnowledge:
            return LookupKnowledge(
                search=container.search(),
                transformer=container.transformer(),
                recorder=recorder,  # type: ignore[arg-type]
                session_state=session_state,  # type: ignore[arg-type]
                clock=container.clock(),
                embedder=container.embedder(),
                config=config,
            )

        engine = container.audit_engine()
        recorders: list[SqlToolInvocationRecorder] = []
        systems = {
            "off": variant(DisabledRecorder(), InMemorySessionState()),
            "on": product,
        }
        if compare_inline:  # its own fsyncs and commits load the disk the others use
            recorders.append(build_sql_recorder(engine, Path(spool) / "inline"))
            systems["inline"] = variant(recorders[-1], container.session_state())
        from lookup_knowledge.adapters import builders

        try:  # audit.durability=process, as the container builds it (skipped before)
            recorders.append(
                build_sql_recorder(
                    engine,
                    Path(spool) / "process",
                    write_behind=True,
                    files=DurableFiles(enabled=False),
                    linger_s=builders.AUDIT_LINGER_S,
                )
            )
            systems["process"] = variant(recorders[-1], container.session_state())
        except (TypeError, AttributeError):
            pass
        fsync_ms = probe_fsync(Path(spool))
        paced_ms = probe_fsync(Path(spool), 60, size=LOOKUP_LINE_BYTES, pause_s=0.005)
        load_before = os.getloadavg()[0]
        queries = [q.text for q in beir.dataset.queries][: warmup + queries_n]
        stamp = uuid.uuid4().hex[:8]
        rows: dict[str, list[float]] = {name: [] for name in systems}
        walls: dict[str, list[float]] = {name: [] for name in systems}
        names = list(systems)
        for i, query in enumerate(queries):
            turn = i % len(names)
            order = names[turn:] + names[:turn]  # rotate: no system always first
            for name in order:
                t0 = time.perf_counter()
                result = systems[name].execute(query, session_id=f"in-lookups-{name}-{stamp}")
                wall = (time.perf_counter() - t0) * 1000
                if i < warmup:
                    continue
                timings = result.retrieval_trace["timingsMs"]
                rows[name].append(wall - timings.get("embed", 0.0))
                walls[name].append(wall)
        for recorder in (container.recorder(), *recorders):
            if not recorder.flush(timeout_s=120):
                raise SystemExit("audit records still pending after the run")
        for recorder in recorders:
            recorder.close()
        chunks = container.store().count()
        fsync_after_ms = probe_fsync(Path(spool))
        paced_after_ms = probe_fsync(Path(spool), 60, size=LOOKUP_LINE_BYTES, pause_s=0.005)

    n = len(rows["off"])
    print(
        f"(c) audit cost inside real lookups: {n} SciFact queries after {warmup} warm-up, "
        f"collection {collection} ({chunks} chunks, Milvus Lite), embedder {embedder}, "
        "retrieve-k 20, SQLite audit store; interleaved per query, rotating order; load "
        f"average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after on {os.cpu_count()} cpus"
    )
    print(
        f"  fsync of a 1 KB append on this disk: p50 {fsync_ms:.2f} ms before the run, "
        f"{fsync_after_ms:.2f} ms after; of a {LOOKUP_LINE_BYTES // 1000} KB append (a "
        f"lookup's line) every 5 ms: p50 {paced_ms:.2f} ms before, {paced_after_ms:.2f} ms after"
    )
    print(f"{'':52}{'p50 ms':>9}{'p95 ms':>9}{'mean ms':>9}")
    labels = {
        "off": "audit off",
        "on": "audit on (the product: journal fsync, write-behind)",
        "inline": "audit on, inline (SQL before return)",
        "process": "audit on, durability=process, write-behind",
    }
    for name in names:
        p50, p95, mean = stats(rows[name])
        print(f"  {labels[name] + ': wall - embed':52}{p50:9.2f}{p95:9.2f}{mean:9.2f}")
    off50, _, off_mean = stats(rows["off"])
    for name in names[1:]:
        p50, _, mean = stats(rows[name])
        wall50, _, _ = stats(walls[name])
        offwall50, _, _ = stats(walls["off"])
        print(
            f"  ratio {labels[name]} / audit off: p50 {p50 / off50:.3f}x, mean "
            f"{mean / off_mean:.3f}x (with the embed: p50 {wall50 / offwall50:.3f}x); "
            f"audit cost p50 {p50 - off50:+.2f} ms"
        )


# --------------------------------------------------------------------------- durability

DURABILITIES = ("fsync", "process", "database")


def durability_recorder(engine: Engine, spool: Path, durability: str) -> SqlToolInvocationRecorder:
    """The recorder ``_sql_recorder`` builds for ``audit.durability=durability``."""
    from lookup_knowledge.adapters import builders

    return build_sql_recorder(
        engine,
        spool,
        write_behind=True,
        linger_s=builders.AUDIT_LINGER_S,
        files=DurableFiles(enabled=durability != "process"),
        commit_before_return=durability == "database",  # type: ignore[call-arg]
    )


def bench_durability(label: str, engine: Engine, records: int, threads: int) -> None:
    block = 50
    with tempfile.TemporaryDirectory() as spool:
        recorders = {d: durability_recorder(engine, Path(spool) / d, d) for d in DURABILITIES}
        sequential: dict[str, list[float]] = {d: [] for d in DURABILITIES}
        stamp = uuid.uuid4().hex[:8]
        for b in range(0, records, block):
            turn = (b // block) % len(DURABILITIES)
            for d in DURABILITIES[turn:] + DURABILITIES[:turn]:
                for n in range(b, min(b + block, records)):
                    record = make_record(f"durability-{d}-{stamp}", n)
                    t0 = time.perf_counter()
                    if recorders[d].record(record) not in WRITTEN:
                        raise SystemExit(f"{label} {d}: record {n} not written")
                    sequential[d].append((time.perf_counter() - t0) * 1000)
        concurrent: dict[str, list[float]] = {}
        for d in DURABILITIES:
            lock = threading.Lock()
            found: list[float] = []

            def work(
                t: int, d: str = d, found: list[float] = found, lock: threading.Lock = lock
            ) -> None:
                mine = []
                for n in range(records // threads):
                    record = make_record(f"durability-{d}-{stamp}-{t}", n)
                    t0 = time.perf_counter()
                    recorders[d].record(record)
                    mine.append((time.perf_counter() - t0) * 1000)
                with lock:
                    found.extend(mine)

            workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
            for w in workers:
                w.start()
            for w in workers:
                w.join()
            concurrent[d] = found
        for recorder in recorders.values():
            if not recorder.flush(timeout_s=600):
                raise SystemExit(f"{label}: records still pending after the run")
            recorder.close()
    base_seq, base_con = pct(sequential["fsync"], 50), pct(concurrent["fsync"], 50)
    for d in DURABILITIES:
        s50, s95 = pct(sequential[d], 50), pct(sequential[d], 95)
        c50, c95 = pct(concurrent[d], 50), pct(concurrent[d], 95)
        print(
            f"  {label:<11} durability={d:<9} record() sequential p50 {s50:6.2f} ms "
            f"p95 {s95:6.2f} ms ({s50 / base_seq:5.2f}x fsync); {threads} threads p50 "
            f"{c50:6.2f} ms p95 {c95:6.2f} ms ({c50 / base_con:5.2f}x fsync)"
        )


# --------------------------------------------------------------------------- main


def server_url(raw: str | None) -> URL:
    if not raw:
        raise SystemExit("set BENCH_DATABASE_URL (or TEST_DATABASE_URL) or pass --url")
    url = make_url(raw)
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername="postgresql+psycopg")
    return url


def _write_behind_only(server: URL, name: str, args: argparse.Namespace) -> int:
    """PostgreSQL only: records written by ``--threads`` writers and moved, end to end."""
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    engine = create_audit_engine(server.set(database=name), pool_size=args.threads + 1)
    try:
        upgrade_database(engine)
        with tempfile.TemporaryDirectory() as keys:
            bench_all_writes(
                "PostgreSQL",
                engine,
                args.write_records,
                args.threads,
                write_behind_only=True,
                trail=Path(keys) / "signing-key.pem" if args.trail else None,
            )
        print(
            f"  load average at the end {os.getloadavg()[0]:.2f}; fsync of a 1 KB append "
            f"p50 {probe_fsync(Path(tempfile.gettempdir())):.2f} ms"
        )
    finally:
        engine.dispose()
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--url", default=os.environ.get("BENCH_DATABASE_URL") or os.environ.get("TEST_DATABASE_URL")
    )
    parser.add_argument("--bench-db", default="lookup_bench")
    parser.add_argument("--invocations", type=int, default=1_000_000)
    parser.add_argument("--write-records", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--verify-calls", type=int, default=200)
    parser.add_argument("--keep", action="store_true", help="do not drop the bench database")
    parser.add_argument(
        "--writes-only", action="store_true", help="(a) only: no bulk load, no verify"
    )
    parser.add_argument(
        "--write-behind-only",
        action="store_true",
        help="(a) on PostgreSQL, write-behind only: records/s end to end",
    )
    parser.add_argument(
        "--trail",
        action="store_true",
        help="--write-behind-only: chain the records and sign checkpoints as the container "
        "does (the tamper-evident trail), and run verify-log after each run",
    )
    parser.add_argument("--in-lookups", type=int, default=0, metavar="N", help="(c) only")
    parser.add_argument("--durability", type=int, default=0, metavar="N", help="(d) only")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--embedder", default="onnx-minilm")
    parser.add_argument(
        "--corpus-sample",
        type=int,
        default=None,
        metavar="N",
        help="(c) on a small corpus: the queries' judged documents plus N others",
    )
    parser.add_argument(
        "--compare-inline",
        action="store_true",
        help="(c): also the inline recorder (SQL before return), interleaved with the others",
    )
    args = parser.parse_args(argv)
    if args.in_lookups:
        bench_in_lookups(
            args.in_lookups,
            args.warmup,
            args.data_dir,
            args.embedder,
            args.compare_inline,
            args.corpus_sample,
        )
        return 0
    if args.durability:
        print(f"audit benchmark (d)  python {sys.version.split()[0]}  cpus {os.cpu_count()}")
        print(
            f"  fsync of a 1 KB append on this disk: p50 {probe_fsync(Path(tempfile.gettempdir())):.2f} ms"
        )
        with tempfile.TemporaryDirectory() as tmp:
            sqlite = create_audit_engine(f"sqlite:///{Path(tmp) / 'bench.db'}")
            upgrade_database(sqlite)
            bench_durability("SQLite", sqlite, args.durability, args.threads)
            sqlite.dispose()
        if args.url:
            pg = create_audit_engine(server_url(args.url), pool_size=args.threads + 1)
            upgrade_database(pg)
            bench_durability("PostgreSQL", pg, args.durability, args.threads)
            pg.dispose()
        return 0
    if not args.bench_db.replace("_", "").isalnum():
        raise SystemExit("--bench-db must be letters, digits and underscores")

    print(
        f"audit benchmark  python {sys.version.split()[0]}  cpus {os.cpu_count()}  load "
        f"average {os.getloadavg()[0]:.2f}"
    )
    if args.write_behind_only:
        return _write_behind_only(server_url(args.url), args.bench_db, args)
    print(
        "\n(a) write cost (SqlToolInvocationRecorder.record: durable in the journal before "
        "it returns; inline: also moved into the database before it returns; write-behind: "
        "moved by the background writer in batches, as the container builds it)"
    )
    with tempfile.TemporaryDirectory() as tmp:
        sqlite = create_audit_engine(f"sqlite:///{Path(tmp) / 'bench.db'}")
        upgrade_database(sqlite)
        bench_all_writes("SQLite", sqlite, args.write_records, args.threads)
        sqlite.dispose()

    server = server_url(args.url)
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    name = args.bench_db  # checked above: an identifier, never user text in SQL otherwise
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        conn.execute(text(f'CREATE DATABASE "{name}"'))
        version = conn.execute(text("SHOW server_version")).scalar_one()
    print(f"  PostgreSQL {version}, database {name}")
    engine = create_audit_engine(server.set(database=name), pool_size=args.threads + 1)
    try:
        upgrade_database(engine)
        bench_all_writes("PostgreSQL", engine, args.write_records, args.threads)
        if args.writes_only:
            return 0
        with engine.begin() as conn:  # the load starts from empty tables
            conn.execute(text("TRUNCATE invocation_evidence, tool_invocation"))

        print(f"\n(b) {args.invocations:,} invocations on PostgreSQL")
        bulk_load(engine, args.invocations)
        sessions = args.invocations // SESSION_LEN
        rng = random.Random(1)
        probe = rng.randrange(sessions)
        explain_citations(engine, probe, cited_for(probe, rng))
        bench_verify(engine, sessions, args.verify_calls)
        print("\n  (a') write cost with the 1M-row tables in place:")
        bench_all_writes("PostgreSQL", engine, min(args.write_records, 1000), args.threads)
    finally:
        engine.dispose()
        if not args.keep:
            with admin.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
