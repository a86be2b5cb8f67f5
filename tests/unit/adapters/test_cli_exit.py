"""``exit_now``: the console script exits without the interpreter's teardown, but only
once exit handlers ran and the streams are flushed, and never while another thread
still works."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path


def run(body: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "script.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import atexit, logging, sys, threading, time
            from pathlib import Path
            from lookup_knowledge.adapters.cli.app import exit_now
            out = Path({str(tmp_path)!r})
            atexit.register(lambda: (out / "atexit").write_text("ran"))
            logging.basicConfig(filename=out / "log.txt", level=logging.INFO)
            """
        )
        + textwrap.dedent(body),
        encoding="utf-8",
    )
    # Buffered streams, as a console script's are unless PYTHONUNBUFFERED is set: the
    # flush is what gets a pipe's output out.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    return subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )


def test_the_status_the_output_the_exit_handlers_and_the_log_all_get_out(tmp_path: Path) -> None:
    done = run(
        """
        sys.stdout.write("no newline, still buffered")
        sys.stderr.write("to stderr")
        logging.getLogger("x").info("logged line")
        exit_now(SystemExit(3))
        """,
        tmp_path,
    )
    assert done.returncode == 3
    assert done.stdout == "no newline, still buffered"
    assert done.stderr == "to stderr"
    assert (tmp_path / "atexit").read_text() == "ran"
    assert "logged line" in (tmp_path / "log.txt").read_text()


def test_a_running_non_daemon_thread_is_waited_for(tmp_path: Path) -> None:
    done = run(
        """
        def work():
            time.sleep(0.5)
            (out / "thread").write_text("finished")
        threading.Thread(target=work).start()
        exit_now(SystemExit(0))
        """,
        tmp_path,
    )
    assert done.returncode == 0
    assert (tmp_path / "thread").read_text() == "finished"
    assert (tmp_path / "atexit").read_text() == "ran"


def test_a_message_status_exits_as_python_does(tmp_path: Path) -> None:
    done = run('exit_now(SystemExit("went wrong"))\n', tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip() == "went wrong"
    none = run("exit_now(SystemExit(None))\n", tmp_path)
    assert none.returncode == 0


def test_a_closed_stdout_or_an_out_of_range_status_takes_the_normal_exit(tmp_path: Path) -> None:
    closed = run("sys.stdout = None\nexit_now(SystemExit(4))\n", tmp_path)
    assert closed.returncode == 4
    assert "Traceback" not in closed.stderr
    big = run("exit_now(SystemExit(2**40))\n", tmp_path)
    assert "Traceback" not in big.stderr
    plain = subprocess.run(
        [sys.executable, "-c", "raise SystemExit(2**40)"], capture_output=True, check=False
    )
    assert big.returncode == plain.returncode  # what Python itself exits with
