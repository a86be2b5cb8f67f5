"""Ed25519 keys for the audit trail's checkpoints (``cryptography``).

The private key is a PKCS#8 PEM file, created at first start in the data directory
(``audit-signing-key.pem``, mode 0600) unless ``audit.signing-key`` names one; the
public key (``audit public-key``) is a SubjectPublicKeyInfo PEM an auditor keeps
outside the system. A key's id is the SHA-256 of its raw 32 bytes (hex, 16 digits).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from lookup_knowledge.adapters.private_files import private_directory
from lookup_knowledge.domain.errors import ConfigurationError

_KEY = "audit.signing-key"


def key_id(public: Ed25519PublicKey) -> str:
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def public_pem(public: Ed25519PublicKey) -> str:
    return public.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode("ascii")


class TrailVerifyKey:
    """A public key: checks checkpoint signatures (hex)."""

    def __init__(self, public: Ed25519PublicKey) -> None:
        self._public = public
        self.key_id = key_id(public)
        self.pem = public_pem(public)

    def check(self, payload: bytes, signature_hex: str) -> bool:
        try:
            self._public.verify(bytes.fromhex(signature_hex), payload)
        except (InvalidSignature, ValueError, TypeError):
            return False
        return True

    @classmethod
    def from_file(
        cls, path: str | os.PathLike[str], *, option: str = "--public-key"
    ) -> TrailVerifyKey:
        """A PEM public key (or the PEM private key, whose public half is taken);
        ``ConfigurationError`` naming ``option`` when it is missing or not an Ed25519 key."""
        target = Path(path)
        try:
            data = target.read_bytes()
        except OSError as error:
            raise ConfigurationError(
                option, str(target), f"cannot be read ({error.strerror})"
            ) from None
        try:
            loaded = serialization.load_pem_public_key(data)
        except ValueError:
            try:
                private = serialization.load_pem_private_key(data, password=None)
            except (ValueError, TypeError):
                raise ConfigurationError(
                    option, str(target), "is not a PEM Ed25519 public key"
                ) from None
            if not isinstance(private, Ed25519PrivateKey):
                raise ConfigurationError(option, str(target), "is not an Ed25519 key") from None
            return cls(private.public_key())
        if not isinstance(loaded, Ed25519PublicKey):
            raise ConfigurationError(option, str(target), "is not an Ed25519 public key")
        return cls(loaded)


class TrailSigner:
    """The private key: signs checkpoint payloads (hex signatures)."""

    def __init__(self, private: Ed25519PrivateKey) -> None:
        self._private = private
        self.verify_key = TrailVerifyKey(private.public_key())
        self.key_id = self.verify_key.key_id

    def sign(self, payload: bytes) -> str:
        return self._private.sign(payload).hex()

    @classmethod
    def load_or_create(cls, path: Path, *, create: bool = True) -> TrailSigner:
        """The key at ``path``; made (0600, its folder 0700) when missing and ``create``."""
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            if not create:
                raise ConfigurationError(_KEY, str(path), "no signing key there") from None
            return cls._create(path)
        except OSError as error:
            raise ConfigurationError(
                _KEY, str(path), f"cannot be read ({error.strerror})"
            ) from None
        try:
            private = serialization.load_pem_private_key(data, password=None)
        except (ValueError, TypeError):
            raise ConfigurationError(
                _KEY, str(path), "is not an unencrypted PEM (PKCS#8) Ed25519 private key"
            ) from None
        if not isinstance(private, Ed25519PrivateKey):
            raise ConfigurationError(_KEY, str(path), "is not an Ed25519 private key")
        return cls(private)

    @classmethod
    def _create(cls, path: Path) -> TrailSigner:
        private_directory(path.parent, key=_KEY)
        private = Ed25519PrivateKey.generate()
        pem = private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another process made it first: use that one
            return cls.load_or_create(path, create=False)
        except OSError as error:
            raise ConfigurationError(
                _KEY, str(path), f"cannot be created ({error.strerror})"
            ) from None
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, pem)
            os.fsync(fd)
        finally:
            os.close(fd)
        return cls(private)
