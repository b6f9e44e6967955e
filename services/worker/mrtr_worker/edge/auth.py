"""Bearer-token authentication: JWTs verified with PyJWT, plugged into the SDK's auth hooks.

The worker only has to say who the caller is. The SDK then binds every sealed
`requestState` to that principal (client, issuer, subject) through its default
`authenticated_principal`, so a state presented by anyone else is refused.

Anonymous access is a setting. When it is on, a request without a token is
served anonymously (its states are bound to nobody, so they never open under
a token), but a request with a bad token is refused: a broken token must not
quietly become an anonymous call. Likewise a presented token must carry the
required scopes (`MRTR_WORKER_REQUIRED_SCOPES`) whether or not anonymous
access is on, and the vault's sign-in checks the same scopes (`missing_scopes`):
a token refused here never gets in anywhere else.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio.to_thread
import jwt
from cryptography.hazmat.primitives.serialization import load_pem_public_key
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, BearerAuthBackend, RequireAuthMiddleware
from mcp.server.auth.provider import AccessToken, TokenVerifier
from starlette.authentication import AuthCredentials, AuthenticationBackend, AuthenticationError, BaseUser
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

logger = logging.getLogger(__name__)

REQUIRED_CLAIMS = ("exp", "iss", "aud", "sub")
"""Claims every token must carry: a token without an expiry or a subject is refused."""


class JwtVerifier(TokenVerifier):
    """Verify a JWT's signature, issuer, audience and lifetime; map its claims to the SDK's `AccessToken`.

    The key is either a PEM public key (the development issuer, or any issuer
    with one static key) or a JWKS URL (a real identity provider that rotates keys).
    """

    def __init__(
        self,
        *,
        issuer: str,
        audience: str,
        algorithms: Sequence[str],
        public_key_file: Path | None = None,
        jwks_url: str | None = None,
        leeway_seconds: float = 30.0,
    ) -> None:
        if (public_key_file is None) == (jwks_url is None):
            raise ValueError("give exactly one of a public key file or a JWKS URL")
        self._issuer = issuer
        self._audience = audience
        self._algorithms = list(algorithms)
        self._leeway = leeway_seconds
        # Parsed now, so a broken key file stops start-up instead of refusing every token later.
        self._public_key = None if public_key_file is None else _load_public_key(public_key_file)
        self._jwks = None if jwks_url is None else jwt.PyJWKClient(jwks_url, cache_keys=True)

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            key = await self._signing_key(token)
            claims = jwt.decode(
                token,
                key,
                algorithms=self._algorithms,
                audience=self._audience,
                issuer=self._issuer,
                leeway=self._leeway,
                options={"require": list(REQUIRED_CLAIMS)},
            )
        except jwt.PyJWTError as exc:
            logger.info("bearer token refused: %s", exc)
            return None
        return _access_token(token, claims)

    async def _signing_key(self, token: str) -> Any:
        if self._jwks is None:
            return self._public_key
        jwks = self._jwks
        # PyJWKClient fetches (and caches) the key set with blocking I/O.
        signing_key = await anyio.to_thread.run_sync(jwks.get_signing_key_from_jwt, token)
        return signing_key.key


def _load_public_key(path: Path) -> Any:
    try:
        return load_pem_public_key(path.read_bytes())
    except ValueError as exc:
        raise ValueError(f"{path} is not a PEM public key: {exc}") from exc


def _access_token(token: str, claims: dict[str, Any]) -> AccessToken:
    """The SDK's view of a verified token: the principal is (client, issuer, subject)."""
    subject = str(claims["sub"])
    client_id = claims.get("client_id") or claims.get("azp") or subject
    scope = claims.get("scope", "")
    return AccessToken(
        token=token,
        client_id=str(client_id),
        scopes=scope.split() if isinstance(scope, str) else [],
        expires_at=int(claims["exp"]),
        subject=subject,
        claims={"iss": claims["iss"]},
    )


class _StrictBearerBackend(AuthenticationBackend):
    """The SDK's bearer backend, except that a token which fails verification is an error, not anonymity."""

    def __init__(self, verifier: TokenVerifier) -> None:
        self._backend = BearerAuthBackend(verifier)

    async def authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, BaseUser] | None:
        header = conn.headers.get("authorization")
        if header is None:
            return None
        if not header.lower().startswith("bearer "):
            raise AuthenticationError("the Authorization header must be 'Bearer <token>'")
        result: tuple[AuthCredentials, BaseUser] | None = await self._backend.authenticate(conn)
        if result is None:
            raise AuthenticationError("the bearer token is invalid or expired")
        return result


def _refuse(_: HTTPConnection, exc: AuthenticationError) -> Response:
    """401 in the shape the SDK's RequireAuthMiddleware uses (RFC 6750), so clients see one format."""
    description = str(exc)
    return JSONResponse(
        {"error": "invalid_token", "error_description": description},
        status_code=401,
        headers={"WWW-Authenticate": f'Bearer error="invalid_token", error_description="{description}"'},
    )


def missing_scopes(token: AccessToken, required: Sequence[str]) -> list[str]:
    """The required scopes a verified token lacks (empty: it may pass)."""
    return [scope for scope in required if scope not in token.scopes]


class _ScopesOfPresentedTokens:
    """Anonymous access on: a request without a token passes, but a presented token needs every required scope.

    The refusal is the SDK's own (403, `insufficient_scope`), as when tokens are required.
    """

    def __init__(self, app: ASGIApp, required_scopes: Sequence[str]) -> None:
        self._app = app
        self._scoped = RequireAuthMiddleware(app, list(required_scopes))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if isinstance(scope.get("user"), AuthenticatedUser):
            await self._scoped(scope, receive, send)
        else:
            await self._app(scope, receive, send)


def authenticate(
    app: ASGIApp, verifier: TokenVerifier | None, *, allow_anonymous: bool, required_scopes: Sequence[str] = ()
) -> ASGIApp:
    """Wrap the MCP endpoint: identify the caller, refuse bad tokens, require one unless anonymous is allowed,
    and require the scopes of every token presented.

    The SDK's `AuthContextMiddleware` puts the caller where its request-state
    boundary looks for the principal.
    """
    if verifier is None:
        if not allow_anonymous:
            raise ValueError("authentication is required but no token verifier is configured")
        return app
    inner: ASGIApp
    if not allow_anonymous:
        inner = RequireAuthMiddleware(app, list(required_scopes))
    elif required_scopes:
        inner = _ScopesOfPresentedTokens(app, required_scopes)
    else:
        inner = app
    return AuthenticationMiddleware(
        AuthContextMiddleware(inner), backend=_StrictBearerBackend(verifier), on_error=_refuse
    )
