"""`GET|POST /vault/connect` and `GET|POST /vault/sign-in`: the pages a URL-mode elicitation opens.

Every state-changing request is a POST carrying the session's CSRF token in
its form (and, from a browser, an `Origin` that must be the fleet's own), so
another site can neither sign a user in nor complete a flow in their name.
The API key arrives in a POST body only: never in a URL, never in a log line.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from urllib.parse import parse_qs, quote, urlsplit

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from mcp.server.auth.provider import TokenVerifier

from mrtr_worker.edge.auth import missing_scopes
from mrtr_worker.vault import pages
from mrtr_worker.vault.flows import FLOW_ID, Completion, StoreError, VaultFlows
from mrtr_worker.vault.session import COOKIE, Session, SessionCodec
from mrtr_worker.vault.users import User, user_of

logger = logging.getLogger(__name__)

MAX_FORM_BYTES = 16 * 1024
"""A sign-in token and an API key fit many times over; anything larger is refused unread."""
MAX_KEY_CHARS = 4096

NO_STORE = "this fleet has no vault store (MRTR_WORKER_REDIS_URL is unset)"
NO_ISSUER = "sign-in is not configured on this fleet (no token issuer: MRTR_WORKER_JWT_PUBLIC_KEY_FILE or _JWKS_URL)"
STORE_DOWN = "the vault store (Redis) cannot be reached right now; try again in a moment"


@dataclass(frozen=True)
class VaultSite:
    """What the pages need: the flows, who can sign in, the cookie's sealing, and the fleet's public address."""

    flows: VaultFlows | None
    verifier: TokenVerifier | None
    sessions: SessionCodec
    public_url: str
    required_scopes: tuple[str, ...] = ()
    """The scopes `/mcp` requires (`MRTR_WORKER_REQUIRED_SCOPES`): a token without them does not sign in either."""

    @property
    def origin(self) -> str:
        parts = urlsplit(self.public_url)
        return f"{parts.scheme}://{parts.netloc}"

    @property
    def secure_cookie(self) -> bool:
        return self.public_url.startswith("https://")


def short(flow_id: str) -> str:
    """Enough of a flow id to follow it in the logs, not enough to use it."""
    return flow_id[:6] + "…"


def vault_router(site: VaultSite) -> APIRouter:
    router = APIRouter(prefix="/vault", include_in_schema=False)

    @router.get("/connect")
    async def show_connect(request: Request, flow: str = "") -> Response:
        session = _session(site, request)
        if session.user is None:
            return _with_cookie(site, pages.sign_in(flow, session.csrf), session)
        return _with_cookie(site, await _connect_page(site, flow, session, session.user), session)

    @router.get("/sign-in")
    async def show_sign_in(flow: str = "") -> Response:
        """Sign in (again): a fresh, signed-out session, as "not you?" promises."""
        session = Session.anonymous()
        return _with_cookie(site, pages.sign_in(flow, session.csrf), session)

    @router.post("/sign-in")
    async def sign_in(request: Request) -> Response:
        form, problem = await _checked_form(site, request)
        if problem is not None:
            return problem
        flow = form.get("flow", "")
        if site.verifier is None:
            return pages.unavailable(NO_ISSUER)
        token = form.get("token", "").strip()
        access = await site.verifier.verify_token(token) if token else None
        user = user_of(access)
        if access is None or user is None:
            logger.info("vault sign-in refused: the token is invalid or expired")
            session = _session(site, request)
            return _with_cookie(site, pages.sign_in(flow, session.csrf, error=_REFUSED_SIGN_IN, status=401), session)
        missing = missing_scopes(access, site.required_scopes)
        if missing:
            logger.info("vault sign-in refused: %s's token lacks the required scope(s) %s", user.subject, missing)
            session = _session(site, request)
            error = _LACKS_SCOPES.format(scopes=", ".join(missing))
            return _with_cookie(site, pages.sign_in(flow, session.csrf, error=error, status=403), session)
        expires = float(access.expires_at) if access.expires_at else float("inf")
        signed_in = Session.signed_in(user, expires)
        logger.info("vault sign-in: %s", user.subject)
        redirect = RedirectResponse(f"/vault/connect?flow={quote(flow)}", status_code=303)
        return _with_cookie(site, redirect, signed_in)

    @router.post("/connect")
    async def connect(request: Request) -> Response:
        form, problem = await _checked_form(site, request)
        if problem is not None:
            return problem
        session = _session(site, request)
        flow = form.get("flow", "")
        if session.user is None:
            return _with_cookie(site, pages.sign_in(flow, session.csrf, status=401), session)
        api_key = form.get("api_key", "")
        if not api_key.strip() or len(api_key) > MAX_KEY_CHARS:
            return pages.bad_form(f"the API key must be between 1 and {MAX_KEY_CHARS} characters")
        if site.flows is None:
            return pages.unavailable(NO_STORE)
        try:
            outcome = await site.flows.complete(flow, session.user, api_key)
        except StoreError as exc:
            logger.warning("vault store unreachable completing flow %s: %s", short(flow), type(exc).__name__)
            return pages.unavailable(STORE_DOWN)
        if outcome is Completion.MISSING:
            return pages.expired()
        if outcome is Completion.FOREIGN:
            _log_foreign(flow, session.user, "submitted a key for")
            return pages.refused(session.user)
        if outcome is Completion.COMPLETED:
            logger.info("vault flow %s completed by %s", short(flow), session.user.subject)
        return pages.connected(session.user)

    return router


_REFUSED_SIGN_IN = (
    "That token was not accepted (invalid, expired, or from another issuer). Mint a new one and try again."
)
_LACKS_SCOPES = "That token lacks the scope(s) this service requires ({scopes}). Sign in with a token that has them."


async def _connect_page(site: VaultSite, flow: str, session: Session, user: User) -> HTMLResponse:
    if site.flows is None:
        return pages.unavailable(NO_STORE)
    if not FLOW_ID.match(flow):
        return pages.expired()
    try:
        record = await site.flows.get(flow)
    except StoreError as exc:
        logger.warning("vault store unreachable reading flow %s: %s", short(flow), type(exc).__name__)
        return pages.unavailable(STORE_DOWN)
    if record is None:
        return pages.expired()
    if record.owner != user:
        _log_foreign(flow, user, "opened")
        return pages.refused(user)
    if record.completed:
        return pages.connected(user)
    return pages.connect(flow, session.csrf, user)


def _log_foreign(flow: str, user: User, what: str) -> None:
    logger.warning(
        "vault flow %s: %s (issuer %s) %s another user's flow; refused", short(flow), user.subject, user.issuer, what
    )


def _session(site: VaultSite, request: Request) -> Session:
    return site.sessions.open(request.cookies.get(COOKIE)) or Session.anonymous()


def _with_cookie(site: VaultSite, response: Response, session: Session) -> Response:
    response.set_cookie(
        COOKIE,
        site.sessions.seal(session),
        max_age=max(1, int(session.expires - time.time())),
        path="/vault",
        httponly=True,
        samesite="lax",
        secure=site.secure_cookie,
    )
    return response


async def _checked_form(site: VaultSite, request: Request) -> tuple[dict[str, str], Response | None]:
    """The POSTed form, once its size, origin and CSRF token check out; else the page that says why."""
    origin = request.headers.get("origin")
    if origin is not None and origin != site.origin:
        logger.warning("vault form refused: Origin %s is not the fleet's %s", origin[:100], site.origin)
        return {}, pages.bad_form("this form was sent from another site", status=403)
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            return {}, pages.bad_form("the form is too large", status=413)
    try:
        parsed = parse_qs(body.decode("utf-8"), keep_blank_values=True, max_num_fields=8)
    except (UnicodeDecodeError, ValueError):
        return {}, pages.bad_form("the form could not be read")
    form = {name: values[0] for name, values in parsed.items()}
    session = site.sessions.open(request.cookies.get(COOKIE))
    if session is None or not session.csrf_matches(form.get("csrf")):
        logger.info("vault form refused: missing or wrong CSRF token")
        return {}, pages.bad_form("the page expired or was not sent from this site (CSRF check failed)", status=403)
    return form, None
