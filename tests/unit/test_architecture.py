"""Packaging and architecture guarantees that no linter checks by itself."""

from __future__ import annotations

import ast
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_domain_imports_only_the_standard_library() -> None:
    offenders = []
    for path in (SRC / "domain").rglob("*.py"):
        for name in _imports(path):
            top = name.split(".")[0]
            if name.startswith("lookup_knowledge.domain") or top == "__future__":
                continue
            if top not in sys.stdlib_module_names:
                offenders.append(f"{path.relative_to(ROOT)}: {name}")
    assert offenders == []


def test_importing_the_package_builds_nothing_and_loads_no_driver() -> None:
    code = (
        "import sys, lookup_knowledge, lookup_knowledge.application.lookup;"
        "bad=[m for m in ('pymilvus','sqlalchemy','onnxruntime','typer','dependency_injector')"
        " if m in sys.modules]; print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _expected_wheel_members() -> set[str]:
    expected: set[str] = set()
    for folder, prefix in (
        (SRC, "lookup_knowledge"),
        (ROOT / "migrations", "lookup_knowledge/migrations"),
    ):
        for path in folder.rglob("*"):
            if "__pycache__" in path.parts or path.is_dir():
                continue
            if path.suffix in {".py", ".typed", ".mako", ".md", ".yaml", ".json"}:
                expected.add(f"{prefix}/{path.relative_to(folder).as_posix()}")
    return expected


@pytest.mark.slow
def test_a_wheel_built_from_the_repo_contains_every_module(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "build",
            "--wheel",
            "--no-isolation",
            "--outdir",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    wheel = next(tmp_path.glob("lookup_knowledge-*.whl"))
    members = set(zipfile.ZipFile(wheel).namelist())
    missing = sorted(_expected_wheel_members() - members)
    assert missing == []
    assert not any(
        m.split("/")[0] in {"domain", "application", "adapters", "src"} for m in members
    ), "no generic top-level package may be installed"
