"""Configuration: one validated settings model, read from defaults < a config file <
environment variables < explicit overrides. See docs/configuration.md for every key."""

from lookup_knowledge.adapters.config.display import (
    describe_settings,
    reference_markdown,
    reference_rows,
)
from lookup_knowledge.adapters.config.keys import CONFIG_FILE_ENV, ENV_PREFIX, env_var_name
from lookup_knowledge.adapters.config.loading import LoadedSettings, load_settings
from lookup_knowledge.adapters.config.network import is_loopback
from lookup_knowledge.adapters.config.properties import parse_properties
from lookup_knowledge.adapters.config.redaction import mask_url
from lookup_knowledge.adapters.config.settings import (
    AuditDurability,
    EmbedderProvider,
    SearchBackend,
    ServerSettings,
    Settings,
)

__all__ = [
    "CONFIG_FILE_ENV",
    "ENV_PREFIX",
    "AuditDurability",
    "EmbedderProvider",
    "LoadedSettings",
    "SearchBackend",
    "ServerSettings",
    "Settings",
    "describe_settings",
    "env_var_name",
    "is_loopback",
    "load_settings",
    "mask_url",
    "parse_properties",
    "reference_markdown",
    "reference_rows",
]
