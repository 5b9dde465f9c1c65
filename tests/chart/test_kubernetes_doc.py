"""docs/kubernetes.md: every operation has its command, and the commands name what the chart renders."""

import re

import pytest

import chart_support as cs

DOC = cs.REPO / "docs" / "kubernetes.md"


def sections() -> dict[str, str]:
    parts = re.split(r"^## (.+)$", DOC.read_text(), flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2]))


def commands(text: str) -> list[str]:
    blocks = re.findall(r"```sh\n(.*?)```", text, re.DOTALL)
    return [line for block in blocks for line in re.sub(r"\\\n\s*", " ", block).splitlines() if line.strip()]


@pytest.mark.parametrize("section, tool", [
    ("Install", "helm upgrade --install"), ("Scale", "helm upgrade"), ("Upgrade", "helm upgrade"),
    ("Restart the job from its checkpoint", "kubectl"), ("Logs and metrics", "kubectl"), ("Uninstall", "helm uninstall"),
])
def test_each_operation_has_its_command(section, tool):
    assert any(tool in line for line in commands(sections()[section])), section


def test_scaling_changes_both_executors_and_partitions():
    scale = " ".join(commands(sections()["Scale"]))
    assert "--set job.executor.instances=" in scale and "--set kafka.topics.partitions=" in scale


@pytest.mark.helm
def test_every_set_in_the_doc_is_a_value_the_chart_accepts():
    sets = sorted(set(re.findall(r"--set (\S+=\S+)", " ".join(commands(DOC.read_text())))))
    assert len(sets) >= 6
    cs.render(sets=tuple(s for s in sets if not s.startswith("job.enabled")))
    for job_toggle in (s for s in sets if s.startswith("job.enabled")):
        cs.render(sets=(job_toggle,))


@pytest.mark.helm
def test_the_objects_the_doc_names_are_the_ones_the_chart_renders(default_docs):
    names = {(d["kind"], d["metadata"]["name"]) for d in default_docs}
    text = DOC.read_text()
    for kind, name in re.findall(r"\b(deploy|svc|sparkapplication|pvc|kafka)[/ ](market-spread[\w-]*)", text):
        kind = {"deploy": "Deployment", "svc": "Service", "sparkapplication": "SparkApplication",
                "pvc": "PersistentVolumeClaim", "kafka": "Kafka"}[kind]
        assert (kind, name) in names, f"docs/kubernetes.md names {kind} {name}, which the chart does not render"


@pytest.mark.helm
def test_the_label_selectors_in_the_doc_select_the_jobs_pods(default_docs):
    labels = {**cs.one(default_docs, "SparkApplication")["spec"]["driver"]["labels"], "spark-role": "driver"}
    for selector in re.findall(r"-l (app\.kubernetes\.io/component=job,spark-role=driver)", DOC.read_text()):
        assert all(labels.get(k) == v for k, v in (pair.split("=") for pair in selector.split(",")))
