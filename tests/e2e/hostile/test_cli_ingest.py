"""Ingest given hostile files and names: it never aborts on one bad file and never
blocks on a non-regular one; each failure is one line with its reason, the exit code is
1 when any file failed and 2 for a bad input path; what was ingested is served, and
every lookup that serves it is recorded with the ids it returned."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.e2e.hostile.support import (
    Backend,
    assert_no_traceback,
    assert_recorded_once,
    assert_usage_error,
    evidence_ids,
    session_id,
    tool_json,
)

GOOD = "# Good runbook\n\nPromote the standby with patronictl failover.\n"
#: Far below the time one folder of a few files takes even on a loaded machine; a hang
#: (a named pipe read as a file) fails the case instead of the run.
INGEST_TIMEOUT_S = 90.0


def _ingest(backend: Backend, *args: str) -> tuple[int, dict[str, object], list[str]]:
    done = backend.run("ingest", *args, "--json", timeout=INGEST_TIMEOUT_S)
    assert_no_traceback(done.stderr)
    report = json.loads(done.stdout) if done.stdout.strip() else {}
    failures = [line for line in done.stderr.splitlines() if line.startswith("failed ")]
    return done.returncode, report, failures


def _folder(tmp_path: Path, files: dict[str, bytes]) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.md").write_text(GOOD, encoding="utf-8")
    for name, content in files.items():
        (docs / name).write_bytes(content)
    return docs


BAD_FILES: list[tuple[str, dict[str, bytes], str | None]] = [
    ("front-matter-not-yaml", {"a.md": b"---\ntitle: [unclosed\n---\n# A\n\ntext\n"}, None),
    ("front-matter-not-a-mapping", {"b.md": b"---\n- 1\n- 2\n---\n# B\n\ntext\n"}, None),
    ("front-matter-raw-escape", {"c.md": b"---\ntitle: a\x1bb\n---\n# C\n\ntext\n"}, None),
    (
        "three-bad-files",
        {
            "x.md": b"---\ntitle: [\n---\nx\n",
            "y.md": b"---\n: : :\n---\ny\n",
            "z.md": b"---\n- z\n---\nz\n",
        },
        None,
    ),
]


@pytest.mark.parametrize(
    ("label", "files"),
    [
        pytest.param(lab, f, id=lab, marks=[pytest.mark.xfail(strict=True, reason=x)] if x else [])
        for lab, f, x in BAD_FILES
    ],
)
def test_a_failing_file_exits_1_lists_its_reason_and_spares_the_others(
    label: str, files: dict[str, bytes], tmp_path: Path
) -> None:
    docs = _folder(tmp_path, files)
    code, report, failures = _ingest(Backend(tmp_path / "data", None), str(docs))
    assert code == 1
    assert len(failures) == len(files), failures
    assert report["added"] == 1, "the good file beside them is ingested"
    for line in failures:
        assert "\x1b" not in line


HARMLESS: list[tuple[str, dict[str, bytes]]] = [
    ("empty-file", {"empty.md": b""}),
    ("only-front-matter", {"fm.md": b"---\ntitle: t\n---\n"}),
    ("nul-bytes-in-text", {"nul.md": b"# N\n\nfail\x00over \x00 text\n"}),
    ("invalid-utf8-text", {"latin.md": b"# L\n\ncaf\xe9 \xff\xfe failover\n"}),
    ("bom-and-crlf", {"bom.md": b"\xef\xbb\xbf# B\r\n\r\nfailover text\r\n"}),
    ("escape-in-heading-and-text", {"esc.md": b"# T \x1b[31mred\n\n\x1b]0;x\x07 failover\n"}),
    ("yaml-escaped-esc-title", {"yt.md": b'---\ntitle: "\\e[31mred"\n---\nfailover\n'}),
    (
        "huge-front-matter",
        {
            "huge.md": b"---\n"
            + b"".join(b"key%d: %s\n" % (i, b"v" * 80) for i in range(20_000))
            + b"---\n# H\n\nfailover\n"
        },
    ),
    ("binary-as-markdown", {"bin.md": bytes(range(256)) * 64}),
    ("long-file-name", {"n" * 240 + ".md": b"# long\n\nfailover\n"}),
    ("markup-file-name", {"[bold]x[-bold].md": b"# markup\n\nfailover\n"}),
    ("space-and-quotes-name", {"a \"b\" 'c'.md": b"# q\n\nfailover\n"}),
]


@pytest.mark.parametrize(("label", "files"), HARMLESS, ids=[h[0] for h in HARMLESS])
def test_odd_but_readable_files_never_abort_the_folder(
    label: str, files: dict[str, bytes], tmp_path: Path
) -> None:
    docs = _folder(tmp_path, files)
    code, report, failures = _ingest(Backend(tmp_path / "data", None), str(docs))
    assert code in (0, 1), "done, or one line per failed file"
    assert (code == 1) == bool(failures), failures
    assert int(str(report["added"])) >= 1, "the good file is ingested"
    assert all("\x1b" not in line for line in failures)


def test_a_folder_named_like_a_file_and_a_symlink_loop_are_not_files(tmp_path: Path) -> None:
    docs = _folder(tmp_path, {})
    (docs / "dir.md").mkdir()
    (docs / "loop").symlink_to(docs / "loop")
    (docs / "dangling.md").symlink_to(tmp_path / "absent.md")
    code, report, _ = _ingest(Backend(tmp_path / "data", None), str(docs))
    assert code in (0, 1)
    assert report["added"] == 1


def test_a_non_utf8_file_name_does_not_abort_the_folder(tmp_path: Path) -> None:
    docs = _folder(tmp_path, {})
    with open(os.fsencode(docs) + b"/bad-\xff-name.md", "wb") as bad:
        bad.write(b"# bad name\n\nfailover\n")
    code, report, _ = _ingest(Backend(tmp_path / "data", None), str(docs))
    assert code in (0, 1)
    assert int(str(report["added"])) >= 1


def test_a_named_pipe_does_not_block_ingest(tmp_path: Path) -> None:
    docs = _folder(tmp_path, {})
    os.mkfifo(docs / "pipe.md")
    code, report, _ = _ingest(Backend(tmp_path / "data", None), str(docs))
    assert code in (0, 1)
    assert report["added"] == 1


@pytest.mark.parametrize(
    "args",
    [
        ["/nonexistent/docs"],
        ["{docs}", "/nonexistent/more"],
        ["{docs}", "--root", "{docs}/good.md"],
        ["{docs}", "--root", "/nonexistent"],
    ],
    ids=["missing", "one-of-two-missing", "root-is-a-file", "root-missing"],
)
def test_a_bad_input_path_exits_2(args: list[str], tmp_path: Path) -> None:
    docs = _folder(tmp_path, {})
    done = Backend(tmp_path / "data", None).run(
        "ingest", *(a.format(docs=docs) for a in args), timeout=INGEST_TIMEOUT_S
    )
    assert_usage_error(done)


def test_a_doc_id_with_control_characters_is_refused(tmp_path: Path) -> None:
    docs = _folder(tmp_path, {})
    done = Backend(tmp_path / "data", None).run(
        "ingest", str(docs / "good.md"), "--doc-id", "a\x1b[2Jb", timeout=INGEST_TIMEOUT_S
    )
    assert done.returncode == 2, done.stderr
    assert_no_traceback(done.stderr)
    assert "\x1b" not in done.stderr


def test_a_category_the_audit_store_cannot_hold_is_refused_or_recorded(tmp_path: Path) -> None:
    docs = _folder(tmp_path, {})
    backend = Backend(tmp_path / "data", None)
    code, _, _ = _ingest(backend, str(docs), "--category", "c" * 300)
    if code != 0:
        return  # refused at ingest: fine
    session = session_id("long-category")
    done = backend.run("lookup", "promote the standby", "--session", session, "--json")
    assert_no_traceback(done.stderr)
    payload = tool_json(done.stdout)
    with backend.audit() as audit:
        assert_recorded_once(audit, session, payload["invocationId"], evidence_ids(payload))
