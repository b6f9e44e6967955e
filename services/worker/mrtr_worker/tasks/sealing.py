"""Task records sealed at rest with the fleet's key ring: a copy of Redis reveals no answers or results.

The same crypto as `requestState` (the SDK's AES-256-GCM ring under HKDF,
a key fingerprint in every token), over the ring the worker currently holds:
a rotation (`/admin/keyring/reload`) seals new writes with the new primary
while records sealed under an older key still open. The task id is sealed
inside the record and checked on open, so a record copied onto another
task's key in Redis is refused rather than served.

A rotation alone leaves older records under the old key until their next
write; `reseal` moves one onto the primary (the same bytes, so its format is
kept), which the store's `reseal_all` does for every record before a retire.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from mcp.server.request_state import AESGCMRequestStateCodec, InvalidRequestState

from mrtr_worker.sealing.codec import FleetStateCodec
from mrtr_worker.sealing.keyring import KeyRing
from mrtr_worker.tasks.record import TaskRecord, UnreadableRecord

_SEALED_PREFIX = "v1."
_FINGERPRINT_CHARS = 8
"""base64url characters that cover the token's leading 4-byte key fingerprint (8 chars = 6 bytes)."""


def fingerprint(sealed: str) -> bytes | None:
    """The key fingerprint a sealed token names (the SDK's `v1.` + base64url(kid + nonce + ciphertext)),
    read without decrypting; None for anything that is not such a token."""
    if not sealed.startswith(_SEALED_PREFIX):
        return None
    head = sealed[len(_SEALED_PREFIX) : len(_SEALED_PREFIX) + _FINGERPRINT_CHARS]
    if len(head) < _FINGERPRINT_CHARS:
        return None
    try:
        return base64.urlsafe_b64decode(head)[:4]
    except ValueError:
        return None


class RecordSealer:
    """Seal and open task records with whichever ring the fleet codec holds right now."""

    def __init__(self, codec: FleetStateCodec, readable_formats: frozenset[int]) -> None:
        self._codec = codec
        self._readable = readable_formats
        self._ring: KeyRing | None = None
        self._crypto: AESGCMRequestStateCodec | None = None
        self._primary_fingerprint: bytes | None = None

    def _current(self) -> AESGCMRequestStateCodec:
        ring = self._codec.ring
        if ring is not self._ring or self._crypto is None:
            crypto = AESGCMRequestStateCodec(ring.sealing_order())
            # The SDK keeps its fingerprints private: one token sealed now names the primary's.
            self._ring, self._crypto, self._primary_fingerprint = ring, crypto, fingerprint(crypto.seal(b""))
        return self._crypto

    def is_current(self, sealed: str) -> bool:
        """Whether `sealed` names the current primary key (no decryption: the fingerprint is in clear)."""
        self._current()
        return fingerprint(sealed) == self._primary_fingerprint

    def reseal(self, task_id: str, sealed: str) -> str:
        """The same record sealed under the current primary; `UnreadableRecord` when no key opens it."""
        payload = self._open_payload(sealed)
        _document(task_id, payload)  # checked as `open` would: a record copied from another task is not adopted
        return self._current().seal(payload)

    def _open_payload(self, sealed: str) -> bytes:
        try:
            return self._current().unseal(sealed)
        except InvalidRequestState as exc:
            raise UnreadableRecord(f"task record does not open ({exc})") from None

    def seal(self, record: TaskRecord) -> str:
        payload = json.dumps(record.to_document(), separators=(",", ":"), ensure_ascii=False)
        return self._current().seal(payload.encode("utf-8", "surrogatepass"))

    def open(self, task_id: str, sealed: str) -> TaskRecord:
        return TaskRecord.from_document(_document(task_id, self._open_payload(sealed)), self._readable)


def _document(task_id: str, payload: bytes) -> dict[str, Any]:
    """The record's JSON document, refused unless it is this task's."""
    try:
        doc: Any = json.loads(payload.decode("utf-8", "surrogatepass"))
    except ValueError as exc:
        raise UnreadableRecord(f"task record does not open ({exc})") from None
    if not isinstance(doc, dict) or doc.get("id") != task_id:
        raise UnreadableRecord("task record belongs to another task id")
    return doc
