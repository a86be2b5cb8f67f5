"""The command line given wrong arguments, bad configuration files and unusable data
directories: exit 2, typer's own message or one line naming what to fix, no traceback,
nothing recorded."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.hostile.support import (
    Backend,
    assert_no_traceback,
    assert_not_recorded,
    assert_one_line,
    assert_usage_error,
    session_id,
)

# (label, arguments): typer refuses each before any work starts.
USAGE_ERRORS: list[tuple[str, list[str]]] = [
    ("lookup-without-query", ["lookup"]),
    ("unknown-option", ["lookup", "x", "--bogus"]),
    ("unknown-command", ["lokup", "x"]),
    ("mode-unknown", ["lookup", "x", "--mode", "fuzzy"]),
    ("mode-empty", ["lookup", "x", "--mode", ""]),
    ("mode-without-value", ["lookup", "x", "--mode"]),
    ("format-unknown", ["lookup", "x", "--format", "xml"]),
    ("json-with-other-format", ["lookup", "x", "--json", "--format", "anthropic"]),
    ("tool-call-id-blank", ["lookup", "x", "--tool-call-id", " "]),
    ("category-empty", ["lookup", "x", "--category", ""]),
    ("category-blank", ["lookup", "x", "--category", " \t "]),
    ("ingest-category-empty", ["ingest", ".", "--category", ""]),
    ("data-dir-empty", ["--data-dir", "", "lookup", "x"]),
    ("data-dir-blank", ["--data-dir", "   ", "audit", "list"]),
    ("ingest-without-path", ["ingest"]),
    ("ingest-missing-path", ["ingest", "/nonexistent/lookup-knowledge-docs"]),
    ("ingest-one-of-two-missing", ["ingest", ".", "/nonexistent/b.md"]),
    ("ingest-root-missing", ["ingest", ".", "--root", "/nonexistent/root"]),
    ("audit-show-without-id", ["audit", "show"]),
    ("audit-verify-without-session", ["audit", "verify", "a.md#chunk-0"]),
    ("audit-verify-without-ids", ["audit", "verify", "--session", "s"]),
    ("audit-list-limit-not-int", ["audit", "list", "--limit", "ten"]),
    ("audit-list-offset-float", ["audit", "list", "--offset", "1.5"]),
    ("audit-unknown-subcommand", ["audit", "purge"]),
    ("db-upgrade-two-revisions", ["db", "upgrade", "head", "base"]),
    ("config-show-extra-argument", ["config", "show", "everything"]),
    ("quickstart-questions-not-int", ["quickstart", "--questions", "many"]),
    ("eval-run-without-collection", ["eval", "run"]),
    ("debug-takes-no-value", ["--debug=yes", "lookup", "x"]),
]


@pytest.mark.parametrize(("label", "args"), USAGE_ERRORS, ids=[u[0] for u in USAGE_ERRORS])
def test_a_usage_error_exits_2_with_typers_message(
    label: str, args: list[str], tmp_path: Path
) -> None:
    backend = Backend(tmp_path / "data", None)
    done = backend.run(*args, cwd=tmp_path)
    assert_usage_error(done)
    assert not (tmp_path / "data").exists(), "a refused command creates nothing"


# (label, arguments) whose input is checked where the work starts: one line, exit 2.
INPUT_ERRORS: list[tuple[str, list[str]]] = [
    ("audit-list-since-not-a-date", ["audit", "list", "--since", "yesterday"]),
    ("audit-list-until-nonsense", ["audit", "list", "--until", "2026-13-45"]),
    ("audit-stats-since-nul", ["audit", "stats", "--since", "2026-01-01\x01"]),
    ("audit-stats-top-huge", ["audit", "stats", "--top", "9" * 40]),
    ("audit-list-limit-zero", ["audit", "list", "--limit", "0"]),
]


@pytest.mark.parametrize(("label", "args"), INPUT_ERRORS, ids=[u[0] for u in INPUT_ERRORS])
def test_bad_input_exits_2_on_one_line(label: str, args: list[str], tmp_path: Path) -> None:
    done = Backend(tmp_path / "data", None).run(*args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert_no_traceback(done.stderr)
    assert_one_line(done.stderr)


def _corrupt_yaml(folder: Path) -> Path:
    path = folder / "lk.yaml"
    path.write_text("rag:\n  retrieve-k: [1, 2\n  return-n: 3\n: :\n", encoding="utf-8")
    return path


def _deep_json(folder: Path) -> Path:
    path = folder / "lk.json"
    path.write_text('{"rag": ' * 100_000 + "1" + "}" * 100_000, encoding="utf-8")
    return path


def _unknown_key(folder: Path) -> Path:
    path = folder / "lk.yaml"
    path.write_text("rag:\n  retrieve-kk: 5\n", encoding="utf-8")
    return path


def _wrong_type(folder: Path) -> Path:
    path = folder / "lk.toml"
    path.write_text('[rag]\nretrieve-k = "twenty"\n', encoding="utf-8")
    return path


def _not_a_mapping(folder: Path) -> Path:
    path = folder / "lk.json"
    path.write_text("[1, 2, 3]", encoding="utf-8")
    return path


def _binary(folder: Path) -> Path:
    path = folder / "lk.yaml"
    path.write_bytes(b"\xff\xfe\x00\x00garbage\x00\x01\x02")
    return path


def _directory(folder: Path) -> Path:
    path = folder / "conf.yaml"
    path.mkdir()
    return path


def _unknown_suffix(folder: Path) -> Path:
    path = folder / "lk.ini"
    path.write_text("[rag]\nretrieve-k=5\n", encoding="utf-8")
    return path


def _missing(folder: Path) -> Path:
    return folder / "absent.yaml"


def _esc_in_value(folder: Path) -> Path:
    path = folder / "lk.json"
    path.write_text(json.dumps({"rag": {"search-mode": "\x1b[31mdense"}}), encoding="utf-8")
    return path


def _huge_number(folder: Path) -> Path:
    path = folder / "lk.yaml"
    path.write_text("rag:\n  retrieve-k: " + "9" * 5000 + "\n", encoding="utf-8")
    return path


CONFIG_FILES: list[tuple[str, Callable[[Path], Path], str | None]] = [
    ("corrupt-yaml", _corrupt_yaml, None),
    ("deep-json", _deep_json, None),
    ("unknown-key", _unknown_key, None),
    ("wrong-type", _wrong_type, None),
    ("not-a-mapping", _not_a_mapping, None),
    ("binary-garbage", _binary, None),
    ("a-directory", _directory, None),
    ("unknown-suffix", _unknown_suffix, None),
    ("missing-file", _missing, None),
    ("escape-sequence-in-value", _esc_in_value, None),
    ("huge-number", _huge_number, None),
]


def _maybe_xfail(reason: str | None) -> list[pytest.MarkDecorator]:
    return [pytest.mark.xfail(strict=True, reason=reason)] if reason else []


@pytest.mark.parametrize(
    ("make", "label"),
    [pytest.param(m, lab, marks=_maybe_xfail(x), id=lab) for lab, m, x in CONFIG_FILES],
)
def test_a_bad_config_file_is_one_line_exit_2(
    make: Callable[[Path], Path], label: str, tmp_path: Path
) -> None:
    config = make(tmp_path)
    backend = Backend(tmp_path / "data", None)
    session = session_id(label)
    done = backend.run("--config", str(config), "lookup", "x", "--session", session)
    assert done.returncode == 2, done.stderr
    assert_no_traceback(done.stderr)
    assert_one_line(done.stderr)
    assert "\x1b" not in done.stderr, "the value is shown escaped"


def _a_file(tmp: Path) -> str:
    (tmp / "afile").write_text("x", encoding="utf-8")
    return str(tmp / "afile")


def _under_a_file(tmp: Path) -> str:
    return _a_file(tmp) + "/sub"


def _unreadable(tmp: Path) -> str:
    if os.geteuid() == 0:
        pytest.skip("root reads every folder")
    folder = tmp / "locked"
    folder.mkdir(mode=0o000)
    return str(folder)


DATA_DIRS: list[tuple[str, Callable[[Path], str]]] = [
    ("a-file", _a_file),
    ("under-a-file", _under_a_file),
    ("under-proc", lambda _: "/proc/lookup-knowledge-x"),
    ("unreadable", _unreadable),
    ("nul-byte-env", lambda tmp: str(tmp / "a\x01b") + "/\udcff"),
]


@pytest.mark.parametrize(
    ("where", "label"),
    [pytest.param(m, lab, id=lab) for lab, m in DATA_DIRS],
)
def test_an_unusable_data_dir_is_one_line_exit_2(
    where: Callable[[Path], str], label: str, tmp_path: Path
) -> None:
    data_dir = where(tmp_path)
    backend = Backend(tmp_path / "unused", None)
    done = backend.run("--data-dir", data_dir, "lookup", "failover", "--session", "dd")
    if label == "nul-byte-env":
        # a control character and an undecodable byte in the folder's name: a folder of
        # that name is a folder like any other; whatever happens, one line, no traceback
        assert done.returncode in (0, 1, 2), done.stderr
    else:
        assert done.returncode == 2, done.stderr
        assert_one_line(done.stderr)
    assert_no_traceback(done.stderr)


def test_a_config_error_records_nothing(tmp_path: Path) -> None:
    backend = Backend(tmp_path / "data", None)
    session = session_id("retrieve-k-zero")
    done = backend.run(
        "lookup", "x", "--session", session, env={"LOOKUP_KNOWLEDGE_RAG__RETRIEVE_K": "0"}
    )
    assert done.returncode == 2
    assert_one_line(done.stderr)
    with backend.audit() as audit:
        assert_not_recorded(audit, session)
