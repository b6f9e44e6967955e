"""The vault page's session: a cookie sealed with the fleet's key ring, so any worker can read it.

The cookie carries the signed-in user (if any), a CSRF token the page's forms
echo back, and an expiry. It is sealed (AES-GCM, the same ring that seals
`requestState`), so the browser can neither read nor forge it, and a kind
marker keeps a sealed MCP state from ever passing for a session. HttpOnly
(no script reads it), SameSite=Lax (a cross-site POST does not carry it),
path `/vault`, and Secure when the fleet's public URL is https.
"""

from __future__ import annotations

import hmac
import json
import secrets
import time
from dataclasses import dataclass

from mcp.server.request_state import InvalidRequestState

from mrtr_worker.sealing.codec import FleetStateCodec
from mrtr_worker.vault.users import User

COOKIE = "mrtr_vault_session"
KIND = "mrtr-vault-session/1"
MAX_AGE_SECONDS = 3600
"""A sign-in lasts at most an hour (and never past the sign-in token's own expiry)."""


@dataclass(frozen=True)
class Session:
    csrf: str
    expires: float
    user: User | None = None

    @classmethod
    def anonymous(cls) -> Session:
        return cls(csrf=secrets.token_urlsafe(24), expires=time.time() + MAX_AGE_SECONDS)

    @classmethod
    def signed_in(cls, user: User, token_expires: float) -> Session:
        """A fresh session (new CSRF token: nothing from before the sign-in carries over)."""
        expires = min(time.time() + MAX_AGE_SECONDS, token_expires)
        return cls(csrf=secrets.token_urlsafe(24), expires=expires, user=user)

    def csrf_matches(self, presented: str | None) -> bool:
        return presented is not None and hmac.compare_digest(self.csrf.encode(), presented.encode())


class SessionCodec:
    def __init__(self, codec: FleetStateCodec) -> None:
        self._codec = codec

    def seal(self, session: Session) -> str:
        doc: dict[str, object] = {"k": KIND, "csrf": session.csrf, "exp": session.expires}
        if session.user is not None:
            doc["iss"], doc["sub"] = session.user.issuer, session.user.subject
        return self._codec.seal(json.dumps(doc, separators=(",", ":")).encode())

    def open(self, cookie: str | None) -> Session | None:
        """The session a cookie holds; None when absent, forged, from another kind, or expired."""
        if not cookie:
            return None
        try:
            doc = json.loads(self._codec.unseal(cookie))
        except (InvalidRequestState, ValueError):
            return None
        if not isinstance(doc, dict) or doc.get("k") != KIND:
            return None
        csrf, expires = doc.get("csrf"), doc.get("exp")
        if not isinstance(csrf, str) or not isinstance(expires, int | float) or not time.time() < expires:
            return None
        issuer, subject = doc.get("iss"), doc.get("sub")
        user = User(issuer, subject) if isinstance(issuer, str) and isinstance(subject, str) else None
        return Session(csrf=csrf, expires=float(expires), user=user)
