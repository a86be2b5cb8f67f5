"""The knowledge collection's schema: fields, creation, and the mismatch check.

Primary key = the evidence key (``docId#chunk-N``), so identity, dedup and the
per-document cap can run on ids and scores alone and content is fetched by key for the
survivors only (late materialisation).

BM25 reads ``bm25_text``, not ``text``: the chunk's title, breadcrumb and text after the
product's own analysis (stemming, stop words, Chinese segmentation; see
``adapters/text/analysis.py``), space-separated terms that Milvus' ``standard`` tokenizer
keeps as they are on Lite and on a server. ``text`` stays the original for display.

Access control (schema version 3): ``tenant`` (the partition key: Milvus Lite and
servers 2.2.9+ support one; searches filtered by tenant prune partitions),
``allowed_groups`` (ARRAY of VARCHAR, what a hit reports), ``allowed_groups_key``
(the same groups as the filter matches them, see ``filters.py``) and ``access_public``
(BOOL). A tenant's rows are
keyed ``storage_key(tenant, evidence_key)`` (``domain/access.py``) so two tenants can
hold the same doc paths; the agent-facing id still comes from doc_id and chunk_index.
A version-2 collection (before access control) is still read and written while
``access.mode`` is off, with no tenant; under ``enforced`` it is refused (nothing in
it says who may see it), and writing a tenant or groups into it is refused.

The collection carries its schema version and the analysis fingerprint as collection
properties. A collection without them (built before analysis existed) or with another
version or analysis is refused with a message that says to ingest again: mixing
differently analysed documents and queries would match silently worse.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lookup_knowledge.adapters.milvus.filters import (
    GROUPS_FIELD,
    GROUPS_KEY_FIELD,
    PUBLIC_FIELD,
    TENANT_FIELD,
)
from lookup_knowledge.application.ports import EmbedderIdentity
from lookup_knowledge.domain.access import MAX_DOCUMENT_GROUPS
from lookup_knowledge.domain.errors import SchemaMismatch
from lookup_knowledge.domain.relevance import DenseBackground

DEFAULT_COLLECTION = "knowledge_chunks"

PK = "evidence_key"
DOC_ID = "doc_id"
CHUNK_INDEX = "chunk_index"
CATEGORY = "category"
SOURCE = "source"
TITLE = "title"
BREADCRUMB = "breadcrumb"
SOURCE_TYPE = "source_type"
SOURCE_NAME = "source_name"  # the ingest source that owns the row's document
TENANT = TENANT_FIELD
ALLOWED_GROUPS = GROUPS_FIELD
ALLOWED_GROUPS_KEY = GROUPS_KEY_FIELD  # the groups as the filter matches them
ACCESS_PUBLIC = PUBLIC_FIELD
TEXT = "text"
BM25_TEXT = "bm25_text"
CONTENT_HASH = "content_hash"
INGESTED_AT = "ingested_at"
DENSE = "dense_vector"
SPARSE = "sparse_vector"
BM25_FUNCTION = "text_bm25"
#: Collection property holding the embedder identity (JSON) the vectors were made with.
EMBEDDER_PROPERTY = "lookup_knowledge.embedder"

#: Version of this schema. 2: BM25 over ``bm25_text`` (analysed title + breadcrumb +
#: text) instead of the raw ``text``; schema and analysis recorded as properties.
#: 3: access fields (tenant, allowed_groups, access_public); tenant-scoped keys.
SCHEMA_VERSION = 3
#: Versions this one still reads: 2 has no access fields (see the module docstring).
READABLE_VERSIONS = frozenset({2, 3})
SCHEMA_VERSION_PROPERTY = "lookup_knowledge.schema_version"
ANALYSIS_PROPERTY = "lookup_knowledge.analysis"
#: The dense index's type and build parameters as created (JSON): Milvus Lite's
#: describe_index does not report build parameters, the trace needs them.
DENSE_INDEX_PROPERTY = "lookup_knowledge.dense_index"
#: The collection's dense background (JSON ``{"mean", "std", "pairs"}``): the cosine of
#: random pairs of its chunks, measured at seal (``domain.relevance.DenseBackground``).
BACKGROUND_PROPERTY = "lookup_knowledge.dense_background"
#: The Milvus analyzer on ``bm25_text``: it only has to split the pre-analysed terms.
BM25_FIELD_ANALYZER: Mapping[str, Any] = {"tokenizer": "standard"}
REINGEST_HINT = (
    "ingest the documents again into a new collection (point milvus.collection at a new "
    "name), or drop this collection and ingest again"
)

#: VARCHAR limits in bytes (UTF-8), as Milvus counts them.
MAX_BYTES: Mapping[str, int] = {
    PK: 2800,  # 2200 in version 2; a tenant's key adds the tenant (<= 512 bytes) + 2
    TENANT: 512,
    ALLOWED_GROUPS: 512,  # per element
    ALLOWED_GROUPS_KEY: 65535,  # 64 groups of <= 512 bytes, base64 (684) + 2 tabs each
    DOC_ID: 2048,
    CATEGORY: 512,
    SOURCE: 2048,
    TITLE: 1024,
    BREADCRUMB: 2048,
    SOURCE_TYPE: 64,
    SOURCE_NAME: 512,
    TEXT: 65535,
    BM25_TEXT: 65535,
    CONTENT_HASH: 64,
}
#: Metadata returned with every hit (no text: that is fetched late or on request).
LIGHT_FIELDS = (DOC_ID, CHUNK_INDEX, CATEGORY, SOURCE, TITLE, BREADCRUMB, SOURCE_TYPE)
#: Returned with every hit of a version-3 collection (the defence-in-depth check).
ACCESS_FIELDS = (TENANT, ALLOWED_GROUPS, ACCESS_PUBLIC)
_ACCESS_TYPES: Mapping[str, str] = {
    TENANT: "VARCHAR",
    ALLOWED_GROUPS: "ARRAY",
    ALLOWED_GROUPS_KEY: "VARCHAR",
    ACCESS_PUBLIC: "BOOL",
}

# DataType names per scalar field (compared by name to stay independent of enums).
_SCALARS: Mapping[str, str] = {
    PK: "VARCHAR",
    DOC_ID: "VARCHAR",
    CHUNK_INDEX: "INT64",
    CATEGORY: "VARCHAR",
    SOURCE: "VARCHAR",
    TITLE: "VARCHAR",
    BREADCRUMB: "VARCHAR",
    SOURCE_TYPE: "VARCHAR",
    SOURCE_NAME: "VARCHAR",
    TEXT: "VARCHAR",
    CONTENT_HASH: "VARCHAR",
    INGESTED_AT: "INT64",
}


@dataclass(frozen=True, slots=True)
class CollectionLayout:
    """What an existing collection offers."""

    name: str
    dimension: int | None  # None: no dense vector (sparse-only)
    bm25: bool  # has the BM25 function into the sparse field
    primary_key: str
    schema_version: int = SCHEMA_VERSION
    analysis: str | None = None  # fingerprint of the analysis of bm25_text (None: no BM25)
    dense_index: Mapping[str, Any] | None = None  # as created: {"type": ..., params...}
    embedder: EmbedderIdentity | None = None  # None: made by a tool that did not say
    #: Measured at seal; None for a collection sealed before it was (or without vectors).
    dense_background: DenseBackground | None = None

    @property
    def access(self) -> bool:
        """The collection has the access fields (version 3)."""
        return self.schema_version >= 3

    @property
    def has_dense(self) -> bool:
        return self.dimension is not None


def embedder_property(identity: EmbedderIdentity) -> str:
    return json.dumps(
        {
            "provider": identity.provider,
            "model": identity.model,
            "dimension": identity.dimension,
            "normalised": identity.normalised,
        },
        sort_keys=True,
    )


def _embedder_of(description: Mapping[str, Any], problems: list[str]) -> EmbedderIdentity | None:
    properties = description.get("properties") or {}
    raw = properties.get(EMBEDDER_PROPERTY) if isinstance(properties, Mapping) else None
    if raw is None:
        return None
    try:
        data = json.loads(raw)
        return EmbedderIdentity(
            provider=str(data["provider"]),
            model=str(data["model"]),
            dimension=int(data["dimension"]),
            normalised=bool(data["normalised"]),
        )
    except (ValueError, TypeError, KeyError):
        problems.append(f"property {EMBEDDER_PROPERTY!r} is not an embedder identity: {raw!r}")
        return None


def check_embedder(
    layout: CollectionLayout, embedder: EmbedderIdentity | None, *, where: str
) -> None:
    """The collection's vectors must come from the embedder in use: two embedders of one
    dimension give vectors that are not comparable (every search would miss)."""
    if embedder is None or layout.embedder is None or layout.embedder == embedder:
        return
    raise SchemaMismatch(
        f"Milvus collection {layout.name!r} at {where} was built with the embedder "
        f"{layout.embedder.describe()}, but the configured embedder is "
        f"{embedder.describe()}: configure the embedder the collection was built with "
        f"(embedder.provider={layout.embedder.provider}), or point milvus.collection at a "
        "new name and ingest again."
    )


def _type_name(value: Any) -> str:
    name = getattr(value, "name", None)
    return str(name if name is not None else value).upper()


def read_layout(description: Mapping[str, Any], *, where: str) -> CollectionLayout:
    """Check a ``describe_collection`` result against this schema, or ``SchemaMismatch``."""
    name = str(description.get("collection_name", "?"))
    fields = {str(f.get("name")): f for f in description.get("fields", [])}
    properties = description.get("properties") or {}
    version = _schema_version(name, fields, properties, where)
    problems = _field_problems(fields, version)
    dimension = _dense_dimension(fields, problems)
    bm25 = _has_bm25(description, fields, problems)
    if DENSE not in fields and SPARSE not in fields:
        problems.append(f"neither a dense ({DENSE!r}) nor a sparse ({SPARSE!r}) vector field")
    embedder = _embedder_of(description, problems)
    if problems:
        older = (
            f" (collections written before document ownership have no {SOURCE_NAME!r} field)"
            if f"missing field {SOURCE_NAME!r}" in problems
            else ""
        )
        raise SchemaMismatch(
            f"Milvus collection {name!r} at {where} does not have the lookup-knowledge "
            f"schema{older}: {'; '.join(problems)}. Re-ingest: point milvus.collection at a "
            "new name (it is created on first ingest), or drop this collection and ingest "
            "again."
        )
    analysis = properties.get(ANALYSIS_PROPERTY)
    dense_index: Mapping[str, Any] | None = None
    try:
        parsed = json.loads(str(properties.get(DENSE_INDEX_PROPERTY, "")))
        dense_index = parsed if isinstance(parsed, dict) else None
    except ValueError:
        dense_index = None
    return CollectionLayout(
        name=name,
        dimension=dimension,
        dense_background=read_background(properties.get(BACKGROUND_PROPERTY))
        if dimension is not None
        else None,
        bm25=bm25,
        primary_key=PK,
        schema_version=version,
        analysis=str(analysis) if bm25 and analysis else None,
        dense_index=dense_index if dimension is not None else None,
        embedder=embedder,
    )


def _schema_version(
    name: str, fields: Mapping[str, Any], properties: Mapping[str, Any], where: str
) -> int:
    """The collection's schema version; ``SchemaMismatch`` for one this version cannot read."""
    raw_version = properties.get(SCHEMA_VERSION_PROPERTY)
    if raw_version is None and PK in fields:
        raise SchemaMismatch(
            f"Milvus collection {name!r} at {where} was built by an older lookup-knowledge "
            f"(no schema version; this one needs version {SCHEMA_VERSION}): its BM25 field "
            f"holds unanalysed text: {REINGEST_HINT}."
        )
    version = SCHEMA_VERSION
    if raw_version is not None:
        try:
            version = int(str(raw_version))
        except ValueError:
            version = -1
        if version not in READABLE_VERSIONS:
            raise SchemaMismatch(
                f"Milvus collection {name!r} at {where} has lookup-knowledge schema version "
                f"{raw_version}, this version reads {SCHEMA_VERSION}: {REINGEST_HINT}."
            )
    return version


def _field_problems(fields: Mapping[str, Any], version: int) -> list[str]:
    """What is wrong with the primary key and the scalar fields (empty: nothing)."""
    problems: list[str] = []
    primary = next((n for n, f in fields.items() if f.get("is_primary")), "")
    if primary != PK:
        problems.append(f"primary key is {primary!r}, expected {PK!r}")
    expected = {**_SCALARS, **(_ACCESS_TYPES if version >= 3 else {})}
    for field_name, type_name in expected.items():
        found = fields.get(field_name)
        if found is None:
            problems.append(f"missing field {field_name!r}")
        elif _type_name(found.get("type")) != type_name:
            problems.append(
                f"field {field_name!r} is {_type_name(found.get('type'))}, expected {type_name}"
            )
    return problems


def _dense_dimension(fields: Mapping[str, Any], problems: list[str]) -> int | None:
    """The dense vector field's dimension (None: no such field, or not a float vector)."""
    dense = fields.get(DENSE)
    if dense is None:
        return None
    if _type_name(dense.get("type")) != "FLOAT_VECTOR":
        problems.append(
            f"field {DENSE!r} is {_type_name(dense.get('type'))}, expected FLOAT_VECTOR"
        )
        return None
    return int(dense.get("params", {}).get("dim", 0))


def _has_bm25(
    description: Mapping[str, Any], fields: Mapping[str, Any], problems: list[str]
) -> bool:
    """The sparse field is the output of a BM25 function on the analysed text."""
    if SPARSE not in fields:
        return False
    functions = description.get("functions", []) or []
    bm25 = any(
        _type_name(fn.get("type")) == "BM25"
        and list(fn.get("output_field_names", [])) == [SPARSE]
        and list(fn.get("input_field_names", [])) == [BM25_TEXT]
        for fn in functions
    )
    if not bm25:
        problems.append(f"field {SPARSE!r} is not the output of a BM25 function on {BM25_TEXT!r}")
    return bm25


def background_property(background: DenseBackground) -> str:
    return json.dumps(
        {"mean": background.mean, "std": background.std, "pairs": background.pairs},
        sort_keys=True,
    )


def read_background(raw: object) -> DenseBackground | None:
    """The stored background, or None when absent or unreadable (it is measured again)."""
    if raw is None:
        return None
    try:
        data = json.loads(str(raw))
        return DenseBackground(
            mean=float(data["mean"]), std=float(data["std"]), pairs=int(data.get("pairs", 0))
        )
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def check_analysis(layout: CollectionLayout, analysis: str, *, where: str) -> None:
    """Documents and queries must be analysed alike: refuse a collection built otherwise."""
    if not layout.bm25 or layout.analysis == analysis:
        return
    raise SchemaMismatch(
        f"Milvus collection {layout.name!r} at {where} was built with text analysis "
        f"{layout.analysis!r}, but this configuration analyses with {analysis!r} "
        f"(rag.text-analysis.*): set the analysis it was built with, or {REINGEST_HINT}."
    )


def collection_properties(
    analysis: str | None, dense_index: Mapping[str, Any] | None = None
) -> dict[str, str]:
    """The properties a new collection is created with."""
    properties = {SCHEMA_VERSION_PROPERTY: str(SCHEMA_VERSION)}
    if analysis is not None:
        properties[ANALYSIS_PROPERTY] = analysis
    if dense_index is not None:
        properties[DENSE_INDEX_PROPERTY] = json.dumps(dict(dense_index), sort_keys=True)
    return properties


def check_dimension(layout: CollectionLayout, dimension: int | None, *, where: str) -> None:
    """The ingest-side check: the embedder's dimension must be the collection's."""
    if layout.dimension == dimension:
        return
    if dimension is None:
        raise SchemaMismatch(
            f"Milvus collection {layout.name!r} at {where} has a {layout.dimension}-dim dense "
            "vector field, but ingest runs without an embedder: configure the embedder the "
            "collection was built with, or use another collection for a sparse-only store."
        )
    have = f"a {layout.dimension}-dim" if layout.dimension is not None else "no"
    raise SchemaMismatch(
        f"Milvus collection {layout.name!r} at {where} has {have} dense vector field, but "
        f"the embedder produces {dimension}-dim vectors: configure the embedder the "
        "collection was built with, or point milvus.collection at a new name, or drop the "
        "collection and ingest everything again."
    )


def build_schema(
    client: Any,
    *,
    dimension: int | None,
    bm25: bool,
    analyzer_params: Mapping[str, Any] | None,
    index_type: str,
    index_params: Mapping[str, Any] | None,
) -> tuple[Any, Any]:
    """(schema, index params) for a new collection. No scalar index on the access fields:
    on Milvus Lite an INVERTED index on ``tenant`` and ``allowed_groups_key`` saved a
    fraction of a millisecond per filtered search (benchmarks/README.md), but an ingest
    with it timed out in its final flush and Lite's background build of those files
    raced the reload."""
    from pymilvus import DataType, Function, FunctionType

    schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field(PK, DataType.VARCHAR, is_primary=True, max_length=MAX_BYTES[PK])
    schema.add_field(DOC_ID, DataType.VARCHAR, max_length=MAX_BYTES[DOC_ID])
    schema.add_field(CHUNK_INDEX, DataType.INT64)
    for name in (CATEGORY, SOURCE, TITLE, BREADCRUMB, SOURCE_TYPE, SOURCE_NAME, CONTENT_HASH):
        schema.add_field(name, DataType.VARCHAR, max_length=MAX_BYTES[name])
    schema.add_field(INGESTED_AT, DataType.INT64)
    schema.add_field(TENANT, DataType.VARCHAR, max_length=MAX_BYTES[TENANT], is_partition_key=True)
    schema.add_field(
        ALLOWED_GROUPS,
        DataType.ARRAY,
        element_type=DataType.VARCHAR,
        max_capacity=MAX_DOCUMENT_GROUPS,
        max_length=MAX_BYTES[ALLOWED_GROUPS],
    )
    schema.add_field(ALLOWED_GROUPS_KEY, DataType.VARCHAR, max_length=MAX_BYTES[ALLOWED_GROUPS_KEY])
    schema.add_field(ACCESS_PUBLIC, DataType.BOOL)
    schema.add_field(TEXT, DataType.VARCHAR, max_length=MAX_BYTES[TEXT])
    if bm25:
        schema.add_field(
            BM25_TEXT,
            DataType.VARCHAR,
            max_length=MAX_BYTES[BM25_TEXT],
            enable_analyzer=True,
            analyzer_params=dict(analyzer_params or BM25_FIELD_ANALYZER),
        )
        schema.add_field(SPARSE, DataType.SPARSE_FLOAT_VECTOR)
        schema.add_function(
            Function(
                name=BM25_FUNCTION,
                function_type=FunctionType.BM25,
                input_field_names=[BM25_TEXT],
                output_field_names=[SPARSE],
            )
        )
    if dimension is not None:
        schema.add_field(DENSE, DataType.FLOAT_VECTOR, dim=dimension)
    index = client.prepare_index_params()
    if dimension is not None:
        index.add_index(
            field_name=DENSE,
            index_type=index_type,
            metric_type="COSINE",
            params=dict(index_params or {}),
        )
    if bm25:
        index.add_index(field_name=SPARSE, index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
    return schema, index
