"""The vault page: where a user enters a secret that must never pass through the MCP client.

`connect_vault` asks by URL-mode elicitation. The URL points at these pages,
served by every worker behind the same proxy as `/mcp`, so any instance serves
any flow: the flow lives in the fleet's Redis, not in a process. The user signs
in on the page (`session`), the page records who completed the flow (`flows`),
and the tool completes only when the store shows the flow completed by the
user who started the call. A client's `accept` only says the user claims to be done.

* `users`: who a user is (issuer, subject), from a verified token.
* `flows`: the flow records in Redis (owner, completion, the key's fingerprint).
* `session`: the page's session cookie, sealed with the fleet's key ring.
* `pages`: the server-rendered HTML.
* `routes`: `/vault/connect` and `/vault/sign-in`.
"""
