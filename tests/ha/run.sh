#!/usr/bin/env bash
# Home Assistant Core's MQTT integration against the daemon (tests/ha/check.py says what is
# checked), run by the Python of the venv that scripts/install-deps.sh test makes.
#   tests/ha/run.sh [--bin target/debug/edgesight] [--out target/ha/run]
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=target/ha/venv
if ! cmp -s tests/ha/requirements.txt "$venv/requirements.txt"; then
    echo "tests/ha: no venv of tests/ha/requirements.txt in $venv: run scripts/install-deps.sh test" >&2
    exit 1
fi
export POCL_CACHE_DIR=${POCL_CACHE_DIR:-$PWD/target/pocl-cache}
mkdir -p "$POCL_CACHE_DIR"
exec "$venv/bin/python" tests/ha/check.py "$@"
