"""The one secret masker: a password in a URL never leaves in clear.

Pure text rules (stdlib only), so the error hierarchy, the configuration display, the
connection adapters and the audit record all mask the same way:
``postgresql://app:s3cret@db/audit`` -> ``postgresql://app:****@db/audit``.
"""

from __future__ import annotations

import re

MASK = "****"

# scheme://user:password@ - in a whole URL value the password ends at the first "@", as
# SQLAlchemy and urllib parse it.
_URL_PASSWORD = re.compile(r"^(?P<head>[A-Za-z][\w+.-]*://[^:/@]*):(?P<password>[^@]*)@")
# The same inside free text (an error message, a driver's exception text): a URL ends at
# whitespace or a quote, so the password does too.
_TEXT_URL_PASSWORD = re.compile(
    r"(?P<head>\b[A-Za-z][\w+.-]*://[^\s:/@'\"<>]*):(?P<password>[^\s@'\"<>]*)@"
)
# key=value pairs a driver may echo (libpq's "password=... ", a query string "?api_key=").
_TEXT_SECRET_PARAM = re.compile(
    r"(?P<head>\b(?:password|passwd|pwd|api[_-]?key|token|secret)=)(?P<value>[^\s&'\";]+)",
    re.IGNORECASE,
)


def mask_url(url: str) -> str:
    """One URL value with its password masked (everything else kept)."""
    return _URL_PASSWORD.sub(lambda m: f"{m.group('head')}:{MASK}@", url, count=1)


def mask_secrets(text: str) -> str:
    """Free text with every URL password and ``password=``/``token=``-style value masked."""
    if "=" not in text and "@" not in text:
        return text
    masked = _TEXT_URL_PASSWORD.sub(lambda m: f"{m.group('head')}:{MASK}@", text)
    return _TEXT_SECRET_PARAM.sub(lambda m: f"{m.group('head')}{MASK}", masked)
