"""The fleet's `requestState` codec: the SDK's AES-GCM ring, a size limit, a live ring, per-key counts.

The SDK's `RequestStateBoundary` does the envelope (expiry, method, target,
argument digest, principal, audience) and its `AESGCMRequestStateCodec` the
crypto. Around them this adds what a fleet needs:

* an upper bound on the token size, checked before any decoding, so an
  oversized state costs nothing but a length comparison;
* a ring that can be swapped while the process runs (key rotation), with
  every seal and unseal using one consistent ring;
* which named key sealed or opened each token, so an operator can see when
  an old key stops being used before retiring it.
"""

from __future__ import annotations

from collections.abc import Callable

from mcp.server.request_state import AESGCMRequestStateCodec, InvalidRequestState

from mrtr_worker.sealing.keyring import KeyRing

OVERSIZED = "oversized"
_UNKNOWN_KEY = "unknown key"  # the SDK codec's reason when a token names a key it does not hold

KeyObserver = Callable[[str, str], None]
"""Called with (operation, key name) for every seal ("sealed") and successful unseal ("opened")."""


class _Ring:
    """One codec per named key: the primary seals, and a token opens under the key it names."""

    def __init__(self, ring: KeyRing) -> None:
        self.ring = ring
        self.sealer = AESGCMRequestStateCodec([ring.keys[ring.primary]])
        # Primary first: after a promotion, most tokens in flight name it.
        self.openers = [(name, AESGCMRequestStateCodec([ring.keys[name]])) for name in ring.sealing_names()]


class FleetStateCodec:
    """`RequestStateCodec` over a shared, replaceable key ring."""

    def __init__(self, ring: KeyRing, *, max_token_bytes: int, observe: KeyObserver | None = None) -> None:
        self._max_token_bytes = max_token_bytes
        self._observe = observe or (lambda operation, key: None)
        self._ring = _Ring(ring)

    @property
    def ring(self) -> KeyRing:
        return self._ring.ring

    def use_ring(self, ring: KeyRing) -> None:
        """Switch to another ring; a request already past unseal is unaffected."""
        self._ring = _Ring(ring)

    def seal(self, payload: bytes) -> str:
        current = self._ring
        token = current.sealer.seal(payload)
        if len(token) > self._max_token_bytes:
            # A state the fleet itself would refuse must never reach a client.
            raise ValueError(f"sealed state of {len(token)} bytes exceeds the {self._max_token_bytes} limit")
        self._observe("sealed", current.ring.primary)
        return token

    def unseal(self, token: str) -> bytes:
        name, payload = self.open(token)
        self.opened(name)
        return payload

    def open(self, token: str) -> tuple[str, bytes]:
        """Unseal without counting: (the key that opened it, the payload). The worker's resume fast path
        opens first and counts (`opened`) only once it serves the request, so a fallback is not counted twice."""
        if len(token) > self._max_token_bytes:
            raise InvalidRequestState(OVERSIZED)
        for name, opener in self._ring.openers:
            try:
                payload = opener.unseal(token)
            except InvalidRequestState as exc:
                if str(exc) == _UNKNOWN_KEY:
                    continue  # a token names its key; try the next one in the ring
                raise
            return name, payload
        raise InvalidRequestState(_UNKNOWN_KEY)

    def opened(self, key: str) -> None:
        """Count one successful unseal under `key`."""
        self._observe("opened", key)
