"""The command line does no work at import: ``--help`` loads no driver, no storage
adapter and no model runtime (each costs a noticeable part of a second and may need
native libraries)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("pymilvus", "sqlalchemy", "onnxruntime")

# Runs the console script's entry point as `lookup-knowledge ARGS` would, then lists
# the top-level packages it loaded.
PROBE = """
import json, sys
from lookup_knowledge.adapters.cli import main
sys.argv = ["lookup-knowledge", *json.loads(sys.argv[1])]
try:
    main()
except SystemExit as done:
    code = done.code
sys.stdout.flush()
print("\\nMODULES " + json.dumps(sorted({name.split(".")[0] for name in sys.modules})))
print("CODE " + json.dumps(code))
"""


def _loaded_by(*args: str) -> tuple[set[str], object, str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(list(args))],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    lines = done.stdout.splitlines()
    modules = next(line for line in lines if line.startswith("MODULES "))
    code = next(line for line in lines if line.startswith("CODE "))
    return (
        set(json.loads(modules.removeprefix("MODULES "))),
        json.loads(code.removeprefix("CODE ")),
        done.stdout,
    )


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


def test_a_command_that_needs_the_audit_store_does_load_its_driver(tmp_path: Path) -> None:
    # The probe can tell: `db current` on an empty data directory reaches SQLAlchemy.
    modules, code, _ = _loaded_by("--data-dir", str(tmp_path), "db", "current")
    assert code == 1, "an empty database is not at head"
    assert "sqlalchemy" in modules
