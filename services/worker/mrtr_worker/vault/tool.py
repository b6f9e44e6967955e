"""`connect_vault`'s rounds: ask by URL, then believe the store, never the client's word.

A URL-mode `accept` only says the user claims to be done. The tool completes
when the flow's record in Redis shows it completed by the user who started the
call; otherwise it asks again with the same flow and the same URL. The flow id
travels in the sealed `requestState`, which the SDK binds to the caller's
principal, and the record names its owner, so neither a replayed state nor a
shared link lets anyone else finish it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from mcp_types import CallToolResult, InputRequiredResult, TextContent

from mrtr_worker.tool_api import inputs
from mrtr_worker.tool_api.rounds import Round
from mrtr_worker.vault.flows import StoreError, VaultFlows
from mrtr_worker.vault.users import User, current_caller

logger = logging.getLogger(__name__)

KEY = "vault"
"""The input request's key."""
ASK = "Open the vault page, sign in, and enter your API key there. It is never shown to this client."
ASK_AGAIN = (
    "The vault page does not show this connection as completed yet. Open the same link, sign in as yourself, "
    "and enter your API key there; then answer again."
)
NO_STORE = "connect_vault is unavailable: this worker has no vault store (MRTR_WORKER_REDIS_URL is unset)"
ANONYMOUS = (
    "connect_vault needs a signed-in caller: only the user who starts it may finish it on the vault page, "
    'so call with a bearer token (mrtr-call --token "$(scripts/mint-token YOU)")'
)
STORE_DOWN = "connect_vault: the vault store (Redis) cannot be reached right now; try again in a moment"
EXPIRED = "The vault link expired before the connection was completed; call connect_vault again for a new one."
PAST_TENSE = {"decline": "declined", "cancel": "cancelled"}


@dataclass(frozen=True)
class VaultDesk:
    """Where the tool records flows and the address users reach the vault page at."""

    flows: VaultFlows
    public_url: str

    def link(self, flow_id: str) -> str:
        return f"{self.public_url}/vault/connect?flow={flow_id}"


def _result(text: str, structured: dict[str, Any] | None = None, *, error: bool = False) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured, is_error=error)


async def vault_round(rnd: Round, desk: VaultDesk | None) -> CallToolResult | InputRequiredResult:
    """One round of `connect_vault` (the URL-mode capability is checked by the caller)."""
    if desk is None:
        return _result(NO_STORE, error=True)
    caller = current_caller()
    if caller is None:
        return _result(ANONYMOUS, error=True)
    try:
        return await _round(rnd, desk, caller)
    except StoreError as exc:
        logger.warning("connect_vault: vault store unreachable: %s", type(exc).__name__)
        return _result(STORE_DOWN, error=True)


async def _round(rnd: Round, desk: VaultDesk, caller: User) -> CallToolResult | InputRequiredResult:
    flow_id = rnd.data.get("flow")
    if not isinstance(flow_id, str):
        flow_id = await desk.flows.start(caller)
        return _ask(rnd, desk, flow_id, ASK)
    flow = await desk.flows.get(flow_id)
    if flow is None:
        return _result(EXPIRED, error=True)
    if flow.owner != caller:
        logger.warning("connect_vault: %s presented another user's flow %s…; refused", caller.subject, flow_id[:6])
        return _result("This vault connection belongs to another user; it was refused.", error=True)
    action = inputs.read_url_consent(rnd.responses, KEY)
    if action is None:
        return _ask(rnd, desk, flow_id, ASK)
    if action != "accept":
        await desk.flows.forget(flow_id)
        return _result(f"Vault connection was {PAST_TENSE.get(action, action)}.", error=True)
    if not flow.completed:
        return _ask(rnd, desk, flow_id, ASK_AGAIN)
    if flow.completed_by != caller:
        logger.warning("connect_vault: flow %s… completed by another user; refused", flow_id[:6])
        return _result("This vault connection was completed by another user; it was refused.", error=True)
    structured = {"flow": flow_id, "connected": True, "keyRef": flow.key_ref, "completedBy": caller.subject}
    return _result(f"Vault connected for {caller.subject} (key {flow.key_ref}).", structured)


def _ask(rnd: Round, desk: VaultDesk, flow_id: str, message: str) -> InputRequiredResult:
    return rnd.ask({KEY: inputs.url_elicitation(message, desk.link(flow_id))}, {"flow": flow_id})
