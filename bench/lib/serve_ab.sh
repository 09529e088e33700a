# bench/serve's A/B mode (EMBER_BASE set): ember ($EMBER, "new") against another ember binary
# ($BASE, "old"), both on the same setup, interleaved round by round. Sourced by bench/serve
# after its helpers (start_ember, fio_run, cpu_ticks, median, spread, ember_counts); reads its
# settings (MODES, DEPTHS, ROUNDS, RUNTIME, EXTRA, WSS).

echo "bench/serve A/B: new $EMBER against old $BASE; $(nproc) cores, working set $WSS, $ROUNDS rounds of ${RUNTIME}s per fio run, modes: $MODES, depths: $DEPTHS${EMBER_FLAGS:+, ember flags: $EMBER_FLAGS}${SERVER_CPUS:+, servers on CPUs $SERVER_CPUS}${CLIENT_CPUS:+, fio on CPUs $CLIENT_CPUS}"

AB_SERVERS=()
for mode in $MODES; do
  case $mode in
    buffered) eflags=() ;;
    direct) eflags=(--direct) ;;
    *) echo "bench/serve: unknown mode $mode (buffered or direct)" >&2; exit 2 ;;
  esac
  for who in old new; do
    name="$who-$mode"
    bin=$EMBER; [[ $who == old ]] && bin=$BASE
    SERVE_BIN=$bin start_ember "$name" "${eflags[@]}"
    uvar="URI_${name//-/_}"
    # Prefill through the server (write-through allocates every block), then a read pass.
    fio_run "${!uvar}" write 32 >/dev/null
    fio_run "${!uvar}" read 32 >/dev/null
    AB_SERVERS+=("$name")
  done
done

declare -A AB_HITS0 AB_MISSES0 AB_IOPS AB_CPU
for name in "${AB_SERVERS[@]}"; do
  read -r AB_HITS0[$name] AB_MISSES0[$name] < <(ember_counts "$name")
done

# ab_run NAME DEPTH ROUND: one measured fio run against that server; prints its line
ab_run() {
  local name=$1 depth=$2 round=$3 u p c0 c1 iops p99 cpu
  u="URI_${name//-/_}" p="SPID_${name//-/_}"
  c0=$(cpu_ticks "${!p}")
  read -r iops p99 < <(fio_run "${!u}" randread "$depth" "$RUNTIME")
  c1=$(cpu_ticks "${!p}")
  cpu=$(awk -v c=$((c1 - c0)) -v t="$TCK" -v i="$iops" -v s="$RUNTIME" \
    'BEGIN { n = i * (s + 1); if (n > 0) printf "%.1f", c / t * 1e6 / n; else print "-" }')
  printf 'round %d  %-14s iodepth %-2d  %8s IOPS  p99 %6s us  cpu %5s us/read\n' \
    "$round" "$name" "$depth" "$iops" "$p99" "$cpu"
  AB_IOPS[$name.$depth]+="$iops "
  AB_CPU[$name.$depth]+="$cpu "
}

for round in $(seq "$ROUNDS"); do
  for depth in $DEPTHS; do
    for mode in $MODES; do
      # The pair runs back to back, old first in odd rounds and new first in even ones.
      if (( round % 2 )); then pair=(old new); else pair=(new old); fi
      for who in "${pair[@]}"; do ab_run "$who-$mode" "$depth" "$round"; done
    done
  done
done

echo
worst=""
worst_row=""
for mode in $MODES; do
  for depth in $DEPTHS; do
    o=${AB_IOPS[old-$mode.$depth]} n=${AB_IOPS[new-$mode.$depth]}
    r=$(python3 -c "
a = '$n'.split(); b = '$o'.split()
print(' '.join('%.3f' % (float(x) / float(y)) for x, y in zip(a, b)))")
    m=$(echo "$r" | median)
    printf '%-8s iodepth %-2d  old %8s IOPS (min..max %s; cpu %s us/read)  new %8s IOPS (min..max %s; cpu %s us/read)\n' \
      "$mode" "$depth" "$(echo "$o" | median)" "$(echo "$o" | spread)" \
      "$(echo "${AB_CPU[old-$mode.$depth]}" | median)" \
      "$(echo "$n" | median)" "$(echo "$n" | spread)" \
      "$(echo "${AB_CPU[new-$mode.$depth]}" | median)"
    printf '%-8s iodepth %-2d  new/old %s (min..max %s; per round %s)\n' \
      "$mode" "$depth" "$m" "$(echo "$r" | spread)" "$r"
    if [[ -z $worst ]] || python3 -c "import sys; sys.exit(0 if $m < $worst else 1)"; then
      worst=$m worst_row="$mode iodepth $depth"
    fi
  done
done

fail=0
for name in "${AB_SERVERS[@]}"; do
  read -r h1 m1 < <(ember_counts "$name")
  echo "$name read hits/misses (blocks) in the measured rounds: $((h1 - AB_HITS0[$name])) / $((m1 - AB_MISSES0[$name]))"
  if (( m1 != AB_MISSES0[$name] || h1 == AB_HITS0[$name] )); then fail=1; fi
done
if (( fail )); then
  echo "bench/serve: a server missed in the measured rounds (or served no hit): not a hit benchmark" >&2
  exit 1
fi
echo "worst row: $worst_row"
echo "ratio: $worst"
