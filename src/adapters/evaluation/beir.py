"""Test collections in the BEIR layout.

    <dataset>/corpus.jsonl | corpus.jsonl.gz   {"_id", "title", "text", "metadata"?}
    <dataset>/queries.jsonl                    {"_id", "text", "metadata"?}
    <dataset>/qrels/<split>.tsv                query-id, corpus-id, score (header optional)

A qrels file may also be in TREC form (``qid iteration docid grade``, whitespace
separated). The queries an eval runs are those with at least one relevant (grade > 0)
document in the chosen qrels, in ``queries.jsonl`` order.

``BeirCorpusSource`` streams the corpus as documents for ``IngestDocuments``: one
corpus entry is one document (``doc_id`` = ``_id``, ``title`` = title, plain text), so
a long entry is chunked into several chunks like any other document. An entry whose
``metadata`` says ``"format": "markdown"`` is chunked as Markdown (headings become
breadcrumbs), with ``metadata.category`` / ``metadata.type`` as its category and source
type (the bundled sample corpus in this layout: ``benchmarks/datasets/northwind-zh``).
It can be restricted to a set of ids (a smaller corpus for fast runs).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from lookup_knowledge.application.evaluation import EvalDataset, EvalQuery
from lookup_knowledge.application.ports import (
    DocumentLoadFailure,
    DocumentSource,
    LoadedDocument,
    SourceDocument,
)
from lookup_knowledge.domain.errors import IngestError, InvalidInputError, LookupKnowledgeError

CORPUS_NAMES = ("corpus.jsonl", "corpus.jsonl.gz")
QUERIES_NAMES = ("queries.jsonl", "queries.jsonl.gz")
QRELS_SUFFIXES = (".tsv", ".txt", ".qrels")


def _open_text(path: Path) -> IO[str]:
    if path.name.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open("r", encoding="utf-8")


def _find(folder: Path, names: tuple[str, ...], what: str) -> Path:
    for name in names:
        candidate = folder / name
        if candidate.is_file():
            return candidate
    raise InvalidInputError(f"{folder} has no {what} ({' or '.join(names)})")


def corpus_path(dataset_dir: Path) -> Path:
    return _find(dataset_dir, CORPUS_NAMES, "corpus")


def queries_path(dataset_dir: Path) -> Path:
    return _find(dataset_dir, QUERIES_NAMES, "queries file")


def qrels_path(dataset_dir: Path, split: str | None = None, qrels_file: Path | None = None) -> Path:
    """The qrels file: ``qrels_file`` when given, else ``qrels/<split>.tsv``, else the
    only file in ``qrels/``."""
    if qrels_file is not None:
        if not qrels_file.is_file():
            raise InvalidInputError(f"qrels file not found: {qrels_file}")
        return qrels_file
    folder = dataset_dir / "qrels"
    if not folder.is_dir():
        raise InvalidInputError(f"{dataset_dir} has no qrels/ folder (or pass a qrels file)")
    available = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in QRELS_SUFFIXES)
    if split is not None:
        for path in available:
            if path.stem == split:
                return path
        raise InvalidInputError(
            f"no qrels for split {split!r} in {folder}; available: "
            + (", ".join(p.stem for p in available) or "none")
        )
    if len(available) == 1:
        return available[0]
    raise InvalidInputError(
        f"{folder} holds {len(available)} qrels files; choose a split: "
        + (", ".join(p.stem for p in available) or "none")
    )


# --------------------------------------------------------------------------- readers


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """Query id -> document id -> grade. BEIR TSV (3 columns, header optional) or TREC
    (4 columns: qid, iteration, docid, grade)."""
    qrels: dict[str, dict[str, int]] = {}
    with _open_text(path) as handle:
        for number, line in enumerate(handle, 1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) == 3:
                qid, docid, grade = parts
            elif len(parts) == 4:
                qid, _, docid, grade = parts
            else:
                raise InvalidInputError(
                    f"{path}:{number}: expected 3 (BEIR) or 4 (TREC) columns, found {len(parts)}"
                )
            try:
                value = int(grade)
            except ValueError:
                if number == 1:
                    continue  # the header line (query-id corpus-id score)
                raise InvalidInputError(
                    f"{path}:{number}: the relevance grade {grade!r} is not a whole number"
                ) from None
            qrels.setdefault(qid, {})[docid] = value
    if not qrels:
        raise InvalidInputError(f"{path} holds no relevance judgements")
    return qrels


def _json_lines(path: Path) -> Iterator[tuple[int, dict[str, object] | str]]:
    """(line number, object) per non-blank line; a string instead of an object says why
    the line could not be read."""
    with _open_text(path) as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as error:
                yield number, f"not JSON ({error.msg})"
                continue
            if not isinstance(value, dict):
                yield number, "not a JSON object"
                continue
            yield number, value


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def read_queries(path: Path) -> dict[str, str]:
    """Query id -> text, in file order."""
    queries: dict[str, str] = {}
    for number, item in _json_lines(path):
        if isinstance(item, str):
            raise InvalidInputError(f"{path}:{number}: {item}")
        qid = item.get("_id")
        if not isinstance(qid, str | int) or isinstance(qid, bool) or str(qid) == "":
            raise InvalidInputError(f"{path}:{number}: a query needs an _id")
        queries[str(qid)] = _text(item.get("text"))
    return queries


def read_corpus_ids(path: Path) -> list[str]:
    """Every readable ``_id`` of the corpus, in file order."""
    ids: list[str] = []
    for _, item in _json_lines(path):
        if isinstance(item, dict):
            doc_id = item.get("_id")
            if isinstance(doc_id, str | int) and not isinstance(doc_id, bool):
                ids.append(str(doc_id))
    return ids


class BeirCorpusSource(DocumentSource):
    """Streams ``corpus.jsonl(.gz)`` as plain-text documents.

    ``doc_ids`` restricts the corpus to those ids. ``title_in_text`` puts the title in
    front of the text (as BEIR's BM25 baseline indexes title + text; the product's
    BM25 field holds chunk text only). A malformed line is reported as a load failure
    (ingest goes on); a missing file raises ``IngestError``.
    """

    def __init__(
        self,
        path: Path,
        *,
        dataset: str = "",
        doc_ids: frozenset[str] | None = None,
        category: str = "",
        title_in_text: bool = False,
    ) -> None:
        self._path = path
        self._title_in_text = title_in_text
        self._dataset = dataset or path.parent.name
        self._doc_ids = doc_ids
        self._category = category
        self._count: int | None = None

    @property
    def path(self) -> Path:
        return self._path

    @property
    def source_name(self) -> str:
        """The dataset: its doc_ids are the corpus ids as the qrels name them."""
        return self._dataset or "beir"

    def documents(self) -> Iterator[LoadedDocument]:
        if not self._path.is_file():
            raise IngestError(f"corpus file not found: {self._path}")
        for number, item in _json_lines(self._path):
            where = f"{self._path.name}:{number}"
            if isinstance(item, str):
                yield DocumentLoadFailure(where, item)
                continue
            raw_id = item.get("_id")
            if not isinstance(raw_id, str | int) or isinstance(raw_id, bool):
                yield DocumentLoadFailure(where, "the corpus entry has no _id")
                continue
            doc_id = str(raw_id)
            if self._doc_ids is not None and doc_id not in self._doc_ids:
                continue
            title, text = _text(item.get("title")), _text(item.get("text"))
            if self._title_in_text and title.strip():
                text = f"{title} {text}" if text.strip() else title
            meta = item.get("metadata")
            meta = meta if isinstance(meta, dict) else {}
            markdown = meta.get("format") == "markdown"
            try:
                yield SourceDocument(
                    doc_id=doc_id,
                    text=text,
                    title=title,
                    source=f"{self._dataset}/{doc_id}",
                    category=_text(meta.get("category")) or self._category,
                    source_type=_text(meta.get("type")) or "abstract",
                    format="markdown" if markdown else "text",
                )
            except LookupKnowledgeError as error:
                yield DocumentLoadFailure(where, error.message, None)

    def estimated_count(self) -> int:
        if self._count is None:
            if self._doc_ids is not None:
                self._count = len(self._doc_ids)
            else:
                self._count = len(read_corpus_ids(self._path))
        return self._count


# --------------------------------------------------------------------------- a dataset


@dataclass(frozen=True, slots=True)
class BeirDataset:
    """A loaded test collection and how it was chosen."""

    dataset: EvalDataset
    corpus_path: Path
    queries_path: Path
    qrels_path: Path
    restricted_to: frozenset[str] | None  # corpus ids kept, None = the whole corpus
    judged_without_text: tuple[str, ...]  # qrels query ids missing from queries.jsonl
    title_in_text: bool = False

    @property
    def name(self) -> str:
        return self.dataset.name

    def fingerprint(self) -> str:
        """Short hash of the restricted corpus ids ("" for the whole corpus)."""
        if self.restricted_to is None:
            return ""
        digest = hashlib.sha256("\n".join(sorted(self.restricted_to)).encode("utf-8"))
        return digest.hexdigest()[:8]


def _sample_key(doc_id: str) -> str:
    return hashlib.sha256(doc_id.encode("utf-8")).hexdigest()


def load_beir(
    dataset_dir: Path,
    *,
    split: str | None = None,
    qrels_file: Path | None = None,
    limit_queries: int | None = None,
    corpus_sample: int | None = None,
    name: str | None = None,
    title_in_text: bool = False,
) -> BeirDataset:
    """Read a BEIR dataset folder.

    ``limit_queries`` keeps the first N judged queries (file order). ``corpus_sample``
    restricts the corpus to the documents judged for the kept queries plus that many
    others, picked by a hash of their id (deterministic, spread over the file).
    """
    if not dataset_dir.is_dir():
        raise InvalidInputError(f"dataset folder not found: {dataset_dir}")
    if limit_queries is not None and limit_queries < 1:
        raise InvalidInputError("limit_queries must be >= 1")
    if corpus_sample is not None and corpus_sample < 0:
        raise InvalidInputError("corpus_sample must be >= 0")
    corpus = corpus_path(dataset_dir)
    queries_file = queries_path(dataset_dir)
    qrels_file_path = qrels_path(dataset_dir, split, qrels_file)
    qrels = read_qrels(qrels_file_path)
    texts = read_queries(queries_file)
    judged = {q for q, docs in qrels.items() if any(g > 0 for g in docs.values())}
    chosen = [EvalQuery(qid, text) for qid, text in texts.items() if qid in judged]
    missing = tuple(sorted(judged - texts.keys()))
    if limit_queries is not None:
        chosen = chosen[:limit_queries]
    if not chosen:
        raise InvalidInputError(
            f"no query of {queries_file} has a relevant document in {qrels_file_path}"
        )
    kept_qrels: Mapping[str, Mapping[str, int]] = {q.query_id: qrels[q.query_id] for q in chosen}

    restricted: frozenset[str] | None = None
    if corpus_sample is not None:
        all_ids = read_corpus_ids(corpus)
        known = set(all_ids)
        judged_docs = {d for docs in kept_qrels.values() for d in docs if d in known}
        others = sorted((d for d in known if d not in judged_docs), key=_sample_key)
        restricted = frozenset(judged_docs | set(others[:corpus_sample]))

    dataset_name = name or dataset_dir.resolve().name
    source = BeirCorpusSource(
        corpus, dataset=dataset_name, doc_ids=restricted, title_in_text=title_in_text
    )
    return BeirDataset(
        dataset=EvalDataset(
            name=dataset_name, corpus=source, queries=tuple(chosen), qrels=kept_qrels
        ),
        corpus_path=corpus,
        queries_path=queries_file,
        qrels_path=qrels_file_path,
        restricted_to=restricted,
        judged_without_text=missing,
        title_in_text=title_in_text,
    )


_COLLECTION_CHARS = re.compile(r"[^A-Za-z0-9_]+")


def eval_collection_name(dataset: BeirDataset, embedder: str) -> str:
    """``eval_<dataset>_<embedder>[_titled][_<corpus hash>]``: one collection per corpus and
    embedder, so runs with the same corpus and embedder reuse the ingested chunks."""
    parts = ["eval", dataset.name, embedder]
    if dataset.title_in_text:
        parts.append("titled")
    if dataset.fingerprint():
        parts.append(dataset.fingerprint())
    name = _COLLECTION_CHARS.sub("_", "_".join(parts)).strip("_").lower()
    return name[:200]


def load_unanswerable(paths: Sequence[Path]) -> tuple[EvalQuery, ...]:
    """Questions a corpus cannot answer, for the abstention rate: each path a queries
    file (``.jsonl``, every query in it) or a BEIR folder (its queries judged in any
    ``qrels/*.tsv``: another collection's answerable questions). Ids are prefixed with
    the file's or folder's name, so two sources never collide."""
    out: list[EvalQuery] = []
    for path in paths:
        if path.is_dir():
            texts = read_queries(queries_path(path))
            judged: set[str] = set()
            for split in sorted((path / "qrels").glob("*.tsv")):
                judged |= {
                    q for q, docs in read_qrels(split).items() if any(g > 0 for g in docs.values())
                }
            chosen = [(q, t) for q, t in texts.items() if q in judged and t.strip()]
        elif path.is_file():
            chosen = [(q, t) for q, t in read_queries(path).items() if t.strip()]
        else:
            raise InvalidInputError(f"unanswerable queries: {path} is neither a file nor a folder")
        if not chosen:
            raise InvalidInputError(f"unanswerable queries: {path} holds no query to run")
        name = path.name.removesuffix(".jsonl") if path.is_file() else path.name
        if name == "queries":
            name = path.parent.name
        out.extend(EvalQuery(f"{name}/{qid}", text) for qid, text in chosen)
    return tuple(out)
