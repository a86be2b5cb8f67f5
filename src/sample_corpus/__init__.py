"""Bundled sample corpus for ``lookup-knowledge quickstart``.

A small, fictional knowledge base for "Northwind Cloud", a mid-size SaaS company that
runs a payments and ordering platform. It was written for this project (it is not
copied from anywhere) and ships under the project's licence, Apache-2.0.

Layout of the folder returned by :func:`corpus_path`:

- ``operations/``, ``database/``, ``networking/``, ``product/``: the four categories
  (first-level folders); each document is Markdown with YAML front matter
  (``title``, ``type``, ``tags``). A few documents are in Simplified Chinese.
- ``questions.json``: demo questions, each with the document that answers it.
- ``domains.yaml``: the L0 domain dictionary (category -> keywords and aliases).

Stdlib only, so importing this module costs nothing.
"""

from __future__ import annotations

import pathlib
from importlib.resources import files

__all__ = ["corpus_path"]


def corpus_path() -> pathlib.Path:
    """The corpus root as a real filesystem path (the package folder itself).

    Raises ``RuntimeError`` when the package is not installed as plain files (for
    example from a zip archive), since the corpus is read with ordinary file I/O.
    """
    root = files(__package__ or __name__)
    path = root if isinstance(root, pathlib.Path) else pathlib.Path(str(root))
    if not path.is_dir():
        raise RuntimeError(f"the sample corpus is not available as a folder: {root!r}")
    return path
