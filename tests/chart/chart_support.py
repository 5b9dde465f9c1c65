"""What the chart tests share: the real helm and promtool, rendering, and the schemas to check against.

No cluster is needed: `helm template` renders the chart, kubernetes-validate's JSON schemas check
the built-in kinds, and each operator's CRD (../shared/schemas/crds, or $MARKETSPREAD_SHARED_DIR)
checks its custom resources, unknown fields rejected.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import typing
from pathlib import Path
from typing import Literal

import pytest
import yaml
from annotated_types import Ge, Gt, Le, Lt

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "market-spread"
CI_VALUES = sorted((CHART / "ci").glob("*-values.yaml"))
GOLDEN = Path(__file__).resolve().parent / "golden"
RELEASE = "market-spread"
NAMESPACE = "market-spread"
# `helm template` has no cluster to ask, so it is told which Kubernetes and which optional APIs to assume.
KUBE_VERSION = "1.35.0"
MONITORING_APIS = (
    "monitoring.coreos.com/v1/ServiceMonitor",
    "monitoring.coreos.com/v1/PodMonitor",
    "monitoring.coreos.com/v1/PrometheusRule",
)
# The oldest Kubernetes the chart supports (Chart.yaml kubeVersion) and the newest with schemas.
VALIDATE_VERSIONS = ("1.30", "1.37")


def shared_dir() -> Path:
    candidates = [Path(os.environ["MARKETSPREAD_SHARED_DIR"])] if os.environ.get("MARKETSPREAD_SHARED_DIR") else []
    candidates.append(REPO.parent / "shared")
    for candidate in candidates:
        if (candidate / "schemas").is_dir():
            return candidate
    pytest.fail(f"the shared schemas are missing: looked in {', '.join(map(str, candidates))} "
                "(set MARKETSPREAD_SHARED_DIR to the directory holding schemas/crds and schemas/skaffold)")


def tool(name: str, hint: str) -> str:
    local = REPO / ".local" / "bin" / name
    found = str(local) if local.is_file() else shutil.which(name)
    if not found:
        pytest.fail(f"`{name}` is not installed: {hint}")
    return found


def helm() -> str:
    return tool("helm", "run `make setup` (it builds .local/bin/helm from the Go module proxy)")


def promtool() -> str:
    return tool("promtool", "run `make setup` (it installs Debian's prometheus package)")


def helm_args(values: tuple[str, ...] = (), sets: tuple[str, ...] = (),
              api_versions: tuple[str, ...] = MONITORING_APIS) -> list[str]:
    args = [helm(), "template", RELEASE, str(CHART), "--namespace", NAMESPACE, "--kube-version", KUBE_VERSION]
    for api in api_versions:
        args += ["--api-versions", api]
    for path in values:
        args += ["--values", str(path)]
    for item in sets:
        args += ["--set", item]
    return args


@functools.lru_cache(maxsize=64)
def render_text(values: tuple[str, ...] = (), sets: tuple[str, ...] = (),
                api_versions: tuple[str, ...] = MONITORING_APIS) -> str:
    result = subprocess.run(helm_args(values, sets, api_versions), capture_output=True, text=True, timeout=120)
    if result.returncode:
        pytest.fail(f"helm template failed:\n{result.stderr}")
    return result.stdout


def render(values: tuple[str, ...] = (), sets: tuple[str, ...] = (),
           api_versions: tuple[str, ...] = MONITORING_APIS) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(render_text(values, sets, api_versions)) if doc]


def render_failure(values: tuple[str, ...] = (), sets: tuple[str, ...] = ()) -> str:
    """helm's error message for values the chart must refuse."""
    result = subprocess.run(helm_args(values, sets), capture_output=True, text=True, timeout=120)
    assert result.returncode != 0, f"helm template accepted {values} {sets}"
    return result.stderr


def ci_values(name: str) -> tuple[str, ...]:
    return (str(CHART / "ci" / f"{name}-values.yaml"),)


def by_kind(docs: list[dict], kind: str) -> list[dict]:
    return [doc for doc in docs if doc["kind"] == kind]


def one(docs: list[dict], kind: str, name: str | None = None) -> dict:
    found = [d for d in by_kind(docs, kind) if name is None or d["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {[d['metadata']['name'] for d in found]}"
    return found[0]


def env_of(container: dict) -> dict[str, str]:
    return {item["name"]: item["value"] for item in container.get("env", [])}


# --- golden manifests ---------------------------------------------------------------------------

def normalise(text: str) -> str:
    """Rendered YAML without what changes on every release: the chart and app version labels."""
    text = re.sub(r"(helm\.sh/chart: market-spread)-\S+", r"\1", text)
    text = re.sub(r"\n\s*app\.kubernetes\.io/version: \S+", "", text)
    return re.sub(r"\n\s*checksum/\S+: \S+", "", text)


def golden_path(values_file: Path) -> Path:
    return GOLDEN / values_file.name.replace("-values.yaml", ".yaml")


# --- CRD schemas --------------------------------------------------------------------------------

def _strict(node):
    """An OpenAPI v3 CRD schema as a JSON schema that rejects what the API server would prune."""
    if isinstance(node, list):
        return [_strict(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: _strict(value) for key, value in node.items()}
    if node.get("x-kubernetes-int-or-string") and "anyOf" not in node:
        node.pop("type", None)
        node["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if node.get("nullable") and isinstance(node.get("type"), str):
        node["type"] = [node["type"], "null"]
    if ("properties" in node and "additionalProperties" not in node
            and not node.get("x-kubernetes-preserve-unknown-fields")):
        node["additionalProperties"] = False
    return node


@functools.cache
def crd_schemas() -> dict[tuple[str, str], dict]:
    """{(apiVersion, kind): strict schema} for every served version of every shared CRD."""
    schemas = {}
    for path in sorted((shared_dir() / "schemas" / "crds").rglob("*.yaml")):
        for crd in yaml.safe_load_all(path.read_text()):
            if not crd or crd.get("kind") != "CustomResourceDefinition":
                continue
            group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
            for version in crd["spec"]["versions"]:
                if version.get("served"):
                    schemas[(f"{group}/{version['name']}", kind)] = _strict(version["schema"]["openAPIV3Schema"])
    return schemas


# --- settings classes -> values.schema.json -----------------------------------------------------

def settings_classes() -> dict[str, type]:
    """values.schema.json $defs name -> the pydantic settings class whose fields it must list."""
    from marketspread.receiver.settings import ReceiverSettings
    from marketspread.sender.settings import SenderSettings
    from marketspread.settings import KafkaSettings
    from marketspread_job.settings import JobSettings

    return {"kafkaSettings": KafkaSettings, "senderSettings": SenderSettings,
            "receiverSettings": ReceiverSettings, "jobSettings": JobSettings}


_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean"}


def settings_schema(settings_cls: type) -> dict:
    """The JSON schema of a `settings:` block: exactly the class's fields, typed and bounded alike."""
    properties = {}
    for name, info in settings_cls.model_fields.items():
        annotation = info.annotation
        if typing.get_origin(annotation) is Literal:
            choices = list(typing.get_args(annotation))
            field = {"type": _JSON_TYPES[type(choices[0])], "enum": choices}
        else:
            field = {"type": _JSON_TYPES[annotation]}
        for bound in info.metadata:
            if isinstance(bound, Ge):
                field["minimum"] = bound.ge
            elif isinstance(bound, Gt):
                field["exclusiveMinimum"] = bound.gt
            elif isinstance(bound, Le):
                field["maximum"] = bound.le
            elif isinstance(bound, Lt):
                field["exclusiveMaximum"] = bound.lt
        if info.description:
            field["description"] = info.description
        properties[name] = field
    return {
        "type": "object",
        "description": f"{settings_cls.__name__} ({settings_cls.__module__}): each key becomes "
                       f"MARKETSPREAD_<KEY>; a key left out keeps the service's default.",
        "additionalProperties": False,
        "properties": properties,
    }


def values_schema_path() -> Path:
    return CHART / "values.schema.json"


def load_values_schema() -> dict:
    return json.loads(values_schema_path().read_text())
