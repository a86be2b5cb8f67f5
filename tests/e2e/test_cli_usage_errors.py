"""The command line's usage errors and inputs: usage errors are typer's own
message with exit 2, help names flags as flags, an empty or blank category or data
directory is refused, an unusable data directory is one line (escaped output:
``tests/e2e/hostile/test_cli_lookups.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.hostile.support import (
    Backend,
    assert_no_traceback,
    assert_one_line,
    assert_usage_error,
    run_cli,
)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["lookup"], "Missing argument"),
        (["lookup", "x", "--mode", "fuzzy"], "Invalid value for '--mode'"),
        (["audit", "list", "--limit", "ten"], "Invalid value for '--limit'"),
        (["lookup", "x", "--bogus"], "No such option: --bogus"),
        (["audit", "show"], "Missing argument"),
    ],
    ids=["missing-parameter", "bad-choice", "bad-int", "no-such-option", "missing-id"],
)
def test_usage_errors_exit_2_with_typers_message(
    args: list[str], message: str, tmp_path: Path
) -> None:
    done = Backend(tmp_path / "data", None).run(*args)
    assert_usage_error(done)
    assert message in done.stderr
    assert "Usage: lookup-knowledge" in done.stderr


@pytest.mark.parametrize(
    "args", [["--help"], ["lookup", "--help"], ["audit", "list", "--help"], ["ingest", "--help"]]
)
def test_help_shows_flags_without_a_value(args: list[str]) -> None:
    done = run_cli(*args)
    assert done.returncode == 0, done.stderr
    assert "<bool>" not in done.stdout
    flags = {"--help": "--debug", "lookup": "--json", "audit": "--newest-first", "ingest": "--sync"}
    flag = flags[args[0]]
    [line] = [row for row in done.stdout.splitlines() if row.strip().startswith(flag)]
    assert line.split()[0] == flag, line


@pytest.mark.parametrize("value", ["", " ", "\t \n"])
@pytest.mark.parametrize("command", ["lookup", "ingest"])
def test_blank_category_is_a_usage_error(value: str, command: str, tmp_path: Path) -> None:
    target = "failover" if command == "lookup" else str(tmp_path)
    done = Backend(tmp_path / "data", None).run(command, target, "--category", value)
    assert_usage_error(done)
    assert "'--category'" in done.stderr


@pytest.mark.parametrize("value", ["", "   "])
def test_empty_data_dir_is_a_usage_error(value: str, tmp_path: Path) -> None:
    done = run_cli("--data-dir", value, "lookup", "failover", cwd=tmp_path)
    assert_usage_error(done)
    assert "'--data-dir'" in done.stderr
    assert list(tmp_path.iterdir()) == [], "nothing is created in the working directory"


@pytest.mark.parametrize("where", ["file", "under-file", "proc"])
def test_unusable_data_dir_is_one_line(where: str, tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x", encoding="utf-8")
    data_dir = {
        "file": tmp_path / "afile",
        "under-file": tmp_path / "afile" / "sub",
        "proc": Path("/proc/lookup-knowledge-x"),
    }[where]
    done = run_cli("--data-dir", str(data_dir), "lookup", "failover", cwd=tmp_path)
    assert done.returncode in (1, 2), done.stderr  # 2 once the settings check it
    assert_no_traceback(done.stderr)
    assert_one_line(done.stderr)
    assert str(data_dir) in done.stderr or "data-dir" in done.stderr
