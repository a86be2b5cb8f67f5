"""The hash chain's rules (``domain.trail``), property-tested: an intact chain verifies,
and any single change of a field, a deleted, reordered or inserted entry is caught."""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from lookup_knowledge.domain.trail import (
    GENESIS,
    ChainEntry,
    ChainVerifier,
    Checkpoint,
    ProblemKind,
    RecordFormat,
    StoredRecord,
    canonical_document,
    canonical_json,
    make_entry,
    record_digest,
)
from lookup_knowledge.domain.trail_checks import check_checkpoints, check_witness

FMT = RecordFormat("test/1", ("id", "query", "score", "flag"), ("rank", "text"))
SECRET = b"test key"

scalars = st.one_of(
    st.none(),
    st.integers(min_value=-(2**60), max_value=2**60),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
)
records = st.tuples(
    st.lists(scalars, min_size=4, max_size=4),
    st.lists(st.lists(scalars, min_size=2, max_size=2), max_size=3),
)


def sign(payload: bytes) -> str:
    return hmac.new(SECRET, payload, hashlib.sha256).hexdigest()


def check_sig(payload: bytes, signature: str) -> bool:
    return hmac.compare_digest(sign(payload), signature)


def build(recs: list[tuple[list[Any], list[list[Any]]]]) -> list[ChainEntry]:
    entries, prev = [], GENESIS
    for position, (values, children) in enumerate(recs, 1):
        digest = record_digest(FMT, values, children)
        entry = make_entry(position, "invocation", f"r{position}", "s", position, digest, prev, "t")
        entries.append(entry)
        prev = entry.entry_hash
    return entries


def run(
    entries: list[ChainEntry], recs: dict[int, tuple[list[Any], list[list[Any]]]]
) -> ChainVerifier:
    verifier = ChainVerifier()
    for entry in entries:
        rec = recs.get(entry.position)
        stored = None if rec is None else StoredRecord(record_digest(FMT, *rec), entry.position)
        verifier.feed(entry, stored)
    return verifier


@given(st.lists(records, min_size=1, max_size=8))
def test_an_intact_chain_verifies(recs: list[Any]) -> None:
    entries = build(recs)
    verifier = run(entries, dict(enumerate(recs, 1)))
    assert verifier.problem is None
    assert verifier.last_hash == entries[-1].entry_hash


def _changed(value: Any) -> Any:
    if value is None:
        return 0
    if isinstance(value, str):
        return value + "x"
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    return value + 1.0 if abs(value) < 1e15 else -value


@given(st.lists(records, min_size=1, max_size=6), st.data())
def test_any_single_field_change_is_caught(recs: list[Any], data: st.DataObject) -> None:
    entries = build(recs)
    position = data.draw(st.integers(1, len(recs)))
    values, children = json.loads(json.dumps(recs[position - 1]))
    cells = [("v", i) for i in range(len(values))] + [
        ("c", (r, i)) for r in range(len(children)) for i in range(2)
    ]
    where, index = data.draw(st.sampled_from(cells))
    if where == "v":
        values[index] = _changed(values[index])
    else:
        r, i = index
        children[r][i] = _changed(children[r][i])
    tampered = dict(enumerate(recs, 1))
    tampered[position] = (values, children)
    problem = run(entries, tampered).problem
    assert problem is not None
    assert problem.position == position
    assert problem.kind is ProblemKind.CONTENT_CHANGED


@given(st.lists(records, min_size=2, max_size=6), st.data())
def test_a_deleted_child_row_or_record_is_caught(recs: list[Any], data: st.DataObject) -> None:
    entries = build(recs)
    position = data.draw(st.integers(1, len(recs)))
    tampered = dict(enumerate(recs, 1))
    values, children = recs[position - 1]
    if children and data.draw(st.booleans()):
        tampered[position] = (values, children[1:])
        kind = ProblemKind.CONTENT_CHANGED
    else:
        del tampered[position]
        kind = ProblemKind.RECORD_MISSING
    problem = run(entries, tampered).problem
    assert problem is not None
    assert (problem.kind, problem.position) == (kind, position)


@given(st.lists(records, min_size=2, max_size=6), st.data())
def test_a_deleted_entry_is_caught_and_the_newest_by_its_checkpoint(
    recs: list[Any], data: st.DataObject
) -> None:
    entries = build(recs)
    gone = data.draw(st.integers(1, len(entries)))
    kept = [e for e in entries if e.position != gone]
    verifier = run(kept, dict(enumerate(recs, 1)))
    if gone < len(entries):
        assert verifier.problem is not None
        assert verifier.problem.kind is ProblemKind.RECORD_MISSING
    else:  # the newest: the chain ends earlier than the checkpoint signed
        assert verifier.problem is None
        assert verifier.last_position < entries[-1].position


@given(st.lists(records, min_size=2, max_size=6), st.data())
def test_reordered_entries_are_caught(recs: list[Any], data: st.DataObject) -> None:
    entries = build(recs)
    i = data.draw(st.integers(0, len(entries) - 2))
    j = data.draw(st.integers(i + 1, len(entries) - 1))
    swapped = list(entries)
    # Moved with their positions renumbered, as a tamperer would store them.
    a, b = swapped[i], swapped[j]
    swapped[i] = dataclasses.replace(b, position=a.position)
    swapped[j] = dataclasses.replace(a, position=b.position)
    assert run(swapped, dict(enumerate(recs, 1))).problem is not None


@given(st.lists(records, min_size=1, max_size=6), records, st.data())
def test_an_inserted_entry_is_caught(recs: list[Any], forged: Any, data: st.DataObject) -> None:
    entries = build(recs)
    at = data.draw(st.integers(1, len(entries)))
    prev = GENESIS if at == 1 else entries[at - 2].entry_hash
    digest = record_digest(FMT, *forged)
    fake = make_entry(at, "invocation", "forged", "s", at, digest, prev, "t")
    shifted = [dataclasses.replace(e, position=e.position + 1) for e in entries[at - 1 :]]
    chain = [*entries[: at - 1], fake, *shifted]
    stored = dict(enumerate(recs, 1))
    stored = {p + (1 if p >= at else 0): r for p, r in stored.items()}
    stored[at] = forged
    assert run(chain, stored).problem is not None


json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**53), max_value=2**53),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=10),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=20,
)


def _as_jsonb(value: Any) -> Any:
    """What PostgreSQL's JSONB gives back: keys reordered, big floats as integers, no -0."""
    if isinstance(value, dict):
        return {k: _as_jsonb(value[k]) for k in sorted(value, key=lambda k: (len(k), k))}
    if isinstance(value, list):
        return [_as_jsonb(v) for v in value]
    if isinstance(value, float) and not isinstance(value, bool):
        if value == 0:
            return 0.0
        if abs(value) >= 1e16:
            return int(value)
    return value


@settings(max_examples=200)
@given(json_values)
def test_a_json_document_hashes_alike_however_the_database_gives_it_back(doc: Any) -> None:
    assert canonical_document(doc) == canonical_document(_as_jsonb(doc))
    assert canonical_document(json.loads(canonical_document(doc))) == canonical_document(doc)


@given(st.one_of(scalars, st.floats(), st.binary()))
def test_canonical_json_never_raises_and_tells_types_apart(value: Any) -> None:
    assert canonical_json([value]) != canonical_json([object()])
    if not isinstance(value, bytes):
        assert canonical_json([value]) != canonical_json([b"odd"])


def _checkpoints(n: int) -> list[Checkpoint]:
    out: list[Checkpoint] = []
    for number in range(1, n + 1):
        c = Checkpoint(
            number,
            number * 10,
            "h" * 64,
            "t",
            out[-1].digest() if out else GENESIS,
            "flush",
            0,
            "k",
        )
        out.append(dataclasses.replace(c, signature=sign(c.payload())))
    return out


@given(st.integers(1, 5), st.data())
def test_checkpoints_verify_and_an_edit_or_a_gap_is_caught(n: int, data: st.DataObject) -> None:
    checkpoints = _checkpoints(n)
    assert check_checkpoints(checkpoints, check_sig) is None
    i = data.draw(st.integers(0, n - 1))
    edited = list(checkpoints)
    edited[i] = dataclasses.replace(edited[i], position=edited[i].position + 1)
    problem = check_checkpoints(edited, check_sig)
    assert problem is not None
    assert problem.kind is ProblemKind.CHECKPOINT_SIGNATURE_INVALID
    if n >= 3:
        gap = [c for c in checkpoints if c.number != 2]
        problem = check_checkpoints(gap, check_sig)
        assert problem is not None
        assert problem.kind is ProblemKind.CHECKPOINT_MISSING


def _signed_at_heads(entries: list[ChainEntry], positions: list[int]) -> list[Checkpoint]:
    out: list[Checkpoint] = []
    for number, position in enumerate(positions, 1):
        c = Checkpoint(
            number,
            position,
            entries[position - 1].entry_hash,
            "t",
            out[-1].digest() if out else GENESIS,
            "flush",
            0,
            "k",
        )
        out.append(dataclasses.replace(c, signature=sign(c.payload())))
    return out


@given(st.lists(records, min_size=2, max_size=8), st.data())
def test_a_witness_catches_the_newest_records_removed_with_their_checkpoints(
    recs: list[Any], data: st.DataObject
) -> None:
    entries = build(recs)
    positions = sorted(set(data.draw(st.lists(st.integers(1, len(recs)), min_size=1))))
    witnessed = _signed_at_heads(entries, positions)

    def verified(kept: int) -> ChainVerifier:
        """The chain as a verifier walks it when only the first ``kept`` records remain."""
        verifier = ChainVerifier()
        verifier.watch(c.position for c in witnessed)
        for entry, (values, children) in zip(entries[:kept], recs[:kept], strict=True):
            stored = StoredRecord(record_digest(FMT, values, children), entry.position)
            verifier.feed(entry, stored)
        assert verifier.problem is None
        return verifier

    whole = verified(len(recs))
    assert check_witness(witnessed, witnessed, whole, check_sig, "k") is None
    # The store rolled back to before the newest witnessed checkpoint, that checkpoint
    # deleted with the records: only the witness can tell.
    newest = witnessed[-1]
    kept = newest.position - 1
    if kept >= 1:
        problem = check_witness(witnessed, witnessed[:-1], verified(kept), check_sig, "k")
        assert problem is not None
        assert problem.kind is ProblemKind.RECORDS_MISSING_AT_END
        assert problem.checkpoint == newest.number
    # A checkpoint the database lost, one it holds otherwise, one the witness's copy edited.
    problem = check_witness(witnessed, witnessed[1:], whole, check_sig, "k")
    assert problem is not None
    assert (problem.kind, problem.checkpoint) == (ProblemKind.CHECKPOINT_MISSING, 1)
    other = [dataclasses.replace(witnessed[0], created_at="later"), *witnessed[1:]]
    problem = check_witness(witnessed, other, whole, check_sig, "k")
    assert problem is not None
    assert (problem.kind, problem.checkpoint) == (ProblemKind.CHECKPOINT_MISMATCH, 1)
    edited = [dataclasses.replace(witnessed[0], head_hash="0" * 64), *witnessed[1:]]
    problem = check_witness(edited, witnessed, whole, check_sig, "k")
    assert problem is not None
    assert problem.kind is ProblemKind.WITNESS_INVALID
