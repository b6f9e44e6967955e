"""Cross-user state swaps: a state sealed for one principal never works for another, nor anonymously.

The fuzzed worker verifies the development issuer's tokens and allows
anonymous calls. A principal is (client, issuer, subject), the client being
the subject when a token names none (`mrtr_worker.edge.auth`). Each case seals a
state under one caller (a user with a token, or anonymous) on a real round
and presents it, with a correct answer, as another caller: the same principal
(even with a freshly minted token) continues, anyone else gets the frozen
rejection, counted as `foreign_principal`.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from mrtr_dev_issuer import DevIssuer
from tests.fuzz.budget import budget
from tests.fuzz.calls import ELICIT, Call
from tests.fuzz.origins import ANSWERS, PRIMES
from tests.fuzz.rejections import assert_rejected, present_and_count
from tests.fuzz.tally import TALLY
from tests.fuzz.target import FuzzTarget
from tests.fuzz.wire_strategies import any_text

LINK = Call("link", "tools/call", {"name": "link_accounts", "arguments": {}}, ELICIT)
CALLS = {"link": (LINK, {"github_login": ANSWERS["github_login"]}), "primes": (PRIMES, None)}

Principal = tuple[str, str | None] | None
"""(subject, client_id or None), or None for an anonymous caller."""

names = st.sampled_from(["alice", "bob", "app-one", "app-two"]) | any_text.filter(bool)
principals: st.SearchStrategy[Principal] = st.none() | st.tuples(names, st.none() | names)


def identity(principal: Principal) -> tuple[str, str] | None:
    """Who the worker sees: (client, subject), the client defaulting to the subject."""
    if principal is None:
        return None
    subject, client = principal
    return (client or subject, subject)


def headers(issuer: DevIssuer, principal: Principal) -> dict[str, str]:
    if principal is None:
        return {}
    subject, client = principal
    return {"Authorization": f"Bearer {issuer.mint(subject, client_id=client)}"}


@settings(max_examples=budget(120))
@given(
    call=st.sampled_from(sorted(CALLS)),
    owner=principals,
    presenter=principals,
    same=st.booleans(),
)
def test_a_state_works_only_for_the_principal_it_was_sealed_for(
    target: FuzzTarget,
    issuer: tuple[DevIssuer, Path],
    call: str,
    owner: Principal,
    presenter: Principal,
    same: bool,
) -> None:
    if same:
        presenter = owner  # half the cases: the owner again, with a freshly minted token
    request, answers = CALLS[call]
    first = target.call(request, request.params, headers=headers(issuer[0], owner))
    assert first.kind == "result", first.message
    state = first.message["result"]["requestState"]
    params = {**request.params, "requestState": state, **({"inputResponses": answers} if answers else {})}

    verdict, added = present_and_count(target, request, params, headers=headers(issuer[0], presenter))

    who = "anonymous" if owner is None else "user"
    to = "anonymous" if presenter is None else "user"
    if identity(owner) == identity(presenter):
        assert verdict.kind == "result", verdict.message
        assert added == {}, added
        if call == "link":
            assert list(verdict.message["result"]["inputRequests"]) == ["google_login"]  # github was taken
        TALLY.case(f"{call}: {who} -> same principal: accepted")
    else:
        assert_rejected(verdict)
        assert added == {"foreign_principal": 1.0}, added
        TALLY.case(f"{call}: {who} -> {to}: foreign_principal")
