#!/usr/bin/env python3
"""deploy/k8s/prometheusrule.yaml from deploy/alerts.yml, the one source of the alerts.

alerts.yml stays what Prometheus loads and what `promtool test rules` tests; the
PrometheusRule wraps its text, comments kept, under `spec:` (a rule file's top level,
`groups:`, is exactly a PrometheusRule's spec). Prints it, or with --write writes it.
tests/k8s/test_manifests.py fails when the committed file differs from a fresh one.
"""

import argparse
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SOURCE = ROOT / "deploy" / "alerts.yml"
TARGET = ROOT / "deploy" / "k8s" / "prometheusrule.yaml"

HEADER = """\
# Generated from deploy/alerts.yml by scripts/k8s/prometheusrule.py: edit that file and
# run `scripts/k8s/prometheusrule.py --write`. For the Prometheus Operator; the label
# is one a Prometheus' ruleSelector may match on.
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: edgesight
  namespace: edgesight
  labels:
    app.kubernetes.io/name: edgesight
    role: alert-rules
spec:
"""


def generate(source_text: str) -> str:
    lines = source_text.splitlines()
    # The file's opening comment speaks of alerts.yml itself; the rules start at `groups:`.
    start = next((i for i, line in enumerate(lines) if line.startswith("groups:")), None)
    if start is None:
        raise ValueError(f"{SOURCE}: no top-level `groups:` key")
    body = ["  " + line if line.strip() else "" for line in lines[start:]]
    return HEADER + "\n".join(body) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write {TARGET.relative_to(ROOT)}")
    args = parser.parse_args()
    text = generate(SOURCE.read_text())
    if args.write:
        TARGET.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
