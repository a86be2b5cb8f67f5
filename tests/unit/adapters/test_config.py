"""The settings model and its loader: sources, precedence, validation, display."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lookup_knowledge.adapters.config import (
    CONFIG_FILE_ENV,
    LoadedSettings,
    Settings,
    describe_settings,
    env_var_name,
    load_settings,
    parse_properties,
    reference_markdown,
    reference_rows,
)
from lookup_knowledge.adapters.config.keys import key_schema
from lookup_knowledge.adapters.config.sources import environment_layer
from lookup_knowledge.application.lookup import LookupConfig
from lookup_knowledge.domain.errors import ConfigurationError
from lookup_knowledge.domain.model import SearchMode
from lookup_knowledge.domain.settings import MAX_RETRIEVE_K, MAX_RETURN_N

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Relative defaults resolve against the working directory at load time.
    monkeypatch.chdir(tmp_path)


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def load(
    config_file: Path | None = None,
    overrides: dict[str, object] | None = None,
    *,
    env: dict[str, str] | None = None,
    **environ: str,
) -> LoadedSettings:
    return load_settings(config_file, overrides, environ={**(env or {}), **environ})


def fails(
    config_file: Path | None = None,
    overrides: dict[str, object] | None = None,
    *,
    env: dict[str, str] | None = None,
    **environ: str,
) -> ConfigurationError:
    with pytest.raises(ConfigurationError) as caught:
        load(config_file, overrides, env=env, **environ)
    return caught.value


def rows(loaded: LoadedSettings) -> dict[str, tuple[str, str]]:
    return {key: (value, source) for key, value, source in describe_settings(loaded)}


# --- defaults ---------------------------------------------------------------------------


def test_defaults_match_the_documented_values(tmp_path: Path) -> None:
    loaded = load()
    s = loaded.settings
    assert s.data_dir == tmp_path / ".lookup-knowledge"
    assert s.data_dir.is_absolute()
    assert (s.retrieval.retrieve_k, s.retrieval.return_n) == (20, 5)
    assert s.retrieval.max_chunks_per_document == 2
    # no one threshold for every mode: each mode's own, from the pooled fit
    assert s.retrieval.min_relevance is None
    assert s.retrieval.min_relevance_for(SearchMode.DENSE) == 0.02
    assert s.retrieval.min_relevance_for(SearchMode.SPARSE) == 0.02
    assert s.retrieval.min_relevance_for(SearchMode.HYBRID) == 0.03
    assert s.rag.search_mode is SearchMode.HYBRID
    assert s.rag.rerank.source_type == {"runbook": 0.03, "faq": 0.02}
    assert s.rag.domains == {}
    assert s.search.backend == "milvus"
    assert s.milvus_uri == str(tmp_path / ".lookup-knowledge" / "milvus.db")
    assert s.milvus.collection == "knowledge"
    assert s.milvus.timeout_s == 10.0
    assert s.milvus_token is None
    assert s.embedder.provider == "onnx-minilm"
    assert s.embedder.batch_size == 32
    assert s.embedder.hashing.dimension == 384
    assert s.embedder.openai.max_retries == 3
    assert s.audit_database_url == f"sqlite:///{tmp_path / '.lookup-knowledge' / 'audit.db'}"
    assert s.audit_journal_dir == tmp_path / ".lookup-knowledge" / "audit-journal"
    assert s.audit.enabled
    assert s.audit.auto_migrate
    assert (s.ingest.chunk_size, s.ingest.chunk_overlap, s.ingest.batch_size) == (256, 32, 64)
    assert (s.milvus.index.type, s.milvus.index.m, s.milvus.search_ef) == ("HNSW", 16, 256)
    assert s.rag.text_analysis.language == "english"
    assert (s.log.level, s.log.json_) == ("INFO", False)
    assert set(loaded.sources.values()) == {"default"}
    assert loaded.config_file is None


def test_default_lookup_config_matches_the_domain_defaults() -> None:
    config = load().settings.to_lookup_config()
    domain = LookupConfig()
    assert config.retrieval == domain.retrieval
    # The product's default mode is hybrid (measured best, benchmarks/README.md); the
    # use case's own default stays dense, which every search port can serve.
    assert (config.mode, domain.mode) == (SearchMode.HYBRID, SearchMode.DENSE)
    assert config.calibration == domain.calibration
    assert config.projection == domain.projection
    assert config.quality == domain.quality
    assert config.context_char_budget == domain.context_char_budget
    assert (config.engine_grouping, config.late_materialisation) == (False, False)
    assert config.rerank.relevance == domain.rerank.relevance
    assert config.rerank.hint_alignment == domain.rerank.hint_alignment
    assert dict(config.rerank.source_type) == {"runbook": 0.03, "faq": 0.02}


def test_settings_built_in_code_read_nothing_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LOOKUP_KNOWLEDGE_RAG__RETRIEVE_K", "99")
    assert Settings().retrieval.retrieve_k == 20
    assert load_settings().settings.retrieval.retrieve_k == 99  # os.environ by default


def test_to_lookup_config_carries_every_pipeline_key() -> None:
    config = load(
        overrides={
            "rag.search-mode": "hybrid",
            "rag.engine-grouping": True,
            "rag.late-materialisation": False,
            "rag.hybrid.rrf-k": 30,
            "rag.relevance.bm25-saturation": 4.5,
            "rag.rerank.enabled": False,
            "rag.rerank.weights.entity-match": 0.3,
            "rag.rerank.source-type.design-note": -0.01,
            "rag.context.char-budget": 900,
            "rag.context.min-excerpt-chars": 40,
            "rag.projection": {"max-blocks": 3, "max-excerpt-chars": 500},
            "rag.projection.max-total-chars": 1500,
            "rag.quality": {"medium": 0.3, "high": 0.7},
            "rag.max-chunks-per-document": 0,
            "rag.min-relevance": 0.35,
        }
    ).settings.to_lookup_config()
    assert config.mode is SearchMode.HYBRID
    assert config.engine_grouping
    assert not config.late_materialisation
    assert (config.calibration.rrf_k, config.calibration.bm25_saturation) == (30, 4.5)
    assert not config.rerank.enabled
    assert config.rerank.entity_match == 0.3
    assert dict(config.rerank.source_type) == {
        "runbook": 0.03,
        "faq": 0.02,
        "design-note": -0.01,
    }
    assert (config.context_char_budget, config.context_min_excerpt_chars) == (900, 40)
    assert (config.projection.max_blocks, config.projection.max_excerpt_chars) == (3, 500)
    assert config.projection.max_total_chars == 1500
    assert config.projection.min_excerpt_chars == 40
    assert (config.quality.medium, config.quality.high) == (0.3, 0.7)
    assert config.retrieval.max_chunks_per_document is None  # 0 turns the cap off
    assert config.retrieval.min_relevance == 0.35


# --- sources and precedence -------------------------------------------------------------


@pytest.mark.parametrize(
    ("use_file", "use_env", "use_override", "expected", "source"),
    [
        (False, False, False, 20, "default"),
        (True, False, False, 30, "file"),
        (True, True, False, 40, "env:LOOKUP_KNOWLEDGE_RAG__RETRIEVE_K"),
        (False, True, False, 40, "env:LOOKUP_KNOWLEDGE_RAG__RETRIEVE_K"),
        (True, True, True, 50, "override"),
        (True, False, True, 50, "override"),
    ],
)
def test_precedence_is_defaults_file_env_overrides(
    tmp_path: Path,
    use_file: bool,
    use_env: bool,
    use_override: bool,
    expected: int,
    source: str,
) -> None:
    config = write(tmp_path / "app.properties", "rag.retrieve-k=30\n")
    environ = {"LOOKUP_KNOWLEDGE_RAG__RETRIEVE_K": "40"} if use_env else {}
    loaded = load(
        config if use_file else None,
        {"rag.retrieve-k": 50} if use_override else None,
        env=environ,
    )
    assert loaded.settings.rag.retrieve_k == (None if expected == 20 else expected)
    assert loaded.settings.retrieval.retrieve_k == expected
    want = f"file:{config}" if source == "file" else source
    assert loaded.sources["rag.retrieve-k"] == want


def test_layers_merge_key_by_key(tmp_path: Path) -> None:
    config = write(
        tmp_path / "app.yaml",
        "rag:\n  retrieve-k: 30\n  return-n: 4\nmilvus:\n  collection: from_file\n",
    )
    loaded = load(
        config,
        {"milvus.collection": "from_override"},
        LOOKUP_KNOWLEDGE_RAG__RETURN_N="6",
    )
    s = loaded.settings
    assert (s.retrieval.retrieve_k, s.retrieval.return_n) == (30, 6)
    assert s.milvus.collection == "from_override"
    assert loaded.sources["rag.retrieve-k"] == f"file:{config}"
    assert loaded.sources["rag.return-n"] == "env:LOOKUP_KNOWLEDGE_RAG__RETURN_N"
    assert loaded.sources["milvus.collection"] == "override"
    assert loaded.sources["log.level"] == "default"


def test_map_entries_merge_across_layers(tmp_path: Path) -> None:
    config = write(tmp_path / "app.properties", "rag.rerank.source-type.design=0.04\n")
    loaded = load(config, {"rag.rerank.source-type": {"faq": 0.0}})
    assert loaded.settings.rag.rerank.source_type == {"runbook": 0.03, "faq": 0.0, "design": 0.04}
    assert loaded.sources["rag.rerank.source-type.runbook"] == "default"
    assert loaded.sources["rag.rerank.source-type.design"] == f"file:{config}"
    assert loaded.sources["rag.rerank.source-type.faq"] == "override"
    assert loaded.sources["rag.rerank.source-type"] == "override"


def test_config_file_from_environment_variable(tmp_path: Path) -> None:
    config = write(tmp_path / "lk.toml", "[rag]\nreturn-n = 3\n")
    loaded = load(env={CONFIG_FILE_ENV: str(config)})
    assert loaded.settings.retrieval.return_n == 3
    assert loaded.config_file == config


def test_explicit_config_file_wins_over_the_environment_variable(tmp_path: Path) -> None:
    explicit = write(tmp_path / "a.yaml", "rag.return-n: 2\n")
    other = write(tmp_path / "b.yaml", "rag.return-n: 3\n")
    loaded = load(explicit, env={CONFIG_FILE_ENV: str(other)})
    assert loaded.settings.retrieval.return_n == 2


def test_relative_config_file_path_is_relative_to_the_working_directory(
    tmp_path: Path,
) -> None:
    write(tmp_path / "rel.yaml", "rag.return-n: 4\n")
    loaded = load(Path("rel.yaml"))
    assert loaded.config_file == tmp_path / "rel.yaml"
    assert loaded.sources["rag.return-n"] == f"file:{tmp_path / 'rel.yaml'}"


# --- legacy rag.top-k -------------------------------------------------------------------


def test_legacy_top_k_sets_both_widths_when_neither_is_set(tmp_path: Path) -> None:
    config = write(tmp_path / "legacy.properties", "rag.top-k=8\n")
    loaded = load(config)
    assert (loaded.settings.retrieval.retrieve_k, loaded.settings.retrieval.return_n) == (8, 8)
    shown = rows(loaded)
    assert shown["rag.retrieve-k"] == ("8", f"file:{config} via rag.top-k")
    assert shown["rag.return-n"] == ("8", f"file:{config} via rag.top-k")
    assert shown["rag.top-k"] == ("8", f"file:{config}")


@pytest.mark.parametrize(
    ("overrides", "widths"),
    [
        ({"rag.top-k": 8, "rag.retrieve-k": 30}, (30, 5)),
        ({"rag.top-k": 8, "rag.return-n": 3}, (20, 3)),
        ({"rag.top-k": 8, "rag.retrieve-k": 12, "rag.return-n": 4}, (12, 4)),
    ],
)
def test_new_width_keys_win_over_legacy_top_k(
    overrides: dict[str, object], widths: tuple[int, int]
) -> None:
    retrieval = load(overrides=overrides).settings.retrieval
    assert (retrieval.retrieve_k, retrieval.return_n) == widths


def test_retrieve_k_alone_below_the_default_return_n_is_valid() -> None:
    loaded = load(overrides={"rag.retrieve-k": 3})
    assert loaded.settings.retrieval.return_n == 3
    assert rows(loaded)["rag.return-n"] == ("3", "derived")


# --- .properties ------------------------------------------------------------------------


def test_properties_file_as_the_java_system_wrote_it(tmp_path: Path) -> None:
    config = write(
        tmp_path / "application.properties",
        "# retrieval widths, kept from the Java system\n"
        "! bang comments too\n"
        "rag.retrieve-k=20\n"
        "rag.return-n: 5\n"
        "rag.max-chunks-per-document 2\n"
        "   rag.min-relevance  =  0.25   \n"
        "rag.domains.database=postgres, pg, \\\n"
        "    数据库, mysql\n"
        "rag.domains.network=dns,\\u8d1f\\u8f7d\\u5747\\u8861\n"
        "rag.rerank.source-type.runbook=0.05\n"
        "rag.search-mode=hybrid\n"
        "milvus.uri=http://milvus.internal:19530\n"
        "audit.database-url=postgresql+psycopg://app:s3cr%23t@db:5432/audit\n",
    )
    s = load(config).settings
    assert (s.retrieval.retrieve_k, s.retrieval.return_n) == (20, 5)
    assert s.retrieval.max_chunks_per_document == 2
    assert s.retrieval.min_relevance == 0.25
    assert s.retrieval.min_relevance_for(SearchMode.DENSE) == 0.25  # overrides every mode
    assert s.rag.domains == {
        "database": ["postgres", "pg", "数据库", "mysql"],
        "network": ["dns", "负载均衡"],
    }
    assert s.rag.rerank.source_type["runbook"] == 0.05
    assert s.rag.search_mode is SearchMode.HYBRID
    assert s.milvus_uri == "http://milvus.internal:19530"
    assert s.audit_database_url == "postgresql+psycopg://app:s3cr%23t@db:5432/audit"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a=1", {"a": "1"}),
        ("a = 1", {"a": "1"}),
        ("a:1", {"a": "1"}),
        ("a 1", {"a": "1"}),
        ("a\t=\t1", {"a": "1"}),
        ("a=", {"a": ""}),
        ("a", {"a": ""}),
        ("a=b=c", {"a": "b=c"}),
        ("a=x # not a comment", {"a": "x # not a comment"}),
        ("# a=1\n  ! b=2\n\n", {}),
        ("a=1\na=2", {"a": "2"}),
        ("a=one \\\n   two", {"a": "one two"}),
        ("a=one\\\\\nb=2", {"a": "one\\", "b": "2"}),
        ("a=\\\n\\\n  end", {"a": "end"}),
        ("a=tail\\", {"a": "tail"}),
        ("a=x\\ ", {"a": "x "}),
        ("a\\=b=c", {"a=b": "c"}),
        ("a\\ b=c", {"a b": "c"}),
        ("a=\\t\\n\\u00e9\\q", {"a": "\t\né" + "q"}),
        ("a=\\uD83D\\uDE00", {"a": "😀"}),
        ("a=1\r\nb=2\rc=3", {"a": "1", "b": "2", "c": "3"}),
        ("\ufeffa=1", {"a": "1"}),
        ("# comment ending in backslash \\\na=1", {"a": "1"}),
        ("k=数据库, 缓存", {"k": "数据库, 缓存"}),
    ],
)
def test_properties_parser_follows_java_rules(text: str, expected: dict[str, str]) -> None:
    assert parse_properties(text) == expected


def test_properties_malformed_unicode_escape_names_the_file_and_line(tmp_path: Path) -> None:
    config = write(tmp_path / "bad.properties", "a=1\nrag.domains.x=\\u12G4\n")
    err = fails(config)
    assert err.key == "config_file"
    assert err.value == str(config)
    assert "line 2" in err.rule


def _escape_properties(text: str, *, key: bool) -> str:
    out = []
    for index, char in enumerate(text):
        if char in "\\=:#!" or (char == " " and (key or index == 0)):
            out.append("\\" + char)
        elif char in "\t\n\r\f":
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}[char])
        elif not char.isprintable():
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    if not key and text.endswith(" "):
        out[-1] = "\\ "
    return "".join(out)


@settings(max_examples=200)
@given(
    st.dictionaries(
        st.text(alphabet=st.characters(blacklist_categories=["Cs"], max_codepoint=0xFFFF)),
        st.text(alphabet=st.characters(blacklist_categories=["Cs"], max_codepoint=0xFFFF)),
        max_size=5,
    )
)
def test_properties_round_trip_any_keys_and_values(entries: dict[str, str]) -> None:
    text = "\n".join(
        f"{_escape_properties(k, key=True)}={_escape_properties(v, key=False)}"
        for k, v in entries.items()
    )
    assert parse_properties(text) == entries


# --- YAML, TOML, JSON -------------------------------------------------------------------


def test_yaml_nested_and_dotted_keys(tmp_path: Path) -> None:
    config = write(
        tmp_path / "app.yml",
        """
data-dir: data
rag:
  retrieve-k: 40
  rerank.weights.relevance: 0.9
  domains:
    database: [postgres, pg]
    缓存: redis, memcached
rag.return-n: 7
embedder:
  provider: hashing
  hashing: {dimension: 64}
log.json: true
""",
    )
    s = load(config).settings
    assert s.data_dir == tmp_path / "data"
    assert (s.retrieval.retrieve_k, s.retrieval.return_n) == (40, 7)
    assert s.rag.rerank.weights.relevance == 0.9
    assert s.rag.domains == {"database": ["postgres", "pg"], "缓存": ["redis", "memcached"]}
    assert s.embedder.provider == "hashing"
    assert s.embedder.hashing.dimension == 64
    assert s.log.json_ is True


def test_yaml_accepts_snake_case_keys(tmp_path: Path) -> None:
    config = write(tmp_path / "app.yaml", "rag:\n  retrieve_k: 25\n  max_chunks_per_document: 3\n")
    s = load(config).settings
    assert (s.retrieval.retrieve_k, s.retrieval.max_chunks_per_document) == (25, 3)


def test_toml_file(tmp_path: Path) -> None:
    config = write(
        tmp_path / "app.toml",
        """
[rag]
retrieve-k = 25
search-mode = "sparse"

[rag.rerank.source-type]
faq = 0.01

[rag.domains]
database = ["postgres", "数据库"]

[embedder]
provider = "none"

[audit]
enabled = false
""",
    )
    s = load(config).settings
    assert s.retrieval.retrieve_k == 25
    assert s.rag.search_mode is SearchMode.SPARSE
    assert s.rag.rerank.source_type == {"runbook": 0.03, "faq": 0.01}
    assert s.rag.domains == {"database": ["postgres", "数据库"]}
    assert s.embedder.provider == "none"
    assert s.audit.enabled is False


def test_json_file(tmp_path: Path) -> None:
    config = write(tmp_path / "app.json", '{"rag": {"return-n": 2}, "log.level": "debug"}')
    s = load(config).settings
    assert s.retrieval.return_n == 2
    assert s.log.level == "DEBUG"


def test_empty_config_file_means_defaults(tmp_path: Path) -> None:
    loaded = load(write(tmp_path / "empty.yaml", "# nothing yet\n"))
    assert set(loaded.sources.values()) == {"default"}


# --- environment ------------------------------------------------------------------------


def test_env_scheme(tmp_path: Path) -> None:
    loaded = load(
        LOOKUP_KNOWLEDGE_DATA_DIR=str(tmp_path / "lk"),
        LOOKUP_KNOWLEDGE_RAG__RETRIEVE_K="30",
        LOOKUP_KNOWLEDGE_RAG__MAX_CHUNKS_PER_DOCUMENT="0",
        LOOKUP_KNOWLEDGE_RAG__RERANK__WEIGHTS__DOMAIN_MATCH="0.2",
        LOOKUP_KNOWLEDGE_RAG__RERANK__SOURCE_TYPE__RUNBOOK="0.1",
        LOOKUP_KNOWLEDGE_RAG__DOMAINS__DATABASE="postgres, pg",
        LOOKUP_KNOWLEDGE_MILVUS__URI="https://milvus.example.com:443",
        LOOKUP_KNOWLEDGE_MILVUS__TOKEN="root:Milvus",
        LOOKUP_KNOWLEDGE_EMBEDDER__OPENAI__TIMEOUT_S="5",
        LOOKUP_KNOWLEDGE_LOG__JSON="true",
        UNRELATED_VARIABLE="ignored",
    )
    s = loaded.settings
    assert s.data_dir == tmp_path / "lk"
    assert s.audit_journal_dir == tmp_path / "lk" / "audit-journal"
    assert s.retrieval.retrieve_k == 30
    assert s.retrieval.max_chunks_per_document is None
    assert s.rag.rerank.weights.domain_match == 0.2
    assert s.rag.rerank.source_type["runbook"] == 0.1
    assert s.rag.domains == {"database": ["postgres", "pg"]}
    assert s.milvus_uri == "https://milvus.example.com:443"
    assert s.milvus_token == "root:Milvus"
    assert s.embedder.openai.timeout_s == 5.0
    assert s.log.json_ is True
    assert loaded.sources["data-dir"] == "env:LOOKUP_KNOWLEDGE_DATA_DIR"
    assert loaded.sources["rag.domains.database"] == "env:LOOKUP_KNOWLEDGE_RAG__DOMAINS__DATABASE"


def test_env_map_as_json() -> None:
    s = load(LOOKUP_KNOWLEDGE_RAG__DOMAINS='{"data-platform": ["spark", "flink"]}').settings
    assert s.rag.domains == {"data-platform": ["spark", "flink"]}


def test_env_var_name_round_trips_for_every_key() -> None:
    for key in key_schema().keys:
        if key.kind == "leaf":
            layer = environment_layer({env_var_name(key.name): "x"})
            assert list(layer) == [key.path], key.name


def test_empty_env_value_leaves_an_optional_key_unset() -> None:
    s = load(LOOKUP_KNOWLEDGE_MILVUS__TOKEN="", LOOKUP_KNOWLEDGE_RAG__TOP_K="").settings
    assert s.milvus_token is None
    assert s.rag.top_k is None


def test_unknown_env_variable_is_an_error_with_a_suggestion() -> None:
    err = fails(LOOKUP_KNOWLEDGE_RAG__RETREIVE_K="30")
    assert err.key == "LOOKUP_KNOWLEDGE_RAG__RETREIVE_K"
    assert err.value == "30"
    assert "did you mean LOOKUP_KNOWLEDGE_RAG__RETRIEVE_K (rag.retrieve-k)?" in err.rule


def test_single_underscore_typo_of_a_secret_does_not_leak_it() -> None:
    err = fails(LOOKUP_KNOWLEDGE_MILVUS_TOKEN="hunter2")
    assert "LOOKUP_KNOWLEDGE_MILVUS__TOKEN" in err.rule
    assert "hunter2" not in str(err)


def test_openai_api_key_falls_back_to_openai_api_key_env() -> None:
    loaded = load(OPENAI_API_KEY="sk-from-env")
    assert loaded.settings.openai_api_key == "sk-from-env"
    assert loaded.sources["embedder.openai.api-key"] == "env:OPENAI_API_KEY"
    explicit = load(
        OPENAI_API_KEY="sk-from-env", LOOKUP_KNOWLEDGE_EMBEDDER__OPENAI__API_KEY="sk-own"
    )
    assert explicit.settings.openai_api_key == "sk-own"


# --- overrides --------------------------------------------------------------------------


def test_overrides_take_dotted_nested_and_snake_case_keys() -> None:
    s = load(
        overrides={
            "rag.retrieve-k": 30,
            "rag": {"return_n": 6, "rerank": {"weights": {"keyword-match": 0.2}}},
            "embedder.openai": {"api_key": "sk-x", "dimension": 256},
            "search.backend": "memory",
            "data_dir": "elsewhere",
        }
    ).settings
    assert (s.retrieval.retrieve_k, s.retrieval.return_n) == (30, 6)
    assert s.rag.rerank.weights.keyword_match == 0.2
    assert s.openai_api_key == "sk-x"
    assert s.embedder.openai.dimension == 256
    assert s.search.backend == "memory"
    assert s.data_dir.name == "elsewhere"


# --- validation -------------------------------------------------------------------------


def test_return_n_above_retrieve_k_names_both_keys(tmp_path: Path) -> None:
    config = write(tmp_path / "app.properties", "rag.retrieve-k=10\nrag.return-n=12\n")
    err = fails(config)
    assert (err.key, err.value) == ("rag.return-n", 12)
    assert "must be <= rag.retrieve-k (10)" in err.rule
    assert f"file:{config}" in err.rule
    assert str(err).startswith("invalid configuration rag.return-n=12: must be <=")


@pytest.mark.parametrize(
    ("overrides", "key", "value", "rule"),
    [
        ({"rag.context.char-budget": -5}, "rag.context.char-budget", -5, "must be >= 1"),
        ({"rag.projection.max-blocks": 0}, "rag.projection.max-blocks", 0, "must be >= 1"),
        ({"rag.search-mode": "semantic"}, "rag.search-mode", "semantic", "must be one of"),
        ({"rag.retrieve-k": "lots"}, "rag.retrieve-k", "lots", "must be a whole number"),
        ({"rag.retrieve-k": 2.5}, "rag.retrieve-k", 2.5, "must be a whole number"),
        ({"rag.retrieve-k": True}, "rag.retrieve-k", True, "must be a whole number"),
        ({"rag.retrieve-k": MAX_RETRIEVE_K + 1}, "rag.retrieve-k", MAX_RETRIEVE_K + 1, "<="),
        ({"rag.top-k": 0}, "rag.top-k", 0, "must be >= 1"),
        ({"rag.min-relevance": 1.5}, "rag.min-relevance", 1.5, "must be <= 1"),
        ({"rag.min-relevance": "nan"}, "rag.min-relevance", "nan", "finite"),
        ({"rag.max-chunks-per-document": -1}, "rag.max-chunks-per-document", -1, ">= 0"),
        ({"rag.rerank.weights.relevance": -0.1}, "rag.rerank.weights.relevance", -0.1, ">= 0"),
        (
            {"rag.rerank.source-type.faq": "inf"},
            "rag.rerank.source-type.faq",
            "inf",
            "finite",
        ),
        ({"rag.relevance.bm25-saturation": 0}, "rag.relevance.bm25-saturation", 0, "> 0"),
        ({"rag.hybrid.rrf-k": -1}, "rag.hybrid.rrf-k", -1, ">= 0"),
        ({"rag.engine-grouping": "maybe"}, "rag.engine-grouping", "maybe", "true or false"),
        (
            {"rag.quality": {"medium": 0.7, "high": 0.5}},
            "rag.quality.medium",
            0.7,
            "must be <= rag.quality.high (0.5)",
        ),
        ({"search.backend": "elastic"}, "search.backend", "elastic", "must be one of"),
        ({"milvus.uri": "milvus.sqlite"}, "milvus.uri", "milvus.sqlite", ".db"),
        ({"milvus.uri": "grpc://h:19530"}, "milvus.uri", "grpc://h:19530", "http(s)://"),
        ({"milvus.collection": ""}, "milvus.collection", "", "must not be empty"),
        ({"milvus.timeout-s": 0}, "milvus.timeout-s", 0, "> 0"),
        ({"embedder.provider": "bert"}, "embedder.provider", "bert", "must be one of"),
        ({"embedder.batch-size": 0}, "embedder.batch-size", 0, ">= 1"),
        ({"embedder.openai.base-url": "api.openai.com"}, "embedder.openai.base-url", None, "http"),
        ({"audit.database-url": "not a url"}, "audit.database-url", "not a url", "SQLAlchemy"),
        (
            {"ingest.chunk-overlap": 1200},
            "ingest.chunk-overlap",
            1200,
            "< half of ingest.chunk-size",
        ),
        ({"log.level": "LOUD"}, "log.level", "LOUD", "DEBUG, INFO"),
        ({"rag.domains.database": 5}, "rag.domains.database", 5, "list"),
    ],
)
def test_invalid_values_name_key_value_and_rule(
    overrides: dict[str, object], key: str, value: object, rule: str
) -> None:
    err = fails(overrides=overrides)
    assert err.key == key
    if value is not None:
        assert err.value == value
    assert rule in err.rule
    assert "(set by override)" in err.rule
    assert str(err).startswith(f"invalid configuration {key}=")


def test_legacy_top_k_above_the_return_n_bound_is_rejected() -> None:
    err = fails(overrides={"rag.top-k": MAX_RETURN_N + 1})
    assert err.key == "rag.top-k"


def test_embedder_none_needs_sparse_search() -> None:
    err = fails(overrides={"embedder.provider": "none"})
    assert err.key == "embedder.provider"
    assert "rag.search-mode=sparse" in err.rule
    assert load(overrides={"embedder.provider": "none", "rag.search-mode": "sparse"})


def test_several_problems_are_one_message_naming_the_others() -> None:
    err = fails(overrides={"rag.retrieve-k": "x", "log.level": "LOUD", "ingest.batch-size": 0})
    assert err.key == "rag.retrieve-k"
    assert "also invalid: ingest.batch-size, log.level" in err.rule


def test_value_from_env_names_the_variable_in_the_error() -> None:
    err = fails(LOOKUP_KNOWLEDGE_RAG__RETURN_N="five")
    assert err.key == "rag.return-n"
    assert err.value == "five"
    assert "(set by env:LOOKUP_KNOWLEDGE_RAG__RETURN_N)" in err.rule


@pytest.mark.parametrize(
    ("text", "key", "hint"),
    [
        ("rag.retreive-k=30\n", "rag.retreive-k", "rag.retrieve-k"),
        (
            "rag.rerank.weight.relevance=1\n",
            "rag.rerank.weight.relevance",
            "rag.rerank.weights.relevance",
        ),
        ("retrieve-k=30\n", "retrieve-k", "rag.retrieve-k"),
        ("milvus.url=x.db\n", "milvus.url", "milvus.uri"),
        ("rag.retrieve-k.extra=1\n", "rag.retrieve-k.extra", None),
    ],
)
def test_unknown_key_in_a_file_is_an_error_with_a_suggestion(
    tmp_path: Path, text: str, key: str, hint: str | None
) -> None:
    config = write(tmp_path / "typo.properties", text)
    err = fails(config)
    assert err.key == key
    assert "is not a known setting" in err.rule
    assert f"file:{config}" in err.rule
    if hint is not None:
        assert f"did you mean {hint}?" in err.rule


def test_unknown_nested_key_in_yaml_names_the_dotted_path(tmp_path: Path) -> None:
    err = fails(write(tmp_path / "app.yaml", "rag:\n  rerank:\n    enabld: false\n"))
    assert err.key == "rag.rerank.enabld"
    assert "did you mean rag.rerank.enabled?" in err.rule


def test_unknown_override_key_is_an_error() -> None:
    err = fails(overrides={"rag.return_k": 3})
    assert err.key == "rag.return_k"
    assert "did you mean rag.return-n?" in err.rule


def test_a_section_given_a_plain_value_is_an_error(tmp_path: Path) -> None:
    err = fails(write(tmp_path / "app.yaml", "rag: 5\n"))
    assert err.key == "rag"
    assert "group of settings" in err.rule


@pytest.mark.parametrize(
    ("name", "text", "rule"),
    [
        ("missing.yaml", None, "file not found"),
        ("app.ini", "a=1", "must end in"),
        ("broken.yaml", "rag: [unclosed", "cannot be parsed"),
        ("broken.toml", "rag = = 1", "cannot be parsed"),
        ("list.yaml", "- a\n- b\n", "mapping"),
    ],
)
def test_unusable_config_file_is_an_error(
    tmp_path: Path, name: str, text: str | None, rule: str
) -> None:
    path = tmp_path / name
    if text is not None:
        write(path, text)
    err = fails(env={CONFIG_FILE_ENV: str(path)})
    assert err.key == CONFIG_FILE_ENV
    assert err.value == str(path)
    assert rule in err.rule


# --- paths and the domain dictionary ----------------------------------------------------


def test_domains_file_is_relative_to_the_config_file_and_merges(tmp_path: Path) -> None:
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    write(
        conf_dir / "domains.yaml",
        "database: [postgres, pg]\nnetwork: dns, 负载均衡\n",
    )
    config = write(
        conf_dir / "app.properties",
        "rag.domains-file=domains.yaml\nrag.domains.database=pg, 数据库\nrag.domains.cache=redis\n",
    )
    s = load(config).settings
    assert s.domains_file == conf_dir / "domains.yaml"
    assert s.domain_dictionary() == {
        "database": ["postgres", "pg", "数据库"],
        "network": ["dns", "负载均衡"],
        "cache": ["redis"],
    }


def test_domains_file_from_env_is_relative_to_the_working_directory(tmp_path: Path) -> None:
    write(tmp_path / "d.yaml", "db: [pg]\n")
    s = load(LOOKUP_KNOWLEDGE_RAG__DOMAINS_FILE="d.yaml").settings
    assert s.domains_file == tmp_path / "d.yaml"
    assert s.domain_dictionary() == {"db": ["pg"]}


@pytest.mark.parametrize(
    ("text", "rule"),
    [(None, "readable file"), ("db: [pg\n", "valid YAML"), ("[a, b]\n", "mapping")],
)
def test_bad_domains_file_fails_at_load(tmp_path: Path, text: str | None, rule: str) -> None:
    path = tmp_path / "domains.yaml"
    if text is not None:
        write(path, text)
    err = fails(overrides={"rag.domains-file": str(path)})
    assert err.key == "rag.domains-file"
    assert rule in err.rule


def test_relative_paths_resolve_against_the_working_directory_at_load(tmp_path: Path) -> None:
    s = load(
        overrides={
            "data-dir": "d",
            "milvus.uri": "m/kb.db",
            "audit.journal-dir": "~/journal",
        }
    ).settings
    assert s.data_dir == tmp_path / "d"
    assert s.milvus_uri == str(tmp_path / "m" / "kb.db")
    assert s.audit_journal_dir == Path("~/journal").expanduser()


def test_the_journal_folder_is_still_read_under_its_old_key_and_name(tmp_path: Path) -> None:
    """``audit.spool-dir`` (a file, a variable, an override written for an older version)
    sets ``audit.journal-dir``; a data directory with an ``audit-spool`` folder keeps it."""
    config = tmp_path / "old.toml"
    config.write_text('[audit]\nspool-dir = "/srv/file"\n', encoding="utf-8")
    assert load(config).settings.audit_journal_dir == Path("/srv/file")
    from_env = load(LOOKUP_KNOWLEDGE_AUDIT__SPOOL_DIR="/srv/env").settings
    assert from_env.audit_journal_dir == Path("/srv/env")
    overridden = load(overrides={"audit.spool-dir": "/srv/override"}).settings
    assert overridden.audit_journal_dir == Path("/srv/override")

    data = tmp_path / "data"
    (data / "audit-spool").mkdir(parents=True)
    assert load(overrides={"data-dir": str(data)}).settings.audit_journal_dir == (
        data / "audit-spool"
    )
    fresh = load(overrides={"data-dir": str(tmp_path / "new")}).settings
    assert fresh.audit_journal_dir == tmp_path / "new" / "audit-journal"


# --- display: masking and sources -------------------------------------------------------


def test_describe_masks_secrets_and_names_sources(tmp_path: Path) -> None:
    config = write(
        tmp_path / "app.yaml",
        "audit:\n  database-url: postgresql+psycopg://app:s3cret@db:5432/audit\n"
        "milvus:\n  token: root:Milvus\n",
    )
    loaded = load(config, {"rag.retrieve-k": 30}, OPENAI_API_KEY="sk-live-123")
    shown = rows(loaded)
    assert shown["audit.database-url"] == (
        "postgresql+psycopg://app:****@db:5432/audit",
        f"file:{config}",
    )
    assert shown["milvus.token"] == ("****", f"file:{config}")
    assert shown["embedder.openai.api-key"] == ("****", "env:OPENAI_API_KEY")
    assert shown["rag.retrieve-k"] == ("30", "override")
    assert shown["log.level"] == ("INFO", "default")
    text = repr(describe_settings(loaded)) + repr(loaded.settings)
    for secret in ("s3cret", "root:Milvus", "sk-live-123"):
        assert secret not in text


def test_describe_lists_map_entries_and_every_key() -> None:
    shown = rows(load(overrides={"rag.domains.db": "pg, 数据库"}))
    assert shown["rag.domains.db"] == ("pg, 数据库", "override")
    assert shown["rag.rerank.source-type.runbook"] == ("0.03", "default")
    for key in key_schema().keys:
        if key.kind == "leaf":
            assert key.name in shown


def test_invalid_database_url_error_does_not_show_the_password() -> None:
    err = fails(overrides={"audit.database-url": "postgresql://app:s3cret@db:notaport/x"})
    assert err.key == "audit.database-url"
    assert "s3cret" not in str(err)


# --- the configuration reference --------------------------------------------------------


def test_every_key_is_documented_with_its_env_name() -> None:
    reference = reference_rows()
    assert [r[0] for r in reference] == [k.name for k in key_schema().keys]
    for key, default, env, meaning in reference:
        assert default, key
        assert env.startswith("LOOKUP_KNOWLEDGE_"), key
        assert meaning, key


def test_docs_embed_the_generated_reference() -> None:
    docs = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert reference_markdown() in docs


# --- properties of the model ------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(
    retrieve_k=st.none() | st.integers(min_value=-5, max_value=MAX_RETRIEVE_K + 5),
    return_n=st.none() | st.integers(min_value=-5, max_value=MAX_RETURN_N + 5),
    top_k=st.none() | st.integers(min_value=-5, max_value=MAX_RETURN_N + 5),
    cap=st.integers(min_value=-2, max_value=120),
)
def test_widths_either_load_consistently_or_fail_with_a_named_key(
    retrieve_k: int | None, return_n: int | None, top_k: int | None, cap: int
) -> None:
    overrides = {
        "rag.retrieve-k": retrieve_k,
        "rag.return-n": return_n,
        "rag.top-k": top_k,
        "rag.max-chunks-per-document": cap,
    }
    error: ConfigurationError | None = None
    try:
        loaded = load_settings(overrides=overrides, environ={})
    except ConfigurationError as caught:
        error = caught
    if error is not None:
        assert error.key in overrides
        return
    retrieval = loaded.settings.to_lookup_config().retrieval
    assert 1 <= retrieval.return_n <= retrieval.retrieve_k
    if retrieve_k is not None:
        assert retrieval.retrieve_k == retrieve_k
    if return_n is not None:
        assert retrieval.return_n == return_n


@settings(max_examples=100, deadline=None)
@given(
    weight=st.floats(allow_nan=True, allow_infinity=True),
    medium=st.floats(min_value=-1, max_value=2),
    high=st.floats(min_value=-1, max_value=2),
)
def test_anything_that_loads_builds_the_domain_objects(
    weight: float, medium: float, high: float
) -> None:
    overrides: dict[str, object] = {
        "rag.rerank.weights.hint-alignment": weight,
        "rag.rerank.source-type.faq": weight,
        "rag.quality.medium": medium,
        "rag.quality.high": high,
    }
    error: ConfigurationError | None = None
    try:
        loaded = load_settings(overrides=overrides, environ={})
    except ConfigurationError as caught:
        error = caught
    if error is not None:
        assert error.key in overrides
        return
    config = loaded.settings.to_lookup_config()  # never a bare ValueError
    assert math.isfinite(config.rerank.hint_alignment)
    assert 0 <= config.quality.medium <= config.quality.high <= 1


def test_show_does_not_credit_an_ignored_top_k(tmp_path: Path) -> None:
    from lookup_knowledge.adapters.config import describe_settings

    config = tmp_path / "app.properties"
    config.write_text("rag.retrieve-k=30\nrag.top-k=7\n", encoding="utf-8")
    loaded = load_settings(config_file=config, environ={})
    rows = {key: (value, source) for key, value, source in describe_settings(loaded)}
    assert rows["rag.return-n"][0] == "5"
    assert "top-k" not in rows["rag.return-n"][1]


def test_each_search_mode_has_its_own_min_relevance_key() -> None:
    s = load(
        overrides={
            "rag.relevance.min-dense": 0.11,
            "rag.relevance.min-sparse": 0.12,
            "rag.relevance.min-hybrid": 0.13,
        }
    ).settings
    assert s.retrieval.min_relevance_for(SearchMode.DENSE) == 0.11
    assert s.retrieval.min_relevance_for(SearchMode.SPARSE) == 0.12
    assert s.retrieval.min_relevance_for(SearchMode.HYBRID) == 0.13
