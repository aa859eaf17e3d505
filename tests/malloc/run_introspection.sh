#!/bin/sh
# Runs one case of introspection.cpp under LD_PRELOAD of a malloc library,
# with the environment options that case needs, and checks what the options
# print on stderr.
#   run_introspection.sh CASE LIB PROGRAM
# Cases of the program: stats_match_proc heap_rows glibc_api retain_env.
# Cases of this script (the program's `idle` case under options):
#   show_stats    ALLOTHEQUE_SHOW_STATS=1: the statistics at exit
#   verbose       ALLOTHEQUE_VERBOSE=1: the options in force
#   bad_values    a bad value for each option: reported, ignored, exit 0
# ALLOTHEQUE_MALLOC_SKIP (any value) skips with exit status 77.
set -u
case_name=$1 lib=$2 prog=$3
if [ -n "${ALLOTHEQUE_MALLOC_SKIP:-}" ]; then
  echo "SKIP: $ALLOTHEQUE_MALLOC_SKIP"; exit 77
fi
unset ASAN_OPTIONS TSAN_OPTIONS UBSAN_OPTIONS ALLOTHEQUE_SHOW_STATS ALLOTHEQUE_VERBOSE \
      ALLOTHEQUE_RETAIN_BYTES ALLOTHEQUE_PURGE_DELAY_MS 2>/dev/null || true
err=$(mktemp)
trap 'rm -f "$err"' EXIT
fail() { echo "FAIL: $case_name: $1"; cat "$err"; exit 1; }

run() {   # run ENV... : the program's case under the preload, within 120 s
  env "$@" LD_PRELOAD="$lib" timeout 120 "$prog" "$prog_case" 2>"$err"
}
prog_case=$case_name
case $case_name in
stats_match_proc|heap_rows)
  run || fail "exit status $?" ;;
glibc_api)
  run || fail "exit status $?"
  grep -q "^  total: active " "$err" || fail "malloc_stats() printed no total line" ;;
retain_env)
  run ALLOTHEQUE_RETAIN_BYTES=0 ALLOTHEQUE_PURGE_DELAY_MS=0 || fail "exit status $?" ;;
show_stats)
  prog_case=idle
  run ALLOTHEQUE_SHOW_STATS=1 || fail "exit status $?"
  grep -q "thread heap(s), in bytes" "$err" || fail "no statistics at exit"
  grep -q "^  total: active " "$err" || fail "no total line at exit" ;;
verbose)
  prog_case=idle
  run ALLOTHEQUE_VERBOSE=1 ALLOTHEQUE_RETAIN_BYTES=8m ALLOTHEQUE_PURGE_DELAY_MS=250 || fail "exit status $?"
  grep -q "retain_bytes 8388608, purge_delay_ms 250" "$err" || fail "the options in force are not printed" ;;
bad_values)
  prog_case=idle
  run ALLOTHEQUE_SHOW_STATS=yes ALLOTHEQUE_VERBOSE=1 ALLOTHEQUE_RETAIN_BYTES=12q \
      ALLOTHEQUE_PURGE_DELAY_MS=99999999999 || fail "a bad value was fatal (exit status $?)"
  for o in ALLOTHEQUE_SHOW_STATS=yes ALLOTHEQUE_RETAIN_BYTES=12q ALLOTHEQUE_PURGE_DELAY_MS=99999999999; do
    grep -q "$o ignored" "$err" || fail "$o was not reported"
  done
  # Ignored means the defaults: the heap's configured values.
  grep -q "retain_bytes 4194304, purge_delay_ms 1000, show_stats 0" "$err" || fail "the defaults were not kept" ;;
*)
  echo "unknown case $case_name"; exit 64 ;;
esac
cat "$err" >&2
echo OK
