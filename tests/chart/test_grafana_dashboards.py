"""Grafana dashboards as code: the generator, the chart's copies of its output, and `dashboards push`."""

import argparse
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from marketspread.dashboards import cli as dashboards_cli
from marketspread.dashboards.catalogue import ARCHITECTURE_DOC, MetricNameError, load_catalogue
from marketspread.dashboards.generate import (CHART_DASHBOARD_DIR, build_dashboards, dashboard_exprs, render,
                                              write_dashboards)
from marketspread.dashboards.push import PushError, connect, push_dashboards


def run_cli(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    dashboards_cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["dashboards", *argv])
    return args.func(args)


def panels():
    return [(name, panel) for name, dashboard in build_dashboards().items() for panel in dashboard["panels"]]


def test_the_chart_ships_exactly_what_the_generator_builds():
    assert write_dashboards(CHART_DASHBOARD_DIR, check=True) == [], "run `marketspread dashboards generate`"
    assert sorted(p.name for p in CHART_DASHBOARD_DIR.glob("*.json")) == sorted(build_dashboards())


def test_generate_check_fails_on_a_hand_edited_file_and_generate_repairs_it(tmp_path, capsys):
    assert run_cli("generate", "--out", str(tmp_path)) == 0
    (tmp_path / "market-spread-job.json").write_text("{}\n")
    (tmp_path / "stale.json").write_text("{}\n")
    assert run_cli("generate", "--out", str(tmp_path), "--check") == 1
    assert "market-spread-job.json, stale.json" in capsys.readouterr().err
    assert run_cli("generate", "--out", str(tmp_path)) == 0
    assert run_cli("generate", "--out", str(tmp_path), "--check") == 0
    assert not (tmp_path / "stale.json").exists()


def test_the_subcommand_is_registered_with_the_marketspread_cli():
    from marketspread.cli import COMMAND_MODULES

    assert "marketspread.dashboards.cli" in COMMAND_MODULES


def test_the_catalogue_holds_every_metric_of_the_architecture_doc():
    catalogue = load_catalogue(include_platform=False)
    documented = ARCHITECTURE_DOC.read_text().count("| `marketspread_")
    assert len(catalogue.metrics) == documented >= 28
    assert catalogue.metrics["marketspread_receiver_latency_seconds"].type == "histogram"
    assert catalogue.metrics["marketspread_job_offsets_behind_latest"].labels == {"stat"}


def test_every_dashboard_query_names_only_metrics_the_services_export():
    load_catalogue().check(dashboard_exprs(build_dashboards()))


@pytest.mark.parametrize("expr, problem", [
    ("rate(marketspread_sender_messages_totl[5m])", "'marketspread_sender_messages_totl' is not a metric"),
    ('marketspread_job_offsets_behind_latest{stats="max"}', "has no label 'stats'"),
    ("rate(marketspread_job_state_rows[5m])", "rate() over 'marketspread_job_state_rows', a gauge"),
    ("marketspread_receiver_latency_seconds", "is a histogram"),
    ("histogram_quantile(0.9, rate(marketspread_receiver_rejections_total[5m]))", "over no _bucket series"),
])
def test_the_metric_check_catches_what_would_give_an_empty_panel(expr, problem):
    with pytest.raises(MetricNameError, match=re.escape(problem)):
        load_catalogue().check({"panel": expr})


def test_the_dashboards_have_the_panels_the_issue_asks_for():
    by_title = {panel["title"]: panel for _, panel in panels()}
    exprs = {title: " ".join(t["expr"] for t in panel["targets"]) for title, panel in by_title.items()}
    assert "sum by (topic) (rate(marketspread_sender_messages_total" in exprs["Throughput per stream (messages/s)"]
    latency = exprs["End-to-end latency (order's intended send time to receipt)"]
    assert all(f"histogram_quantile({q}," in latency for q in ("0.5", "0.9", "0.99", "0.999"))
    assert "marketspread_receiver_latency_seconds_bucket" in latency
    assert "marketspread_job_offsets_behind_latest" in exprs["Lag"] and "kafka_consumergroup_lag" in exprs["Lag"]
    assert "marketspread_job_batch_duration_seconds_bucket" in exprs["Micro-batch duration"]
    assert "marketspread_job_state_rows" in exprs["State"]
    assert "marketspread_job_dead_letters_total" in exprs["Dead letters"]
    assert "container_cpu_usage_seconds_total" in exprs["CPU per pod (cores)"] and "by (pod)" in exprs["CPU per pod (cores)"]


def test_every_panel_queries_the_datasource_chosen_in_the_template_variable():
    for name, dashboard in build_dashboards().items():
        variables = {v["name"]: v for v in dashboard["templating"]["list"]}
        assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
        for panel in dashboard["panels"]:
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
            assert all(t["datasource"] == panel["datasource"] for t in panel["targets"])
            assert all('namespace="$namespace"' in t["expr"] for t in panel["targets"]), panel["title"]


def test_panels_do_not_overlap_and_ids_are_unique():
    uids = set()
    for name, dashboard in build_dashboards().items():
        assert dashboard["uid"] not in uids and len(dashboard["uid"]) <= 40
        uids.add(dashboard["uid"])
        cells, ids = set(), set()
        for panel in dashboard["panels"]:
            box = panel["gridPos"]
            assert box["x"] + box["w"] <= 24
            covered = {(x, y) for x in range(box["x"], box["x"] + box["w"]) for y in range(box["y"], box["y"] + box["h"])}
            assert not covered & cells, f"{name}: {panel['title']} overlaps"
            cells |= covered
            assert panel["id"] not in ids
            ids.add(panel["id"])
            assert len({t["refId"] for t in panel["targets"]}) == len(panel["targets"])


def test_the_files_are_stable_json_that_the_chart_can_embed():
    for name, dashboard in build_dashboards().items():
        text = render(dashboard)
        assert json.loads(text) == dashboard and text == render(json.loads(text))


# --- push, against a stand-in for Grafana's HTTP API ----------------------------------------------

class FakeGrafana(BaseHTTPRequestHandler):
    """Grafana's folder and dashboard endpoints, as far as `push` uses them."""

    folders: dict[str, dict]
    requests: list[tuple[str, str, dict | None, str | None]]
    status: int = 200

    def _reply(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _record(self) -> dict | None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        self.requests.append((self.command, self.path, body, self.headers.get("Authorization")))
        return body

    def do_GET(self):
        self._record()
        uid = self.path.removeprefix("/api/folders/")
        if uid in self.folders:
            self._reply(200, self.folders[uid])
        else:
            self._reply(404, {"message": "folder not found"})

    def do_POST(self):
        body = self._record()
        if self.status != 200:
            self._reply(self.status, {"message": "Unauthorized"})
        elif self.path == "/api/folders":
            self.folders[body["uid"]] = {"uid": body["uid"], "title": body["title"]}
            self._reply(200, self.folders[body["uid"]])
        elif self.path == "/api/dashboards/db":
            uid = body["dashboard"]["uid"]
            self._reply(200, {"status": "success", "uid": uid, "url": f"/d/{uid}", "version": 1})
        else:
            self._reply(404, {"message": "no such endpoint"})

    def log_message(self, *args):
        pass


@pytest.fixture()
def grafana():
    handler = type("Handler", (FakeGrafana,), {"folders": {}, "requests": [], "status": 200})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield handler, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_push_creates_the_folder_and_saves_every_dashboard_into_it(grafana):
    """Grafana cannot run here: a local HTTP stand-in answers the endpoints grafana-client calls."""
    handler, url = grafana
    uids = push_dashboards(connect(url, "secret-token"), folder="Market Spread")
    assert uids == [d["uid"] for d in build_dashboards().values()]
    calls = [(method, path) for method, path, _, _ in handler.requests]
    assert calls == [("GET", "/api/folders/market-spread"), ("POST", "/api/folders"),
                     ("POST", "/api/dashboards/db"), ("POST", "/api/dashboards/db")]
    assert handler.requests[1][2] == {"title": "Market Spread", "uid": "market-spread"}
    for _, _, body, auth in handler.requests[2:]:
        assert auth == "Bearer secret-token"
        assert body["folderUid"] == "market-spread" and body["overwrite"] is True
        assert "id" not in body["dashboard"]
        assert body["dashboard"] == {k: v for k, v in build_dashboards()[f"{body['dashboard']['uid']}.json"].items()
                                     if k != "id"}


def test_push_again_reuses_the_folder_and_overwrites_the_dashboards(grafana):
    handler, url = grafana
    api = connect(url, "t")
    push_dashboards(api)
    handler.requests.clear()
    push_dashboards(api)
    assert [(m, p) for m, p, _, _ in handler.requests] == [
        ("GET", "/api/folders/market-spread"), ("POST", "/api/dashboards/db"), ("POST", "/api/dashboards/db")]


def test_push_reads_grafana_url_and_token_from_the_environment(grafana, monkeypatch, capsys):
    handler, url = grafana
    monkeypatch.setenv("GRAFANA_URL", url)
    monkeypatch.setenv("GRAFANA_TOKEN", "from-env")
    assert run_cli("push", "--url", "", "--token", "") == 0
    assert "pushed 2 dashboard(s)" in capsys.readouterr().out
    assert {auth for _, _, _, auth in handler.requests} == {"Bearer from-env"}


def test_a_refusing_grafana_is_a_clear_error(grafana):
    handler, url = grafana
    handler.status = 401
    with pytest.raises(PushError, match="Grafana refused the dashboards"):
        push_dashboards(connect(url, "wrong"))


def test_an_unreachable_grafana_is_a_clear_error():
    with pytest.raises(PushError, match="cannot reach Grafana"):
        push_dashboards(connect("http://127.0.0.1:9", "t"))
