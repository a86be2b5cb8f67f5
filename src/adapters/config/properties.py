"""Java/Spring ``.properties`` files, so teams moving from the Java system keep their lines.

The rules of ``java.util.Properties.load``: a line whose first non-blank character is
``#`` or ``!`` is a comment; a line ending in an odd number of backslashes continues on
the next one (whose leading blanks are dropped); the key ends at the first unescaped
``=``, ``:`` or blank; escapes ``\\t \\n \\r \\f \\uXXXX`` and ``\\<char>`` -> char. As in
Java, ``#`` after a value is part of the value, not a comment. Two differences for
convenience: the text is UTF-8 (so ``数据库`` can be written as is), and trailing unescaped
blanks of a value are dropped. A repeated key keeps its last value.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

_BLANKS = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


class PropertiesSyntaxError(ValueError):
    def __init__(self, line_number: int, reason: str) -> None:
        super().__init__(f"line {line_number}: {reason}")
        self.line_number = line_number
        self.reason = reason


def parse_properties(text: str) -> dict[str, str]:
    """Keys to values, in file order."""
    entries: dict[str, str] = {}
    for line_number, line in _logical_lines(text):
        key, value = _entry(line, line_number)
        entries.pop(key, None)  # a repeated key moves to where it was last set
        entries[key] = value
    return entries


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    pending: str | None = None
    start = 0
    for number, natural in enumerate(_LINE_BREAK.split(text.removeprefix("\ufeff")), 1):
        stripped = natural.lstrip(_BLANKS)
        if pending is None:
            if not stripped or stripped[0] in "#!":
                continue
            current, start = stripped, number
        else:
            current = pending + stripped
        if _continues(current):
            pending = current[:-1]
            continue
        pending = None
        yield start, current
    if pending is not None:  # the file ended inside a continuation
        yield start, pending


def _escape(line: str, at: int, line_number: int) -> tuple[str, int]:
    """Decode the escape starting with the backslash at ``at``; return (text, next index)."""
    if at + 1 >= len(line):
        return "", at + 1
    char = line[at + 1]
    if char == "u":
        digits = line[at + 2 : at + 6]
        if len(digits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
            raise PropertiesSyntaxError(line_number, f"malformed \\uXXXX escape: \\u{digits}")
        return chr(int(digits, 16)), at + 6
    return _ESCAPES.get(char, char), at + 2


def _entry(line: str, line_number: int) -> tuple[str, str]:
    key: list[str] = []
    i, end = 0, len(line)
    while i < end:
        char = line[i]
        if char == "\\":
            decoded, i = _escape(line, i, line_number)
            key.append(decoded)
            continue
        if char in "=:" or char in _BLANKS:
            break
        key.append(char)
        i += 1
    while i < end and line[i] in _BLANKS:
        i += 1
    if i < end and line[i] in "=:":
        i += 1
        while i < end and line[i] in _BLANKS:
            i += 1
    value: list[str] = []
    keep = 0  # length of the value without trailing unescaped blanks
    while i < end:
        if line[i] == "\\":
            decoded, i = _escape(line, i, line_number)
            value.append(decoded)
            keep = len(value)
        else:
            value.append(line[i])
            if line[i] not in _BLANKS:
                keep = len(value)
            i += 1
    return _pair_surrogates("".join(key)), _pair_surrogates("".join(value[:keep]))


def _pair_surrogates(text: str) -> str:
    # \uD83D\uDE00 arrives as two surrogates; join them into the one character they encode.
    if not any("\ud800" <= c <= "\udfff" for c in text):
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
