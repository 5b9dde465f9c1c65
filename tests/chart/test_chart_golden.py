"""Golden rendered manifests: any change to what the chart renders shows up as a reviewed diff.

Regenerate after a deliberate change with `make chart-regenerate` (tests/chart/regenerate.py).
Chart and app version labels are left out, so a version bump alone changes nothing here.
"""

import difflib

import pytest

import chart_support as cs

pytestmark = pytest.mark.helm


@pytest.mark.parametrize("values", cs.CI_VALUES, ids=lambda p: p.name)
def test_the_rendered_manifests_match_the_golden_file(values):
    golden = cs.golden_path(values)
    assert golden.is_file(), f"{golden} is missing: run `make chart-regenerate`"
    rendered = cs.normalise(cs.render_text((str(values),)))
    expected = golden.read_text()
    if rendered != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), rendered.splitlines(True),
                                            str(golden), "helm template", n=2))
        pytest.fail(f"{values.name} renders differently from {golden.name} "
                    f"(run `make chart-regenerate` if intended):\n{diff[:6000]}")


def test_there_is_a_golden_file_for_each_ci_values_file_and_no_other():
    assert sorted(p.name for p in cs.GOLDEN.glob("*.yaml")) == sorted(cs.golden_path(v).name for v in cs.CI_VALUES)


def test_the_golden_files_hold_no_version_labels():
    for path in cs.GOLDEN.glob("*.yaml"):
        text = path.read_text()
        assert "app.kubernetes.io/version" not in text and "helm.sh/chart: market-spread\n" in text
