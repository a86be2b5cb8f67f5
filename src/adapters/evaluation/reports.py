"""Eval and replay reports: JSON on disk, rich tables, and a chart (PNG and a
self-contained HTML page that embeds it)."""

from __future__ import annotations

import base64
import html
import io
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.table import Table

from lookup_knowledge.adapters.extras import load
from lookup_knowledge.application.evaluation import (
    ConfigurationResult,
    EvalReport,
    ReplayReport,
)

#: How a measure is titled in tables and charts (ir-measures' RR@10 averaged is MRR@10).
DISPLAY = {"RR@10": "MRR@10"}


def display(measure: str) -> str:
    return DISPLAY.get(measure, measure)


def write_json(data: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    return path


def _fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _cap(result: ConfigurationResult) -> str:
    cap = result.settings.get("maxChunksPerDocument")
    return "off" if cap is None else str(cap)


def _on(value: object) -> str:
    return "on" if value else "off"


# --------------------------------------------------------------------------- eval


_CUTOFF = re.compile(r"^R@(\d+)$")


def _beyond_depth(measure: str, result: ConfigurationResult) -> bool:
    """Recall at k > return-n counts documents that cannot be returned: it only repeats
    Recall@return-n, so the table shows "-" instead of a number that looks like more."""
    match = _CUTOFF.match(measure)
    return_n = result.settings.get("returnN")
    if match is None or not isinstance(return_n, int):
        return False
    return int(match.group(1)) > return_n


def table_measures(report: EvalReport) -> list[str]:
    """The measures worth a column: a recall cut-off deeper than every configuration's
    return-n is left out (the JSON report keeps every measure)."""
    return [
        m
        for m in report.measures
        if not report.configurations or not all(_beyond_depth(m, c) for c in report.configurations)
    ]


def eval_rows(report: EvalReport) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the comparison table (shared by the terminal and HTML)."""
    measures = table_measures(report)
    header = [
        "configuration",
        "mode",
        "cap",
        "grouping",
        "rerank",
        *(display(m) for m in measures),
        "docs/result",
        "no-evidence",
        "found",
        "abstained",
        "errors",
        "p50 ms",
        "p95 ms",
    ]
    rows: list[list[str]] = []
    for c in report.configurations:
        rows.append(
            [
                c.name,
                str(c.settings.get("mode", "")),
                _cap(c),
                _on(c.settings.get("engineGrouping")),
                _on(c.settings.get("rerank")),
                *("-" if _beyond_depth(m, c) else f"{c.metrics[m]:.4f}" for m in measures),
                _fmt(c.distinct_documents, 2),
                f"{c.no_evidence_rate:.1%}",
                f"{c.found_rate:.1%}",
                "-" if c.abstention_rate is None else f"{c.abstention_rate:.1%}",
                f"{c.error_rate:.1%}",
                _fmt(c.latency_p50_ms, 1),
                _fmt(c.latency_p95_ms, 1),
            ]
        )
    return header, rows


def eval_table(report: EvalReport) -> Table:
    queries = report.configurations[0].queries if report.configurations else 0
    table = Table(title=f"Eval {report.run_id}: {report.dataset}, {queries} queries")
    header, rows = eval_rows(report)
    for index, column in enumerate(header):
        table.add_column(column, justify="left" if index < 5 else "right")
    measure_columns = range(5, 5 + len(table_measures(report)))
    best = {
        i: max((row[i] for row in rows if row[i] != "-"), key=float, default="")
        for i in measure_columns
    }
    for row in rows:
        table.add_row(
            *(
                f"[bold]{cell}[/]" if i in best and cell == best[i] else cell
                for i, cell in enumerate(row)
            )
        )
    return table


def _figure(report: EvalReport) -> Any:
    # The Agg canvas of a Figure: no pyplot global state.
    figure_type = load("eval", "the eval report's figure", "matplotlib.figure").Figure

    configs = report.configurations
    names = [c.name for c in configs]
    measures = table_measures(report)
    fig = figure_type(figsize=(max(8.0, 1.6 * len(configs) + 5.0), 8.5), layout="constrained")
    top, bottom_left, bottom_right = fig.subplot_mosaic([["q", "q"], ["d", "l"]]).values()
    width = 0.8 / max(len(configs), 1)
    for i, c in enumerate(configs):
        xs = [m + (i - (len(configs) - 1) / 2) * width for m in range(len(measures))]
        bars = top.bar(xs, [c.metrics[m] for m in measures], width, label=c.name)
        top.bar_label(bars, fmt="%.2f", fontsize=7, padding=1)
    top.set_xticks(range(len(measures)), [display(m) for m in measures])
    top.set_ylim(0, 1.22)
    top.set_ylabel("score (mean over queries)")
    top.set_title(f"{report.dataset}: retrieval quality per configuration ({report.run_id})")
    top.legend(fontsize=8, ncols=min(len(configs), 6), loc="upper center")
    top.grid(axis="y", alpha=0.3)

    positions = range(len(configs))
    docs = [c.distinct_documents or 0.0 for c in configs]
    bars = bottom_left.bar(positions, docs, color="tab:green")
    bottom_left.bar_label(bars, fmt="%.2f", fontsize=7)
    bottom_left.set_xticks(positions, names, rotation=30, ha="right", fontsize=8)
    bottom_left.set_ylabel("distinct documents per result")
    no_evidence = [100.0 * c.no_evidence_rate for c in configs]
    if any(no_evidence):
        twin = bottom_left.twinx()
        twin.plot(positions, no_evidence, "o", color="tab:red", label="no-evidence %")
        twin.set_ylabel("no-evidence %", color="tab:red")
        twin.set_ylim(bottom=0)
    bottom_left.set_title("result diversity")
    bottom_left.grid(axis="y", alpha=0.3)

    half = 0.38
    p50 = [c.latency_p50_ms or 0.0 for c in configs]
    p95 = [c.latency_p95_ms or 0.0 for c in configs]
    b50 = bottom_right.bar([p - half / 2 for p in positions], p50, half, label="p50")
    b95 = bottom_right.bar([p + half / 2 for p in positions], p95, half, label="p95")
    bottom_right.bar_label(b50, fmt="%.0f", fontsize=7)
    bottom_right.bar_label(b95, fmt="%.0f", fontsize=7)
    bottom_right.set_xticks(positions, names, rotation=30, ha="right", fontsize=8)
    bottom_right.set_ylabel("lookup latency (ms, recorded)")
    bottom_right.set_title("latency")
    bottom_right.legend(fontsize=8)
    bottom_right.grid(axis="y", alpha=0.3)
    return fig


def chart_png(report: EvalReport) -> bytes:
    buffer = io.BytesIO()
    _figure(report).savefig(buffer, format="png", dpi=110)
    return buffer.getvalue()


def calibration_rows(report: EvalReport) -> tuple[list[str], list[list[str]]]:
    """Relevance bins (rows) by configuration (columns): returned blocks and the share
    of them judged relevant, ``blocks: share``."""
    configs = report.configurations
    header = ["relevance", *(c.name for c in configs)]
    bins = list(configs[0].calibration) if configs else []
    rows: list[list[str]] = []
    for index, first in enumerate(bins):
        row = [f"{first.low:.1f}-{first.high:.1f}"]
        for c in configs:
            b = c.calibration[index] if index < len(c.calibration) else None
            share = None if b is None else b.relevant_share
            row.append("-" if b is None or share is None else f"{b.blocks}: {share:.2f}")
        rows.append(row)
    return header, rows


def _html_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


_STYLE = (
    "body{font-family:system-ui,sans-serif;margin:2em;color:#222}"
    "table{border-collapse:collapse;font-size:14px;margin:1em 0}"
    "th,td{border:1px solid #ccc;padding:4px 8px;text-align:right}"
    "th:first-child,td:first-child{text-align:left}"
    "th{background:#f3f3f3}img{max-width:100%}code{background:#f3f3f3;padding:1px 4px}"
)


def write_html(report: EvalReport, path: Path, png: bytes | None = None) -> Path:
    """One self-contained page: the table, the chart (inline PNG) and the settings."""
    header, rows = eval_rows(report)
    picture = png if png is not None else chart_png(report)
    encoded = base64.b64encode(picture).decode("ascii")
    settings_rows = [
        [c.name, c.session_id, json.dumps(dict(c.settings)), json.dumps(dict(c.changes))]
        for c in report.configurations
    ]
    ingest = report.ingest.as_dict() if report.ingest is not None else None
    page = (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>Eval {html.escape(report.run_id)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>Eval {html.escape(report.run_id)}: {html.escape(report.dataset)}</h1>"
        f"<p>{report.configurations[0].queries if report.configurations else 0} queries; "
        f"started {html.escape(report.started_at.isoformat())}, finished "
        f"{html.escape(report.finished_at.isoformat())}. Metrics are means over all "
        "queries of the document-level run read back from the audit store "
        "(MRR@10 = mean RR@10); docs/result is over results with evidence.</p>"
        + _html_table(header, rows)
        + f"<img alt='eval chart' src='data:image/png;base64,{encoded}'>"
        + "<h2>Calibration</h2><p>Returned blocks per relevance bin, and the share of them "
        "judged relevant (blocks of unanswerable queries never are): "
        "<code>blocks: share</code>.</p>"
        + _html_table(*calibration_rows(report))
        + "<h2>Configurations</h2>"
        + _html_table(["configuration", "audit session", "settings", "changes"], settings_rows)
        + (
            f"<h2>Ingest</h2><pre>{html.escape(json.dumps(ingest, indent=2))}</pre>"
            if ingest
            else ""
        )
        + "</body></html>\n"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    return path


# --------------------------------------------------------------------------- replay


def replay_summary_table(report: ReplayReport) -> Table:
    table = Table(title=f"Replay {report.replay_session_id}")
    table.add_column("measure")
    table.add_column("value", justify="right")
    rows = [
        ("queries replayed", str(len(report.queries))),
        ("mean Jaccard (document_ids)", f"{report.mean_jaccard:.4f}"),
        (f"mean RBO (p={report.rbo_persistence})", f"{report.mean_rbo:.4f}"),
        ("unchanged (same ids, same order)", str(report.unchanged)),
        ("lost all evidence", str(len(report.lost_all))),
        ("gained evidence", str(len(report.gained))),
    ]
    threshold = report.threshold
    if threshold is not None:
        rule = f"mean {threshold.measure.value} >= {threshold.min_overlap}"
        if threshold.max_lost is not None:
            rule += f", lost <= {threshold.max_lost}"
        verdict = "[green]PASS[/]" if report.passed else "[red]FAIL[/]"
        rows.append((f"threshold ({rule})", verdict))
    for name, value in rows:
        table.add_row(name, value)
    return table


def replay_queries_table(report: ReplayReport, limit: int = 20) -> Table:
    """The queries whose evidence changed most (lowest RBO first)."""
    changed = sorted(
        (q for q in report.queries if not q.unchanged), key=lambda q: (q.rbo, q.jaccard)
    )
    table = Table(
        title=f"Changed queries ({len(changed)} of {len(report.queries)}; lowest RBO first)"
    )
    for column in ("step", "query", "jaccard", "rbo", "before", "after", "status"):
        table.add_column(
            column, overflow="fold", justify="right" if column in ("jaccard", "rbo") else "left"
        )
    for q in changed[:limit]:
        text = " ".join(q.query.split())
        table.add_row(
            q.step_id or "-",
            text if len(text) <= 50 else text[:49] + "…",
            f"{q.jaccard:.3f}",
            f"{q.rbo:.3f}",
            str(len(q.before)),
            str(len(q.after)),
            "[red]lost all[/]" if q.lost_all else f"{q.status_before} -> {q.status_after}",
        )
    return table
