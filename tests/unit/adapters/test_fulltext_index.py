"""The tantivy index of Milvus Lite's BM25 path on its own (``adapters/milvus/fulltext.py``):
BM25 over pre-analysed terms, exact filters, the access rule of ``domain/access.py``,
the journal and the repairs on open."""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lookup_knowledge.adapters.milvus.fulltext import FullTextIndex, FullTextRow
from lookup_knowledge.domain.access import (
    AccessMode,
    AccessScope,
    DocumentAccess,
    Principal,
    can_see,
    storage_key,
)
from tests.support.lite_rows import RowsInMilvus


def row(
    doc: str,
    chunk: int,
    terms: str,
    *,
    category: str = "ops",
    tenant: str = "",
    groups: Sequence[str] = (),
    public: bool = False,
) -> FullTextRow:
    return FullTextRow(
        key=storage_key(tenant, f"{doc}#chunk-{chunk}"),
        doc_id=doc,
        chunk_index=chunk,
        category=category,
        source=f"kb/{doc}",
        title=doc,
        breadcrumb="",
        source_type="markdown",
        text=f"text of {doc} {chunk}",
        terms=terms,
        tenant=tenant,
        allowed_groups=tuple(groups),
        public=public,
    )


Milvus = RowsInMilvus[FullTextRow]


def open_index(root: Path, milvus: Milvus, analysis: str = "a1") -> FullTextIndex:
    return FullTextIndex(
        root,
        analysis=analysis,
        read_rows=milvus.read,
        count_rows=milvus.count,
        heap_bytes=15_000_000,  # tantivy's smallest writer heap: fast to set up per test
    )


def keys(found: list[dict[str, object]]) -> list[object]:
    return [hit["evidence_key"] for hit in found]


def test_bm25_ranks_by_term_statistics_and_filters_exactly(tmp_path: Path) -> None:
    milvus = Milvus()
    index = open_index(tmp_path / "ft", milvus)
    rows = [
        row("a.md", 0, "kafka lag kafka", category="ops"),
        row("b.md", 0, "kafka disk", category="storage"),
        row("c.md", 0, "disk quota billing", category="billing"),
    ]
    milvus.rows = {r.key: r for r in rows}
    index.upsert(rows)
    assert keys(index.search("kafka", 10)) == ["a.md#chunk-0", "b.md#chunk-0"]
    assert keys(index.search("kafka", 10, {"category": "storage"})) == ["b.md#chunk-0"]
    assert index.search("kafka", 10, {"category": "stor"}) == []  # equality, not prefix
    hit = index.search("quota", 1, with_text=True)[0]
    assert hit["text"] == "text of c.md 0"
    assert hit["doc_id"] == "c.md"
    assert float(str(hit["distance"])) > 0
    assert "text" not in index.search("quota", 1)[0]
    index.close()


@pytest.mark.parametrize("padding", [0, 300], ids=["a few keys", "past the term clauses"])
def test_bm25_of_named_rows_is_their_score_in_the_full_ranking(
    tmp_path: Path, padding: int
) -> None:
    milvus = Milvus()
    index = open_index(tmp_path / "ft", milvus)
    rows = [row(f"d{n}.md", 0, "kafka lag " + "filler " * n) for n in range(12)]
    rows.append(row("other.md", 0, "disk quota"))
    milvus.rows = {r.key: r for r in rows}
    index.upsert(rows)
    everything = {
        str(h["evidence_key"]): float(str(h["distance"])) for h in index.search("kafka lag", 50)
    }
    unknown = [f"none{n}.md#chunk-0" for n in range(padding)]
    named = ["d11.md#chunk-0", "d3.md#chunk-0", "other.md#chunk-0", "missing.md#chunk-0"]
    assert index.scores("kafka lag", [*unknown, *named, "d3.md#chunk-0"]) == pytest.approx(
        {key: everything[key] for key in ("d11.md#chunk-0", "d3.md#chunk-0")}
    )  # other.md holds no query term; missing.md is no row
    assert index.scores("kafka lag", []) == {}
    assert index.scores("", named) == {}
    assert index.scores("kafka lag", [*unknown, *named], {"category": "billing"}) == {}
    index.close()


def test_replace_and_deletes_follow_the_store_calls(tmp_path: Path) -> None:
    milvus = Milvus()
    index = open_index(tmp_path / "ft", milvus)
    index.upsert([row("a.md", i, f"alpha w{i}") for i in range(4)] + [row("b.md", 0, "alpha")])
    index.upsert([row("a.md", 0, "omega")])  # replace by key
    assert keys(index.search("omega", 10)) == ["a.md#chunk-0"]
    assert "a.md#chunk-0" not in keys(index.search("alpha", 10))
    index.delete_except(["a.md"], ["a.md#chunk-0", "a.md#chunk-1"])
    assert sorted(keys(index.search("alpha omega", 10))) == [
        "a.md#chunk-0",
        "a.md#chunk-1",
        "b.md#chunk-0",
    ]
    index.delete_documents(["a.md"])
    assert keys(index.search("alpha omega", 10)) == ["b.md#chunk-0"]
    assert index.count() == 1
    index.close()


def test_a_journal_left_by_a_crash_is_replayed_from_milvus_on_open(tmp_path: Path) -> None:
    root = tmp_path / "ft"
    milvus = Milvus([row("a.md", 0, "old words"), row("b.md", 0, "other")])
    index = open_index(root, milvus)
    index.upsert(list(milvus.rows.values()))
    index.settle()
    index.mark(["a.md"])  # the process journals a.md, Milvus takes the new rows ...
    milvus.rows["a.md#chunk-0"] = row("a.md", 0, "new words")
    index.close()  # ... and dies before the index hears of them

    assert json.loads((root / "pending.jsonl").read_text().splitlines()[0]) == ["a.md"]
    reopened = open_index(root, milvus)
    assert keys(reopened.search("new", 10)) == ["a.md#chunk-0"]
    assert reopened.search("old", 10) == []
    assert milvus.reads[-1] == ["a.md"]  # only the journalled document was re-read
    assert not (root / "pending.jsonl").exists()
    reopened.close()


def test_a_torn_journal_line_is_ignored(tmp_path: Path) -> None:
    root = tmp_path / "ft"
    milvus = Milvus([row("a.md", 0, "words")])
    index = open_index(root, milvus)
    index.upsert(list(milvus.rows.values()))
    index.mark(["a.md"])
    index.close()
    with open(root / "pending.jsonl", "a", encoding="utf-8") as journal:
        journal.write('["b.m')  # cut by the crash: its write never reached Milvus
    reopened = open_index(root, milvus)
    assert reopened.count() == 1
    assert milvus.reads[-1] == ["a.md"]
    reopened.close()


@pytest.mark.parametrize("damage", ["missing", "other-analysis", "count"])
def test_an_index_that_does_not_match_the_collection_is_rebuilt_from_milvus(
    tmp_path: Path, damage: str
) -> None:
    root = tmp_path / "ft"
    milvus = Milvus([row("a.md", 0, "alpha"), row("b.md", 0, "beta")])
    index = open_index(root, milvus)
    index.upsert(list(milvus.rows.values()))
    index.settle()
    index.close()
    analysis = "a1"
    if damage == "missing":
        shutil.rmtree(root)
    elif damage == "other-analysis":
        analysis = "a2"
    else:
        milvus.rows["c.md#chunk-0"] = row("c.md", 0, "gamma")  # written by another tool
    reopened = open_index(root, milvus, analysis)
    assert milvus.reads[-1] is None  # a full read
    assert reopened.count() == len(milvus.rows)
    assert keys(reopened.search("gamma", 10)) == (["c.md#chunk-0"] if damage == "count" else [])
    reopened.close()


def test_a_search_during_the_rebuild_on_open_waits_for_every_row(tmp_path: Path) -> None:
    rows = [row(f"d{i}.md", 0, "alpha") for i in range(30)]
    reading, go_on = threading.Event(), threading.Event()

    class SlowMilvus(Milvus):
        def read(self, doc_keys: Sequence[str] | None) -> Iterator[FullTextRow]:
            for n, found in enumerate(super().read(doc_keys)):
                if n == 10:  # a third of the rows read: let the other thread search now
                    reading.set()
                    go_on.wait(5)
                yield found

    index = open_index(tmp_path / "ft", SlowMilvus(rows))  # no index yet: rebuilt on open
    warming = threading.Thread(target=index.count)  # what the warm-up does
    warming.start()
    assert reading.wait(5)
    found: list[list[dict[str, object]]] = []
    searching = threading.Thread(target=lambda: found.append(index.search("alpha", 100)))
    searching.start()
    searching.join(0.3)
    go_on.set()
    warming.join(5)
    searching.join(5)
    assert len(keys(found[0])) == len(rows)  # not the third read when it asked
    index.close()


def test_an_open_whose_rebuild_failed_is_opened_and_rebuilt_again_by_the_next_call(
    tmp_path: Path,
) -> None:
    rows = [row(f"d{i}.md", 0, "alpha") for i in range(30)]

    index = open_index(
        tmp_path / "ft", Milvus(rows, fail_after=10)
    )  # no index yet: rebuilt on open
    with pytest.raises(RuntimeError, match="mid-read"):
        index.search("alpha", 100)
    assert len(keys(index.search("alpha", 100))) == len(rows)
    index.upsert([row("new.md", 0, "alpha")])  # the writer is the new index's
    assert len(keys(index.search("alpha", 100))) == len(rows) + 1
    index.close()


def test_a_write_that_failed_is_repaired_before_the_next_search(tmp_path: Path) -> None:
    milvus = Milvus([row("a.md", 0, "old")])
    index = open_index(tmp_path / "ft", milvus)
    index.upsert(list(milvus.rows.values()))
    index.mark(["a.md"])
    milvus.rows["a.md#chunk-0"] = row("a.md", 0, "new")  # Milvus wrote, then the call failed
    index.failed()
    assert keys(index.search("new", 10)) == ["a.md#chunk-0"]
    index.close()


# ---------------------------------------------------------------------- access control

_NAMES = st.sampled_from(["t1", "t2"])
_GROUPS = st.frozensets(st.sampled_from(["g1", "g2", "g3"]), max_size=2)
_DOCS = st.lists(
    st.builds(
        lambda tenant, groups, public: DocumentAccess(
            tenant, groups if tenant else frozenset(), public
        ),
        st.one_of(st.just(""), _NAMES),
        _GROUPS,
        st.booleans(),
    ),
    min_size=1,
    max_size=8,
)
_SCOPES = st.one_of(
    st.just(AccessScope(AccessMode.OFF)),
    st.just(AccessScope(AccessMode.ENFORCED, None)),
    st.builds(
        lambda tenant, groups: AccessScope(AccessMode.ENFORCED, Principal(tenant, "u", groups)),
        _NAMES,
        _GROUPS,
    ),
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=_DOCS, scope=_SCOPES)
def test_the_index_returns_exactly_the_rows_the_access_rule_allows(
    docs: list[DocumentAccess], scope: AccessScope
) -> None:
    root = Path(tempfile.mkdtemp(prefix="ft-acl-"))
    try:
        rows = [
            row(
                f"d{i}.md",
                0,
                "shared",
                tenant=doc.tenant,
                groups=sorted(doc.allowed_groups),
                public=doc.public,
            )
            for i, doc in enumerate(docs)
        ]
        index = open_index(root, Milvus())
        index.upsert(rows)
        found = index.search("shared", 100, access=scope)
        expected = {
            storage_key(doc.tenant, f"d{i}.md#chunk-0")
            for i, doc in enumerate(docs)
            if can_see(scope.principal, doc, scope.mode)
        }
        assert set(keys(found)) == expected
        for hit in found:  # each hit says its document's access as stored
            doc = docs[int(str(hit["doc_id"])[1:].split(".")[0])]
            assert hit["tenant"] == doc.tenant
            assert set(cast(list[str], hit["allowed_groups"])) == set(doc.allowed_groups)
            assert hit["access_public"] is doc.public
        index.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_two_tenants_with_the_same_path_are_written_and_deleted_apart(tmp_path: Path) -> None:
    """Writes, deletes and repairs select by document key (the doc_id scoped to its
    tenant): one tenant's re-ingest or delete of a path never touches the other's rows."""
    a = [row("guide.md", i, f"alpha w{i}", tenant="acme") for i in range(3)]
    b = [row("guide.md", i, f"alpha w{i}", tenant="globex") for i in range(3)]
    milvus = Milvus(a + b)
    index = open_index(tmp_path / "ft", milvus)
    index.upsert(a + b)
    acme, globex = storage_key("acme", "guide.md"), storage_key("globex", "guide.md")
    index.delete_except([acme], [a[0].key])
    assert sorted(keys(index.search("alpha", 10))) == sorted([a[0].key, *(r.key for r in b)])
    index.delete_documents([globex])
    assert keys(index.search("alpha", 10)) == [a[0].key]
    # A crash journalled acme's document: the repair re-reads acme's rows only.
    milvus.rows = {r.key: r for r in a}
    index.mark([acme])
    index.close()
    reopened = open_index(tmp_path / "ft", milvus)
    assert sorted(keys(reopened.search("alpha", 10))) == sorted(r.key for r in a)
    assert milvus.reads[-1] == [acme]
    reopened.close()
