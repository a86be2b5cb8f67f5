"""``access.mode`` and the MCP principals in the settings: defaults, values, refusals."""

from __future__ import annotations

import pytest

from lookup_knowledge.adapters.config import load_settings
from lookup_knowledge.domain.access import AccessMode, Principal
from lookup_knowledge.domain.errors import ConfigurationError

DIGEST = "0" * 64


def test_access_is_off_by_default_and_enforced_on_request() -> None:
    assert load_settings().settings.to_lookup_config().access_mode is AccessMode.OFF
    loaded = load_settings(overrides={"access.mode": "enforced"}).settings
    assert loaded.to_lookup_config().access_mode is AccessMode.ENFORCED


def test_the_environment_sets_the_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOOKUP_KNOWLEDGE_ACCESS__MODE", "enforced")
    assert load_settings().settings.access.mode is AccessMode.ENFORCED


def test_mcp_principals_are_read_and_checked() -> None:
    settings = load_settings(
        overrides={
            "mcp.tenant": "acme",
            "mcp.groups": "hr, ops",
            "mcp.principals": {DIGEST: {"tenant": "globex", "user": "bot", "groups": ["x"]}},
        }
    ).settings
    assert settings.mcp.principal() == Principal("acme", groups=frozenset({"hr", "ops"}))
    assert settings.mcp.principals_by_token_hash() == {
        DIGEST: Principal("globex", "bot", frozenset({"x"}))
    }


@pytest.mark.parametrize(
    "overrides",
    [
        {"access.mode": "on"},
        {"mcp.tenant": " acme"},
        {"mcp.user": "u"},  # a user without a tenant
        {"mcp.principals": {"not-a-digest": {"tenant": "t"}}},
        {"mcp.principals": {DIGEST: {"tenant": "t\nx"}}},
        {"mcp.principals": {DIGEST: {"user": "u"}}},
    ],
)
def test_unusable_values_are_configuration_errors(overrides: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        load_settings(overrides=overrides)
