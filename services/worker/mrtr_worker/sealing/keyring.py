"""The fleet's shared key ring for sealing `requestState`.

The crypto is the MCP SDK's (`AESGCMRequestStateCodec`: AES-256-GCM under
HKDF-derived keys, a 4-byte key fingerprint in every token). This module only
gives the ring a file format operators can edit safely and a small CLI for the
rotation steps:

    {"primary": "2026-11", "keys": {"2026-11": "<base64url, 32+ bytes>", "2026-08": "..."}}

`primary` seals; every listed key opens. Rotation without failing a request
in flight is three rollouts: `add` a key (every instance can open with it),
`promote` it (it seals), `retire` the old one once the state TTL has passed.
"""

from __future__ import annotations

import argparse
import base64
import json
import secrets
import sys
from dataclasses import dataclass, field
from pathlib import Path

MIN_KEY_BYTES = 32


class KeyRingError(ValueError):
    """The key ring text is unusable; the message says why in one line."""


@dataclass(frozen=True)
class KeyRing:
    """Named secrets, one of which is primary (the sealing key)."""

    primary: str
    keys: dict[str, bytes] = field(repr=False)

    def __post_init__(self) -> None:
        if not self.keys:
            raise KeyRingError("key ring has no keys")
        if self.primary not in self.keys:
            raise KeyRingError(f"primary key {self.primary!r} is not in the ring")
        for name, secret in self.keys.items():
            if len(secret) < MIN_KEY_BYTES:
                raise KeyRingError(f"key {name!r} has {len(secret)} bytes; at least {MIN_KEY_BYTES} needed")

    def sealing_names(self) -> list[str]:
        """Key names in the SDK's ring order: the primary first, then the rest."""
        return [self.primary] + [name for name in self.keys if name != self.primary]

    def sealing_order(self) -> list[bytes]:
        """Secrets in the SDK's ring order: the primary first, then the rest."""
        return [self.keys[name] for name in self.sealing_names()]

    @classmethod
    def parse(cls, text: str) -> KeyRing:
        try:
            doc = json.loads(text)
            primary, raw_keys = doc["primary"], doc["keys"]
        except (ValueError, KeyError, TypeError) as exc:
            raise KeyRingError(f'key ring is not {{"primary": ..., "keys": {{...}}}} JSON ({exc})') from None
        if not isinstance(primary, str) or not isinstance(raw_keys, dict):
            raise KeyRingError("key ring: primary must be a string and keys an object")
        keys: dict[str, bytes] = {}
        for name, encoded in raw_keys.items():
            try:
                keys[name] = _b64decode(encoded)
            except (ValueError, TypeError):
                raise KeyRingError(f"key {name!r} is not base64url text") from None
        return cls(primary=primary, keys=keys)

    def dumps(self) -> str:
        encoded = {name: _b64encode(secret) for name, secret in self.keys.items()}
        return json.dumps({"primary": self.primary, "keys": encoded}, indent=2) + "\n"

    def with_key(self, name: str, secret: bytes) -> KeyRing:
        if name in self.keys:
            raise KeyRingError(f"key {name!r} is already in the ring")
        return KeyRing(primary=self.primary, keys={**self.keys, name: secret})

    def promoted(self, name: str) -> KeyRing:
        if name not in self.keys:
            raise KeyRingError(f"key {name!r} is not in the ring; add it (and roll it out) first")
        return KeyRing(primary=name, keys=self.keys)

    def without_key(self, name: str) -> KeyRing:
        if name == self.primary:
            raise KeyRingError(f"key {name!r} is primary; promote another key first")
        if name not in self.keys:
            raise KeyRingError(f"key {name!r} is not in the ring")
        return KeyRing(primary=self.primary, keys={n: s for n, s in self.keys.items() if n != name})


def new_secret() -> bytes:
    return secrets.token_bytes(MIN_KEY_BYTES)


def new_ring(name: str) -> KeyRing:
    return KeyRing(primary=name, keys={name: new_secret()})


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _b64decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def main(argv: list[str] | None = None) -> int:
    """`python -m mrtr_worker.sealing.keyring new|add|promote|retire|show FILE ...`."""
    parser = argparse.ArgumentParser(prog="python -m mrtr_worker.sealing.keyring", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    new = sub.add_parser("new", help="print a new ring with one key (or write it to --out)")
    new.add_argument("--name", default="k1")
    new.add_argument("--out", type=Path)
    for command, help_text in (
        ("add", "add a new key that every instance can open with"),
        ("promote", "make a key the sealing key"),
        ("retire", "remove a key once no state sealed with it can still be alive"),
    ):
        p = sub.add_parser(command, help=help_text)
        p.add_argument("file", type=Path)
        p.add_argument("name")
    show = sub.add_parser("show", help="list key names and which is primary, never the secrets")
    show.add_argument("file", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.command == "new":
            text = new_ring(args.name).dumps()
            if args.out is None:
                sys.stdout.write(text)
            else:
                _write_private(args.out, text)
            return 0
        ring = KeyRing.parse(args.file.read_text())
        if args.command == "show":
            for name in ring.keys:
                print(f"{name}{'  (primary)' if name == ring.primary else ''}")
            return 0
        if args.command == "add":
            ring = ring.with_key(args.name, new_secret())
        elif args.command == "promote":
            ring = ring.promoted(args.name)
        else:
            ring = ring.without_key(args.name)
        _write_private(args.file, ring.dumps())
        return 0
    except (KeyRingError, OSError) as exc:
        print(f"keyring: {exc}", file=sys.stderr)
        return 2


def _write_private(path: Path, text: str) -> None:
    """Write atomically with owner-only permissions: the ring is a secret."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    tmp.chmod(0o600)
    tmp.replace(path)


if __name__ == "__main__":
    raise SystemExit(main())
