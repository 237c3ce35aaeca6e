#!/usr/bin/env bash
# The fuzz targets of dcs (tests/fuzz/fuzz_targets): every parser of outside input, driven by
# libFuzzer through cargo fuzz. The code is safe Rust, so no sanitizer is used: what a target
# looks for is a panic (an overflow included: the build keeps overflow checks) or a broken
# round trip. Each target starts from its committed corpus (tests/fuzz/corpus/<target>, made
# smaller with `cargo fuzz cmin`) and the inputs that once failed (tests/fuzz/regressions/
# <target>), and runs for DCS_FUZZ_SECONDS (default 20); new inputs go to a scratch copy, so the
# repository is not written to.
#
#   tests/fuzz/run.sh                 every target, DCS_FUZZ_SECONDS each
#   tests/fuzz/run.sh labels          one target
#   DCS_FUZZ_SECONDS=600 tests/fuzz/run.sh   a long run (RELIABILITY.md records one)
#
# A failing input is written to tests/fuzz/artifacts/<target>/ (not committed) and the script
# exits non-zero, naming the command that runs it again. cargo-fuzz is installed from crates.io
# when missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-2}
seconds=${DCS_FUZZ_SECONDS:-20}
cargo_fuzz_version=0.13.2

if ! cargo fuzz --version 2>/dev/null | grep -q "$cargo_fuzz_version"; then
    echo "== installing cargo-fuzz $cargo_fuzz_version"
    cargo install --locked "cargo-fuzz@$cargo_fuzz_version"
fi

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(cargo fuzz list --fuzz-dir tests/fuzz)
fi

echo "== building ${#targets[@]} fuzz targets"
for t in "${targets[@]}"; do
    cargo fuzz build --fuzz-dir tests/fuzz -s none "$t"
done

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
status=0
for t in "${targets[@]}"; do
    mkdir -p "$scratch/$t" "tests/fuzz/artifacts/$t"
    for seeds in "tests/fuzz/corpus/$t" "tests/fuzz/regressions/$t"; do
        if [ -d "$seeds" ]; then
            cp -r "$seeds/." "$scratch/$t/"
        fi
    done
    log="$scratch/$t.log"
    if cargo fuzz run --fuzz-dir tests/fuzz -s none "$t" "$scratch/$t" -- \
        -max_total_time="$seconds" -print_final_stats=1 \
        -artifact_prefix="tests/fuzz/artifacts/$t/" >"$log" 2>&1; then
        runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
        echo "fuzz $t: ${seconds}s, $runs executions, no failure"
    else
        status=1
        echo "fuzz $t: FAILED"
        grep -E "panicked|SUMMARY|Test unit written" "$log" || tail -20 "$log"
        echo "run it again: cargo fuzz run --fuzz-dir tests/fuzz -s none $t tests/fuzz/artifacts/$t/<file>"
    fi
done
exit $status
