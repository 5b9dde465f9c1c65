"""skaffold.yaml: valid skaffold/v4beta14 (the shared JSON schema, plus the apiVersion it leaves
unchecked), building the three images and deploying the chart with them."""

import copy
import json

import jsonschema
import pytest
import yaml

import chart_support as cs

SKAFFOLD = cs.REPO / "skaffold.yaml"


def config() -> dict:
    return yaml.safe_load(SKAFFOLD.read_text())


def schema_errors(doc: dict) -> list[str]:
    schema = json.loads((cs.shared_dir() / "schemas" / "skaffold" / "v4beta14.json").read_text())
    validator = jsonschema.Draft7Validator(schema)
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message[:200]}" for e in validator.iter_errors(doc)]


def with_profile(doc: dict, name: str) -> dict:
    """The config with a profile's JSON patches applied (replace and add, as skaffold.yaml uses)."""
    doc = copy.deepcopy(doc)
    profile = next(p for p in doc["profiles"] if p["name"] == name)
    for patch in profile.get("patches", []):
        assert patch["op"] in ("replace", "add")
        *parents, last = [int(p) if p.isdigit() else p for p in patch["path"].strip("/").split("/")]
        target = doc
        for key in parents:
            target = target[key]
        if patch["op"] == "replace":
            assert (last < len(target)) if isinstance(last, int) else (last in target), patch["path"]
        target[last] = patch["value"]
    return doc


def test_skaffold_yaml_is_valid_against_the_v4beta14_schema():
    assert schema_errors(config()) == []


def test_skaffold_yaml_declares_the_v4beta14_api_the_schema_itself_does_not_check():
    doc = config()
    assert (doc["apiVersion"], doc["kind"]) == ("skaffold/v4beta14", "Config")
    assert schema_errors({**doc, "apiVersion": "skaffold/v1"}) == []  # why the explicit check is needed


def test_the_schema_check_rejects_a_misspelt_field():
    doc = config()
    doc["manifests"]["helm"]["releases"][0]["valueFiles"] = []
    assert schema_errors(doc)


def test_it_builds_the_three_images_from_the_repository_root():
    artifacts = {a["image"]: a for a in config()["build"]["artifacts"]}
    assert set(artifacts) == {"market-spread/sender", "market-spread/receiver", "market-spread/spark-job"}
    for image, artifact in artifacts.items():
        assert artifact["context"] == "."
        assert (cs.REPO / artifact["docker"]["dockerfile"]).is_file()
        assert artifact["docker"]["dockerfile"] == f"images/{image.split('/')[1]}/Dockerfile"


@pytest.mark.parametrize("profile", ["local", "pinned"])
def test_each_profile_is_valid_and_deploys_the_chart_with_its_ci_values(profile):
    doc = with_profile(config(), profile)
    assert schema_errors(doc) == []
    release = doc["manifests"]["helm"]["releases"][0]
    assert (cs.REPO / release["chartPath"] / "Chart.yaml").is_file()
    expected = {"local": "default-values.yaml", "pinned": "pinned-values.yaml"}[profile]
    assert [p.split("/")[-1] for p in release["valuesFiles"]] == [expected]
    assert all((cs.REPO / p).is_file() for p in release["valuesFiles"])


def test_the_pinned_profile_pushes_and_the_local_one_loads_into_the_cluster():
    assert with_profile(config(), "pinned")["build"]["local"]["push"] is True
    local = with_profile(config(), "local")
    assert local["build"]["local"]["push"] is False
    assert local["profiles"][0]["activation"][0]["kubeContext"].startswith("(kind-")


@pytest.mark.helm
def test_the_built_images_reach_every_workload_of_the_chart():
    release = config()["manifests"]["helm"]["releases"][0]
    sets = []
    for key, template in release["setValueTemplates"].items():
        image = template.split("IMAGE_")[1].split("_", 1)[1].split("}}")[0]  # e.g. market_spread_sender
        sets.append(f"{key}={'registry.test/' + image if key.endswith('repository') else 'abc@sha256:' + '0' * 64}")
    docs = cs.render(tuple(str(cs.REPO / p) for p in release["valuesFiles"]), tuple(sets))
    digest = "abc@sha256:" + "0" * 64
    images = {d["metadata"]["name"]: d["spec"]["template"]["spec"]["containers"][0]["image"]
              for d in cs.by_kind(docs, "Deployment")}
    images["job"] = cs.one(docs, "SparkApplication")["spec"]["image"]
    assert images == {
        "market-spread-sender-nbbo": f"registry.test/market_spread_sender:{digest}",
        "market-spread-sender-orders": f"registry.test/market_spread_sender:{digest}",
        "market-spread-receiver": f"registry.test/market_spread_receiver:{digest}",
        "job": f"registry.test/market_spread_spark_job:{digest}",
    }
