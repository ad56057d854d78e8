#!/usr/bin/env bash
# `make bench`: every benchmark case next to its baseline in one run, one
# summary table. Builds bin/api, starts the private dev services, lets the
# geofence bench load the demo data into its bench database once (the seed
# comparison reuses it), runs the cases one after the other on an otherwise
# idle machine, keeps each case's full output in bench/results/<case>.txt and
# writes the summary to bench/results/latest.md and to a dated copy that the
# next run keeps, bench/results/<UTC date and time>.md (2026-12-01T1530Z.md),
# then prints it.
#   BENCH_QUICK=1    short smoke run (1 trial, short durations, no auth case)
#   BENCH_PROFILE=1  profiles of `api serve` under each seed-comparison load:
#                    Go CPU and allocation profiles through PPROF_ADDR
#                    (bench/results/api-<case>.{cpu,allocs}.prof, top 25 in
#                    api-<case>.{cpu,allocs}.top.txt) and perf call graphs
#                    with the kernel side (api-<case>.perf.prof,
#                    api-<case>.top.txt); a Go CPU profile of the tile bench
#                    (bench/results/tiles.cpu.prof).
#   BENCH_TRIALS (3), BENCH_DUR (4s), BENCH_CONC (32) set the trials per
#   side, the duration of each trial and the HTTP concurrency;
#   BENCH_TILES_DUR (3s) the duration of each tile trial (six tile sets);
#   BENCH_FEATURES_CONC (8) the concurrency of the items pages of 1,000.
#   BENCH_CASES="ratelimit replicas" runs only those cases; the summary
#   then takes the other cases' rows from their last full output in
#   bench/results/<case>.txt and says so.
set -euo pipefail
cd "$(dirname "$0")/.."

trials=${BENCH_TRIALS:-3}
dur=${BENCH_DUR:-3s}
conc=${BENCH_CONC:-32}
tdur=${BENCH_TILES_DUR:-3s}
cases=(ratelimit geofence tiles features replicas overload events seed caller import auth)
if [ "${BENCH_QUICK:-}" = 1 ]; then
  trials=1; dur=1s; tdur=1s; cases=(ratelimit geofence tiles features replicas overload events seed caller import)
fi
if [ -n "${BENCH_CASES:-}" ]; then
  read -r -a cases <<<"$BENCH_CASES"
fi
start=$(date +%s)
# Read now: by the time the summary is written the run itself has loaded
# the machine.
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

# The dev services without their replica: a standby replaying the primary's
# WAL takes CPU from every case that writes (a tenth of the machine under
# the events case). Only the replicas case has it, for its own run.
env_lines=$(scripts/services.sh start dev)
DATABASE_URL=$(echo "$env_lines" | sed -n 's/^DATABASE_URL=//p')
REDIS_URL=$(echo "$env_lines" | sed -n 's/^REDIS_URL=//p')
unset DATABASE_REPLICA_URL
export DATABASE_URL REDIS_URL TEST_DATABASE_URL=$DATABASE_URL TEST_REDIS_URL=$REDIS_URL
echo "== building bin/api and the bench drivers" >&2
go build -o bin/api ./cmd/api
go build -o bin/load ./bench/load
mkdir -p bench/results
rm -f bench/results/*.prof bench/results/api-*.top.txt

run_case() { # name command...
  local name=$1; shift
  echo "== $name" >&2
  local t0; t0=$(date +%s)
  "$@" 2>&1 | tee "bench/results/$name.txt"
  echo "($name took $(($(date +%s) - t0)) s)" >&2
}

for c in "${cases[@]}"; do
  case $c in
    ratelimit) RL_DUR=$dur RL_RUNS=$trials run_case ratelimit bench/ratelimit.sh ;;
    geofence)  GEOFENCE_CONC=${BENCH_GEOFENCE_CONC:-8,$conc} GEOFENCE_DUR=$dur GEOFENCE_RUNS=$trials run_case geofence bench/geofence.sh ;;
    tiles)     TILES_DUR=$tdur TILES_RUNS=$trials TILES_CPUPROFILE=${BENCH_PROFILE:+bench/results/tiles.cpu.prof} run_case tiles bench/tiles.sh ;;
    features)  FEATURES_CONC=${BENCH_FEATURES_CONC:-8} FEATURES_DUR=$dur FEATURES_RUNS=$trials FEATURES_OGR_TRIALS=$trials run_case features bench/features.sh ;;
    replicas)  REPLICAS_CONC=8,$conc REPLICAS_DUR=$dur REPLICAS_RUNS=$trials run_case replicas bench/replicas.sh
               scripts/services.sh start dev >/dev/null ;; # stops the replica
    overload)  OVERLOAD_DUR=$dur OVERLOAD_RUNS=$trials run_case overload bench/overload.sh ;;
    events)    EVENTS_DUR=$dur EVENTS_RUNS=$trials run_case events bench/events.sh ;;
    seed)      SEED_CONC=$conc SEED_DUR=$dur SEED_TRIALS=$trials run_case seed bench/seed.sh ;;
    caller)    CALLER_CONC=$conc CALLER_DUR=$dur CALLER_TRIALS=$(( trials < 3 ? trials : 5 )) run_case caller bench/caller.sh ;;
    import)    IMPORT_TRIALS=$trials run_case import bench/import.sh ;;
    auth)      run_case auth bench/auth.sh ;;
  esac
done
took=$(($(date +%s) - start))

# The summary: one row per case, figures taken from each case's output.
# One moment names the run in the heading and in the dated file's name.
r=bench/results
now=$(date -u +%s)
num() { awk -v x="$1" 'BEGIN { printf "%\047.0f", x }'; }
{
  echo "# geogate benchmark, $(date -u -d "@$now" +%Y-%m-%dT%H:%MZ)"
  echo
  echo "Machine: $(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), load before the run $load_before, $took s in all."
  echo "Medians of $trials alternating trials per side ($dur each, HTTP concurrency $conc); min-max in brackets where the case prints it."
  if [ -n "${BENCH_CASES:-}" ]; then
    echo "This run measured only: ${cases[*]}. Every other row comes from that case's last run, kept in bench/results/<case>.txt."
  fi
  echo
  echo "| case | geogate | baseline (same run) | ratio | goal | met |"
  echo "|---|---|---|---|---|---|"
  if [ -s $r/ratelimit.txt ]; then
    awk -F'|' '
      /log.lua via go-redis Script.Run/ { raw=$3+0; rawp=$5+0 }
      /ratelimit.Limiter.Allow \|/ { lim=$3+0; limp=$5+0 }
      /Options.Pipeline/ { pip=$3+0; pipp=$5+0; name=$2 }
      /commands sent by the client/ { rt=$3+0 }
      /bare log.lua with the day/ { qraw=$3+0; qrawp=$5+0 }
      /Limiter.Allow, 2 windows and 1d@calendar/ { qlim=$3+0; qlimp=$5+0 }
      /Limiter.Allow, no tallies/ { tno=$3+0 }
      /Limiter.Allow, tallied per identity/ { tyes=$3+0; tyesp=$5+0 }
      /^CPU per decision/ && cpu == "" { cpu = $0; sub(/^CPU per decision, microseconds: /, "", cpu) }
      END {
        printf "| limiter decisions/s (concurrency 50, 1,000 identities) | %.0f, p99 %.2f ms | bare Lua script through go-redis: %.0f, p99 %.2f ms | %.0f%% | at least 90%% | %s |\n", lim, limp, raw, rawp, 100*lim/raw, (lim >= 0.9*raw) ? "yes" : "no"
        if (pip > 0) printf "| limiter, decisions pipelined (%s) | %.0f, p99 %.2f ms | the same bare script, unpipelined: %.0f | %.2fx | above 1x, ideally 2x, p99 under 2 ms | %s |\n", substr(name, index(name, "Pipeline"), 11), pip, pipp, raw, pip/raw, (pip > raw && pipp < 2) ? "yes" : "no"
        if (qraw > 0) printf "| limiter decisions/s, 2 sliding windows and a daily calendar quota | %.0f, p99 %.2f ms | the same log.lua, keys and arguments through go-redis: %.0f, p99 %.2f ms | %.0f%% | at least 90%% | %s |\n", qlim, qlimp, qraw, qrawp, 100*qlim/qraw, (qlim >= 0.9*qraw) ? "yes" : "no"
        if (tno > 0) printf "| limiter decisions/s with per-key usage tallies (the policy above) | %.0f, p99 %.2f ms | the same limiter without tallies: %.0f | %.0f%% | at least 90%% | %s |\n", tyes, tyesp, tno, 100*tyes/tno, (tyes >= 0.9*tno) ? "yes" : "no"
        printf "| Redis round trips per limited decision | %.3f | | | exactly 1 | %s |\n", rt, (rt == 1) ? "yes" : "no"
        if (cpu != "") printf "| CPU per limiter decision, microseconds in the driver and in Redis | %s | | | | |\n", cpu
      }' $r/ratelimit.txt
  fi
  if [ -s $r/geofence.txt ]; then
    awk '
      $1 == "range" && $2 != "containment" && $2 != "layercontains" { ar = $5; sr = $7; hr = $9 }
      $1 == "range" && $2 == "containment" { car = $4; csr = $6; cnr = $8 }
      $2 == "m" && $4 == "|" {
        api=$5; ap=$7; sql=$9; sp=$11; ratio=api/sql
        printf "| `/within` %s km, concurrency %s | %.0f req/s (%s), p99 %.2f ms | the same SQL through pgx: %.0f q/s (%s), p99 %.2f ms; the handler alone, no auth or limiter: %.0f (%s) | %.0f%% rate, %.1fx p99 | 80%% of the rate, p99 within 1.5x | %s |\n", $1/1000, $3, api, ar, ap, sql, sr, sp, $15, hr, 100*ratio, ap/sp, (ratio >= 0.8 && ap <= 1.5*sp) ? "yes" : "no"
      }
      $1 == "cpu" { r = $2; c = $3; sub(/^cpu [0-9]+ [0-9]+ us\/request: /, ""); printf "| CPU per `/within` request, %s km, concurrency %s (microseconds, by process) | %s | | | | |\n", r/1000, c, $0 }
      $1 == "apicpu" {
        printf "| API process CPU per `/within`, %s km, concurrency %s | %d us | bare pgx %d us + loopback HTTP floor %d us (plain net/http in a process of its own, %.0f req/s); the lean path (bare Gin, the limiter, the handler) %d us, without the limiter %d us, the same statement through plain net/http and pgx %d us | %.1fx | at most 1.5x (%d us) | %s |\n", $2/1000, $3, $5, $7, $9, $17, $11, $13, $19, $5/($7+$9), $15, ($5 <= $15) ? "yes" : "no"
      }
      $1 == "mercator" {
        printf "| `/within` %s km on a Web Mercator layer (the cities in EPSG:3857) | %.0f req/s, p99 %.2f ms | the same SQL through pgx: %.0f q/s, p99 %.2f ms | %.0f%% | 80%% of the rate | %s |\n", $2/1000, $5, $8, $12, $15, 100*$5/$12, ($5 >= 0.8*$12) ? "yes" : "no"
      }
      $1 == "geography" {
        printf "| `/within` %s km SQL on places through its geometry index | %.0f q/s, p99 %.2f ms | the former query through a geography index: %.0f q/s, p99 %.2f ms | %.2fx | no slower (at least 0.97x, the run-to-run noise) | %s |\n", $2/1000, $5, $8, $12, $15, $5/$12, ($5 >= 0.97*$12) ? "yes" : "no"
      }
      /^API POST \/geofences\/contains/ { a=$(NF-1) }
      /^SQL, subdivided parts/ { s=$(NF-1) }
      /^SQL, naive/ { n=$(NF-1) }
      $1 == "range" && $2 == "layercontains" { lar = $4; lfr = $6; lsr = $8 }
      /^Layer API POST/ { la=$(NF-1) }
      /^Fences API POST/ { lf=$(NF-1) }
      /^Layer SQL/ { ls=$(NF-1) }
      END {
        if (a) printf "| batch point-in-fence, 1,000 points per request, concurrency 4 | %.0f points/s (%s) | the same SQL: %.0f (%s); naive `ST_Intersects`: %.0f (%s) | %.0f%% of the SQL, %.1fx naive | | |\n", a, car, s, csr, n, cnr, 100*a/s, a/n
        if (la) printf "| batch point-in-polygon on a team'"'"'s layer (countries in EPSG:3857, subdivided copy), 1,000 points per request, concurrency 4 | %.0f points/s (%s) | the demo fences through the API: %.0f (%s); the layer'"'"'s SQL through pgx: %.0f (%s) | %.0f%% of the fences, %.0f%% of the SQL | as fast as the fences (at least 90%%) | %s |\n", la, lar, lf, lfr, ls, lsr, 100*la/lf, 100*la/ls, (la >= 0.9*lf) ? "yes" : "no"
      }
    ' $r/geofence.txt
  fi
  if [ -s $r/tiles.txt ]; then
    awk '
      /^loopback HTTP floor/ {
        split(substr($0, index($0, "): ") + 3), f, " ")
        printf "| loopback HTTP floor: a plain net/http handler answering 200 bytes, 8 clients, same load client | %.0f req/s, p99 %.2f ms, %d microseconds per request in the driver (client and server) | | | | |\n", f[1], f[4], f[7]
      }
      $2 ~ /^z[0-9]+$/ && $3 == "|" {
        printf "| cold tiles, %s %s, 8 clients | %.0f tiles/s, p99 %.2f ms | the same tile SQL through pgx: %.0f, p99 %.2f ms | %.0f%% | at least 80%% | %s |\n", $1, $2, $4, $5, $7, $8, 100*$4/$7, ($4 >= 0.8*$7) ? "yes" : "no"
        printf "| cached tiles, %s %s | 8 clients: %.0f tiles/s, p99 %.2f ms; 1 client: %.0f tiles/s, p99 %.2f ms | | | p99 under 2 ms | %s |\n", $1, $2, $12, $13, $15, $16, ($16 < 2) ? ($13 < 2 ? "yes" : "1 client: yes") : "no"
      }
      $1 == "composite" {
        printf "| cold composite tiles, %s %s, 8 clients | %.0f tiles/s, p99 %.2f ms | both layers'"'"' tile SQL through pgx, one after the other: %.0f, p99 %.2f ms | %.0f%% | at least 80%% | %s |\n", $2, $3, $5, $8, $12, $15, 100*$5/$12, ($5 >= 0.8*$12) ? "yes" : "no"
      }' $r/tiles.txt
  fi
  if [ -s $r/features.txt ]; then
    awk '
      ($1 == "items" || $1 == "filtered") && $3 == "|" { k = $1 " " $2; keys[++n] = k; row[k] = $0 }
      $1 == "range" && ($2 == "items" || $2 == "filtered") { api[$2 " " $3] = $5; sql[$2 " " $3] = $7 }
      ($1 == "bbox+count" || $1 == "bbox" || $1 == "bbox+former") && $3 == "|" { bbox[$1 " " $2] = $0; if ($1 == "bbox") bconc[++nb] = $2 }
      /^filtered: not measured/ { refused = 1 }
      $1 == "copy" { copy = $0 }
      END {
        for (i = 1; i <= n; i++) {
          k = keys[i]; split(row[k], f, " ")
          if (f[1] == "items")
            printf "| items pages of 1,000 places, every page of the layer through its next links, concurrency %s | %.1f pages/s (%s), %.0f features/s, p50 %.1f ms, p99 %.1f ms | the same statements (`ItemsSQL`) through pgx: %.1f pages/s (%s), %.0f features/s, p50 %.1f ms, p99 %.1f ms | %.0f%% | at least 80%% | %s |\n", f[2], f[4], api[k], f[5], f[6], f[7], f[9], sql[k], f[10], f[11], f[12], 100*f[4]/f[9], (f[4] >= 0.8*f[9]) ? "yes" : "no"
          else
            printf "| items pages of 1,000 places filtered by a CQL2 `S_INTERSECTS` with a polygon of Germany, concurrency %s | %.1f pages/s (%s), %.0f features/s, p50 %.1f ms, p99 %.1f ms | the same statements (`ItemsSQL`) through pgx: %.1f pages/s (%s), %.0f features/s, p50 %.1f ms, p99 %.1f ms | %.0f%% | | |\n", f[2], f[4], api[k], f[5], f[6], f[7], f[9], sql[k], f[10], f[11], f[12], 100*f[4]/f[9]
        }
        for (i = 1; i <= nb; i++) {
          bc = bconc[i]; split(bbox["bbox+count " bc], f, " "); split(bbox["bbox " bc], g, " ")
          h[9] = 0; if (("bbox+former " bc) in bbox) split(bbox["bbox+former " bc], h, " ")
          if (h[9] > 0)
            printf "| items first pages of a 5 degree box (limit 1,000), `numberMatched` counted up to `FEATURES_COUNT_MAX`, concurrency %s | %.1f pages/s, p50 %.1f ms, p99 %.1f ms | the former page statement (properties built before the sort) with the count of every match: %.1f pages/s; today'"'"'s page statement with it: %.1f; alone: %.1f | %.2fx the former with its count (%.2fx today'"'"'s with it, %.2fx alone) | at least 1.5x the former with its count | %s |\n", bc, f[4], f[6], f[7], h[9], f[9], g[9], f[4]/h[9], f[4]/f[9], f[4]/g[9], (f[4] >= 1.5*h[9]) ? "yes" : "no"
          else
            printf "| items first pages of a 5 degree box (limit 1,000), `numberMatched` counted up to `FEATURES_COUNT_MAX`, concurrency %s | %.1f pages/s, p50 %.1f ms, p99 %.1f ms | the page statement with the count of every match: %.1f pages/s; the page statement alone: %.1f pages/s | %.2fx with the count, %.2fx alone | at least 1.5x with the count | %s |\n", bc, f[4], f[6], f[7], f[9], g[9], f[4]/f[9], f[4]/g[9], (f[4] >= 1.5*f[9]) ? "yes" : "no"
        }
        if (refused) print "| items pages filtered by a CQL2 spatial predicate | not measured: the service refuses filters (400) | | | | |"
        if (copy != "") {
          split(copy, c, " ")
          floor = (c[23] == "floor") ? sprintf("; GDAL reading the same features from a local GeoJSON file: %.2f s %s (%.2fx)", c[24], c[26], c[29]) : ""
          if (c[36] == "client") floor = floor sprintf("; GDAL'"'"'s own CPU in the copy through geogate: %.2f s, so no server could make it faster than %.2fx", c[37], c[41])
          printf "| copy of places (%s features) into a GeoPackage with `ogr2ogr` through geogate (OAPIF, PAGE_SIZE 1000, next pages read ahead) | %.2f s %s | `ogr2ogr` straight from PostgreSQL, the same columns: %.2f s %s%s | %.2fx the speed | at least 0.6x | %s |\n", c[2], c[7], c[9], c[12], c[14], floor, c[17], (c[17] >= 0.6) ? "yes" : "no"
        }
      }' $r/features.txt
  fi
  if [ -s $r/replicas.txt ]; then
    awk -F'|' '$2 ~ /^ [0-9]+ $/ && NF >= 6 {
        printf "| `/within` 1 km with reads on a streaming replica (`DATABASE_REPLICA_URLS`), concurrency %d | %s | the same service reading the primary alone: %s | %s | none: on 2 shared cores the replica adds no capacity; this is the routing cost | |\n", $2, $4, $3, $5
      }' $r/replicas.txt
  fi
  if [ -s $r/overload.txt ]; then
    awk '
      /^RESULT overload / {
        for (i = 3; i <= NF; i++) { split($i, kv, "="); v[$3 "," kv[1]] = kv[2] }
      }
      /^RESULT overload-/ {
        for (i = 3; i <= NF; i++) { split($i, kv, "="); w[$2 "," $3 "," kv[1]] = kv[2] }
        if ($3 == "side=on") cases[$2] = 1
      }
      END {
        on = "side=on"; off = "side=off"
        if (v[on ",light_p99"] == "" || v[off ",light_p99"] == "") exit
        load = sprintf("%s light keys at %s req/s each, open loop, `/within` 1 km, beside %s heavy keys (%s closed-loop clients: `/within` 20 km, items pages of 1,000, cold z4-z5 tiles) each within its limits", v[on ",light_keys"], v[on ",light_rate"], v[on ",heavy_keys"], v[on ",heavy_conc"])
        p99 = v[on ",light_p99"]; alone = v[on ",unloaded_p99"]
        printf "| overload, fair share on (`DB_FAIR_SHARE`): %s | light p50 %s ms, p99 %s ms (%s), %s%% 2xx | the same light load alone: p99 %s ms; fair share off: p50 %s ms, p99 %s ms (%s), %s%% 2xx | p99 %.1fx alone (off: %.1fx) | light p99 within 2x of alone | %s |\n", load, v[on ",light_p50"], p99, v[on ",light_p99_range"], v[on ",light_ok"], alone, v[off ",light_p50"], v[off ",light_p99"], v[off ",light_p99_range"], v[off ",light_ok"], p99/alone, v[off ",light_p99"]/v[off ",unloaded_p99"], (p99 <= 2*alone) ? "yes" : "no"
        printf "| overload: light callers answered 2xx, fair share on | %s%% | fair share off: %s%% | | at least 99%% | %s |\n", v[on ",light_ok"], v[off ",light_ok"], (v[on ",light_ok"] >= 99) ? "yes" : "no"
        for (c in cases) {
          on = c ",side=on"; off = c ",side=off"
          if (w[off ",light_p99"] == "") continue
          if (c == "overload-machine") {
            printf "| overload-machine: the same light load beside %s processes that only burn CPU, no heavy callers, nothing on the database | light p99 %s ms (%s), fair share off %s ms | alone: p99 %s ms, off %s ms | p99 %.1fx alone (off: %.1fx) | none: the floor the 2 shared cores set under the 2x goal | |\n", w[on ",spin"], w[on ",light_p99"], w[on ",light_p99_range"], w[off ",light_p99"], w[on ",unloaded_p99"], w[off ",unloaded_p99"], w[on ",light_p99"]/w[on ",unloaded_p99"], w[off ",light_p99"]/w[off ",unloaded_p99"]
            continue
          }
          what = (c == "overload-spread") ? "the heavy load spread over " w[on ",heavy_keys"] " keys of one account" : "beside a second application running heavy statements straight on the database (light alone: beside it too)"
          p99 = w[on ",light_p99"]; alone = w[on ",unloaded_p99"]
          printf "| %s, fair share on: %s | light p50 %s ms, p99 %s ms (%s), %s%% 2xx; db %s commits/s | alone: p99 %s ms; fair share off: p99 %s ms, %s%% 2xx; db %s commits/s | p99 %.1fx alone (off: %.1fx); db %.0f%% | light p99 within 2x of alone, 99%% 2xx, db 90%% | %s |\n", c, what, w[on ",light_p50"], p99, w[on ",light_p99_range"], w[on ",light_ok"], w[on ",db_qps"], alone, w[off ",light_p99"], w[off ",light_ok"], w[off ",db_qps"], p99/alone, w[off ",light_p99"]/w[off ",unloaded_p99"], 100*w[on ",db_qps"]/w[off ",db_qps"], (p99 <= 2*alone && w[on ",light_ok"] >= 99 && w[on ",db_qps"] >= 0.9*w[off ",db_qps"]) ? "yes" : "no"
        }
        on = "side=on"; off = "side=off"
        printf "| overload: database work (`pg_stat_database.xact_commit`), fair share on | %s commits/s (%s), PostgreSQL %s cores; heavy %s req/s 2xx, %s shed (503) per trial | fair share off: %s commits/s (%s), %s cores; heavy %s req/s, %s shed | %.0f%% | at least 90%% | %s |\n", v[on ",db_qps"], v[on ",db_qps_range"], v[on ",pg_cores"], v[on ",heavy_rps"], v[on ",heavy_shed"], v[off ",db_qps"], v[off ",db_qps_range"], v[off ",pg_cores"], v[off ",heavy_rps"], v[off ",heavy_shed"], 100*v[on ",db_qps"]/v[off ",db_qps"], (v[on ",db_qps"] >= 0.9*v[off ",db_qps"]) ? "yes" : "no"
      }' $r/overload.txt
  fi
  if [ -s $r/events.txt ]; then
    awk '
      /^RESULT events/ { for (i = 3; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] } }
      END {
        if (v["api_pps"] == "") exit
        printf "| geofence events: positions accepted and evaluated, batches of 100, against %s polygon fences, every transition committed, %s clients | %s positions/s, p99 %s ms per batch | the same batches through `events.Service.Report` over pgx: %s positions/s, p99 %s ms | %.0f%% | at least 10,000 positions/s | %s |\n", v["fences"], v["conc"], v["api_pps"], v["api_p99"], v["direct_pps"], v["direct_p99"], 100*v["api_pps"]/v["direct_pps"], (v["api_pps"] >= 10000) ? "yes" : "no"
        if (v["pip_pps"] > 0) printf "| geofence events: the same positions, against the point-in-polygon statement alone | %s positions/s through the API | the statement of the fences layer over the same batches through pgx, outside a transaction: %s positions/s | %.0f%% | none: the floor under the cost of a report, and a reading of the speed of the machine in the same run | |\n", v["api_pps"], v["pip_pps"], 100*v["api_pps"]/v["pip_pps"]
        if (v["api_cpu"] != "") { a = v["api_cpu"]; d = v["direct_cpu"]; gsub(",", " ", a); gsub(",", " ", d); printf "| geofence events: CPU per position, microseconds by process (the median trials above) | API: %s | direct: %s | | none: where the work lands, which the rates, moving with the speed of the machine, cannot tell | |\n", a, d }
        if (v["hook_n"] > 0) printf "| geofence events: position sent to its event received by a local webhook, positions at a steady %s/s | p50 %s ms, p99 %s ms (%s events) | | | p99 under 100 ms | %s |\n", v["hook_pps"], v["hook_p50"], v["hook_p99"], v["hook_n"], (v["hook_p99"] < 100) ? "yes" : "no"
        else print "| geofence events: position sent to its event received by a local webhook | not measured: no event reached the webhook | | | p99 under 100 ms | no |"
        if (v["busy_n"] > 0) printf "| geofence events: the same at a steady %s positions/s, to one subscription | p50 %s ms, p99 %s ms; %s of the %s events made received by 20 s after the last position | | | none: about 1,600 events/s to one subscription, one event per request, 16 times the default `deliveries` policy | |\n", v["busy_pps"], v["busy_p50"], v["busy_p99"], v["busy_n"], v["busy_made"]
      }' $r/events.txt
  fi
  if [ -s $r/seed.txt ]; then
    awk '
      /^RESULT seed/ {
        for (i = 3; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        goal = (v["case"] ~ /^within/) ? 3 : 5
        label["limiter"] = "limiter only: geogate `/within` 1 m radius in the empty Atlantic vs the seed `/limited`"
        label["refused"] = "limiter only: geogate `/conformance` (charged, no database) vs the seed `/limited`"
        label["within1k"] = "`/within` 1 km, geogate vs the seed FastAPI service"
        label["within20k"] = "`/within` 20 km, geogate vs the seed FastAPI service"
        printf "| %s, concurrency '"$conc"' | %s req/s (%s), p99 %s ms | seed (uvicorn, 1 worker): %s (%s), p99 %s ms | %sx | at least %dx, lower p99 | %s |\n", label[v["case"]], v["geogate_rps"], v["geogate_range"], v["geogate_p99"], v["seed_rps"], v["seed_range"], v["seed_p99"], v["ratio"], goal, (v["ratio"] >= goal && v["geogate_p99"] < v["seed_p99"]) ? "yes" : "no"
        if (v["floor_rps"] != "" && v["floor_rps"] != "-")
          printf "| the same, the floor of the seed'"'"'s design: plain Go, net/http and pgx, one limiter script, then the same statement | %s req/s | seed: %s | %s | none: what any service of that design can reach here; geogate is %.0f%% of it | |\n", v["floor_rps"], v["seed_rps"], v["floor_ratio"], 100 * v["geogate_rps"] / v["floor_rps"]
      }' $r/seed.txt
  fi
  if [ -s $r/caller.txt ]; then
    awk '
      /^RESULT caller/ {
        for (i = 3; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        label["within"] = "`/within` 1 km"; label["items"] = "items pages of 100 in 0.5 degree boxes"
        printf "| %s on a layer that runs as its caller (row-level security, concurrency '"$conc"') | %s req/s, p99 %s ms | the same layer as the login role: %s req/s, p99 %s ms | %sx | at least 0.9x | %s |\n", label[v["case"]], v["caller_rps"], v["caller_p99"], v["login_rps"], v["login_p99"], v["ratio"], (v["ratio"] >= 0.9 && v["bad"] == 0) ? "yes" : "no"
      }' $r/caller.txt
  fi
  if [ -s $r/import.txt ]; then
    awk '
      /^trial/ { a = $5 + 0; o = $8 + 0; if (!n++ || a < amin) amin = a; if (a > amax) amax = a; if (n == 1 || o < omin) omin = o; if (o > omax) omax = o }
      /^api import:/ { ours = $6 }
      /^ogr2ogr:/ { ogr = $5 }
      END { printf "| import of 171,075 cities | %.0f rows/s (%.2f-%.2f s) | `ogr2ogr` (PG_USE_COPY), the same indexes: %.0f rows/s (%.2f-%.2f s) | %.2fx | at least 2x | %s |\n", ours, amin, amax, ogr, omin, omax, ours/ogr, (ours >= 2*ogr) ? "yes" : "no" }
    ' $r/import.txt
  fi
  if [ -s $r/auth.txt ]; then
    awk '/^Benchmark/ { for (i = 1; i <= NF; i++) if ($i == "ns/op") { printf "| auth: %s | %.0f/s | | | | |\n", $1, 1e9/$(i-1) } }' $r/auth.txt
  fi
  echo
  echo "Per-case detail: bench/results/{$(IFS=,; echo "${cases[*]}")}.txt, bench/results/seed.md, bench/results/import.md."
  [ "${BENCH_PROFILE:-}" = 1 ] && echo "Profiles (git-ignored): Go CPU and allocation profiles of \`api serve\` per seed case in bench/results/api-<case>.{cpu,allocs}.prof (top 25 in api-<case>.{cpu,allocs}.top.txt; browse with \`go tool pprof -http=127.0.0.1:8081 bin/api bench/results/api-within1k.cpu.prof\`), perf call graphs with the kernel side in api-<case>.perf.prof (api-<case>.top.txt), the tile bench in tiles.cpu.prof."
  true
} >$r/latest.md
dated=$r/$(date -u -d "@$now" +%Y-%m-%dT%H%MZ).md
cp $r/latest.md "$dated"
echo
cat $r/latest.md
echo "(also in $dated)" >&2
