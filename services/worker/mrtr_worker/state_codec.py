"""The fleet's `requestState` codec: the SDK's AES-GCM ring, a size limit, a live ring.

The SDK's `RequestStateBoundary` does the envelope (expiry, method, target,
argument digest, principal, audience) and its `AESGCMRequestStateCodec` the
crypto. Around them this adds two things the fleet needs:

* an upper bound on the token size, checked before any decoding, so an
  oversized state costs nothing but a length comparison;
* a ring that can be swapped while the process runs (key rotation), with
  every seal and unseal using one consistent ring.
"""

from __future__ import annotations

from mcp.server.request_state import AESGCMRequestStateCodec, InvalidRequestState

from mrtr_worker.keyring import KeyRing

OVERSIZED = "oversized"


class FleetStateCodec:
    """`RequestStateCodec` over a shared, replaceable key ring."""

    def __init__(self, ring: KeyRing, *, max_token_bytes: int) -> None:
        self._max_token_bytes = max_token_bytes
        self._codec = AESGCMRequestStateCodec(ring.sealing_order())
        self.ring = ring

    def use_ring(self, ring: KeyRing) -> None:
        """Switch to another ring; requests already past unseal are unaffected."""
        self._codec = AESGCMRequestStateCodec(ring.sealing_order())
        self.ring = ring

    def seal(self, payload: bytes) -> str:
        token = self._codec.seal(payload)
        if len(token) > self._max_token_bytes:
            # A state the fleet itself would refuse must never reach a client.
            raise ValueError(f"sealed state of {len(token)} bytes exceeds the {self._max_token_bytes} limit")
        return token

    def unseal(self, token: str) -> bytes:
        if len(token) > self._max_token_bytes:
            raise InvalidRequestState(OVERSIZED)
        return self._codec.unseal(token)
