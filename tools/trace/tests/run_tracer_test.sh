#!/bin/sh
# One tracer test: runs a program under `allotheque-trace record` and checks
# the trace(s) with tracer_check. Exit 77 = skipped.
#   run_tracer_test.sh CASE CLI WORKLOAD CHECK WORKDIR
# CASE: sequence | many | killed | exit_threads | exec | wrapper | python | sort | cli
set -eu
case_name=$1 cli=$2 workload=$3 check=$4 dir=$5

# The programs traced here are not instrumented; a sanitizer build's options
# would only get in the way.
unset ASAN_OPTIONS TSAN_OPTIONS UBSAN_OPTIONS LD_PRELOAD ALLOTHEQUE_TRACE ALLOTHEQUE_TRACE_LIB 2>/dev/null || true
export LC_ALL=C
rm -rf "$dir"
mkdir -p "$dir"
trace="$dir/trace"

fail() { echo "FAIL: $*"; exit 1; }

# record PROGRAM...: runs it under the tracer; sets $rc, output in $dir/record.err
record() {
  rc=0
  "$cli" record -o "$trace" -- "$@" > "$dir/record.out" 2> "$dir/record.err" || rc=$?
  cat "$dir/record.err"
}

case $case_name in
sequence)
  record "$workload" sequence "$dir"
  [ "$rc" -eq 0 ] || fail "workload exited $rc"
  grep -q "^allotheque-trace: recorded .* events, 10 threads" "$dir/record.err" || fail "no summary line"
  grep -q "^allotheque-trace: 1 child trace" "$dir/record.err" || fail "the fork child's trace is not reported"
  "$check" expected "$trace" "$dir" ;;

many)
  record "$workload" many "$dir" "${ALLOTHEQUE_TRACE_TEST_EVENTS:-1000000}"
  [ "$rc" -eq 0 ] || fail "workload exited $rc"
  "$check" expected "$trace" "$dir"
  rm -f "$dir/expected.main" "$trace" ;;

killed)
  record "$workload" killed
  [ "$rc" -eq 137 ] || fail "record exited $rc, expected 137 (128 + SIGKILL)"
  grep -q "killed by signal 9" "$dir/record.err" || fail "record does not say the program was killed"
  grep -q "no END record" "$dir/record.err" || fail "record does not say the trace is incomplete"
  "$check" truncated "$trace" ;;

exit_threads)
  record "$workload" exit_threads
  [ "$rc" -eq 0 ] || fail "workload exited $rc"
  "$check" complete "$trace" --strict ;;

exec)
  # sh forks a child that execs the workload (FILE.<pid>), then exits itself.
  record sh -c "\"$workload\" many \"$dir\" 1000 && echo done; exit 0"
  [ "$rc" -eq 0 ] || fail "sh exited $rc"
  grep -q '^done$' "$dir/record.out" || fail "the child did not run"
  grep -q "^allotheque-trace: 1 child trace" "$dir/record.err" || fail "the exec'd child's trace is not reported"
  "$check" complete "$trace"
  for f in "$trace".*; do
    [ -f "$f" ] || fail "no child trace"
    "$check" expected "$f" "$dir"
  done ;;

wrapper)
  # A wrapper script (a pyenv shim, say) runs helpers, then execs the program
  # that does the work: FILE is that program's trace. The script starts as
  # `#!/usr/bin/env sh`, so the process runs env (which execvp's sh), then sh
  # (which execve's the workload): their traces are FILE.<pid>.exec1 and
  # .exec2, the helpers' are FILE.<pid>.
  [ -x /usr/bin/env ] || { echo "SKIP: no /usr/bin/env"; exit 77; }
  {
    echo '#!/usr/bin/env sh'
    echo 'v=$(echo helper)'
    echo "ls \"$dir\" > /dev/null"
    echo "exec \"$workload\" many \"$dir\" \"\$@\""
  } > "$dir/wrapper"
  chmod +x "$dir/wrapper"
  record "$dir/wrapper" 1000
  [ "$rc" -eq 0 ] || fail "the wrapper exited $rc"
  grep -q "^allotheque-trace: process \([0-9]*\) exec'd: trace is the trace of the last program it ran, tracer_workload; the programs before: trace\.\1\.exec1 (pid \1 env: .*; trace\.\1\.exec2 (pid \1 [a-z]*sh: " "$dir/record.err" ||
    fail "record does not name the wrapper's traces"
  grep -q "^allotheque-trace: [1-9][0-9]* child trace" "$dir/record.err" || fail "the helpers' traces are not reported"
  "$check" expected "$trace" "$dir"
  "$cli" summary "$trace" > "$dir/summary.out" || fail "summary of the main trace failed"
  grep -q "executable .*/tracer_workload$" "$dir/summary.out" || fail "the main trace is not the workload's"
  n=0
  for f in "$trace".*.exec*; do
    [ -f "$f" ] || fail "no trace of the wrapper itself"
    "$check" complete "$f"
    n=$((n + 1))
  done
  [ "$n" -eq 2 ] || fail "$n traces named .exec, expected 2 (env, sh)"
  # The exec'd program is not traced (LD_PRELOAD without the tracer): the
  # script's trace keeps the name, and is complete (finished before the exec).
  {
    echo '#!/bin/sh'
    echo "LD_PRELOAD=libc.so.6 exec \"$workload\" many \"$dir\" 10"
  } > "$dir/untraced"
  chmod +x "$dir/untraced"
  record "$dir/untraced"
  [ "$rc" -eq 0 ] || fail "the untraced wrapper exited $rc"
  grep -q "exec'd" "$dir/record.err" && fail "record reports an exec whose program was not traced"
  "$check" complete "$trace"
  for f in "$trace".*; do
    [ -f "$f" ] && fail "an exec of an untraced program left $f"
  done
  # An exec that fails (ENOEXEC) takes the name back and recording goes on in
  # the same trace: every event before and after it, one complete trace.
  printf 'echo not a program\n' > "$dir/no-shebang"
  chmod +x "$dir/no-shebang"
  rm -f "$dir"/expected.*
  record "$workload" exec_fail "$dir" "$dir/no-shebang"
  [ "$rc" -eq 0 ] || fail "tracer_workload exec_fail exited $rc"
  "$check" expected "$trace" "$dir"
  for f in "$trace".*; do
    [ -f "$f" ] && fail "a failed exec left $f"
  done ;;

python)
  py=/usr/bin/python3
  [ -x "$py" ] || { echo "SKIP: no $py"; exit 77; }
  record "$py" -c pass
  [ "$rc" -eq 0 ] || fail "python3 -c pass exited $rc"
  "$check" complete "$trace"
  record "$py" -c "import json, sys; print(json.dumps(sorted(str(i) for i in range(100000)))[:60])"
  [ "$rc" -eq 0 ] || fail "python3 exited $rc"
  "$py" -c "import json, sys; print(json.dumps(sorted(str(i) for i in range(100000)))[:60])" > "$dir/plain.out"
  cmp "$dir/plain.out" "$dir/record.out" || fail "python3's output differs under the tracer"
  "$check" complete "$trace" ;;

sort)
  command -v sort >/dev/null || { echo "SKIP: no sort"; exit 77; }
  awk 'BEGIN { for (i = 0; i < 300000; i++) print (i * 7919) % 1000003, "line", i }' > "$dir/in"
  sort -S 1M --parallel=2 -T "$dir" "$dir/in" > "$dir/plain.out"
  record sort -S 1M --parallel=2 -T "$dir" "$dir/in"
  [ "$rc" -eq 0 ] || fail "sort exited $rc"
  cmp "$dir/plain.out" "$dir/record.out" || fail "sort's output differs under the tracer"
  "$check" complete "$trace" ;;

cli)
  rc=0; "$cli" record --help > "$dir/help" 2>&1 || rc=$?
  [ "$rc" -eq 0 ] && grep -q "usage: allotheque-trace record" "$dir/help" || fail "--help (exit $rc)"
  rc=0; "$cli" record > "$dir/out" 2>&1 || rc=$?
  [ "$rc" -eq 2 ] || fail "no program: exit $rc, expected 2"
  rc=0; "$cli" record -o "$trace" -- /nonexistent/program > "$dir/out" 2>&1 || rc=$?
  cat "$dir/out"
  [ "$rc" -eq 127 ] && grep -q "program not found" "$dir/out" || fail "missing program: exit $rc"
  rc=0; "$cli" record -o "$trace" -- no-such-program-anywhere > "$dir/out" 2>&1 || rc=$?
  cat "$dir/out"
  [ "$rc" -eq 127 ] && grep -q "not found in PATH" "$dir/out" || fail "program not in PATH: exit $rc"
  rc=0; ALLOTHEQUE_TRACE_LIB=/nonexistent/liballotheque_trace.so "$cli" record -o "$trace" -- true > "$dir/out" 2>&1 || rc=$?
  cat "$dir/out"
  [ "$rc" -eq 1 ] && grep -q "tracer library .* was not found" "$dir/out" || fail "missing tracer library: exit $rc"
  # The program's exit status is passed on; an old trace and old child traces are replaced.
  printf 'old' > "$trace"
  rc=0; "$cli" record -o "$trace" -- sh -c 'exit 3' > "$dir/out" 2>&1 || rc=$?
  cat "$dir/out"
  [ "$rc" -eq 3 ] || fail "exit status $rc, expected 3"
  "$check" complete "$trace" ;;

*)
  fail "unknown case $case_name" ;;
esac
echo "PASS: $case_name"
