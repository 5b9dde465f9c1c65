"""The Dockerfiles, checked statically (no Docker engine here): pinned bases, multi-stage builds,
dependencies before source, a numeric non-root user, and agreement with the chart that runs them."""

import re
from pathlib import Path

import pytest
import yaml

import chart_support as cs

IMAGES = cs.REPO / "images"
DOCKERFILES = {name: IMAGES / name / "Dockerfile" for name in ("sender", "receiver", "spark-job")}


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", path.read_text())
    result = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            result.append((keyword.upper(), rest.strip()))
    return result


def build_args(path: Path) -> dict[str, str]:
    args = {}
    for keyword, rest in instructions(path):
        if keyword == "ARG" and "=" in rest:
            name, value = rest.split("=", 1)
            args[name] = value
    return args


def stages(path: Path) -> list[tuple[str, str | None]]:
    """(resolved base image, stage name) per FROM."""
    args = build_args(path)
    result = []
    for keyword, rest in instructions(path):
        if keyword == "FROM":
            parts = rest.split()
            image = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], parts[0])
            result.append((image, parts[2] if len(parts) > 2 and parts[1].upper() == "AS" else None))
    return result


def final_stage(path: Path) -> list[tuple[str, str]]:
    items = instructions(path)
    last_from = max(i for i, (keyword, _) in enumerate(items) if keyword == "FROM")
    return items[last_from:]


def pinned_versions() -> dict[str, str]:
    lines = (cs.REPO / "constraints.txt").read_text().splitlines()
    return dict(line.split("==") for line in lines if "==" in line)


@pytest.mark.parametrize("name", DOCKERFILES)
def test_every_base_image_is_pinned_to_an_exact_version(name):
    names = set()
    for image, stage in stages(DOCKERFILES[name]):
        if image not in names:
            repository, _, tag = image.partition("@")[0].rpartition(":")
            assert repository and re.match(r"^v?\d+\.\d+\.\d+", tag), f"{image} is not pinned to an exact version"
            assert "latest" not in image
        if stage:
            names.add(stage)


@pytest.mark.parametrize("name", DOCKERFILES)
def test_each_image_is_built_in_stages_and_runs_as_a_numeric_non_root_user(name):
    assert len(stages(DOCKERFILES[name])) >= 2
    users = [rest for keyword, rest in final_stage(DOCKERFILES[name]) if keyword == "USER"]
    assert users, "the final stage sets no USER"
    uid = users[-1].split(":")[0]
    assert uid.isdigit() and int(uid) != 0


@pytest.mark.parametrize("name", DOCKERFILES)
def test_dependencies_are_installed_before_the_source_is_copied(name):
    items = instructions(DOCKERFILES[name])
    copies = [(i, rest) for i, (keyword, rest) in enumerate(items) if keyword == "COPY" and "--from" not in rest]
    manifests = min(i for i, rest in copies if "pyproject.toml" in rest and "constraints.txt" in rest)
    source = min(i for i, rest in copies if rest.startswith("services"))
    installs = [i for i, (keyword, rest) in enumerate(items)
                if keyword == "RUN" and "install" in rest and "-c constraints.txt" in rest]
    assert installs and manifests < installs[0] < source


@pytest.mark.parametrize("name", DOCKERFILES)
def test_nothing_is_downloaded_by_url_and_no_secret_is_baked_in(name):
    text = DOCKERFILES[name].read_text()
    assert not re.search(r"\b(curl|wget)\b|ADD\s+https?://", text)
    for keyword, rest in instructions(DOCKERFILES[name]):
        if keyword in ("ENV", "ARG"):
            assert not re.search(r"(PASSWORD|TOKEN|SECRET|_KEY)\b", rest, re.IGNORECASE), rest


@pytest.mark.parametrize("name, port", [("sender", 9101), ("receiver", 9102)])
def test_the_service_images_install_the_package_on_python_3_11_slim(name, port):
    path = DOCKERFILES[name]
    assert all(re.match(r"python:3\.11\.\d+-slim", image) for image, stage in stages(path) if image.startswith("python"))
    final = final_stage(path)
    assert ("ENTRYPOINT", '["marketspread"]') in final and ("CMD", f'["{name}"]') in final
    assert ("EXPOSE", str(port)) in final
    assert any(keyword == "RUN" and "pip install --no-deps ." in rest for keyword, rest in instructions(path))


def test_the_spark_image_is_the_official_python_image_of_pyspark_s_version():
    spark = pinned_versions()["pyspark"]
    bases = [image for image, _ in stages(DOCKERFILES["spark-job"]) if image.startswith("apache/spark:")]
    assert bases and all(image.startswith(f"apache/spark:{spark}-") and "python3" in image for image in bases)


def test_the_spark_image_resolves_the_connector_with_maven_into_spark_s_jars():
    items = instructions(DOCKERFILES["spark-job"])
    assert any(keyword == "COPY" and "spark-app/pom.xml spark-app/maven-settings.xml" in rest for keyword, rest in items)
    assert any(keyword == "RUN" and "mvn" in rest and "-s maven-settings.xml" in rest
               and "dependency:copy-dependencies" in rest for keyword, rest in items)
    assert ("COPY", "--from=jars /build/jars/ /opt/spark/jars/") in final_stage(DOCKERFILES["spark-job"])


def test_the_spark_image_installs_the_package_with_the_job_extra():
    text = DOCKERFILES["spark-job"].read_text()
    assert "['optional-dependencies']['job']" in text and "-c constraints.txt" in text


def test_the_chart_runs_what_the_images_provide():
    values = yaml.safe_load((cs.CHART / "values.yaml").read_text())
    spark_final = final_stage(DOCKERFILES["spark-job"])
    main_file = values["job"]["mainApplicationFile"].removeprefix("local://")
    assert ("COPY", f"spark-app/marketspread_job/__main__.py {main_file}") in spark_final
    python = next(rest for keyword, rest in spark_final if keyword == "ENV" and "PYSPARK_PYTHON=" in rest)
    assert "PYSPARK_PYTHON=/opt/marketspread/venv/bin/python" in python
    assert values["job"]["podSecurityContext"]["runAsUser"] == int(
        [rest for keyword, rest in spark_final if keyword == "USER"][-1])
    for name in ("sender", "receiver"):
        user = [rest for keyword, rest in final_stage(DOCKERFILES[name]) if keyword == "USER"][-1]
        assert values["default"]["podSecurityContext"]["runAsUser"] == int(user.split(":")[0])


def test_the_build_context_keeps_everything_but_the_package_out():
    ignore = (cs.REPO / ".dockerignore").read_text().splitlines()
    assert [line for line in ignore if line and not line.startswith("#")][0] == "*"  # an allow-list
    allowed = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    for path in DOCKERFILES.values():
        for keyword, rest in instructions(path):
            if keyword == "COPY" and "--from" not in rest:
                for source in rest.split()[:-1]:
                    assert source.split("/")[0] in allowed, f"{path}: {source} is outside the build context"
                    assert (cs.REPO / source).exists(), f"{path}: {source} does not exist"
