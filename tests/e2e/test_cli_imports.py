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


def test_a_command_that_needs_the_audit_store_does_load_its_driver(tmp_path: Path) -> None:
    # The probe can tell: `db current` on an empty data directory reaches SQLAlchemy.
    modules, code, _ = _loaded_by("--data-dir", str(tmp_path), "db", "current")
    assert code == 1, "an empty database is not at head"
    assert "sqlalchemy" in modules
