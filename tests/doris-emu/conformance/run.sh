#!/usr/bin/env bash
# Starts the dcs-doris-emu binary on free ports and runs every conformance script against it:
# third-party clients (mysql CLI, pymysql, curl, pyarrow Flight, ADBC Flight SQL) talking to the
# emulator exactly as they would talk to Doris. Each script starts from a fresh emulator.
# Scripts named tls_* get an emulator serving TLS on every port (--tls-self-signed), with
# EMU_TLS_CA (the CA that signed its certificate) and EMU_WRONG_CA (one that did not).
# Prints one line per script and "N passed, N failed" at the end; exits non-zero on any failure.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
cd "$root"
CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-2} cargo build --quiet -p dcs-doris-emu --bin dcs-doris-emu || exit 1
bin="$root/target/debug/dcs-doris-emu"
PY=${PYTHON:-python3}

start_emu() { # ports-file [extra flags]
    local out=$1
    shift
    "$bin" --fe-http-port 0 --be-http-port 0 --query-port 0 --fe-flight-port 0 --be-flight-port 0 \
        "$@" >"$out" 2>"$out.log" &
    emu_pid=$!
    for _ in $(seq 1 100); do
        [ -s "$out" ] && break
        sleep 0.1
    done
    if ! [ -s "$out" ]; then
        echo "emulator did not start:"; cat "$out.log"; return 1
    fi
    local line; line=$(head -n1 "$out")
    export EMU_HOST=127.0.0.1
    EMU_FE_HTTP_PORT=$(jq -r .fe_http_port <<<"$line"); export EMU_FE_HTTP_PORT
    EMU_BE_HTTP_PORT=$(jq -r .be_http_port <<<"$line"); export EMU_BE_HTTP_PORT
    EMU_QUERY_PORT=$(jq -r .query_port <<<"$line"); export EMU_QUERY_PORT
    EMU_FE_FLIGHT_PORT=$(jq -r .fe_flight_port <<<"$line"); export EMU_FE_FLIGHT_PORT
    EMU_BE_FLIGHT_PORT=$(jq -r .be_flight_port <<<"$line"); export EMU_BE_FLIGHT_PORT
    EMU_TLS=$(jq -r .tls <<<"$line"); export EMU_TLS
    export FE="$EMU_HOST:$EMU_FE_HTTP_PORT"
}

passed=0
failed=0
failures=()
tmp=$(mktemp -d)
trap 'kill ${emu_pid:-} 2>/dev/null; rm -rf "$tmp"' EXIT

# A CA the TLS emulators' certificates do not chain to, for the tls_* scripts' refusals.
if start_emu "$tmp/wrong.ports" --tls-self-signed "$tmp/wrong-pki"; then
    export EMU_WRONG_CA="$tmp/wrong-pki/ca.pem"
fi
kill "${emu_pid:-}" 2>/dev/null
wait "${emu_pid:-}" 2>/dev/null

for script in "$here"/*.sh "$here"/*.py; do
    name=$(basename "$script")
    [ "$name" = "run.sh" ] && continue
    [ -e "$script" ] || continue
    extra=()
    case "$name" in
        tls_*)
            extra=(--tls-self-signed "$tmp/$name.pki")
            export EMU_TLS_CA="$tmp/$name.pki/ca.pem"
            ;;
    esac
    start_emu "$tmp/$name.ports" "${extra[@]}" || { failed=$((failed+1)); failures+=("$name (emulator start)"); continue; }
    case "$script" in
        *.py) cmd=("$PY" "$script") ;;
        *) cmd=(bash "$script") ;;
    esac
    if timeout 300 "${cmd[@]}" >"$tmp/$name.out" 2>&1; then
        passed=$((passed+1))
        echo "conformance $name: ok ($(tail -n1 "$tmp/$name.out"))"
    else
        failed=$((failed+1))
        failures+=("$name")
        echo "conformance $name: FAILED"
        sed 's/^/    /' "$tmp/$name.out" | tail -n 40
        echo "    --- emulator log (tail)"
        tail -n 20 "$tmp/$name.ports.log" | sed 's/^/    /'
    fi
    kill "$emu_pid" 2>/dev/null
    wait "$emu_pid" 2>/dev/null
done

echo "conformance: $passed passed, $failed failed"
[ "$failed" -eq 0 ] || { printf 'failed: %s\n' "${failures[@]}"; exit 1; }
