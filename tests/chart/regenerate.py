"""Regenerate what the chart tests compare against, after a deliberate change:

    .venv/bin/python tests/chart/regenerate.py      (or: make chart-regenerate)

- the settings blocks of charts/market-spread/values.schema.json, from the pydantic settings classes;
- the Grafana dashboards in charts/market-spread/dashboards/, from marketspread.dashboards;
- the golden rendered manifests in tests/chart/golden/, one per charts/market-spread/ci/*-values.yaml.

Review the diff before committing it: it is what the tests will hold the chart to.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import chart_support as cs  # noqa: E402


def regenerate_schema() -> None:
    schema = cs.load_values_schema()
    for name, settings_cls in cs.settings_classes().items():
        schema["$defs"][name] = cs.settings_schema(settings_cls)
    cs.values_schema_path().write_text(json.dumps(schema, indent=2) + "\n")


def regenerate_golden() -> list[Path]:
    cs.GOLDEN.mkdir(exist_ok=True)
    written = []
    for values in cs.CI_VALUES:
        path = cs.golden_path(values)
        path.write_text(cs.normalise(cs.render_text((str(values),))))
        written.append(path)
    return written


def main() -> int:
    from marketspread.dashboards.generate import write_dashboards

    regenerate_schema()
    changed = write_dashboards()
    golden = regenerate_golden()  # after the schema and dashboards: the chart renders both
    print(f"values.schema.json settings blocks rewritten; dashboards changed: {changed or 'none'}; "
          f"golden: {', '.join(p.name for p in golden)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
