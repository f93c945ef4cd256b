"""Debian's Prometheus against the replicas: `promtool check metrics` on each `/metrics`, and a real
Prometheus, configured by deploy/prometheus/prometheus.yml (its DNS discovery replaced by the loopback
replicas) with the shipped alert rules, answering PromQL over its HTTP API: the active streams summed
across replicas equal the WebSocket contexts the clients hold open."""

import asyncio
import json
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import httpx
import pytest
import yaml

from _debian import debian_binary
from _replicas import live
from _server_process import REPO, free_port, timeout
from uttera_server.client import Audio, Done, SpeechStreamClient

PROMETHEUS_YML = REPO / "deploy" / "prometheus" / "prometheus.yml"
ALERTS = REPO / "deploy" / "helm" / "uttera" / "files" / "alerts.yaml"
HELD_PER_REPLICA = 2


def prometheus_config(targets: list[str], rules: Path) -> dict:
    """The shipped config with the replicas as static targets, a 1 s scrape and the rules at `rules`."""
    config = yaml.safe_load(PROMETHEUS_YML.read_text())
    config["global"]["scrape_interval"] = config["global"]["evaluation_interval"] = "1s"
    config["rule_files"] = [str(rules)]
    job = next(j for j in config["scrape_configs"] if j["job_name"] == "uttera")
    assert job.pop("dns_sd_configs"), "the uttera job discovers the replicas by DNS"
    job["static_configs"] = [{"targets": targets}]
    return config


def query(url: str, promql: str) -> list[dict]:
    with urllib.request.urlopen(f"{url}/api/v1/query?query={urllib.parse.quote(promql)}", timeout=5) as r:
        body = json.loads(r.read())
    assert body["status"] == "success", body
    return body["data"]["result"]


def value(url: str, promql: str) -> float | None:
    result = query(url, promql)
    return float(result[0]["value"][1]) if result else None


async def until(what: str, check, limit_s: float = 20.0):
    """Poll `check()` (a scrape is 1 s apart) until it returns something true; fail after `limit_s`."""
    deadline = time.monotonic() + timeout(limit_s)
    while not (result := await asyncio.to_thread(check)):
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout(limit_s)} s")
        await asyncio.sleep(0.2)
    return result


@pytest.fixture(scope="module")
def prometheus(replicas, tmp_path_factory):
    binary = debian_binary("prometheus", "prometheus")
    tmp = tmp_path_factory.mktemp("prometheus")
    config = tmp / "prometheus.yml"
    config.write_text(yaml.safe_dump(prometheus_config([f"127.0.0.1:{r.port}" for r in replicas], ALERTS)))
    check = subprocess.run(
        [debian_binary("promtool", "prometheus"), "check", "config", str(config)], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout + check.stderr
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with open(tmp / "prometheus.log", "wb") as log:
        proc = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=log,
            stderr=log,
        )
    deadline = time.monotonic() + timeout(30)
    while True:
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"prometheus did not become ready:\n{(tmp / 'prometheus.log').read_text()[-3000:]}")
        time.sleep(0.1)  # poll interval, not a synchronisation
    yield url
    proc.terminate()
    proc.wait(timeout(20))


def test_promtool_checks_every_replicas_metrics(replicas):
    promtool = debian_binary("promtool", "prometheus")
    for r in live(replicas):
        body = httpx.get(f"{r.url}/metrics", timeout=timeout(10)).text
        assert "uttera_active_streams" in body
        check = subprocess.run([promtool, "check", "metrics"], input=body, capture_output=True, text=True)
        assert check.returncode == 0, f"{r.url}/metrics:\n{check.stdout}{check.stderr}"


async def test_prometheus_sums_active_streams_across_replicas(replicas, prometheus):
    alive = live(replicas)
    dead = [r for r in replicas if not r.alive]
    await until("every target scraped", lambda: len(query(prometheus, 'up{job="uttera"}')) == len(replicas))
    for r in replicas:  # a replica killed by the load-balancer test shows as down
        up = value(prometheus, f'up{{job="uttera",instance="127.0.0.1:{r.port}"}}')
        assert up == (1.0 if r.alive else 0.0) or (r in dead and up is None), (r.url, up)
    with urllib.request.urlopen(f"{prometheus}/api/v1/rules", timeout=5) as resp:
        groups = {g["name"] for g in json.loads(resp.read())["data"]["groups"]}
    assert {"uttera-slo", "uttera-availability"} <= groups

    clients = [
        await SpeechStreamClient.connect(r.url.replace("http://", "ws://") + "/v1/audio/speech/stream")
        for r in alive
        for _ in range(HELD_PER_REPLICA)
    ]
    held = len(clients)
    try:
        contexts = []
        for i, client in enumerate(clients):  # each context stays open (an active stream) until its `end`
            ctx = client.context(f"held-{i}")
            await ctx.send_text("Held open. ")
            contexts.append(ctx)
        await until(
            f"sum(uttera_active_streams) == {held}",
            lambda: value(prometheus, 'sum(uttera_active_streams{job="uttera"})') == held,
        )
        per_replica = query(prometheus, 'sum by (instance) (uttera_active_streams{job="uttera"})')
        assert sorted(float(s["value"][1]) for s in per_replica) == [HELD_PER_REPLICA] * len(alive)
        for ctx in contexts:
            await ctx.end()
        for ctx in contexts:
            result = await ctx.collect(timeout(60))
            assert isinstance(result.final, Done) and any(isinstance(e, Audio) for e in result.events)
    finally:
        for client in clients:
            await client.close()
    await until(
        "sum(uttera_active_streams) back to 0",
        lambda: value(prometheus, 'sum(uttera_active_streams{job="uttera"})') == 0,
    )

    # Counters summed across replicas: what Prometheus scraped last equals each replica's own count.
    own = 0.0
    for r in alive:
        for line in httpx.get(f"{r.url}/metrics", timeout=timeout(10)).text.splitlines():
            if line.startswith("uttera_requests_total{"):
                own += float(line.rsplit(" ", 1)[1])
    live_instances = "|".join(f"127.0.0.1:{r.port}" for r in alive)
    await until(
        "sum(uttera_requests_total) matches the replicas",
        lambda: value(prometheus, f'sum(uttera_requests_total{{job="uttera",instance=~"{live_instances}"}})') == own,
    )
