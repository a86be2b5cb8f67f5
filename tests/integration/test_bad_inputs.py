"""A bad data directory, a corrupt or absurdly
nested config file and wrong argument types are typed errors that name what to fix;
through the real loader, container, CLI (subprocess) and API."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from lookup_knowledge import create_app
from lookup_knowledge.adapters.api import LookupApp
from lookup_knowledge.adapters.config import load_settings
from lookup_knowledge.domain.errors import ConfigurationError, InvalidInputError

CLI = str(Path(sys.executable).with_name("lookup-knowledge"))
MEMORY = {"search.backend": "memory", "embedder.provider": "hashing"}


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOKUP_KNOWLEDGE_")}
    return subprocess.run(
        [CLI, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=120, check=False
    )


def _bad_data_dirs(tmp_path: Path) -> dict[str, str]:
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder", encoding="utf-8")
    return {
        "file": str(a_file),
        "under-a-file": str(a_file / "sub"),
        "proc": "/proc/lookup-knowledge-x",
        "empty": "",
    }


@pytest.mark.parametrize("case", ["file", "under-a-file", "proc", "empty"])
def test_bad_data_dir_is_a_configuration_error(tmp_path: Path, case: str) -> None:
    data_dir = _bad_data_dirs(tmp_path)[case]
    with pytest.raises(ConfigurationError) as raised:
        create_app(overrides={**MEMORY, "data-dir": data_dir}).close()
    assert raised.value.key == "data-dir"
    done = _cli("--data-dir", data_dir, "audit", "stats", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    if case == "empty":
        # Refused by the CLI's own option check: a usage error in typer's words
        # (usage line, hint, error line), before any setting is read.
        assert "--data-dir" in done.stderr
        assert "Traceback" not in done.stderr
    else:
        [line] = done.stderr.strip().splitlines()
        assert "data-dir" in line
        assert "internal error" not in line
    assert "internal error" not in done.stderr
    assert not (tmp_path / ".lookup-knowledge").exists()  # never the working directory


def test_unreadable_data_dir_is_a_configuration_error() -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads and writes every folder: an unreadable one needs another user")
    parent = Path(tempfile.mkdtemp(prefix="startup-unreadable-"))
    locked = parent / "locked"
    locked.mkdir(mode=0o700)
    locked.chmod(0o000)
    try:
        with pytest.raises(ConfigurationError) as raised:
            load_settings(overrides={"data-dir": str(locked)}, environ={})
        assert raised.value.key == "data-dir"
        assert "cannot read" in raised.value.rule
    finally:
        locked.chmod(0o700)
        shutil.rmtree(parent, ignore_errors=True)


def test_corrupt_yaml_config_is_one_line_naming_file_and_line(
    tmp_path: Path,
) -> None:
    config = tmp_path / "broken.yaml"
    config.write_text("rag:\n  retrieve-k: 3\n  domains: [unclosed\nlog:\n", encoding="utf-8")
    with pytest.raises(ConfigurationError) as raised:
        load_settings(config_file=config, environ={})
    message = str(raised.value)
    assert "\n" not in message
    assert str(config) in message
    assert "line 4" in message
    done = _cli("--config", str(config), "config", "show", cwd=tmp_path)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1
    assert str(config) in done.stderr


@pytest.mark.parametrize("depth", [64, 100_000])
def test_deeply_nested_json_config_is_a_typed_error(tmp_path: Path, depth: int) -> None:
    config = tmp_path / "deep.json"
    config.write_text('{"rag":' * depth + "1" + "}" * depth, encoding="utf-8")
    with pytest.raises(ConfigurationError) as raised:
        load_settings(config_file=config, environ={})
    assert "too deeply" in str(raised.value)
    nested = '{"a":' * 200 + "1" + "}" * 200
    with pytest.raises(ConfigurationError):
        load_settings(environ={"LOOKUP_KNOWLEDGE_RAG": nested})


@pytest.fixture
def app(tmp_path: Path) -> Iterator[LookupApp]:
    with create_app(overrides={**MEMORY, "data-dir": str(tmp_path / "data")}) as lookup_app:
        yield lookup_app


@pytest.mark.parametrize(
    "kwargs",
    [
        {"category": 123},
        {"category": ["a"]},
        {"category": ""},
        {"category": "   "},
        {"mode": 5},
        {"mode": b"dense"},
        {"mode": "DENSER"},
        {"step_id": 7},
        {"tool_call_id": 1.5},
    ],
    ids=repr,
)
def test_wrong_argument_types_are_invalid_input(app: LookupApp, kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidInputError):
        app.lookup("failover", session_id="types", **kwargs)  # type: ignore[arg-type]


def test_cli_empty_category_is_refused_not_dropped(tmp_path: Path) -> None:
    env_args = ("--data-dir", str(tmp_path / "data"))
    done = subprocess.run(
        [CLI, *env_args, "lookup", "failover", "--category", ""],
        capture_output=True,
        text=True,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("LOOKUP_KNOWLEDGE_")},
            "LOOKUP_KNOWLEDGE_SEARCH__BACKEND": "memory",
            "LOOKUP_KNOWLEDGE_EMBEDDER__PROVIDER": "hashing",
        },
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "category" in done.stderr
    assert json.dumps("Traceback") not in done.stderr
