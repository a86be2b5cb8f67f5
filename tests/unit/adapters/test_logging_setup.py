from __future__ import annotations

import io
import json
import logging

from lookup_knowledge.adapters.logging_setup import configure_logging


def test_json_lines_carry_the_structured_fields() -> None:
    stream = io.StringIO()
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        configure_logging("INFO", json_lines=True, stream=stream)
        logging.getLogger("lookup_knowledge.test").info(
            "lookup_knowledge done", extra={"invocation_id": "01ab", "returned": 3}
        )
        logging.getLogger("lookup_knowledge.test").debug("hidden")
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1
    record = json.loads(lines[0])
    assert record["message"] == "lookup_knowledge done"
    assert record["invocation_id"] == "01ab"
    assert record["returned"] == 3
    assert record["level"] == "INFO"


def test_plain_lines_show_the_fields_as_key_values() -> None:
    stream = io.StringIO()
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        configure_logging("WARNING", json_lines=False, stream=stream)
        logging.getLogger("x").warning("spooled", extra={"invocation_id": "01ab"})
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    assert stream.getvalue().rstrip().endswith("spooled invocation_id=01ab")
