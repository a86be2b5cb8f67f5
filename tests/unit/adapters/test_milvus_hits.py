"""How the Milvus adapter reads a pymilvus search hit."""

from __future__ import annotations

from pymilvus.client.search_result import Hit

from lookup_knowledge.adapters.milvus.hits import flat_hit as _flat


def test_a_hit_becomes_one_plain_dict_of_key_distance_and_fields() -> None:
    hit = Hit(
        {"evidence_key": "a#chunk-0", "distance": 0.5, "entity": {"doc_id": "a", "title": "T"}},
        pk_name="evidence_key",
    )
    row = _flat(hit)
    assert type(row) is dict
    assert row == {"evidence_key": "a#chunk-0", "distance": 0.5, "doc_id": "a", "title": "T"}


def test_a_hit_of_a_server_before_2_4_keeps_its_id_key_and_an_empty_entity() -> None:
    row = _flat(Hit({"id": "a#chunk-0", "distance": 1.0, "entity": {}}, pk_name="id"))
    assert row == {"id": "a#chunk-0", "distance": 1.0}
