"""The suite's figures in Locust's web UI: extra tabs (refreshed with every stats poll), a page and a JSON route.

Locust 2.47's React UI renders `template_args["extended_tabs"]` as tabs whose
tables (`extended_tables`) take their rows from an `extended_stats` list in
the `/stats/requests` poll, so the figures update while a test runs. The
"Download Data" tab links to `./mrtr` (a plain page) and `./mrtr/summary.json`.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Mapping
from typing import Any

from flask import Response, jsonify, request
from locust.env import Environment
from locust.web import WebUI

from mrtr_locust import report

Summary = Callable[[], dict[str, Any]]

TABLES: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "mrtr-checks": (
        "MRTR checks",
        [("figure", "Figure"), ("value", "Value"), ("limit", "Threshold"), ("status", "Status")],
    ),
    "mrtr-hops": (
        "MRTR hops",
        [
            ("n", "N"),
            ("hops", "Requests with N hops"),
            ("instances", "Requests visiting N instances"),
            ("versions", "Requests visiting N versions"),
        ],
    ),
    "mrtr-rounds": (
        "MRTR rounds",
        [("kind", "Kind"), ("key", "Key"), ("count", "Count"), ("share", "Share")],
    ),
    "mrtr-fleet": (
        "MRTR fleet",
        [("kind", "Kind"), ("id", "Id"), ("requests", "Requests visiting"), ("hops", "Hops served")],
    ),
    "mrtr-latency": (
        "MRTR latency",
        [
            ("group", "Group"),
            ("key", "Class or name"),
            ("requests", "Requests"),
            ("failures", "Failures"),
            ("wrong", "Wrong answers"),
            ("p50", "p50 ms"),
            ("p95", "p95 ms"),
            ("p99", "p99 ms"),
            ("max", "Max ms"),
            ("bound", "p95 bound ms"),
        ],
    ),
}


def install(environment: Environment, web_ui: WebUI, current: Summary) -> None:
    web_ui.template_args["extended_tabs"] = [{"title": title, "key": key} for key, (title, _) in TABLES.items()]
    web_ui.template_args["extended_tables"] = [
        {"key": key, "structure": [{"key": k, "title": t} for k, t in columns]} for key, (_, columns) in TABLES.items()
    ]
    web_ui.template_args["extended_csv_files"] = [
        {"href": "./mrtr", "title": "MRTR statistics (a page that refreshes itself)"},
        {"href": "./mrtr/summary.json", "title": "Download the MRTR summary (JSON)"},
    ]
    app = web_ui.app
    assert app is not None
    options = environment.parsed_options
    base = (getattr(options, "web_base_path", "") or "").rstrip("/")

    @app.after_request
    def add_extended_stats(response: Response) -> Response:
        if not request.path.endswith("/stats/requests") or not response.is_json:
            return response
        data = response.get_json()
        if isinstance(data, dict):
            data["extended_stats"] = [{"key": key, "data": rows} for key, rows in tables(current()).items()]
            response.set_data(json.dumps(data))
        return response

    def summary_json() -> Response:
        return jsonify(current())

    def page() -> Response:
        return Response(render_page(current()), mimetype="text/html")

    protect: Any = web_ui.auth_required_if_enabled  # untyped in Locust
    app.add_url_rule(f"{base}/mrtr/summary.json", "mrtr_summary", protect(summary_json))
    app.add_url_rule(f"{base}/mrtr", "mrtr_page", protect(page))


def tables(doc: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The rows of every tab, from a summary document."""
    return {
        "mrtr-checks": _checks(doc),
        "mrtr-hops": _hops(doc),
        "mrtr-rounds": _rounds(doc),
        "mrtr-fleet": _fleet(doc),
        "mrtr-latency": _latency(doc),
    }


def _checks(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    verdicts = {v["check"]: v for v in doc["thresholds"]["checks"]}

    def row(figure: str, key: str) -> dict[str, Any]:
        verdict = verdicts.get(key)
        return {
            "figure": figure,
            "value": doc[key],
            "limit": "" if verdict is None else f"{report.relation(key)} {verdict['limit']}",
            "status": "" if verdict is None else ("ok" if verdict["ok"] else "FAILED"),
        }

    rows = [
        row("requests", "requests"),
        row("failures (all kinds)", "failures"),
        row("failed requests (no complete result)", "failed_requests"),
        row("wrong answers", "wrong_answers"),
        row("re-asked questions", "reasked_questions"),
        row("requests that visited both versions", "requests_both_versions"),
        row("requests shed at least once", "requests_shed"),
        row("questions asked", "questions"),
        row("mean hops per request", "mean_hops"),
    ]
    for check, verdict in verdicts.items():
        if check.startswith("p95_ms "):
            rows.append(
                {
                    "figure": f"p95 of {check.removeprefix('p95_ms ')} (ms)",
                    "value": verdict["value"],
                    "limit": f"<= {verdict['limit']}",
                    "status": "ok" if verdict["ok"] else "FAILED",
                }
            )
    passed = doc["thresholds"]["passed"]
    rows.append({"figure": "all thresholds", "value": "", "limit": "", "status": "ok" if passed else "FAILED"})
    return rows


def _hops(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    columns = {"hops": "hops_histogram", "instances": "instances_per_request", "versions": "versions_per_request"}
    keys = sorted({int(n) for name in columns.values() for n in doc[name]})
    return [{"n": n, **{col: doc[name].get(str(n), 0) for col, name in columns.items()}} for n in keys]


def _rounds(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    kinds = (("round ended by", "end_reasons"), ("question", "questions_by_key"), ("failure", "failure_kinds"))
    for kind, name in kinds:
        total = sum(doc[name].values()) or 1
        rows += [
            {"kind": kind, "key": key, "count": count, "share": f"{100 * count / total:.1f}%"}
            for key, count in doc[name].items()
        ]
    return rows


def _fleet(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    rows = []
    kinds = (("instance", "instances_seen", "instance_hops"), ("version", "versions_seen", "version_hops"))
    for kind, seen, hops in kinds:
        rows += [{"kind": kind, "id": k, "requests": n, "hops": doc[hops].get(k, 0)} for k, n in doc[seen].items()]
    return rows


def _latency(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    bounds = {v["check"].removeprefix("p95_ms "): v["limit"] for v in doc["thresholds"]["checks"]}
    rows = []
    for group, name in (("class", "latency_by_class"), ("name", "latency_by_name")):
        for key, lat in doc[name].items():
            rows.append(
                {
                    "group": group,
                    "key": key,
                    "requests": lat["requests"],
                    "failures": lat["failures"],
                    "wrong": lat["wrong_answers"],
                    "p50": lat["p50_ms"],
                    "p95": lat["p95_ms"],
                    "p99": lat["p99_ms"],
                    "max": lat["max_ms"],
                    "bound": bounds.get(key, "") if group == "class" else "",
                }
            )
    return rows


def render_page(doc: Mapping[str, Any]) -> str:
    """Every tab's table on one plain page, refreshed every two seconds."""
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><meta http-equiv='refresh' content='2'>",
        "<title>MRTR statistics</title><style>body{font-family:sans-serif}table{border-collapse:collapse;"
        "margin-bottom:1.5em}td,th{border:1px solid #999;padding:2px 8px;text-align:left}</style></head><body>",
        "<h1>MRTR statistics</h1><p><a href='./'>back to Locust</a> &middot; "
        "<a href='./mrtr/summary.json'>summary JSON</a></p>",
    ]
    for key, rows in tables(doc).items():
        title, columns = TABLES[key]
        parts.append(f"<h2>{html.escape(title)}</h2><table><tr>")
        parts += [f"<th>{html.escape(t)}</th>" for _, t in columns]
        parts.append("</tr>")
        for row in rows:
            parts.append("<tr>" + "".join(f"<td>{html.escape(str(row.get(k, '')))}</td>" for k, _ in columns) + "</tr>")
        parts.append("</table>")
    parts.append("</body></html>")
    return "".join(parts)
