#!/bin/sh
# Runs one case of misuse.cpp under LD_PRELOAD of a malloc variant and checks
# how it ends (see misuse.cpp for the cases).
#   run_misuse.sh CASE LIB PROGRAM
# Abort cases must die of SIGABRT with "allotheque" on stderr (and the double
# frees with "double free"); the others must exit 0 having printed "OK".
set -u
case_name=$1 lib=$2 prog=$3
unset ASAN_OPTIONS TSAN_OPTIONS UBSAN_OPTIONS 2>/dev/null || true
[ -f "$lib" ] || { echo "FAIL: $lib not built"; exit 1; }
err=$(mktemp) out=$(mktemp)
trap 'rm -f "$err" "$out"' EXIT
LD_PRELOAD="$lib" "$prog" "$case_name" > "$out" 2> "$err"
rc=$?
cat "$out"; cat "$err"
case $case_name in
never_twice|reuse_sizes|thread_churn|trim|fork_threads|distinct_sizes|free_null)
  [ $rc -eq 0 ] || { echo "FAIL: exit status $rc"; exit 1; }
  grep -q "^OK" "$out" || { echo "FAIL: no OK line"; exit 1; } ;;
*)
  [ $rc -eq 134 ] || { echo "FAIL: expected an abort (134), got exit status $rc"; exit 1; }
  grep -q "allotheque" "$err" || { echo "FAIL: no allotheque message on stderr"; exit 1; }
  case $case_name in
  double_free*) grep -q "double free" "$err" || { echo "FAIL: the message does not say double free"; exit 1; } ;;
  esac ;;
esac
echo "PASS: $case_name"
