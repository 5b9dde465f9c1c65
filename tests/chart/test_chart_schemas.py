"""Every rendered object against its schema: built-in kinds against Kubernetes' (kubernetes-validate,
strict: unknown fields fail), custom resources against their operator's CRD, unknown fields rejected."""

import copy

import jsonschema
import kubernetes_validate
import pytest

import chart_support as cs

pytestmark = pytest.mark.helm

VARIANTS = {
    "values.yaml": ((), ()),
    "ci-default": (cs.ci_values("default"), ()),
    "ci-pinned": (cs.ci_values("pinned"), ()),
    "kafka-security": (cs.ci_values("pinned"), ("kafka.security.enabled=true",)),
    "object-store-checkpoint": ((), ("job.checkpoint.uri=s3a://bucket/ms",
                                     "job.checkpoint.persistentVolumeClaim.enabled=false")),
}


def crd_errors(doc: dict) -> list[str]:
    schema = cs.crd_schemas().get((doc["apiVersion"], doc["kind"]))
    assert schema is not None, f"no CRD in the shared schemas serves {doc['apiVersion']} {doc['kind']}"
    validator = jsonschema.Draft4Validator(schema)
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]


def is_custom(doc: dict) -> bool:
    return (doc["apiVersion"], doc["kind"]) in cs.crd_schemas()


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("kube", cs.VALIDATE_VERSIONS)
def test_every_built_in_object_is_valid_for_kubernetes_strictly(variant, kube):
    values, sets = VARIANTS[variant]
    checked = 0
    for doc in cs.render(values, sets):
        if is_custom(doc):
            continue
        try:
            kubernetes_validate.validate(doc, kube, strict=True)
        except kubernetes_validate.ValidationError as error:
            pytest.fail(f"{doc['kind']}/{doc['metadata']['name']} is invalid for Kubernetes {kube}: "
                        f"{'.'.join(map(str, error.path))}: {error.message}")
        checked += 1
    assert checked >= 8


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_custom_resource_is_valid_against_its_operators_crd(variant):
    values, sets = VARIANTS[variant]
    customs = [doc for doc in cs.render(values, sets) if is_custom(doc)]
    assert {doc["kind"] for doc in customs} >= {"Kafka", "KafkaNodePool", "KafkaTopic", "SparkApplication",
                                                "PodMonitor", "ServiceMonitor", "PrometheusRule"}
    for doc in customs:
        assert crd_errors(doc) == [], f"{doc['kind']}/{doc['metadata']['name']}"


def test_the_crd_check_rejects_a_field_the_operator_would_prune(default_docs):
    kafka = copy.deepcopy(cs.one(default_docs, "Kafka"))
    kafka["spec"]["kafka"]["listners"] = []
    app = copy.deepcopy(cs.one(default_docs, "SparkApplication"))
    app["spec"]["driver"]["coreRequests"] = "1"
    assert any("listners" in error for error in crd_errors(kafka))
    assert any("coreRequests" in error for error in crd_errors(app))


def test_the_crd_check_still_accepts_free_form_fields_the_crd_preserves(default_docs):
    kafka = copy.deepcopy(cs.one(default_docs, "Kafka"))
    kafka["spec"]["kafka"]["config"]["any.broker.setting"] = 1
    assert crd_errors(kafka) == []


def test_the_kubernetes_check_rejects_an_unknown_field(default_docs):
    deployment = copy.deepcopy(cs.by_kind(default_docs, "Deployment")[0])
    deployment["spec"]["template"]["spec"]["containers"][0]["resource"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, cs.VALIDATE_VERSIONS[-1], strict=True)


def test_every_rendered_kind_is_checked_by_one_of_the_two(pinned_docs):
    for doc in cs.render(*VARIANTS["kafka-security"]):
        if not is_custom(doc):
            kubernetes_validate.validate(doc, cs.VALIDATE_VERSIONS[-1], strict=True)  # raises SchemaNotFoundError
