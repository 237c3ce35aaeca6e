#!/usr/bin/env bash
# Static checks of docker/*.Dockerfile (images cannot be built on the project's machines): every
# `cargo build` names a workspace package, binary and features that exist, Cargo.lock is current
# (the builds use --locked), the runner image leaves out the demo feature and so every test bed,
# the runtime stage copies the binary it built and runs it as a non-root user, and .dockerignore
# keeps target/ out of the build context. Resolves the dependency graph with cargo metadata/tree;
# builds nothing.
#
#   docker/check.sh           # one line per check, then `N passed, N failed`
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok   $1"; }
ko() {
    failed=$((failed + 1))
    echo "FAIL $1"
    [ -n "${2:-}" ] && sed 's/^/    /' <<<"$2" | head -30
    return 0
}

T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
if cargo metadata --format-version 1 --locked >"$T/metadata.json" 2>"$T/metadata.err"; then
    ok "Cargo.lock is current (cargo metadata --locked), as the images' --locked builds need"
else
    ko "Cargo.lock is current (cargo metadata --locked), as the images' --locked builds need" "$(cat "$T/metadata.err")"
fi

# check_dockerfile FILE PACKAGE BINARY NO_DEFAULT(yes|no)
check_dockerfile() {
    local file=$1 pkg=$2 bin=$3 no_default=$4 out
    if out=$("$PY" - "$file" "$pkg" "$bin" "$no_default" "$T/metadata.json" <<'EOF' 2>&1
import json, re, shlex, sys

path, pkg, binary, no_default, meta_path = sys.argv[1:]
text = open(path, encoding="utf-8").read()
joined = re.sub(r"\\\n", " ", text)
problems = []

builds = [l for l in joined.splitlines() if "cargo build" in l]
if len(builds) != 1:
    problems.append(f"expected one `cargo build`, found {len(builds)}")
else:
    words = shlex.split(builds[0][builds[0].index("cargo build"):].split("&&")[0])
    def opt(name):
        return words[words.index(name) + 1] if name in words else None
    for flag in ("--release", "--locked"):
        if flag not in words:
            problems.append(f"cargo build lacks {flag}")
    if opt("-p") != pkg:
        problems.append(f"cargo build -p {opt('-p')!r}, expected {pkg!r}")
    if opt("--bin") != binary:
        problems.append(f"cargo build --bin {opt('--bin')!r}, expected {binary!r}")
    if (no_default == "yes") != ("--no-default-features" in words):
        problems.append(f"--no-default-features expected: {no_default}")
    meta = json.load(open(meta_path))
    package = next((p for p in meta["packages"] if p["name"] == pkg), None)
    members = set(meta["workspace_members"])
    if package is None or package["id"] not in members:
        problems.append(f"{pkg} is not a workspace package")
    else:
        bins = [t["name"] for t in package["targets"] if "bin" in t["kind"]]
        if binary not in bins:
            problems.append(f"{pkg} has no binary {binary} (has {bins})")
        feats = opt("--features")
        for f in (feats.split(",") if feats else []):
            if f not in package["features"]:
                problems.append(f"{pkg} has no feature {f}")
        if "demo" in (feats.split(",") if feats else []):
            problems.append(f"{pkg}: the image must not build the `demo` feature (the emulator)")
    if f"target/release/{binary}" not in builds[0]:
        problems.append(f"the build stage does not take target/release/{binary}")

if not re.search(r"(?m)^FROM rust:1-bookworm AS build\s*$", text):
    problems.append("builder stage is not `FROM rust:1-bookworm AS build`")
froms = re.findall(r"(?m)^FROM\s+(\S+)", text)
if not froms or froms[-1] not in ("gcr.io/distroless/cc-debian12:nonroot", "debian:bookworm-slim"):
    problems.append(f"runtime stage is {froms[-1] if froms else None}")
if f"COPY --from=build /out/{binary} /usr/local/bin/{binary}" not in text:
    problems.append("the runtime stage does not copy the built binary to /usr/local/bin")
if f'ENTRYPOINT ["/usr/local/bin/{binary}"]' not in text:
    problems.append("ENTRYPOINT is not the binary")
users = re.findall(r"(?m)^USER\s+(\S+)", text)
if not users or users[-1].split(":")[0] in ("0", "root"):
    problems.append(f"the image does not end as a non-root USER: {users}")
if "LIBZ_SYS_STATIC=1" not in text and "distroless" in (froms[-1] if froms else ""):
    problems.append("distroless has no libz.so.1: build with LIBZ_SYS_STATIC=1")
if problems:
    print("\n".join(problems))
    sys.exit(1)
EOF
    ); then ok "$file: builds $pkg's $bin$([ "$no_default" = yes ] && echo ' without default features'), non-root runtime"
    else ko "$file" "$out"; fi
}
check_dockerfile docker/operator.Dockerfile dcs-operator dcs-operator no
check_dockerfile docker/runner.Dockerfile dcs-runner dcs-runner yes

# The dependency graph (normal edges, as built): no test bed gets into a default build or the
# image.
for spec in "dcs-runner" "dcs-runner --no-default-features" "dcs-operator"; do
    # shellcheck disable=SC2086
    if tree=$(cargo tree --locked -e normal,build --prefix none -p $spec 2>&1); then
        if bad=$(grep -E '^dcs-(doris-emu|kube-bed) ' <<<"$tree"); then
            ko "cargo tree -p $spec: no test bed in the build" "$bad"
        else
            ok "cargo tree -p $spec: no test bed in the build"
        fi
    else
        ko "cargo tree -p $spec resolves" "$tree"
    fi
done
# Only the `demo` feature brings the emulator in (for `cargo run -p dcs-runner --features demo -- demo`).
if cargo tree --locked -e normal --prefix none -p dcs-runner --features demo 2>/dev/null | grep -q '^dcs-doris-emu '; then
    ok "dcs-runner --features demo holds the demo emulator"
else
    ko "dcs-runner --features demo holds the demo emulator"
fi

if [ -f .dockerignore ] && grep -Eq '^/?target/?$' .dockerignore; then
    ok ".dockerignore keeps target/ out of the build context"
else
    ko ".dockerignore keeps target/ out of the build context"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
