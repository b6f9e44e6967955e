"""Task records sealed at rest with the fleet's key ring: a copy of Redis reveals no answers or results.

The same crypto as `requestState` (the SDK's AES-256-GCM ring under HKDF,
a key fingerprint in every token), over the ring the worker currently holds:
a rotation (`/admin/keyring/reload`) seals new writes with the new primary
while records sealed under an older key still open. The task id is sealed
inside the record and checked on open, so a record copied onto another
task's key in Redis is refused rather than served.
"""

from __future__ import annotations

import json
from typing import Any

from mcp.server.request_state import AESGCMRequestStateCodec, InvalidRequestState

from mrtr_worker.keyring import KeyRing
from mrtr_worker.state_codec import FleetStateCodec
from mrtr_worker.tasks.record import TaskRecord, UnreadableRecord


class RecordSealer:
    """Seal and open task records with whichever ring the fleet codec holds right now."""

    def __init__(self, codec: FleetStateCodec, readable_formats: frozenset[int]) -> None:
        self._codec = codec
        self._readable = readable_formats
        self._ring: KeyRing | None = None
        self._crypto: AESGCMRequestStateCodec | None = None

    def _current(self) -> AESGCMRequestStateCodec:
        ring = self._codec.ring
        if ring is not self._ring or self._crypto is None:
            self._ring, self._crypto = ring, AESGCMRequestStateCodec(ring.sealing_order())
        return self._crypto

    def seal(self, record: TaskRecord) -> str:
        payload = json.dumps(record.to_document(), separators=(",", ":"), ensure_ascii=False)
        return self._current().seal(payload.encode("utf-8", "surrogatepass"))

    def open(self, task_id: str, sealed: str) -> TaskRecord:
        try:
            payload = self._current().unseal(sealed)
            doc: Any = json.loads(payload.decode("utf-8", "surrogatepass"))
        except (InvalidRequestState, ValueError) as exc:
            raise UnreadableRecord(f"task record does not open ({exc})") from None
        if not isinstance(doc, dict) or doc.get("id") != task_id:
            raise UnreadableRecord("task record belongs to another task id")
        return TaskRecord.from_document(doc, self._readable)
