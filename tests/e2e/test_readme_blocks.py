"""Every code block in the README and in the pages of ``docs/`` works as written.

``python`` blocks run as scripts, ``bash`` blocks line by line in a shell, ``yaml``,
``toml`` and ``properties`` blocks load as configuration (a block marked
``<!-- domains-file -->`` as the file ``rag.domains-file`` names); each against a fresh
data directory (the hashing embedder keeps them fast: the blocks do not depend on which
embedder answers). The two commands of the README (``./scripts/quickstart``,
``./scripts/test``) are what CI itself runs, and the ``serve`` blocks start a server that
runs until stopped (the browser test drives it), so those blocks are only checked to
name commands that exist.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from lookup_knowledge.adapters.config import load_settings

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
BIN = Path(sys.executable).parent

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def blocks(language: str, pages: list[Path] = PAGES) -> list[tuple[str, str]]:
    """(``page:line``, code) of every block in that language, README first."""
    found = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for match in _FENCE.finditer(text):
            if match.group(1) == language:
                line = text.count("\n", 0, match.start()) + 1
                found.append((f"{page.relative_to(ROOT)}:{line}", match.group(2)))
    return found


def domains_files() -> list[str]:
    """The ``yaml`` blocks marked ``<!-- domains-file -->``: a ``rag.domains-file``, not a
    configuration (a configuration block that names ``domains.yaml`` reads this one)."""
    marked = re.compile(r"^<!-- domains-file -->\n```yaml\n(.*?)^```", re.S | re.M)
    return [m.group(1) for page in PAGES for m in marked.finditer(page.read_text("utf-8"))]


def _runs_forever_or_is_ci(code: str) -> bool:
    return "./scripts/" in code or re.search(r"\bserve\b", code) is not None


@pytest.fixture
def workspace(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOKUP_KNOWLEDGE_")}
    env["LOOKUP_KNOWLEDGE_DATA_DIR"] = str(tmp_path / "data")
    env["LOOKUP_KNOWLEDGE_EMBEDDER__PROVIDER"] = "hashing"
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["HAYSTACK_TELEMETRY_ENABLED"] = "False"
    return tmp_path, env


def test_the_readme_has_runnable_blocks() -> None:
    assert blocks("python", [README])
    assert blocks("bash", [README])


@pytest.mark.slow
@pytest.mark.parametrize(("line", "code"), blocks("python"), ids=lambda v: str(v)[:24])
def test_python_block_runs(line: str, code: str, workspace: tuple[Path, dict[str, str]]) -> None:
    folder, env = workspace
    shutil.copytree(ROOT / "docs", folder / "docs")  # the blocks' "docs/" folder
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, f"{line}:\n{done.stdout}\n{done.stderr}"


@pytest.mark.slow
@pytest.mark.parametrize(("line", "code"), blocks("bash"), ids=lambda v: str(v)[:24])
def test_bash_block_runs(line: str, code: str, workspace: tuple[Path, dict[str, str]]) -> None:
    _, env = workspace
    if _runs_forever_or_is_ci(code):
        for command in re.findall(r"^(\S+)", code, re.M):
            assert (ROOT / command).exists() or (BIN / command).exists(), command
        return
    # In a folder laid out like the repository (docs/, the bundled eval sets), as a user
    # who cloned it runs them; stop at the first failing line (a line that may fail says
    # so itself, with `|| ...`).
    folder, _ = workspace
    shutil.copytree(ROOT / "docs", folder / "docs")
    shutil.copytree(ROOT / "benchmarks" / "datasets", folder / "benchmarks" / "datasets")
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", code],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, f"{line}:\n{done.stdout[-3000:]}\n{done.stderr}"
    assert "Traceback" not in done.stderr
    if "audit check-answer" in code:  # the example answer is one the checker supports
        assert "verdict: supported" in done.stdout, done.stdout[-3000:]


@pytest.mark.parametrize(("line", "code"), blocks("yaml"), ids=lambda v: str(v)[:24])
def test_yaml_block_is_valid_configuration(line: str, code: str, tmp_path: Path) -> None:
    assert isinstance(yaml.safe_load(code), dict), line
    path = tmp_path / "config.yaml"
    for domains in domains_files():  # what a block's `rag.domains-file: domains.yaml` reads
        (tmp_path / "domains.yaml").write_text(domains, encoding="utf-8")
    if code in domains_files():
        path.write_text("rag.domains-file: domains.yaml\n", encoding="utf-8")
        (tmp_path / "domains.yaml").write_text(code, encoding="utf-8")
        assert load_settings(config_file=path).settings.domain_dictionary(), line
        return
    path.write_text(code, encoding="utf-8")
    load_settings(config_file=path).settings.domain_dictionary()  # raises naming the key


@pytest.mark.parametrize(
    ("line", "code", "suffix"),
    [(line, code, ".toml") for line, code in blocks("toml")]
    + [(line, code, ".properties") for line, code in blocks("properties")],
    ids=lambda v: str(v)[:24],
)
def test_config_file_block_is_valid_configuration(
    line: str, code: str, suffix: str, tmp_path: Path
) -> None:
    path = tmp_path / f"config{suffix}"
    path.write_text(code, encoding="utf-8")
    assert load_settings(config_file=path).settings.domain_dictionary(), line
