#!/usr/bin/env bash
# The GitOps health checks on the fixtures of live e2e statuses (testdata/, health_test.yaml):
# charts/dcs-operator/health.lua under Argo CD's Lua health contract, and kstatus's
# status.Compute (sigs.k8s.io/cli-utils). `go test` of this module, pinned by go.mod and go.sum;
# prints one line per test, then `N passed, N failed`, and exits non-zero when one failed.
set -euo pipefail
cd "$(dirname "$0")"
command -v go >/dev/null 2>&1 || { echo "gitops-health: the go command is not installed (Go 1.26 or newer)" >&2; exit 2; }
set +e
out=$(GOFLAGS="-mod=readonly -buildvcs=false" go test -p "${GO_BUILD_JOBS:-2}" -count=1 -v ./... 2>&1)
rc=$?
set -e
grep -E '^\s*--- (PASS|FAIL)|^(ok|FAIL)\s' <<<"$out" || true
passed=$(grep -cE '^\s*--- PASS' <<<"$out" || true)
failed=$(grep -cE '^\s*--- FAIL' <<<"$out" || true)
if ((rc != 0 && failed == 0)); then
    # A build error or a panic: no test said so.
    printf '%s\n' "$out" | tail -n 40
    failed=1
fi
echo "$passed passed, $failed failed"
((rc == 0))
