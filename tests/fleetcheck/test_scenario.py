"""The scenario file: what it accepts, and a clear error naming the call and the field for each mistake."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mrtr_fleet_check.scenario import Expect, ScenarioError, load_scenario, parse_scenario

ROOT = Path(__file__).parents[2]


def test_the_test_servers_scenario_reads_as_written() -> None:
    scenario = load_scenario(ROOT / "examples" / "servers" / "python-sdk" / "scenario.toml")
    assert scenario.name == "python-sdk"
    (call,) = scenario.calls
    assert (call.tool, call.arguments, call.weight, call.task) == ("add_up", {"numbers": [1, 2, 3]}, 1, False)
    assert call.answers == {"confirm": {"ok": True}}
    assert call.expect == Expect(structured={"total": 6})
    assert scenario.tokens == ()


def test_an_unanswered_key_gets_its_forms_defaults_and_an_action_string_is_the_action() -> None:
    (call,) = parse_scenario({"name": "s", "call": [{"tool": "t", "answers": {"go": "decline"}}]}).calls
    inputs = call.inputs()
    form = {"method": "elicitation/create", "params": {"mode": "form", "requestedSchema": {"properties": {}}}}
    assert inputs.answer("go", form) == {"action": "decline"}
    schema = {"properties": {"ok": {"type": "boolean"}}}
    asked = {"method": "elicitation/create", "params": {"mode": "form", "requestedSchema": schema}}
    assert inputs.answer("other", asked) == {"action": "accept", "content": {"ok": True}}
    assert inputs.answer("roots", {"method": "roots/list"}) == {"roots": []}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"call": [{"tool": "t"}]}, "`name` must be a non-empty string"),
        ({"name": "s"}, "at least one [[call]]"),
        ({"name": "s", "call": [{"tool": "t"}], "extra": 1}, "unknown keys ['extra']"),
        ({"name": "s", "call": [{"arguments": {}}]}, "[[call]] 1: call: 'tool' is missing"),
        ({"name": "s", "call": [{"tool": "t", "weight": 0}]}, "[[call]] 1: call 't': 'weight' must be a whole number"),
        ({"name": "s", "call": [{"tool": "t", "weight": True}]}, "'weight' must be a whole number"),
        ({"name": "s", "call": [{"tool": "t", "arguments": [1]}]}, "'arguments' must be a table"),
        ({"name": "s", "call": [{"tool": "t", "task": "yes"}]}, "'task' must be true or false"),
        (
            {"name": "s", "call": [{"tool": "t", "answers": {"k": 3}}]},
            "answer 'k' must be form content or an action string",
        ),
        (
            {"name": "s", "call": [{"tool": "t", "expect": {"structured": 1, "text": "1"}}]},
            "'expect' takes exactly one of",
        ),
        ({"name": "s", "call": [{"tool": "t", "expect": {"json": 1}}]}, "'expect' takes exactly one of"),
        (
            {"name": "s", "call": [{"tool": "t"}, {"tool": "u", "wieght": 2}]},
            "[[call]] 2: call 'u': unknown keys ['wieght']",
        ),
        ({"name": "s", "call": [{"tool": "t"}], "tokens": "abc"}, "`tokens` must be a list"),
        ({"name": "s", "call": [{"tool": "t", "name": "n"}]}, "`name` is not used by the fleet check"),
        ({"name": "s", "call": ["t"]}, "[[call]] 1: a [[call]] must be a table"),
    ],
)
def test_every_mistake_is_a_clear_error(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioError, match=None) as raised:
        parse_scenario(data)
    assert message in str(raised.value)


def test_a_missing_or_broken_file_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="cannot read the scenario"):
        load_scenario(tmp_path / "absent.toml")
    broken = tmp_path / "broken.toml"
    broken.write_text("name = ", encoding="utf-8")
    with pytest.raises(ScenarioError, match=r"broken\.toml: not valid TOML"):
        load_scenario(broken)
