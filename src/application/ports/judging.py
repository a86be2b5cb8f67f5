"""What an optional claim judge's opinion may do (``audit.check.judge.mode``); its own
module, so configuration can name it without importing the answer checker."""

from __future__ import annotations

from enum import StrEnum


class JudgeMode(StrEnum):
    """What a judge's opinion may do: be recorded (``signal``), or also turn a
    ``supported`` verdict into ``contradicted``/``unsupported`` (``veto``)."""

    SIGNAL = "signal"
    VETO = "veto"
