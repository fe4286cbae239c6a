"""The chart's monitoring objects (off by default): the Grafana dashboard ConfigMap, the
PrometheusRule and the /metrics reader role. Every metric the dashboard and the alerts name is one
the programs export: the names come from the node plugin's and the API server's own registries,
and the PromQL is read by a small tokenizer that drops functions, keywords, label matchers,
grouping labels, durations, strings and Grafana variables."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from prometheus_client import registry

from apiserver.endpoints import metrics as server_metrics
from devkit import helm
from nodeplugin import metrics as plugin_metrics

DASHBOARD_FILE = helm.CHART / "dashboards" / "model-manager.json"
ON = ["monitoring.dashboard.enabled=true", "monitoring.prometheusRule.enabled=true",
      "monitoring.metricsReader.enabled=true"]  # fmt: skip
ALERTS = ("ModelManagerVerificationFailed", "ModelManagerCacheAboveHighWatermark",
          "ModelManagerNodeStoreNotReady")  # fmt: skip


# -- what the programs export ---------------------------------------------------------------

SUFFIXES = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "summary": ("", "_sum", "_count", "_created"),
    "info": ("_info",),
    "stateset": ("",),
    "gaugehistogram": ("_bucket", "_gsum", "_gcount"),
    "unknown": ("",),
}
"""The sample names of a family in the text exposition, by its type: a labelled family with no
child yet (the API server's latency before its first request) has a type but no samples."""


def exported(reg: registry.CollectorRegistry) -> frozenset[str]:
    names: set[str] = set()
    for family in reg.collect():
        names.update(sample.name for sample in family.samples)
        names.update(family.name + suffix for suffix in SUFFIXES[family.type])
    return frozenset(names)


def plugin_registry() -> registry.CollectorRegistry:
    """The registry the plugin serves (``nodeplugin.plugin``), over fixed figures."""
    sources = plugin_metrics.Sources(
        downloaded_bytes=lambda: 1, mounts=lambda: {"hit": 1}, stored_bytes=lambda: 1,
        capacity_bytes=lambda: 10, state=lambda: plugin_metrics.NodeState(inodes=10))
    return plugin_metrics.Metrics(sources).registry


PLUGIN = exported(plugin_registry())
SERVER = exported(server_metrics.Metrics().registry)
EXPORTED = PLUGIN | SERVER


def test_the_registries_are_read_not_typed() -> None:
    assert "gpustack_model_manager_verification_failures_total" in PLUGIN
    assert "gpustack_model_manager_publish_duration_seconds_bucket" in PLUGIN
    assert "gpustack_model_manager_apiserver_request_duration_seconds_bucket" in SERVER
    assert "gpustack_model_manager_apiserver_request_duration_seconds_bucket" not in PLUGIN
    assert "gpustack_model_manager_node_store_ready" not in SERVER


# -- metric names in PromQL -----------------------------------------------------------------


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


FUNCTIONS = _words("""
abs absent absent_over_time acos acosh asin asinh atan atanh avg_over_time ceil changes clamp
clamp_max clamp_min cos cosh count_over_time day_of_month day_of_week day_of_year days_in_month
deg delta deriv double_exponential_smoothing exp floor histogram_avg histogram_count
histogram_fraction histogram_quantile histogram_stddev histogram_stdvar histogram_sum
holt_winters hour idelta increase info irate label_join label_replace last_over_time ln log10
log2 mad_over_time max_over_time min_over_time minute month pi predict_linear
present_over_time quantile_over_time rad rate resets round scalar sgn sin sinh sort sort_by_label
sort_by_label_desc sort_desc sqrt start end stddev_over_time stdvar_over_time sum_over_time tan
tanh time timestamp vector year
""")
"""PromQL's functions (``start`` and ``end`` are the ``@`` modifier's)."""
AGGREGATIONS = _words("""
avg bottomk count count_values group limit_ratio limitk max min quantile stddev stdvar sum topk
""")
GROUPING = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})
"""Each may be followed by a parenthesised list of label names."""
KEYWORDS = frozenset({"and", "or", "unless", "atan2", "bool", "offset", "inf", "nan"})

TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<string>"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|`[^`]*`)
  | (?P<variable>\$\{[^}]*\}|\$\w+|\[\[\w+\]\])
  | (?P<number>(?:0[xX][0-9a-fA-F]+|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+)(?:[a-zA-Z]+\d*)*)
  | (?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)
  | (?P<punct>=~|!~|!=|==|>=|<=|[-+*/%^(){}\[\],=<>@:])
""", re.VERBOSE)
CLOSING = {"{": "}", "[": "]", "(": ")"}


class UnknownFunction(ValueError):
    pass


def tokens(expr: str) -> Iterator[tuple[str, str]]:
    """``(kind, text)`` of every token but spaces; anything the grammar lacks is an error."""
    at = 0
    while at < len(expr):
        found = TOKEN.match(expr, at)
        if found is None:
            raise ValueError(f"cannot read {expr[at:at + 20]!r} in {expr!r}")
        kind = found.lastgroup
        assert kind is not None
        if kind != "space":
            yield kind, found.group()
        at = found.end()


def _skip(items: list[tuple[str, str]], at: int) -> int:
    """The index after the bracket closing the one at ``at``."""
    opening = items[at][1]
    while items[at][1] != CLOSING[opening]:
        at += 1
    return at + 1


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: identifiers that are not calls,
    aggregations, keywords, label matchers (``{...}``), grouping labels (``by (...)``),
    ranges and offsets (``[...]``, durations), strings or Grafana variables."""
    items = list(tokens(expr))
    names: set[str] = set()
    at = 0
    while at < len(items):
        kind, text = items[at]
        following = items[at + 1][1] if at + 1 < len(items) else ""
        if text in ("{", "["):
            at = _skip(items, at)
            continue
        if kind == "name":
            word = text.lower()
            if word in GROUPING and following == "(":
                at = _skip(items, at + 1)
                continue
            if word in KEYWORDS or (word in AGGREGATIONS and following in ("(", "by",
                                                                          "without")):
                pass
            elif following == "(":
                if text not in FUNCTIONS:
                    raise UnknownFunction(f"{text}() is not a PromQL function (in {expr!r})")
            else:
                names.add(text)
        at += 1
    return names


def unexported(expr: str, known: frozenset[str] = EXPORTED) -> set[str]:
    return metric_names(expr) - known


@pytest.mark.parametrize(("expr", "names"), [
    ('histogram_quantile(0.99, sum by (le, verb) (rate(a_bucket{instance=~"$x", code!="2"}'
     "[$__rate_interval])))", {"a_bucket"}),
    ("a / on (instance) group_left (node) b > bool 0.5 and c offset 1h30m", {"a", "b", "c"}),
    ("sum(rate(x_total[5m:1m])) without (pod) or vector(0)", {"x_total"}),
    ("topk(3, count by (reason) (y)) unless z @ end()", {"y", "z"}),
    ('label_replace(up, "dst", "$1", "src", "(.*)") * 1e3 - -Inf', {"up"}),
    ("level:recorded:rate5m > 0x1f", {"level:recorded:rate5m"}),
    ("a > 0 or (b unless (c))", {"a", "b", "c"}),
])  # fmt: skip
def test_the_tokenizer_keeps_metrics_only(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def test_the_checker_catches_a_made_up_metric_and_function() -> None:
    made_up = "gpustack_model_manager_cache_hits_total"
    assert unexported(f'sum(rate({made_up}{{result="hit"}}[5m]))') == {made_up}
    # a typo in a real panel is caught too
    text = DASHBOARD_FILE.read_text()
    real = "gpustack_model_manager_quarantined_trees"
    assert real in text
    typo = json.loads(text.replace(real, "gpustack_model_manager_quarantine_trees"))
    assert set().union(*(unexported(e) for e in dashboard_queries(typo))) \
        == {"gpustack_model_manager_quarantine_trees"}
    with pytest.raises(UnknownFunction):
        metric_names("rates(gpustack_model_manager_mounts_total[5m])")
    with pytest.raises(ValueError, match="cannot read"):
        metric_names("gpustack_model_manager_mounts_total # a comment")


# -- the rendered objects -------------------------------------------------------------------


@pytest.fixture(scope="module")
def docs() -> list[dict[str, Any]]:
    return helm.template(sets=ON).docs()


def dashboard_queries(dashboard: dict[str, Any]) -> list[str]:
    """Every PromQL expression of the panels, and the selectors of the query variables
    (Grafana's ``label_values(selector, label)``)."""
    exprs = [target["expr"] for panel in dashboard["panels"]
             for target in panel.get("targets", [])]  # fmt: skip
    for variable in dashboard["templating"]["list"]:
        if variable["type"] != "query":
            continue
        query = variable["query"]["query"] if isinstance(variable["query"], dict) \
            else variable["query"]
        found = re.fullmatch(r"label_values\((.+),\s*\w+\)", query)
        assert found is not None, f"variable {variable['name']}: {query!r}"
        exprs.append(found.group(1))
    return exprs


def rule_queries(rule: dict[str, Any]) -> list[str]:
    return [r["expr"] for group in rule["spec"]["groups"] for r in group["rules"]]


def test_off_by_default(default_docs: list[dict[str, Any]]) -> None:
    assert not helm.by_kind(default_docs, "PrometheusRule")
    names = {(d["kind"], d["metadata"]["name"]) for d in default_docs}
    assert ("ConfigMap", "model-manager-dashboard") not in names
    assert ("ClusterRole", "model-manager-metrics-reader") not in names


def test_the_dashboard_configmap(docs: list[dict[str, Any]]) -> None:
    configmap = helm.one(docs, "ConfigMap", "model-manager-dashboard")
    meta = configmap["metadata"]
    assert meta["namespace"] == helm.NAMESPACE
    assert meta["labels"]["grafana_dashboard"] == "1"
    assert meta["labels"]["app.kubernetes.io/component"] == "monitoring"
    assert "annotations" not in meta
    assert json.loads(configmap["data"]["model-manager.json"]) \
        == json.loads(DASHBOARD_FILE.read_text())


def test_the_dashboard_configmap_takes_its_labels_namespace_and_annotations() -> None:
    docs = helm.template(sets=[
        "monitoring.dashboard.enabled=true", "monitoring.dashboard.namespace=monitoring",
        "monitoring.dashboard.labels.grafana_dashboard=null",
        "monitoring.dashboard.labels.dashboards=model-manager",
        "monitoring.dashboard.annotations.grafana_folder=Models",
    ]).docs()  # fmt: skip
    meta = helm.one(docs, "ConfigMap", "model-manager-dashboard")["metadata"]
    assert meta["namespace"] == "monitoring"
    assert meta["labels"]["dashboards"] == "model-manager"
    assert "grafana_dashboard" not in meta["labels"]
    assert meta["annotations"] == {"grafana_folder": "Models"}
    assert not helm.by_kind(docs, "PrometheusRule")


def test_the_dashboard_is_a_grafana_dashboard() -> None:
    dashboard = json.loads(DASHBOARD_FILE.read_text())
    assert dashboard["uid"] and dashboard["title"] and dashboard["schemaVersion"] >= 36
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for variable in variables.values():
        if variable["type"] == "query":
            assert variable["datasource"]["uid"] == "${datasource}"
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    graphs = [panel for panel in dashboard["panels"] if panel["type"] != "row"]
    assert len(graphs) >= 15
    cells = [(p["gridPos"]["x"] + dx, p["gridPos"]["y"] + dy) for p in dashboard["panels"]
             for dx in range(p["gridPos"]["w"]) for dy in range(p["gridPos"]["h"])]  # fmt: skip
    assert len(cells) == len(set(cells)), "panels overlap"
    for panel in graphs:
        where = panel["title"]
        assert panel["type"] in ("timeseries", "stat"), where
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, where
        assert panel["description"], where
        pos = panel["gridPos"]
        assert pos["x"] + pos["w"] <= 24 and pos["h"] > 0, where
        assert panel["targets"], where
        refs = [target["refId"] for target in panel["targets"]]
        assert len(refs) == len(set(refs)), where
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}", where
            assert target["expr"].strip(), where


def test_the_dashboard_shows_what_an_operator_watches() -> None:
    named = set().union(*(metric_names(e) for e in
                          dashboard_queries(json.loads(DASHBOARD_FILE.read_text()))))
    p = "gpustack_model_manager_"
    wanted = {f"{p}{name}" for name in (
        "used_bytes", "capacity_bytes", "stored_bytes", "used_inodes", "capacity_inodes",
        "high_watermark_ratio", "node_store_ready", "mounts_total", "download_bytes_total",
        "materializations_total", "publish_duration_seconds_bucket",
        "verification_failures_total", "quarantined_trees", "quarantines_total",
        "backoff_digests", "backoffs_total", "references", "referenced_trees",
        "apiserver_request_duration_seconds_bucket", "apiserver_request_duration_seconds_count",
        "apiserver_inflight_requests", "apiserver_watches")}  # fmt: skip
    assert wanted <= named, wanted - named


def test_every_metric_the_dashboard_and_the_rules_name_is_exported(
    docs: list[dict[str, Any]],
) -> None:
    configmap = helm.one(docs, "ConfigMap", "model-manager-dashboard")
    queries = dashboard_queries(json.loads(configmap["data"]["model-manager.json"]))
    queries += rule_queries(helm.one(docs, "PrometheusRule"))
    for expr in queries:
        assert metric_names(expr), expr
        assert unexported(expr) == set(), expr


def test_the_alerts(docs: list[dict[str, Any]]) -> None:
    rule = helm.one(docs, "PrometheusRule", "model-manager")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["namespace"] == helm.NAMESPACE
    (group,) = rule["spec"]["groups"]
    alerts = {r["alert"]: r for r in group["rules"]}
    assert tuple(alerts) == ALERTS
    for name, alert in alerts.items():
        assert set(alert) <= {"alert", "expr", "for", "labels", "annotations"}, name
        assert alert["labels"] == {"severity": "warning"}, name
        assert set(alert["annotations"]) == {"summary", "description"}, name
        assert "{{ $labels.instance }}" in alert["annotations"]["description"], name
    # every series, not an aggregate: the alert keeps the scraped target's labels
    assert all(not re.search(r"\b(sum|max|min|avg|count)\b", a["expr"]) for a in alerts.values())
    failed = alerts["ModelManagerVerificationFailed"]
    assert "[30m]" in failed["expr"] and "offset 30m" in failed["expr"] and "for" not in failed
    high = alerts["ModelManagerCacheAboveHighWatermark"]
    assert high["for"] == "30m"
    assert metric_names(high["expr"]) == {"gpustack_model_manager_used_bytes",
                                          "gpustack_model_manager_capacity_bytes",
                                          "gpustack_model_manager_high_watermark_ratio"}
    ready = alerts["ModelManagerNodeStoreNotReady"]
    assert (ready["expr"], ready["for"]) == ("gpustack_model_manager_node_store_ready == 0", "10m")


def test_the_alerts_take_their_thresholds_and_labels() -> None:
    rules = "monitoring.prometheusRule"
    docs = helm.template(sets=[
        f"{rules}.enabled=true", f"{rules}.namespace=monitoring",
        f"{rules}.labels.release=kube-prometheus-stack",
        f"{rules}.verificationFailures.window=2h",
        f"{rules}.verificationFailures.severity=critical",
        f"{rules}.cacheAboveHighWatermark.for=1h", f"{rules}.nodeStoreNotReady.for=5m",
        f"{rules}.nodeStoreNotReady.severity=info",
    ]).docs()  # fmt: skip
    rule = helm.one(docs, "PrometheusRule")
    assert rule["metadata"]["namespace"] == "monitoring"
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    alerts = {r["alert"]: r for r in rule["spec"]["groups"][0]["rules"]}
    failed = alerts["ModelManagerVerificationFailed"]
    assert "[2h]" in failed["expr"] and "offset 2h" in failed["expr"]
    assert failed["labels"]["severity"] == "critical"
    assert alerts["ModelManagerCacheAboveHighWatermark"]["for"] == "1h"
    assert alerts["ModelManagerNodeStoreNotReady"]["for"] == "5m"
    assert alerts["ModelManagerNodeStoreNotReady"]["labels"]["severity"] == "info"
    assert "model-manager-dashboard" not in {d["metadata"]["name"] for d in docs}


@pytest.mark.parametrize(("setting", "path"), [
    ("monitoring.prometheusRule.nodeStoreNotReady.for=soon",
     "/monitoring/prometheusRule/nodeStoreNotReady/for"),
    ("monitoring.prometheusRule.verificationFailures.severity=very bad",
     "/monitoring/prometheusRule/verificationFailures/severity"),
    ("monitoring.dashboard.namespace=Not_A_Namespace", "/monitoring/dashboard/namespace"),
    ("monitoring.metricsReader.subjects[0].kind=Robot", "/monitoring/metricsReader/subjects/0"),
])  # fmt: skip
def test_bad_monitoring_values_fail_naming_the_value(setting: str, path: str) -> None:
    result = helm.template(sets=[setting], check=False)
    assert result.returncode != 0
    assert path in result.stderr, result.stderr


def test_the_metrics_reader_grants_get_on_metrics(docs: list[dict[str, Any]]) -> None:
    role = helm.one(docs, "ClusterRole", "model-manager-metrics-reader")
    assert role["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    assert not [d for d in helm.by_kind(docs, "ClusterRoleBinding")
                if d["metadata"]["name"] == "model-manager-metrics-reader"]  # fmt: skip
    subject = {"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "monitoring"}
    bound = helm.template(sets=[
        "monitoring.metricsReader.enabled=true",
        *(f"monitoring.metricsReader.subjects[0].{k}={v}" for k, v in subject.items()),
    ]).docs()  # fmt: skip
    binding = helm.one(bound, "ClusterRoleBinding", "model-manager-metrics-reader")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                  "name": "model-manager-metrics-reader"}
    assert binding["subjects"] == [subject]


def test_the_docs_name_every_alert() -> None:
    text = (helm.REPO / "docs" / "operations.md").read_text()
    section = text.split("## Monitoring", 1)[1]
    for alert in ALERTS:
        assert alert in section
    values = yaml.safe_load((helm.CHART / "values.yaml").read_text())["monitoring"]
    for key in values:
        assert f"monitoring.{key}" in section
