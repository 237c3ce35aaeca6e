#!/usr/bin/env bash
# curl against an emulator serving TLS (run.sh starts it with --tls-self-signed): /api/tso and the
# statement API over https with --cacert, Stream Load with --location-trusted through the FE's 307
# to the BE (which must say https://), then the refusals: a wrong CA and plaintext http.
# Needs FE=host:port, EMU_BE_HTTP_PORT, EMU_TLS_CA and EMU_WRONG_CA; prints "N passed, M failed".
set -uo pipefail
: "${FE:?set FE=host:port of the FE HTTP port}"
: "${EMU_TLS_CA:?set EMU_TLS_CA to the CA that signed the emulator certificate}"
: "${EMU_WRONG_CA:?set EMU_WRONG_CA to a CA that did not}"
pass=0
fail=0
run=$(date +%s%N)
DB=tls_curl
TBL=t_$run
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
C=(curl -sS --cacert "$EMU_TLS_CA")

check() { # name expected actual
    if [ "$2" == "$3" ]; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        printf 'FAIL %s\n  expected: %s\n  actual:   %s\n' "$1" "$2" "$3"
    fi
}

stmt() { # db sql -> response body
    "${C[@]}" -u root: -H "Content-Type: application/json" \
        -d "$(jq -cn --arg s "$2" '{stmt: $s}')" "https://$FE/api/query/default_cluster/$1"
}

check "emulator says tls" "true" "${EMU_TLS:-}"

out=$("${C[@]}" -u root: "https://$FE/api/tso")
check "tso over https" "0 success" "$(jq -r '"\(.code) \(.msg)"' <<<"$out")"
check "tso is a number" "true" "$(jq -r '.data.current_tso > 0' <<<"$out")"

out=$(stmt information_schema "CREATE DATABASE IF NOT EXISTS $DB")
check "create database" "0" "$(jq -r .code <<<"$out")"
out=$(stmt "$DB" "CREATE TABLE $DB.$TBL (id INT NOT NULL, name VARCHAR(32)) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 2 PROPERTIES ('replication_num'='1')")
check "create table" "0 exec_status" "$(jq -r '"\(.code) \(.data.type)"' <<<"$out")"

# The FE's 307, read without following it.
code=$("${C[@]}" -u root: -H "Expect:100-continue" -H "label:peek_$run" -X PUT -o /dev/null \
    -D "$tmp/headers" -w '%{http_code}' "https://$FE/api/$DB/$TBL/_stream_load")
check "307 from the FE" "307" "$code"
check "Location: the BE over https" \
    "https://root:@$EMU_HOST:$EMU_BE_HTTP_PORT/api/$DB/$TBL/_stream_load?" \
    "$(tr -d '\r' <"$tmp/headers" | sed -n 's/^[Ll]ocation: //p')"

printf '1,alice\n2,bob\n3,carol\n' >"$tmp/data.csv"
out=$("${C[@]}" --location-trusted -u root: -H "Expect:100-continue" -H "label:tls_$run" \
    -H "column_separator:," -T "$tmp/data.csv" -w '\n%{url_effective}' \
    "https://$FE/api/$DB/$TBL/_stream_load")
body=$(head -n -1 <<<"$out")
check "load status" "Success" "$(jq -r .Status <<<"$body")"
check "load rows" "3" "$(jq -r .NumberLoadedRows <<<"$body")"
case "$(tail -n1 <<<"$out")" in
    https://*:"$EMU_BE_HTTP_PORT"/api/*) check "load landed on the BE over https" ok ok ;;
    *) check "load landed on the BE over https" "https://…:$EMU_BE_HTTP_PORT/api/…" "$(tail -n1 <<<"$out")" ;;
esac
out=$(stmt "$DB" "SELECT COUNT(*) FROM $DB.$TBL")
check "rows visible" "3" "$(jq -r '.data.data[0][0]' <<<"$out")"

# --- refusals
curl -sS --cacert "$EMU_WRONG_CA" -u root: "https://$FE/api/tso" >/dev/null 2>"$tmp/err"
check "wrong CA: curl exit 60 (certificate problem)" "60" "$?"
curl -sS --cacert "$EMU_WRONG_CA" -u root: "https://$EMU_HOST:$EMU_BE_HTTP_PORT/api/_load_error_log?file=x" >/dev/null 2>"$tmp/err"
check "wrong CA on the BE: curl exit 60" "60" "$?"
out=$(curl -sS -m 10 -u root: "http://$FE/api/tso" 2>&1)
rc=$?
check "plaintext http to the TLS port fails" "failed" "$([ "$rc" -ne 0 ] && echo failed || echo "answered: $out")"
# and the port still serves TLS afterwards
out=$("${C[@]}" -u root: "https://$FE/api/tso")
check "tso after the refusals" "0" "$(jq -r .code <<<"$out")"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
