"""The operator's token for `/admin/*`: drain, undrain, key ring reload and state format are not for clients.

The proxy forwards only `/mcp`, but anything that can reach a worker directly
(a neighbour container, a pod in the namespace) could otherwise drain the fleet.
"""

from __future__ import annotations

import hmac

from fastapi import HTTPException, Request


class AdminGuard:
    """A FastAPI dependency: the request must carry `Authorization: Bearer <admin token>` when a token is set."""

    def __init__(self, token: str | None) -> None:
        if token is not None and not token:
            raise ValueError("the admin token is empty")
        self._token = None if token is None else token.encode()

    @property
    def enabled(self) -> bool:
        return self._token is not None

    async def __call__(self, request: Request) -> None:
        if self._token is None:
            return
        header = request.headers.get("authorization", "")
        scheme, _, presented = header.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(presented.strip().encode(), self._token):
            raise HTTPException(
                status_code=401,
                detail="admin endpoints need the operator's token: Authorization: Bearer <admin token>",
                headers={"WWW-Authenticate": 'Bearer realm="mrtr-admin"'},
            )
