"""Who a user is, for the vault: the token issuer and subject, whichever client they use.

The MCP call and the vault page reach the fleet through different clients (an
MCP client, a browser), so the client id of the SDK's principal
(client, issuer, subject) cannot match across them. The person is the
(issuer, subject) pair the identity provider vouches for in both tokens.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken


@dataclass(frozen=True)
class User:
    issuer: str
    subject: str

    def label(self) -> str:
        """A canonical one-line form, stored in Redis and compared there."""
        return json.dumps([self.issuer, self.subject], separators=(",", ":"))

    @classmethod
    def from_label(cls, label: str) -> User | None:
        try:
            issuer, subject = json.loads(label)
        except (ValueError, TypeError):
            return None
        if not isinstance(issuer, str) or not isinstance(subject, str):
            return None
        return cls(issuer, subject)


def user_of(token: AccessToken | None) -> User | None:
    """The user a verified token names; None for no token or a token without an issuer or subject."""
    if token is None or token.subject is None:
        return None
    issuer = (token.claims or {}).get("iss")
    if not isinstance(issuer, str):
        return None
    return User(issuer, token.subject)


def current_caller() -> User | None:
    """The user behind the MCP request being served (None: an anonymous call)."""
    return user_of(get_access_token())
