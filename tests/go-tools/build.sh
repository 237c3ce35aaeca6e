#!/usr/bin/env bash
# Builds the Go programs the tests run (tests/kube-control-plane, tests/helm, tests/prometheus-crds,
# tests/gitops-health) from their published modules, pinned by each directory's go.mod and go.sum:
#
#   tests/go-tools/build.sh kube-control-plane   etcd, kube-apiserver, kube-controller-manager, kube-scheduler
#   tests/go-tools/build.sh helm                 helm
#   tests/go-tools/build.sh prometheus-crds      controller-gen, and with it the Prometheus Operator's
#                                                ServiceMonitor, PodMonitor and PrometheusRule CRDs
#                                                generated from its API module into target/prometheus-crds/crds
#   tests/go-tools/build.sh gitops-health        gitops-health (Argo CD's Lua health contract on
#                                                gopher-lua, and kstatus), which e2e runs on live syncs
#   tests/go-tools/build.sh all
#
# The binaries land in target/<name>/bin (DCS_GO_TOOLS_DIR replaces target/). A stamp beside them
# (a hash of go.mod, go.sum, the directory's own .go files, this script, the link flags and the Go
# version) makes a second call return at once; otherwise the Go build cache ($GOCACHE) makes a
# rebuild link-only, and a fresh machine downloads the modules from the Go module proxy and
# compiles everything (cold). Builds of one directory are serialised with flock, so concurrent test
# binaries wait for one build.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
out_root=${DCS_GO_TOOLS_DIR:-$root/target}

command -v go >/dev/null 2>&1 || { echo "go-tools: the go command is not installed (Go 1.26 or newer)" >&2; exit 2; }

# module_version MODULE DIR: the version DIR's go.mod pins MODULE at.
module_version() {
    (cd "$2" && go list -m -f '{{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}' "$1")
}

# build NAME LDFLAGS BIN=PACKAGE...: builds each PACKAGE of tests/NAME's module into target/NAME/bin/BIN.
build() {
    local name=$1 ldflags=$2
    shift 2
    local dir="$root/tests/$name" out="$out_root/$name/bin"
    mkdir -p "$out"
    exec 9>"$out/.lock"
    flock 9
    local stamp
    stamp=$( {
        cat "$dir/go.mod" "$dir/go.sum" "${BASH_SOURCE[0]}"
        # A directory's own Go sources (tests/gitops-health) are part of what is built.
        find "$dir" -name '*.go' -type f | LC_ALL=C sort | xargs -r cat
        echo "$ldflags $* $(go env GOVERSION GOOS GOARCH)"
    } | sha256sum | cut -d' ' -f1)
    local missing=0 spec
    for spec in "$@"; do [[ -x "$out/${spec%%=*}" ]] || missing=1; done
    if [[ $missing == 0 && -f "$out/.stamp" && "$(cat "$out/.stamp")" == "$stamp" ]]; then
        exec 9>&-
        return 0
    fi
    rm -f "$out/.stamp"
    local start=$SECONDS
    echo "go-tools: building $name ($*) into $out" >&2
    for spec in "$@"; do
        (cd "$dir" && GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0 \
            go build -p "${GO_BUILD_JOBS:-2}" -trimpath -ldflags "-s -w $ldflags" -o "$out/${spec%%=*}.tmp" "${spec#*=}")
        mv -f "$out/${spec%%=*}.tmp" "$out/${spec%%=*}"
    done
    echo "$stamp" >"$out/.stamp"
    echo "go-tools: built $name in $((SECONDS - start)) s" >&2
    exec 9>&-
}

build_kube_control_plane() {
    local dir="$root/tests/kube-control-plane" k8s etcd
    k8s=$(module_version k8s.io/kubernetes "$dir")
    etcd=$(module_version go.etcd.io/etcd/server/v3 "$dir")
    local minor=${k8s#v1.}
    minor=${minor%%.*}
    # As Kubernetes' own build stamps a release (hack/lib/version.sh): `kubectl version` and
    # /version then report it, and the API server's emulation version matches the binary's.
    local v ldflags=""
    for v in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        ldflags+=" -X $v.gitVersion=$k8s -X $v.gitMajor=1 -X $v.gitMinor=$minor"
        ldflags+=" -X $v.gitTreeState=clean -X $v.buildDate=1970-01-01T00:00:00Z"
    done
    ldflags+=" -X go.etcd.io/etcd/api/v3/version.GitSHA=module-${etcd}"
    build kube-control-plane "$ldflags" \
        etcd=go.etcd.io/etcd/server/v3 \
        kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver \
        kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager \
        kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler
}

build_helm() {
    local helm
    helm=$(module_version helm.sh/helm/v4 "$root/tests/helm")
    build helm "-X helm.sh/helm/v4/internal/version.version=$helm -X helm.sh/helm/v4/internal/version.gitTreeState=clean" \
        helm=helm.sh/helm/v4/cmd/helm
}

# The CRDs the chart's ServiceMonitor, PodMonitor and PrometheusRule need, as the Prometheus Operator
# generates them: controller-gen over the Go types of its published API module
# (github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring), so the API server of
# the test bed validates those objects against the genuine schemas. Regenerated when controller-gen
# is newer than them (a new go.mod builds a new one).
build_prometheus_crds() {
    local dir="$root/tests/prometheus-crds" out="$out_root/prometheus-crds" kind missing=0
    build prometheus-crds "" controller-gen=sigs.k8s.io/controller-tools/cmd/controller-gen
    for kind in servicemonitors podmonitors prometheusrules; do
        [[ "$out/crds/monitoring.coreos.com_$kind.yaml" -nt "$out/bin/controller-gen" ]] || missing=1
    done
    [[ $missing == 1 ]] || return 0
    rm -rf "$out/crds.tmp"
    (cd "$dir" && GOFLAGS="-mod=readonly" "$out/bin/controller-gen" crd:crdVersions=v1,maxDescLen=0 \
        paths=github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1 output:crd:dir="$out/crds.tmp")
    mkdir -p "$out/crds"
    for kind in servicemonitors podmonitors prometheusrules; do
        mv -f "$out/crds.tmp/monitoring.coreos.com_$kind.yaml" "$out/crds/"
    done
    rm -rf "$out/crds.tmp"
}

build_gitops_health() {
    build gitops-health "" gitops-health=./cmd/gitops-health
}

case "${1:-all}" in
kube-control-plane) build_kube_control_plane ;;
helm) build_helm ;;
prometheus-crds) build_prometheus_crds ;;
gitops-health) build_gitops_health ;;
all) build_kube_control_plane && build_helm && build_prometheus_crds && build_gitops_health ;;
*) echo "usage: $0 [kube-control-plane|helm|prometheus-crds|gitops-health|all]" >&2; exit 2 ;;
esac
