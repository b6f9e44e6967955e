"""Reading what a driver printed, and the Inspector CLI's invocations and output."""

from __future__ import annotations

import json

from mrtr_ops.interop.catalog import Feature
from mrtr_ops.interop.runner import inspector_argv, inspector_record, records_by_feature


def test_records_are_read_by_feature_and_anything_else_is_ignored() -> None:
    lines = [
        "npm warn something",
        json.dumps({"feature": "roots", "ok": True, "value": 1}),
        "{not json",
        json.dumps({"feature": "no-such-feature", "ok": True}),
        json.dumps({"ok": True}),
        json.dumps({"feature": "sampling", "ok": False, "error": {"message": "x"}}),
    ]
    records = records_by_feature(lines)
    assert set(records) == {Feature.ROOTS, Feature.SAMPLING}
    assert records[Feature.ROOTS]["value"] == 1


def test_the_inspector_runs_modern_except_for_its_default_era() -> None:
    url = "http://127.0.0.1:1/mcp"
    for feature in (Feature.TOOLS_LIST, Feature.TOOLS_CALL, Feature.TASK_RESULT):
        argv = inspector_argv(url, feature)
        assert argv[0] == url
        assert argv[argv.index("--protocol-era") + 1] == "modern"
    assert "--protocol-era" not in inspector_argv(url, Feature.LEGACY_DEFAULT)


def test_the_inspectors_json_result_and_error_become_records() -> None:
    done = inspector_record(Feature.TOOLS_LIST, '{"result": {"tools": []}}\n', "", 12.0)
    assert done["ok"] is True
    assert done["value"] == {"tools": []}
    refused = inspector_record(Feature.LEGACY_DEFAULT, "", '{"error": {"code": "error", "message": "-32020 no"}}', 3.0)
    assert refused["ok"] is False
    assert refused["error"]["message"] == "-32020 no"
    silent = inspector_record(Feature.TOOLS_CALL, "", "crashed", 1.0)
    assert silent["ok"] is False
    assert "crashed" in silent["error"]["message"]
