"""``FileDocumentSource``: Markdown, plain-text and HTML files and folders.

- doc_id: ``doc_id_prefix`` + the file's path relative to the ingest root (POSIX
  separators), so it is stable across machines and runs; or given for a single file.
- root: given, or the folder itself when one folder is ingested, or the folder holding
  the file(s).
- category: the argument > front matter ``category`` > the first folder under the
  root (``runbooks/disk.md`` -> ``runbooks``) > "".
- title: front matter ``title`` > the first level-1 heading, ATX or setext (or HTML
  ``<title>``) >
  the file name without extension.
- source_type: front matter ``type`` (or ``source_type``) > by extension (markdown,
  text, html).
- source: front matter ``source`` (a URL, say) > the path relative to the root.

Files that cannot be read (not UTF-8, binary, too large, bad front matter) are
reported as ``DocumentLoadFailure`` with their doc_id, and ingest goes on.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path, PurePosixPath

from lookup_knowledge.adapters.files.chunking import first_title
from lookup_knowledge.adapters.files.frontmatter import meta_text, split_front_matter
from lookup_knowledge.adapters.files.html_text import html_to_markdown
from lookup_knowledge.application.ports import (
    DocumentLoadFailure,
    DocumentSource,
    LoadedDocument,
    SourceDocument,
    validate_doc_id,
)
from lookup_knowledge.domain.errors import IngestError, InvalidInputError

DEFAULT_EXTENSIONS = (".md", ".markdown", ".txt", ".text", ".html", ".htm")
_KIND = {
    ".md": ("markdown", "markdown"),
    ".markdown": ("markdown", "markdown"),
    ".txt": ("text", "text"),
    ".text": ("text", "text"),
    ".html": ("html", "markdown"),
    ".htm": ("html", "markdown"),
}


def first_heading(markdown: str) -> str | None:
    """The first level-1 heading (ATX ``#`` or setext ``===``), by the CommonMark parser."""
    return first_title(markdown)


class FileDocumentSource(DocumentSource):
    def __init__(
        self,
        paths: Sequence[str | Path] | str | Path,
        *,
        root: str | Path | None = None,
        category: str | None = None,
        doc_id: str | None = None,
        doc_id_prefix: str = "",
        extensions: Iterable[str] = DEFAULT_EXTENSIONS,
        max_file_bytes: int = 10 * 1024 * 1024,
        follow_symlinks: bool = False,
        include_hidden: bool = False,
    ) -> None:
        items = [paths] if isinstance(paths, str | Path) else list(paths)
        if not items:
            raise IngestError("no file or folder to ingest")
        resolved: list[Path] = []
        for item in items:
            path = Path(item).expanduser()
            if not path.exists():
                raise IngestError(f"{path} does not exist")
            resolved.append(path.resolve())
        self._paths = resolved
        if root is not None:
            self._root = Path(root).expanduser().resolve()
            if not self._root.is_dir():
                raise IngestError(f"ingest root {self._root} is not a folder")
        elif len(resolved) == 1 and resolved[0].is_dir():
            self._root = resolved[0]
        else:
            self._root = Path(os.path.commonpath([p if p.is_dir() else p.parent for p in resolved]))
        for path in resolved:
            if not path.is_relative_to(self._root):
                raise IngestError(f"{path} is not inside the ingest root {self._root}")
        self._category = category.strip() if category and category.strip() else None
        self._prefix = doc_id_prefix
        self._extensions = tuple(
            e.lower() if e.startswith(".") else f".{e.lower()}" for e in extensions
        )
        self._max_bytes = max_file_bytes
        self._follow = follow_symlinks
        self._hidden = include_hidden
        self._files: list[Path] | None = None
        self._explicit_id = doc_id
        if doc_id is not None:
            validate_doc_id(doc_id)
            if len(self.files()) != 1:
                raise IngestError(
                    f"an explicit doc_id needs exactly one file; {len(self.files())} found"
                )
        # sync scope: whole folders given -> every doc_id under them; files -> exactly them
        self._scope_prefixes: list[str] = []
        self._scope_ids: set[str] = set()
        for path in resolved:
            if path.is_dir():
                rel = path.relative_to(self._root).as_posix()
                self._scope_prefixes.append(self._prefix + ("" if rel == "." else rel + "/"))
        for path in resolved:
            if path.is_file():
                self._scope_ids.add(self._doc_id(path))

    @property
    def root(self) -> Path:
        return self._root

    # ------------------------------------------------------------------ listing

    def _wanted(self, path: Path) -> bool:
        return path.suffix.lower() in self._extensions and (
            self._hidden or not path.name.startswith(".")
        )

    def files(self) -> list[Path]:
        """The files this source reads, in a stable order."""
        if self._files is not None:
            return self._files
        found: dict[Path, None] = {}
        for path in self._paths:
            if path.is_file():
                found[path] = None
                continue
            for folder, dirs, names in os.walk(path, followlinks=self._follow):
                dirs[:] = sorted(d for d in dirs if self._hidden or not d.startswith("."))
                for name in sorted(names):
                    file = Path(folder) / name
                    if not self._follow and file.is_symlink():
                        continue
                    if self._wanted(file):
                        found[file] = None
        self._files = sorted(found, key=lambda p: p.relative_to(self._root).as_posix())
        return self._files

    def estimated_count(self) -> int:
        return len(self.files())

    def in_scope(self, doc_id: str) -> bool:
        return doc_id in self._scope_ids or any(doc_id.startswith(p) for p in self._scope_prefixes)

    def _relative(self, path: Path) -> PurePosixPath:
        return PurePosixPath(path.relative_to(self._root).as_posix())

    def _doc_id(self, path: Path) -> str:
        if self._explicit_id is not None:
            return self._explicit_id
        return self._prefix + self._relative(path).as_posix()

    # ------------------------------------------------------------------ reading

    def documents(self) -> Iterator[LoadedDocument]:
        for path in self.files():
            yield self._load(path)

    def _load(self, path: Path) -> LoadedDocument:
        relative = self._relative(path).as_posix()
        try:
            doc_id = self._doc_id(path)
        except InvalidInputError as error:
            return DocumentLoadFailure(relative, f"unusable doc_id: {error}")
        try:
            validate_doc_id(doc_id)
        except InvalidInputError as error:
            return DocumentLoadFailure(relative, f"unusable doc_id: {error}")
        try:
            size = path.stat().st_size
            if size > self._max_bytes:
                return DocumentLoadFailure(
                    relative, f"file is {size} bytes; the limit is {self._max_bytes}", doc_id
                )
            raw = path.read_bytes()
        except OSError as error:
            return DocumentLoadFailure(relative, f"cannot read: {error}", doc_id)
        if b"\x00" in raw:
            return DocumentLoadFailure(relative, "binary file (contains NUL bytes)", doc_id)
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as error:
            return DocumentLoadFailure(relative, f"not UTF-8 text: {error}", doc_id)
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        try:
            meta, body = split_front_matter(text)
        except InvalidInputError as error:
            return DocumentLoadFailure(relative, str(error), doc_id)
        source_type, fmt = _KIND.get(path.suffix.lower(), ("text", "text"))
        html_title = None
        if source_type == "html":
            html_title, body = html_to_markdown(body)
        title = (
            meta_text(meta, "title")
            or html_title
            or (first_heading(body) if fmt == "markdown" else None)
            or path.stem
        )
        parts = self._relative(path).parts
        folder_category = parts[0] if len(parts) > 1 else ""
        category = self._category or meta_text(meta, "category") or folder_category
        try:
            return SourceDocument(
                doc_id=doc_id,
                text=body,
                source=meta_text(meta, "source", "url") or relative,
                title=title,
                category=category,
                source_type=meta_text(meta, "type", "source_type") or source_type,
                format=fmt,
            )
        except InvalidInputError as error:
            return DocumentLoadFailure(relative, str(error), doc_id)
