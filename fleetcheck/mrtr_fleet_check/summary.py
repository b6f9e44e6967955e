"""The walkthrough's kind of summary: the load's counts, the probes, the verdict; printed and as JSON.

`compare` holds each call of the load to the answer it should have had (the scenario's `expect`, else
one instance's answer to the same call, of the version that finished it) and lists the mismatches
and the lost calls the verdict is named from.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mrtr_fleet_check.load import CallRecord
from mrtr_fleet_check.probes import Answer, answer_of
from mrtr_fleet_check.scenario import Call
from mrtr_fleet_check.verdict import Mismatch, Observations, Verdict

References = Mapping[str, Mapping[str, Answer]]
"""One instance's answer to each call (by `call_key`), by the version that gave it (`"1"`, `"2"`)."""


def call_key(tool: str, arguments: Mapping[str, Any]) -> str:
    return f"{tool} {json.dumps(arguments, sort_keys=True)}"


def _got(record: CallRecord, call: Call) -> Answer:
    if record.error is not None:
        return Answer(f"error: {record.error}", error=True)
    if call.expect.text is not None:  # held to its text alone, whatever structured content comes with it
        return answer_of(None, record.text, record.is_error)
    return answer_of(record.structured, record.text, record.is_error)


def _wanted(record: CallRecord, call: Call, references: References) -> list[Answer]:
    if call.expect.structured is not None:
        return [Answer(repr(call.expect.structured))]
    if call.expect.text is not None:
        return [answer_of(None, call.expect.text, False)]
    by_version = references.get(call_key(call.tool, call.arguments), {})
    finished = by_version.get(record.finished_by or "")  # when the server names its version
    return [finished] if finished is not None else list(by_version.values())


def compare(
    records: Sequence[CallRecord], calls: Sequence[Call], references: References
) -> tuple[list[Mismatch], list[str]]:
    """The calls whose answer is not the one wanted, and what happened to each call that was lost."""
    by_key = {call_key(call.tool, call.arguments): call for call in calls}
    mismatches: list[Mismatch] = []
    lost: list[str] = []
    for record in records:
        if record.lost is not None:
            lost.append(f"{record.tool}: {record.lost}")
            continue
        call = by_key[call_key(record.tool, record.arguments)]
        wanted = _wanted(record, call, references)
        got = _got(record, call)
        if wanted and got not in wanted:
            mismatches.append(Mismatch(record.tool, got.shown, wanted[0].shown))
    return mismatches, lost


@dataclass(frozen=True)
class Summary:
    scenario: str
    records: Sequence[CallRecord]
    observations: Observations
    verdict: Verdict

    def as_json(self) -> dict[str, Any]:
        records = self.records
        named_versions = any(r.versions for r in records)
        errors = Counter(r.error for r in records if r.error is not None)
        seen = self.observations
        return {
            "scenario": self.scenario,
            "requests": len(records),
            "completed": sum(1 for r in records if r.completed),
            "failures": sum(1 for r in records if not r.completed),
            "wrong_answers": len(seen.mismatches),
            "lost": len(seen.lost),
            "questions_asked_twice": sum(1 for r in records if any(n > 1 for n in r.questions.values())),
            "visited_both_versions": sum(1 for r in records if len(set(r.versions)) > 1) if named_versions else None,
            "rounds": sum(r.rounds for r in records),
            "hand_backs": sum(r.hand_backs for r in records),
            "server_errors": [{"message": message, "calls": n} for message, n in errors.most_common(5)],
            "probes": {
                "session_free_2026_07_28": "yes" if seen.protocol.speaks_current else f"no: {seen.protocol.message}",
                "across_instances": seen.across_instances.describe(),
                "after_upgrade": seen.after_upgrade.describe(),
                "tampered": seen.tampered.describe(),
                "foreign_principal": seen.foreign_principal.describe(),
            },
            "verdict": self.verdict.verdict,
            "explanation": self.verdict.explanation,
            "causes": self.verdict.causes,
        }

    def text(self) -> str:
        data = self.as_json()
        both = data["visited_both_versions"]
        lines = [
            f"fleet check: {data['scenario']}",
            f"  requests              {data['requests']} ({data['completed']} completed, {data['failures']} failed)",
            f"  wrong answers         {data['wrong_answers']}",
            f"  lost                  {data['lost']}",
            f"  questions asked twice {data['questions_asked_twice']}",
            f"  visited both versions {'unknown (the server names no version)' if both is None else both}",
            f"  rounds, hand-backs    {data['rounds']}, {data['hand_backs']}",
        ]
        lines += [f"  server said ({e['calls']}x)  {e['message']}" for e in data["server_errors"]]
        lines += [f"  probe {name:<24}{result}" for name, result in data["probes"].items()]
        lines += [f"verdict: {data['verdict']}", f"  {data['explanation']}"]
        return "\n".join(lines)
