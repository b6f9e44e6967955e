"""The vault's HTML: server-rendered, no script, every dynamic value escaped.

Each page is a plain form or a message. The security headers forbid scripts,
framing and referrers to other sites (the flow id is in the URL) and ask browsers not to store the page.
"""

from __future__ import annotations

from html import escape
from urllib.parse import quote

from fastapi.responses import HTMLResponse

from mrtr_worker.vault.users import User

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",  # no-referrer would make browsers send `Origin: null` on our own forms
    "Cache-Control": "no-store",
}

_STYLE = """
body{font-family:system-ui,sans-serif;max-width:34rem;margin:3rem auto;padding:0 1rem;color:#1d2733;background:#f6f8fa}
main{background:#fff;border:1px solid #d0d7de;border-radius:8px;padding:1.5rem 2rem}
h1{font-size:1.35rem;margin-top:0} label{display:block;font-weight:600;margin:1rem 0 .3rem}
input[type=password],textarea{width:100%;box-sizing:border-box;padding:.5rem;font:inherit;
border:1px solid #8c959f;border-radius:6px}
textarea{height:6rem;font-family:monospace;font-size:.8rem}
button{margin-top:1rem;padding:.5rem 1.2rem;font:inherit;border:0;border-radius:6px;background:#1f6feb;color:#fff}
.who{color:#57606a;font-size:.9rem} .error{color:#b42318;font-weight:600} code{background:#eef1f4;padding:0 .2rem}
"""


def _page(title: str, body: str, status: int = 200) -> HTMLResponse:
    html = (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f'<meta name="viewport" content="width=device-width,initial-scale=1"><style>{_STYLE}</style></head>'
        f"<body><main>{body}</main></body></html>"
    )
    return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)


def _hidden(flow: str, csrf: str) -> str:
    return (
        f'<input type="hidden" name="flow" value="{escape(flow)}">'
        f'<input type="hidden" name="csrf" value="{escape(csrf)}">'
    )


def sign_in(flow: str, csrf: str, *, error: str | None = None, status: int = 200) -> HTMLResponse:
    problem = f'<p class="error" id="error">{escape(error)}</p>' if error else ""
    return _page(
        "Sign in - MRTR vault",
        f"<h1>Sign in to connect your vault</h1>{problem}"
        "<p>Only the person who asked to connect the vault can finish it. "
        "In development, paste a token of the development issuer (<code>scripts/mint-token YOUR_NAME</code>); "
        "a real deployment shows its identity provider's login here.</p>"
        f'<form method="post" action="/vault/sign-in">{_hidden(flow, csrf)}'
        '<label for="token">Sign-in token</label>'
        '<textarea id="token" name="token" autocomplete="off" spellcheck="false" required></textarea>'
        '<button type="submit" id="sign-in">Sign in</button></form>',
        status,
    )


def connect(flow: str, csrf: str, user: User) -> HTMLResponse:
    switch = f"/vault/sign-in?flow={quote(flow)}"
    return _page(
        "Connect your vault - MRTR vault",
        "<h1>Connect your vault</h1>"
        f'<p class="who" id="who">Signed in as <strong>{escape(user.subject)}</strong> '
        f'(<a href="{escape(switch)}">not you?</a>)</p>'
        "<p>Enter your vault's API key. It goes to the vault only: your MCP client and the assistant never see it.</p>"
        f'<form method="post" action="/vault/connect">{_hidden(flow, csrf)}'
        '<label for="api_key">API key</label>'
        '<input type="password" id="api_key" name="api_key" autocomplete="off" required maxlength="4096">'
        '<button type="submit" id="connect">Connect</button></form>',
    )


def connected(user: User) -> HTMLResponse:
    return _page(
        "Vault connected - MRTR vault",
        '<h1 id="done">Vault connected</h1>'
        f"<p>Thank you, {escape(user.subject)}. Go back to your MCP client and continue "
        "(in <code>mrtr-call</code>, press Enter).</p>",
    )


def refused(user: User) -> HTMLResponse:
    return _page(
        "Not your request - MRTR vault",
        '<h1 id="refused">This request belongs to someone else</h1>'
        f"<p>You are signed in as <strong>{escape(user.subject)}</strong>, but another user started this "
        "vault connection. Only they can complete it. If someone sent you this link, do not enter a key: "
        "the attempt has been recorded.</p>",
        403,
    )


def expired() -> HTMLResponse:
    return _page(
        "Link expired - MRTR vault",
        '<h1 id="expired">This link has expired</h1>'
        "<p>The vault connection it belonged to has expired or does not exist. Ask your assistant to connect "
        "the vault again; it will give you a new link.</p>",
        404,
    )


def bad_form(reason: str, status: int = 400) -> HTMLResponse:
    return _page(
        "Try again - MRTR vault",
        f'<h1 id="bad-form">The form could not be accepted</h1><p class="error">{escape(reason)}</p>'
        "<p>Go back to the link your assistant gave you and try again.</p>",
        status,
    )


def unavailable(reason: str) -> HTMLResponse:
    return _page(
        "Unavailable - MRTR vault",
        f'<h1 id="unavailable">The vault is unavailable</h1><p>{escape(reason)}</p>',
        503,
    )
