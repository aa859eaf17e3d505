#!/bin/sh
# Runs a real program under LD_PRELOAD=liballotheque_malloc.so and checks its
# output (against the same run without the preload where that is meaningful).
#   run_preload.sh CASE LIB PROGRAM WORKDIR CMAKE
# PROGRAM: allotheque_malloc_mt_stress (c_new for the c_runtime case).
# CASE: mt_stress | python | git | cmake | sort | c_runtime.  Exit 77 = skipped.
set -eu
case_name=$1 lib=$2 program=$3 work=$4 cmake=$5

if [ -n "${ALLOTHEQUE_MALLOC_SKIP:-}" ]; then
  echo "SKIP: $ALLOTHEQUE_MALLOC_SKIP"; exit 77
fi
# The programs run here are not instrumented; drop anything a sanitizer build
# might have put in the environment that would load a sanitizer runtime.
unset ASAN_OPTIONS TSAN_OPTIONS UBSAN_OPTIONS 2>/dev/null || true
[ -f "$lib" ] || { echo "FAIL: $lib not built"; exit 1; }

dir="$work/$case_name"
rm -rf "$dir"; mkdir -p "$dir"
export LC_ALL=C

pre() { LD_PRELOAD="$lib" "$@"; }

# The preload really loads: the process's own maps show the library.
pre cat /proc/self/maps > "$dir/maps"
grep -qF "$(basename "$lib")" "$dir/maps" || { echo "FAIL: $lib not in /proc/self/maps"; exit 1; }

case $case_name in
mt_stress)
  pre "$program" "${ALLOTHEQUE_MALLOC_OPS:-4000000}" 16 ;;

python)
  command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
  cat > "$dir/work.py" <<'PY'
import ctypes, hashlib, json, sys
lib = ctypes.CDLL(None)
try:
    f = lib.allotheque_malloc_heap_name
    f.restype = ctypes.c_char_p
    print("heap:", f().decode(), file=sys.stderr)
    active = True
except AttributeError:
    active = False
d = {str(i): [i, str(i * 7919 % 1000003)] for i in range(10**6)}
items = sorted(d.items(), key=lambda kv: (kv[1][1], kv[0]))
text = json.dumps(items)
back = json.loads(text)
assert back == [[k, v] for k, v in items]
l = [str(x) * (x % 13) for x in range(100000)]
del d, items, back
print(len(text), hashlib.sha256(text.encode()).hexdigest(), sum(map(len, l)))
print("active" if active else "inactive", file=sys.stderr)
PY
  python3 "$dir/work.py" > "$dir/plain.out" 2>/dev/null
  pre python3 "$dir/work.py" > "$dir/pre.out" 2> "$dir/pre.err"
  cat "$dir/pre.err"
  grep -q '^active' "$dir/pre.err" || { echo "FAIL: python did not see allotheque_malloc"; exit 1; }
  cmp "$dir/plain.out" "$dir/pre.out" || { echo "FAIL: python output differs"; exit 1; }
  cat "$dir/pre.out" ;;

git)
  command -v git >/dev/null || { echo "SKIP: no git"; exit 77; }
  run_git() {   # $1: repo dir; the rest: how to run git ("pre" or nothing)
    r=$1; shift
    mkdir -p "$r"; cd "$r"
    export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t
    export GIT_AUTHOR_DATE='2020-01-01T00:00:00Z' GIT_COMMITTER_DATE='2020-01-01T00:00:00Z'
    export GIT_CONFIG_NOSYSTEM=1 HOME="$r"
    "$@" git init -q -b main .
    i=0
    while [ $i -lt 200 ]; do
      mkdir -p "d$((i % 10))"; seq $i $((i * 50)) > "d$((i % 10))/f$i.txt"; i=$((i + 1))
    done
    "$@" git add -A
    "$@" git commit -q -m first
    seq 1 5000 > d0/f0.txt; "$@" git mv d1 e1
    "$@" git commit -q -am second
    "$@" git gc -q
    "$@" git log --format='%H %T %s' --stat
    "$@" git fsck --strict 2>&1
    cd - >/dev/null
  }
  (run_git "$dir/plain") > "$dir/plain.out"
  (run_git "$dir/pre" pre) > "$dir/pre.out"
  cmp "$dir/plain.out" "$dir/pre.out" || { echo "FAIL: git output differs"; diff "$dir/plain.out" "$dir/pre.out" | head; exit 1; }
  head -3 "$dir/pre.out" ;;

cmake)
  pre "$cmake" --version
  mkdir -p "$dir/src"
  cat > "$dir/src/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.20)
project(preload_probe LANGUAGES CXX)
set(acc "")
foreach(i RANGE 2000)
  string(APPEND acc "${i};")
endforeach()
list(LENGTH acc n)
list(SORT acc)
string(SHA256 h "${acc}")
file(WRITE ${CMAKE_BINARY_DIR}/probe.txt "${n} ${h}\n")
CM
  pre "$cmake" -S "$dir/src" -B "$dir/build" > "$dir/configure.log" 2>&1 || { cat "$dir/configure.log"; exit 1; }
  pre "$cmake" --build "$dir/build" > /dev/null 2>&1 || true
  grep -q "2002 " "$dir/build/probe.txt" || { echo "FAIL: cmake probe"; cat "$dir/build/probe.txt"; exit 1; }
  cat "$dir/build/probe.txt" ;;

sort)
  awk 'BEGIN { srand(42); for (i = 0; i < 2000000; i++) printf "%d %s %x\n", int(rand() * 1e9), substr("abcdefghijklmnop", 1 + i % 16), i }' > "$dir/in.txt"
  sort --parallel=2 -S 64M "$dir/in.txt" > "$dir/plain.out"
  pre sort --parallel=2 -S 64M "$dir/in.txt" > "$dir/pre.out"
  pre sort -n -k1,1 "$dir/in.txt" | pre sort -c -n -k1,1
  cmp "$dir/plain.out" "$dir/pre.out" || { echo "FAIL: sort output differs"; exit 1; }
  wc -l < "$dir/pre.out" ;;

c_runtime)
  # A C program under the library (cat above, a shell pipeline here) loads no
  # C++ runtime: optimized builds of the heaps without mapped tables name
  # none (include/allotheque/malloc/cxx_runtime.hpp). CMake passes this case
  # only for those.
  if grep -q 'libstdc++' "$dir/maps"; then
    grep 'libstdc++' "$dir/maps"; echo "FAIL: a C program under $lib loads libstdc++"; exit 1
  fi
  pre sh -c 'i=0; while [ $i -lt 2000 ]; do echo "line $i"; i=$((i + 1)); done | sort -k2,2n | tail -n 1; \
             grep -c libstdc++ /proc/self/maps' > "$dir/out" || true
  printf 'line 1999\n0\n' | cmp - "$dir/out" || { cat "$dir/out"; echo "FAIL: the pipeline's output"; exit 1; }
  echo "no libstdc++ in a C program's maps"
  # operator new called from C: served, and on failure, with no runtime to
  # throw bad_alloc, the library's message and an abort.
  rc=0
  pre "$program" > "$dir/new.out" 2> "$dir/new.err" || rc=$?
  cat "$dir/new.out" "$dir/new.err"
  [ $rc -eq 134 ] || { echo "FAIL: expected an abort (134), got exit status $rc"; exit 1; }
  grep -q '^operator new(64) from C: a block' "$dir/new.out" || { echo "FAIL: operator new(64) not served"; exit 1; }
  grep -q 'no C++ runtime to throw std::bad_alloc' "$dir/new.err" || { echo "FAIL: not the library's message"; exit 1; } ;;

*) echo "unknown case $case_name"; exit 2 ;;
esac
rm -rf "$dir"
echo "PASS: $case_name"
