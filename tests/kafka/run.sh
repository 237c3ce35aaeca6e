#!/usr/bin/env bash
# The Kafka smoke suite: installs the broker jars if needed (install.sh), then runs smoke_test.py
# with pytest against one test broker (broker.sh) in a fresh temporary directory, stopped and
# removed on exit. Extra arguments go to pytest (e.g. -k fence). Exits non-zero on any failure.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-python3}
"$here/install.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/kafka-smoke.XXXXXX")
pytest_pid=
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
    # Interrupted (SIGTERM, SIGINT): end pytest first, so that nothing outlives this script.
    if [ -n "$pytest_pid" ]; then
        kill -TERM "$pytest_pid" 2>/dev/null || true
        wait "$pytest_pid" 2>/dev/null || true
    fi
    if [ -d "$work/broker" ]; then
        "$here/broker.sh" stop "$work/broker" || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT
export KAFKA_TEST_DIR="$work/broker"
cd "$here"
"$PY" -m pytest -p no:cacheprovider -q smoke_test.py "$@" &
pytest_pid=$!
rc=0
wait "$pytest_pid" || rc=$?
pytest_pid=
exit "$rc"
