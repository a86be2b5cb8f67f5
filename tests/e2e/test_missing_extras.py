"""Optional extras (issue 15, item 5): with an extra's packages absent, the feature that
needs it fails with ``ExtraNotInstalled`` naming the pip command (the CLI: one line,
exit 2), never an ``ImportError`` traceback. The packages are hidden from a fresh
interpreter (``sys.modules[name] = None`` makes their import fail as if uninstalled)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# Runs the CLI with some packages made unimportable.
CLI = """
import json, sys
for name in json.loads(sys.argv[1]):
    sys.modules[name] = None
from lookup_knowledge.adapters.cli import main
sys.argv = ["lookup-knowledge", *json.loads(sys.argv[2])]
main()
"""

# Imports a module (or calls a function) with some packages made unimportable.
API = """
import importlib, json, sys
for name in json.loads(sys.argv[1]):
    sys.modules[name] = None
from lookup_knowledge import ExtraNotInstalled
try:
    exec(sys.argv[2])
except ExtraNotInstalled as error:
    print("EXTRA " + json.dumps([error.extra, error.code, str(error)]))
"""


def _run(script: str, hidden: list[str], arg: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", script, json.dumps(hidden), arg],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


@pytest.mark.parametrize(
    ("hidden", "args", "extra"),
    [
        (["fastapi"], ["serve", "--port", "0"], "server"),
        (["uvicorn"], ["serve", "--port", "0"], "server"),
        (["mcp"], ["mcp"], "mcp"),
        (["psycopg"], ["db", "current"], "postgres"),
        (["ir_measures"], ["eval", "run", "{dataset}", "--config", "dense"], "eval"),
    ],
)
def test_a_command_whose_extra_is_missing_names_the_extra_in_one_line(
    tmp_path: Path, hidden: list[str], args: list[str], extra: str
) -> None:
    config = tmp_path / "config.json"
    settings: dict[str, object] = {"data-dir": str(tmp_path / "data")}
    if extra == "postgres":
        settings["audit"] = {"database-url": "postgresql+psycopg://nobody@127.0.0.1:9/none"}
    config.write_text(json.dumps(settings), encoding="utf-8")
    dataset = tmp_path / "dataset"
    dataset.mkdir()
    args = [a.replace("{dataset}", str(dataset)) for a in args]
    done = _run(CLI, hidden, json.dumps(["--config", str(config), *args]))
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert f"pip install 'lookup-knowledge[{extra}]'" in lines[0]
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("hidden", "code", "extra"),
    [
        (["langchain_core"], "import lookup_knowledge.adapters.frameworks.langchain", "frameworks"),
        (["llama_index"], "import lookup_knowledge.adapters.frameworks.llamaindex", "frameworks"),
        (["haystack"], "import lookup_knowledge.adapters.frameworks.haystack", "frameworks"),
        (["mcp"], "import lookup_knowledge.adapters.mcp_server", "mcp"),
        (["jinja2"], "import lookup_knowledge.adapters.http", "server"),
        (
            ["ir_measures"],
            "from lookup_knowledge.adapters.evaluation.metrics import parse_measures\n"
            "parse_measures(['nDCG@10'])",
            "eval",
        ),
    ],
)
def test_importing_an_integration_without_its_extra_is_a_typed_error(
    hidden: list[str], code: str, extra: str
) -> None:
    done = _run(API, hidden, code)
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stdout.splitlines() if line.startswith("EXTRA "))
    got_extra, got_code, message = json.loads(line.removeprefix("EXTRA "))
    assert (got_extra, got_code) == (extra, "extra_not_installed")
    assert f"pip install 'lookup-knowledge[{extra}]'" in message


def test_the_core_command_line_needs_no_extra(tmp_path: Path) -> None:
    hidden = ["fastapi", "uvicorn", "jinja2", "mcp", "psycopg", "ir_measures", "matplotlib"]
    done = _run(CLI, hidden, json.dumps(["--data-dir", str(tmp_path), "config", "show"]))
    assert done.returncode == 0, done.stderr
    assert "data-dir" in done.stdout
