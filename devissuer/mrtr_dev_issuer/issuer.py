"""A development token issuer: an Ed25519 key pair that signs short-lived JWTs.

Stands in for a real identity provider on a laptop, in compose and in load
tests, so bearer authentication is on in every setting that resembles
production. Workers trust it through its public key file
(`MRTR_WORKER_JWT_PUBLIC_KEY_FILE`); a real deployment points them at its
provider's JWKS URL instead and never has this private key.

    python -m mrtr_dev_issuer new secrets/          # issuer-private.pem, issuer-public.pem
    python -m mrtr_dev_issuer mint alice             # prints a token (key: secrets/issuer-private.pem)
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

DEFAULT_ISSUER = "mrtr-dev-issuer"
DEFAULT_AUDIENCE = "mrtr-fleet"
PRIVATE_KEY_NAME = "issuer-private.pem"
PUBLIC_KEY_NAME = "issuer-public.pem"
DEFAULT_KEY_FILE = Path("secrets") / PRIVATE_KEY_NAME


@dataclass(frozen=True)
class DevIssuer:
    """Signs tokens the workers accept when they trust this issuer's public key."""

    private_key: Ed25519PrivateKey
    issuer: str = DEFAULT_ISSUER
    audience: str = DEFAULT_AUDIENCE

    @classmethod
    def generate(cls) -> DevIssuer:
        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def load(cls, private_key_file: Path) -> DevIssuer:
        key = serialization.load_pem_private_key(private_key_file.read_bytes(), password=None)
        if not isinstance(key, Ed25519PrivateKey):
            raise ValueError(f"{private_key_file} is not an Ed25519 private key")
        return cls(key)

    @classmethod
    def ensure(cls, directory: Path) -> DevIssuer:
        """The issuer whose keys are in `directory`, generated there on first use."""
        private_file = directory / PRIVATE_KEY_NAME
        if private_file.exists():
            return cls.load(private_file)
        issuer = cls.generate()
        issuer.write(directory)
        return issuer

    def write(self, directory: Path) -> None:
        """Write both PEM files; the private one readable by its owner only."""
        directory.mkdir(parents=True, exist_ok=True)
        private_pem = self.private_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        private_file = directory / PRIVATE_KEY_NAME
        fd = os.open(private_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(private_pem)
        (directory / PUBLIC_KEY_NAME).write_bytes(self.public_pem())

    def public_pem(self) -> bytes:
        return self.private_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def mint(
        self,
        subject: str,
        *,
        ttl_seconds: float = 3600,
        client_id: str | None = None,
        scopes: Sequence[str] = (),
        audience: str | None = None,
        not_before: float | None = None,
    ) -> str:
        """A signed token for `subject`; every argument exists so tests can mint wrong tokens on purpose."""
        now = time.time()
        claims: dict[str, object] = {
            "iss": self.issuer,
            "aud": audience or self.audience,
            "sub": subject,
            "iat": int(now),
            "exp": int(now + ttl_seconds),
            "jti": uuid.uuid4().hex,
        }
        if client_id is not None:
            claims["client_id"] = client_id
        if scopes:
            claims["scope"] = " ".join(scopes)
        if not_before is not None:
            claims["nbf"] = int(not_before)
        return jwt.encode(claims, self.private_key, algorithm="EdDSA")


TOKEN_VARIABLE = "MRTR_TOKEN"  # noqa: S105 (the name of a variable, not a secret)
ISSUER_KEY_VARIABLE = "MRTR_ISSUER_KEY_FILE"
LOAD_TEST_TOKEN_TTL = 24 * 3600
"""Long enough for any bounded load test; a token is minted once per simulated user."""


def token_from_environment(subject: str) -> str | None:
    """A bearer token for `subject` as a load generator is configured: `MRTR_TOKEN` (one token for
    everyone), else `MRTR_ISSUER_KEY_FILE` (a token per subject from the development issuer), else None."""
    fixed = os.environ.get(TOKEN_VARIABLE)
    if fixed:
        return fixed
    key_file = os.environ.get(ISSUER_KEY_VARIABLE)
    if not key_file:
        return None
    return _issuer_from(key_file).mint(subject, ttl_seconds=LOAD_TEST_TOKEN_TTL)


@functools.cache
def _issuer_from(key_file: str) -> DevIssuer:
    return DevIssuer.load(Path(key_file))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mrtr_dev_issuer", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    new = commands.add_parser("new", help="create the key pair in a directory (kept if it exists)")
    new.add_argument("directory", type=Path)
    mint = commands.add_parser("mint", help="print a token for SUBJECT")
    mint.add_argument("subject")
    mint.add_argument("--key", type=Path, default=DEFAULT_KEY_FILE, help=f"private key (default {DEFAULT_KEY_FILE})")
    mint.add_argument("--ttl", type=float, default=3600, help="lifetime in seconds (default 3600)")
    mint.add_argument("--client-id", help="client_id claim (default: the subject)")
    mint.add_argument("--scope", action="append", default=[], help="a scope to grant (repeatable)")
    args = parser.parse_args(argv)
    if args.command == "new":
        DevIssuer.ensure(args.directory)
        print(args.directory / PUBLIC_KEY_NAME)
        return 0
    try:
        issuer = DevIssuer.load(args.key)
    except (OSError, ValueError) as exc:
        print(
            f"mrtr_dev_issuer: cannot load {args.key}: {exc}; create one with scripts/compose-secrets", file=sys.stderr
        )
        return 2
    print(issuer.mint(args.subject, ttl_seconds=args.ttl, client_id=args.client_id, scopes=args.scope))
    return 0
