"""The command line does no work at import: ``--help`` and ``config show`` load no
driver, no storage adapter, no model runtime and no numpy (each costs a noticeable part
of a second and may need native libraries), and the root help does not import the
evaluation harness; a command that needs one of them imports it then."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = (
    "pymilvus",
    "milvus_lite",
    "pandas",
    "sqlalchemy",
    "alembic",
    "psycopg",
    "onnxruntime",
    "tokenizers",
    "numpy",
    "mcp",
    "fastapi",
)

# Runs the console script's command as `lookup-knowledge ARGS` would (what ``main``
# runs before its exit), then lists the top-level packages it loaded.
PROBE = """
import json, sys
from lookup_knowledge.adapters.cli.app import build_app, run
sys.argv = ["lookup-knowledge", *json.loads(sys.argv[1])]
try:
    run(build_app())
except SystemExit as done:
    code = done.code
sys.stdout.flush()
print("\\nMODULES " + json.dumps(sorted({name.split(".")[0] for name in sys.modules})))
print("OURS " + json.dumps(sorted(n for n in sys.modules if n.startswith("lookup_knowledge."))))
print("CODE " + json.dumps(code))
"""


def _probe(*args: str) -> tuple[set[str], set[str], object, str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(list(args))],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    lines = done.stdout.splitlines()

    def field(name: str) -> object:
        line = next(line for line in lines if line.startswith(name + " "))
        return json.loads(line.removeprefix(name + " "))

    modules, ours = field("MODULES"), field("OURS")
    assert isinstance(modules, list)
    assert isinstance(ours, list)
    return set(modules), set(ours), field("CODE"), done.stdout


def _loaded_by(*args: str) -> tuple[set[str], object, str]:
    modules, _, code, output = _probe(*args)
    return modules, code, output


@pytest.mark.parametrize(
    "args",
    [("--help",), ("lookup", "--help"), ("eval", "run", "--help"), ("db", "--help")],
)
def test_help_loads_no_driver_and_no_model_runtime(args: tuple[str, ...]) -> None:
    modules, code, output = _loaded_by(*args)
    assert code == 0
    assert "Usage" in output, "the help was printed"
    assert "typer" in modules, "the probe sees what the command line imported"
    assert not modules & set(HEAVY), f"{' '.join(args)} imported {sorted(modules & set(HEAVY))}"


@pytest.fixture(scope="module")
def config_show(tmp_path_factory: pytest.TempPathFactory) -> tuple[set[str], object, str]:
    return _loaded_by("--data-dir", str(tmp_path_factory.mktemp("data")), "config", "show")


@pytest.mark.parametrize("heavy", HEAVY)
def test_config_show_loads_no_driver_no_model_runtime_and_no_numpy(
    config_show: tuple[set[str], object, str], heavy: str
) -> None:
    modules, code, output = config_show
    assert code == 0
    assert "data-dir" in output, "the configuration was printed"
    assert "pydantic" in modules, "the probe sees what the command imported"
    assert heavy not in modules, f"config show imported {heavy}"


def test_the_root_help_lists_the_eval_group_without_importing_it() -> None:
    _, ours, code, output = _probe("--help")
    assert code == 0
    assert "eval" in output.split("Commands:", 1)[1], "the eval group is listed"
    assert not {n for n in ours if ".evaluation" in n or ".cli.eval" in n}, sorted(ours)
    assert not {n for n in ours if n.startswith("lookup_knowledge.application")}, sorted(ours)
    # ... and running it (its own help here) does import it.
    _, ours, code, output = _probe("eval", "--help")
    assert code == 0
    assert "replay" in output
    assert "lookup_knowledge.adapters.cli.eval" in ours


# What searching and embedding need, and a command that reads the audit store does not;
# nor the web frameworks the container's library would import to recognise their markers.
SEARCH_AND_MODEL = (
    "pymilvus",
    "milvus_lite",
    "pandas",
    "pyarrow",
    "grpc",
    "onnxruntime",
    "fastapi",
    "starlette",
    "werkzeug",
)

# Written by a lookup in another process (in-memory search, so the probe's own default
# configuration, Milvus Lite and the ONNX model, is what the audit commands start with).
RECORD_A_LOOKUP = """
import sys
from lookup_knowledge import create_app
overrides = {
    "data-dir": sys.argv[1],
    "search.backend": "memory",
    "embedder.provider": "hashing",
    "audit.keep-shown-text": sys.argv[2] == "keep",
}
with create_app(overrides=overrides) as app:
    folder = app.settings.data_dir.parent / "kb"
    folder.mkdir()
    (folder / "pool.md").write_text("# Pool\\n\\nPgBouncer keeps up to 16 server connections.\\n")
    app.ingest([folder], root=folder)
    result = app.lookup("how many server connections does PgBouncer keep", session_id="s-1")
    print(result["evidenceBlocks"][0]["document_id"])
"""


def _record_a_lookup(folder: Path, *, keep_shown_text: bool = True) -> tuple[str, str]:
    """(a data directory holding one recorded lookup of session s-1, the id it returned)."""
    data = str(folder / "data")
    done = subprocess.run(
        [sys.executable, "-c", RECORD_A_LOOKUP, data, "keep" if keep_shown_text else "hash"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return data, done.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    return _record_a_lookup(tmp_path_factory.mktemp("audit"))


@pytest.mark.parametrize(
    ("args", "expected_code"),
    [
        (("audit", "list", "--session", "s-1"), 0),
        (("audit", "stats"), 0),
        (("audit", "verify", "--session", "s-1", "{cited}"), 0),
        (("audit", "check-answer", "--session", "s-1", "--answer", "{answer}"), 0),
        (("audit", "checks"), 0),
        (("audit", "--help"), 0),
        (("db", "current"), 0),
        (("config", "show"), 0),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, tuple) else str(v),
)
def test_read_commands_load_neither_the_search_client_nor_the_model_runtime(
    recorded: tuple[str, str], args: tuple[str, ...], expected_code: int
) -> None:
    data, cited = recorded
    answer = f"PgBouncer keeps up to 16 server connections [{cited}]."
    argv = [a.format(cited=cited, answer=answer) for a in args]
    modules, code, output = _loaded_by("--data-dir", data, *argv)
    assert code == expected_code, output
    assert not modules & set(SEARCH_AND_MODEL), (
        f"{' '.join(args)} imported {sorted(modules & set(SEARCH_AND_MODEL))}"
    )
    if args[0] == "audit" and "--help" not in args:
        assert "sqlalchemy" in modules, "the probe sees the audit store's driver"


def test_a_check_that_must_reread_evidence_does_start_the_search_store(tmp_path: Path) -> None:
    # The audit kept only the hash of what it showed: the checker re-reads the block from
    # the knowledge store, so that store (Milvus Lite, by default) is started then.
    data, cited = _record_a_lookup(tmp_path, keep_shown_text=False)
    answer = f"PgBouncer keeps up to 16 server connections [{cited}]."
    modules, code, output = _loaded_by(
        "--data-dir", data, "audit", "check-answer", "--session", "s-1", "--answer", answer
    )
    assert code == 1, output  # the Milvus Lite file holds no such block: not supported
    assert "pymilvus" in modules


def test_a_command_that_needs_the_audit_store_does_load_its_driver(tmp_path: Path) -> None:
    # The probe can tell: `db current` on an empty data directory reaches SQLAlchemy.
    modules, code, _ = _loaded_by("--data-dir", str(tmp_path), "db", "current")
    assert code == 1, "an empty database is not at head"
    assert "sqlalchemy" in modules


def test_a_lookup_and_the_read_commands_do_not_load_the_evaluation_harness(
    recorded: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data, _ = recorded
    monkeypatch.setenv("LOOKUP_KNOWLEDGE_SEARCH__BACKEND", "memory")
    monkeypatch.setenv("LOOKUP_KNOWLEDGE_EMBEDDER__PROVIDER", "hashing")
    for args in (("lookup", "server connections"), ("audit", "list", "--session", "s-1")):
        _, ours, code, output = _probe("--data-dir", data, *args)
        assert code in (0, None), output
        assert "lookup_knowledge.application.lookup" in ours or args[0] == "audit"
        loaded = {n for n in ours if n.startswith("lookup_knowledge.application.evaluation")}
        assert not loaded, f"{' '.join(args)} imported {sorted(loaded)}"


def test_a_lookup_does_not_import_the_answer_checker(tmp_path: Path) -> None:
    # The checker's claim and fact analysis is for `audit check-answer`; a cold lookup
    # is measured against the bare import of its heavy dependencies (bench_cold_cli.py).
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "pool.md").write_text("# Pool\n\nPgBouncer keeps up to 16 server connections.\n")
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"embedder": {"provider": "hashing"}}))
    data = str(tmp_path / "data")
    base = ("--config", str(config), "--data-dir", data)
    _, _, code, output = _probe(*base, "ingest", str(folder))
    assert code in (0, None), output
    modules, ours, code, output = _probe(*base, "lookup", "PgBouncer server connections")
    assert code in (0, None), output
    assert "pymilvus" in modules, "the probe sees the lookup's search client"
    assert "lookup_knowledge.application.lookup.use_case" in ours
    # (the command module that registers `audit check-answer` is the command line's)
    checker = sorted(n for n in ours if "answer_check" in n and ".adapters.cli." not in n)
    assert not checker, f"a lookup imported {checker}"
