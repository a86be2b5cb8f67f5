"""The request values every entry point builds for ``LookupApp``."""

from __future__ import annotations

from pathlib import Path

import pytest

from lookup_knowledge.adapters.api_requests import (
    IngestRequest,
    LookupRequest,
    ingest_request,
    lookup_request,
)
from lookup_knowledge.domain.errors import InvalidInputError
from lookup_knowledge.domain.model import SearchMode


def test_the_keyword_form_and_a_whole_request_name_the_same_lookup() -> None:
    whole = LookupRequest("q", session_id="s", mode="HYBRID", category="ops")
    assert lookup_request("q", {"session_id": "s", "mode": "HYBRID", "category": "ops"}) == whole
    assert lookup_request(whole, {}) is whole
    assert lookup_request(whole, {"step_id": "2"}).step_id == "2"
    assert whole.options().mode is SearchMode.HYBRID


def test_a_lookup_without_a_session_is_refused() -> None:
    with pytest.raises(TypeError, match="session_id"):
        lookup_request("q", {})


def test_an_unknown_mode_is_refused_when_the_options_are_made() -> None:
    with pytest.raises(InvalidInputError, match="unknown search mode"):
        LookupRequest("q", session_id="s", mode="fuzzy").options()


def test_an_ingest_request_checks_its_access_metadata() -> None:
    request = ingest_request([Path("docs")], {"tenant": "acme", "allowed_groups": ["ops"]})
    assert request == IngestRequest([Path("docs")], tenant="acme", allowed_groups=["ops"])
    assert request.access().allowed_groups == frozenset({"ops"})
    with pytest.raises(InvalidInputError, match="list of group names"):
        IngestRequest("docs", allowed_groups="ops").access()
