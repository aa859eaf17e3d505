#!/bin/sh
# Runs one case of adversarial.cpp (issue 30) under LD_PRELOAD of a malloc
# variant and checks how it ends (see adversarial.cpp for the cases).
#   run_adversarial.sh CASE LIB PROGRAM
# LIB may be "none" to run the program on the system's malloc, which checks
# the test itself. Misuse cases must die of SIGABRT with the library's
# "allotheque malloc:" message on stderr, saying "double free" for the two
# frees (with "none" they are skipped: glibc's messages differ); the others
# must exit 0 having printed "OK". Every case runs under `timeout 120`, so a
# hang fails instead of blocking the test run. ALLOTHEQUE_MALLOC_SKIP (any
# value) skips the case with exit status 77, as in run_preload.sh.
set -u
case_name=$1 lib=$2 prog=$3
if [ -n "${ALLOTHEQUE_MALLOC_SKIP:-}" ]; then
  echo "SKIP: $ALLOTHEQUE_MALLOC_SKIP"; exit 77
fi
# The program and the library are built without sanitizers in every build
# tree (src/malloc/CMakeLists.txt strips them), so these run in the ASan and
# TSan trees too, uninstrumented; drop what a sanitizer preset puts in the
# environment.
unset ASAN_OPTIONS TSAN_OPTIONS UBSAN_OPTIONS 2>/dev/null || true
ulimit -c 0 2>/dev/null || true   # the misuse cases abort on purpose: no core files
err=$(mktemp) out=$(mktemp)
trap 'rm -f "$err" "$out"' EXIT
misuse=no
# spike_then_small waits for the large-block cache's peak to age: ten to
# twenty purge delays, 10-20 s by default, 200-400 ms with this one.
[ "$case_name" = spike_then_small ] && export ALLOTHEQUE_PURGE_DELAY_MS=20
# glibc's thread heaps aligned for huge pages (8 MiB, not 64): glibc reads
# the tunable at start, so it goes in the environment.
[ "$case_name" = glibc_hugetlb_arenas ] && export GLIBC_TUNABLES=glibc.malloc.hugetlb=2
case $case_name in
remote_after_local_free|remote_twice_after_drain|realloc_freed|realloc_moved_freed) misuse=yes ;;
esac
if [ "$lib" = none ]; then
  [ $misuse = yes ] && { echo "SKIP: $case_name expects an allotheque message"; exit 0; }
  timeout -k 10 120 "$prog" "$case_name" > "$out" 2> "$err"
else
  [ -f "$lib" ] || { echo "FAIL: $lib not built"; exit 1; }
  # Preloaded into the program only: timeout itself stays on the system's malloc.
  timeout -k 10 120 env LD_PRELOAD="$lib" "$prog" "$case_name" > "$out" 2> "$err"
fi
rc=$?
cat "$out"; cat "$err"
[ $rc -eq 124 ] || [ $rc -eq 137 ] && { echo "FAIL: $case_name timed out after 120 s or was killed (exit status $rc)"; exit 1; }
# The program prints the heap that serves it first: the preload really loaded.
if [ "$lib" != none ]; then
  grep -q "^heap: " "$out" || { echo "FAIL: the program did not run on $lib"; exit 1; }
fi
if [ $misuse = yes ]; then
  [ $rc -eq 134 ] || { echo "FAIL: expected an abort (134), got exit status $rc"; exit 1; }
  grep -q "allotheque malloc:" "$err" || { echo "FAIL: no 'allotheque malloc:' message on stderr"; exit 1; }
  case $case_name in
  remote_*) grep -q "double free" "$err" || { echo "FAIL: the message does not say double free"; exit 1; } ;;
  esac
else
  [ $rc -eq 0 ] || { echo "FAIL: exit status $rc"; exit 1; }
  grep -q "^OK" "$out" || { echo "FAIL: no OK line"; exit 1; }
fi
echo "PASS: $case_name"
