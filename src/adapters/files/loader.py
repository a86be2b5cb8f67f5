"""``FileDocumentSource``: Markdown, plain-text and HTML files and folders.

- source name (the namespace, recorded as the owner of every row): given, else the
  name of the ingest root's folder, so two folders ingested separately never share
  ids (``teamA/README.md``, ``teamB/README.md``). A folder inside an ingested source
  joins that source: when the nearest ancestor folder's name is a source the store
  already holds (and the folder's own name is not), the root becomes that ancestor,
  so ``ingest kb/`` then ``ingest kb/guides --sync`` keeps ``kb/guides/deploy.md``
  and touches nothing of ``kb`` outside ``guides/``.
- doc_id: ``doc_id_prefix`` (default: the source name + ``/``) + the file's path
  relative to the ingest root (POSIX separators), so it is stable across machines and
  runs; or given for a single file.
- root: given, or the folder itself when one folder is ingested, or the folder holding
  the file(s); or the ingested ancestor (above).
- category: the argument > front matter ``category`` > the first folder under the
  root (``runbooks/disk.md`` -> ``runbooks``) > "".
- title: front matter ``title`` > the first level-1 heading, ATX or setext (or HTML
  ``<title>``) >
  the file name without extension.
- source_type: front matter ``type`` (or ``source_type``) > by extension (markdown,
  text, html).
- source: front matter ``source`` (a URL, say) > the path relative to the root.
- access: front matter ``tenant``, ``allowed_groups`` (a list, or one name) and
  ``public`` (true/false), each over the source's default (``access``; CLI
  ``--tenant/--allowed-group/--public``), validated like the principal's names; a
  document whose values are unusable is a load failure, not a document without ACL.

Files that cannot be read (not UTF-8, binary, too large, bad front matter, a name
that is not UTF-8) and anything that is not a regular file (a named pipe, a device)
are reported as ``DocumentLoadFailure`` with a one-line reason, and ingest goes on; a
file is opened non-blocking and checked to be regular before it is read, so nothing
blocks a run.
"""

from __future__ import annotations

import copy
import os
import stat
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path, PurePosixPath

from lookup_knowledge.adapters.files.chunking import first_title
from lookup_knowledge.adapters.files.frontmatter import meta_text, split_front_matter
from lookup_knowledge.adapters.files.html_text import html_to_markdown
from lookup_knowledge.application.ports import (
    DocumentLoadFailure,
    DocumentSource,
    LoadedDocument,
    SourceDocument,
    printable,
    validate_doc_id,
    validate_source_name,
)
from lookup_knowledge.domain.access import NO_ACL, DocumentAccess
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
        doc_id_prefix: str | None = None,
        source_name: str | None = None,
        extensions: Iterable[str] = DEFAULT_EXTENSIONS,
        max_file_bytes: int = 10 * 1024 * 1024,
        follow_symlinks: bool = False,
        include_hidden: bool = False,
        access: DocumentAccess = NO_ACL,
    ) -> None:
        self._access = access
        items = [paths] if isinstance(paths, str | Path) else list(paths)
        if not items:
            raise IngestError("no file or folder to ingest")
        resolved: list[Path] = []
        for item in items:
            path = Path(item).expanduser()
            if not path.exists():
                raise IngestError(f"{printable(str(path))} does not exist")
            resolved.append(path.resolve())
        self._paths = resolved
        self._root_given = root is not None
        if root is not None:
            base = Path(root).expanduser().resolve()
            if not base.is_dir():
                raise IngestError(f"ingest root {printable(str(base))} is not a folder")
        elif len(resolved) == 1 and resolved[0].is_dir():
            base = resolved[0]
        else:
            base = Path(os.path.commonpath([p if p.is_dir() else p.parent for p in resolved]))
        for path in resolved:
            if not path.is_relative_to(base):
                raise IngestError(
                    f"{printable(str(path))} is not inside the ingest root {printable(str(base))}"
                )
        self._category = category.strip() if category and category.strip() else None
        self._name_given = source_name is not None
        self._prefix_given = doc_id_prefix
        self._extensions = tuple(
            e.lower() if e.startswith(".") else f".{e.lower()}" for e in extensions
        )
        self._max_bytes = max_file_bytes
        self._follow = follow_symlinks
        self._hidden = include_hidden
        self._files: list[Path] | None = None
        self._skipped: list[DocumentLoadFailure] = []
        self._explicit_id = doc_id
        self._configure(base, source_name if source_name is not None else _folder_name(base))
        if doc_id is not None:
            validate_doc_id(doc_id)
            if len(self.files()) != 1:
                raise IngestError(
                    f"an explicit doc_id needs exactly one file; {len(self.files())} found"
                )

    def _configure(self, root: Path, name: str) -> None:
        """Root, name, doc_id prefix and sync scope (whole folders given -> every doc_id
        under them; files -> exactly them)."""
        if getattr(self, "_root", None) != root:
            self._files = None  # listed (and skipped files named) relative to the root
        self._root = root
        self._name = validate_source_name(name)
        self._prefix = self._prefix_given if self._prefix_given is not None else f"{name}/"
        self._scope_prefixes: list[str] = []
        self._scope_ids: set[str] = set()
        for path in self._paths:
            if path.is_dir():
                rel = path.relative_to(self._root).as_posix()
                self._scope_prefixes.append(self._prefix + ("" if rel == "." else rel + "/"))
            elif path.is_file():
                self._scope_ids.add(self._doc_id(path))

    @property
    def root(self) -> Path:
        return self._root

    @property
    def source_name(self) -> str:
        return self._name

    def bound(self, owners: Mapping[str, str]) -> FileDocumentSource:
        """A folder inside an ingested source joins it (see the module docstring): a
        copy rooted at that source's folder; this source is left as it was."""
        if self._name_given or self._root_given or self._prefix_given is not None:
            return self
        sources = set(owners.values())
        if self._name in sources:
            return self
        for ancestor in self._root.parents:
            if ancestor.name and ancestor.name in sources:
                joined = copy.copy(self)  # the listing is redone under the new root
                try:
                    joined._configure(ancestor, ancestor.name)
                except InvalidInputError:
                    continue
                return joined
        return self

    # ------------------------------------------------------------------ listing

    def _wanted(self, path: Path) -> bool:
        return path.suffix.lower() in self._extensions and (
            self._hidden or not path.name.startswith(".")
        )

    def _regular(self, path: Path) -> bool:
        """A regular file, or the reason it is skipped is listed (never read: a named
        pipe would block the run)."""
        try:
            mode = path.stat().st_mode
        except OSError as error:
            self._skipped.append(DocumentLoadFailure(self._shown(path), f"cannot stat: {error}"))
            return False
        if stat.S_ISREG(mode):
            return True
        self._skipped.append(
            DocumentLoadFailure(
                self._shown(path), f"not a regular file ({_kind(mode)}); skipped", None
            )
        )
        return False

    def files(self) -> list[Path]:
        """The regular files this source reads, in a stable order."""
        if self._files is not None:
            return self._files
        found: dict[Path, None] = {}
        self._skipped = []
        for path in self._paths:
            if not path.is_dir():
                if self._regular(path):
                    found[path] = None
                continue
            for folder, dirs, names in os.walk(path, followlinks=self._follow):
                dirs[:] = sorted(d for d in dirs if self._hidden or not d.startswith("."))
                for name in sorted(names):
                    file = Path(folder) / name
                    if not self._follow and file.is_symlink():
                        continue
                    if self._wanted(file) and self._regular(file):
                        found[file] = None
        self._files = sorted(found, key=lambda p: p.relative_to(self._root).as_posix())
        return self._files

    def estimated_count(self) -> int:
        return len(self.files()) + len(self._skipped)

    def doc_ids(self) -> list[str]:
        ids: list[str] = []
        for path in self.files():
            doc_id = self._doc_id(path)
            try:
                ids.append(validate_doc_id(doc_id))
            except InvalidInputError:
                continue  # reported by documents() as that file's failure
        return ids

    def in_scope(self, doc_id: str) -> bool:
        return doc_id in self._scope_ids or any(doc_id.startswith(p) for p in self._scope_prefixes)

    @property
    def default_access(self) -> DocumentAccess:
        return self._access

    def _relative(self, path: Path) -> PurePosixPath:
        return PurePosixPath(path.relative_to(self._root).as_posix())

    def _shown(self, path: Path) -> str:
        try:
            return self._relative(path).as_posix()
        except ValueError:
            return str(path)

    def _doc_id(self, path: Path) -> str:
        if self._explicit_id is not None:
            return self._explicit_id
        return self._prefix + self._relative(path).as_posix()

    # ------------------------------------------------------------------ reading

    def documents(self) -> Iterator[LoadedDocument]:
        files = self.files()
        yield from self._skipped
        for path in files:
            yield self._load(path)

    def _load(self, path: Path) -> LoadedDocument:
        relative = self._relative(path).as_posix()
        try:
            relative.encode("utf-8")
        except UnicodeEncodeError:
            return DocumentLoadFailure(
                relative, "file name is not valid UTF-8: rename the file to ingest it"
            )
        try:
            doc_id = validate_doc_id(self._doc_id(path))
        except InvalidInputError as error:
            return DocumentLoadFailure(relative, f"unusable doc_id: {error}")
        try:
            raw = self._read(path)
        except _Unreadable as error:
            return DocumentLoadFailure(relative, str(error), doc_id)
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
            access = document_access(meta, self._access)
        except InvalidInputError as error:
            return DocumentLoadFailure(relative, f"access metadata: {error}", doc_id)
        try:
            return SourceDocument(
                doc_id=doc_id,
                text=body,
                source=meta_text(meta, "source", "url") or relative,
                title=title,
                category=category,
                source_type=meta_text(meta, "type", "source_type") or source_type,
                format=fmt,
                access=access,
            )
        except InvalidInputError as error:
            return DocumentLoadFailure(relative, str(error), doc_id)

    def _read(self, path: Path) -> bytes:
        """The file's bytes: opened non-blocking and checked to be a regular file first
        (a named pipe put in place after listing never blocks the run)."""
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
        if self._follow:
            flags &= ~getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(path, flags)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise _Unreadable(f"not a regular file ({_kind(info.st_mode)}); skipped")
            if info.st_size > self._max_bytes:
                raise _Unreadable(f"file is {info.st_size} bytes; the limit is {self._max_bytes}")
            chunks: list[bytes] = []
            remaining = self._max_bytes + 1
            while remaining > 0:
                block = os.read(fd, min(remaining, 1 << 20))
                if not block:
                    break
                chunks.append(block)
                remaining -= len(block)
            raw = b"".join(chunks)
            if len(raw) > self._max_bytes:
                raise _Unreadable(f"file is over {self._max_bytes} bytes; the limit")
            return raw
        finally:
            os.close(fd)


class _Unreadable(Exception):
    """A file this source will not read, with the one-line reason."""


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "not a file"


def _folder_name(folder: Path) -> str:
    """The default source name: the folder's own name ("files" for the file-system root)."""
    name = folder.name or "files"
    try:
        return validate_source_name(name)
    except InvalidInputError as error:
        raise InvalidInputError(
            f"the folder name cannot be a source name ({error}): pass a source name"
        ) from None


def document_access(meta: Mapping[str, object], default: DocumentAccess) -> DocumentAccess:
    """Front matter ``tenant`` / ``allowed_groups`` / ``public`` over ``default``."""
    tenant: object = meta.get("tenant", default.tenant)
    if tenant is None:
        tenant = ""
    if not isinstance(tenant, str):
        raise InvalidInputError(f"tenant must be text, got {type(tenant).__name__}")
    groups: object = meta.get("allowed_groups", sorted(default.allowed_groups))
    if groups is None:
        groups = []
    if isinstance(groups, str):
        groups = [groups]
    if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
        raise InvalidInputError("allowed_groups must be a list of names")
    public: object = meta.get("public", default.public)
    if not isinstance(public, bool):
        raise InvalidInputError(f"public must be true or false, got {public!r}")
    return DocumentAccess(tenant=tenant, allowed_groups=frozenset(groups), public=public)
