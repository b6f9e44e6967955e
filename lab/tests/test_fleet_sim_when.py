"""When a calibration was measured: the parameters' time, and each part measured apart afterwards, as the report
names them (`calibrate.when_measured`), kept through the file (`Calibration.parts`)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from mrtr_lab.fleet_sim.calibrate import ADDED_RUNS, CALIBRATION, PARTS, load, when_measured


def test_the_parts_measured_apart_follow_the_parameters_time(tmp_path: Path) -> None:
    cal = load(CALIBRATION)
    cal.measured_at = "2026-12-02 21:40 UTC (the parameters)"
    cal.parts = {ADDED_RUNS: "2026-12-02 21:55 to 22:10 UTC", PARTS["polled_lift"]: "2026-12-02 22:20 UTC"}
    assert when_measured(cal) == (
        "2026-12-02 21:40 UTC (the parameters); more runs of why-shed's cells (`--add-references`) 2026-12-02 "
        "21:55 to 22:10 UTC; the polled worker's lift 2026-12-02 22:20 UTC"
    )
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps(asdict(cal)))
    assert load(path).parts == cal.parts


def test_a_calibration_without_parts_is_named_by_its_one_time(tmp_path: Path) -> None:
    raw = json.loads(CALIBRATION.read_text())
    raw.pop("parts", None)
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps(raw))
    cal = load(path)
    assert cal.parts == {}
    assert when_measured(cal) == raw["measured_at"]
