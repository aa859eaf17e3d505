#!/usr/bin/python3
"""Instructions per allocation under callgrind (see bench/README.md).

Runs bench/instructions' two programs under `valgrind --tool=callgrind
--collect-atstart=no`; the programs turn collection on (a client request)
around their counted loops only, after a warm-up: warm-up, input generation
and set-up are not counted, so the callgrind output's total Ir is the counted
loops' instructions, which this script divides by the operations the program
reports. Nothing is subtracted: the `harness` rows are the same loops around
an allocator that does nothing, the loops' own share of every other row. One
process per (allocator, pattern):

  instructions_malloc  every malloc: glibc (no preload), jemalloc, mimalloc,
                       tcmalloc and the allotheque malloc libraries by
                       LD_PRELOAD; patterns pair batch random realloc calloc
                       aligned new remote
  instructions_heaps   the header-only heaps used directly, the hand-written
                       twins; patterns pair batch random

Builds nothing: give --build-dir (the bench preset's tree) or the paths.
bench/run.py runs this as its "instructions" section (run_section below);
alone:

    bench/instructions/run.py --build-dir build/bench [--steps 100000] [--jobs 2] [--out-dir DIR]

Prints a markdown section; writes DIR/instructions.md and instructions.json.
--check LO,HI (the ctest smoke run) also fails unless every allocator's cell
is within (LO, HI) and above the harness's.
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIBDIR = "/usr/lib/x86_64-linux-gnu"
# The same libraries as bench/run.py's PRELOAD.
BASELINES = [("glibc", None), ("jemalloc", LIBDIR + "/libjemalloc.so.2"),
             ("mimalloc", LIBDIR + "/libmimalloc.so.2"), ("tcmalloc", LIBDIR + "/libtcmalloc_minimal.so.4")]
ALLOTHEQUE_MALLOCS = ["segregated", "quickfit", "kingsley", "velox", "medius", "lea"]
MALLOC_PATTERNS = ["pair", "batch", "random", "realloc", "calloc", "aligned", "new", "remote"]
HEAP_PATTERNS = ["pair", "batch", "random"]
UNITS = {"pair": "pair", "batch": "pair", "random": "step", "realloc": "realloc", "calloc": "pair",
         "aligned": "pair", "new": "pair", "remote": "block"}
DEFAULT_STEPS = 100000
# The issue-31 comparison: the default library against mimalloc.
TARGET_ROW, TARGET_PEER = "allotheque-segregated", "mimalloc"


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def callgrind_total(path):
    """The Ir total of a callgrind output file (its `totals:` line, else `summary:`)."""
    events, totals, summary = None, None, None
    with open(path) as f:
        for line in f:
            if line.startswith("events:"):
                events = line.split()[1:]
            elif line.startswith("totals:"):
                totals = [int(x) for x in line.split()[1:]]
            elif line.startswith("summary:"):
                summary = [int(x) for x in line.split()[1:]]
    values = totals if totals is not None else summary
    if not events or values is None:
        raise RuntimeError("{}: no events/totals lines".format(path))
    i = events.index("Ir")
    return values[i] if len(values) > i else 0


def run_one(valgrind, tmp, job, steps, timeout):
    """One (allocator, pattern) under callgrind; returns the job's record with
    ir, ops, ir_per_op, or error."""
    out = os.path.join(tmp, "{}-{}-{}.callgrind".format(job["program"], job["allocator"], job["pattern"]))
    cmd = [valgrind, "--tool=callgrind", "--collect-atstart=no", "--callgrind-out-file=" + out] + job["argv"] + \
          ["--pattern", job["pattern"], "--steps", str(steps)]
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if job.get("preload"):
        env["LD_PRELOAD"] = job["preload"]
    rec = {k: v for k, v in job.items() if k not in ("argv", "expect")}
    t0 = time.time()
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        if p.returncode != 0:
            raise RuntimeError("exit {}: {}".format(p.returncode, p.stderr.strip()[-400:]))
        lines = [line for line in p.stdout.splitlines() if line.startswith("{")]
        if not lines:
            raise RuntimeError("no JSON line in the output")
        got = json.loads(lines[-1])
        if not got.get("under_valgrind"):
            raise RuntimeError("the program did not see valgrind (nothing would be counted)")
        # The library a row names must be the one that served it.
        want = job.get("expect")
        if want and (got.get("malloc_library"), got.get("allotheque_heap")) != tuple(want):
            raise RuntimeError("active malloc is {}/{}, not {}/{}".format(
                got.get("malloc_library"), got.get("allotheque_heap"), *want))
        ir = callgrind_total(out)
        rec.update(ops=got["ops"], unit=got["unit"], warm_up=got["warm_up"], ir=ir, ir_per_op=ir / got["ops"])
        if "malloc_library" in got:
            rec["malloc_library"] = got["malloc_library"]
    except Exception as e:   # noqa: BLE001 - reported in the table and the errors
        rec["error"] = str(e)
    finally:
        if os.path.exists(out):
            os.remove(out)
    rec["seconds"] = round(time.time() - t0, 2)
    return rec


def table(rows, header):
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" if i else "---" for i in range(len(header))) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def grid(recs, allocators, patterns):
    idx = {(r["allocator"], r["pattern"]): r for r in recs}
    rows = []
    for a in allocators:
        row = [a]
        for p in patterns:
            r = idx.get((a, p))
            row.append("-" if not r else "error" if "error" in r else "{:.1f}".format(r["ir_per_op"]))
        rows.append(row)
    return table(rows, ["allocator"] + ["{} (/{})".format(p, UNITS[p]) for p in patterns])


def ratios(idx, a, b, patterns):
    """'pattern a/b' for every pattern both have, e.g. ['pair 1.23x', ...]."""
    out = []
    for p in patterns:
        x, y = idx.get((a, p)), idx.get((b, p))
        if x and y and y["ir_per_op"] > 0:
            out.append("{} {:.2f}×".format(p, x["ir_per_op"] / y["ir_per_op"]))
    return out


def git_state():
    try:
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return head + (" (working tree modified)" if dirty else "")
    except Exception:   # noqa: BLE001
        return "unknown"


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def compiler_of(bdir):
    """The build tree's C++ compiler and its version line, from CMakeCache.txt."""
    try:
        with open(os.path.join(bdir, "CMakeCache.txt")) as f:
            cache = dict(line.split("=", 1) for line in f.read().splitlines() if "=" in line and
                         not line.startswith(("#", "//")))
        # Its type is FILEPATH, STRING, or UNINITIALIZED where -DCMAKE_CXX_COMPILER=g++ named it.
        cxx = next(v for k, v in cache.items() if k.startswith("CMAKE_CXX_COMPILER:"))
        flags = " ".join(x for x in (cache.get("CMAKE_CXX_FLAGS:STRING", ""), cache.get(
            "CMAKE_CXX_FLAGS_{}:STRING".format(cache.get("CMAKE_BUILD_TYPE:STRING", "").upper()), "")) if x)
        version = subprocess.run([cxx, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
        return "{} {}".format(version, flags).strip()
    except Exception:   # noqa: BLE001
        return "unknown compiler"


def plan(bdir, malloc_exe, heaps_exe, extra_libs, want_a, want_p):
    """The jobs: one per (allocator, pattern). Returns jobs, malloc row names,
    heap row names and notes (what was skipped and why)."""
    notes, jobs = [], []
    libs = [(n, p, None) for n, p in BASELINES]
    extra = dict(extra_libs)
    for h in ALLOTHEQUE_MALLOCS:
        path = extra.pop(h, None) or os.path.join(bdir, "src", "malloc", "liballotheque_malloc_{}.so".format(h))
        # A tree that built only the default liballotheque_malloc.so: that is
        # the segregated one unless ALLOTHEQUE_MALLOC_HEAP says otherwise (the
        # row's check below refuses it then).
        default = os.path.join(bdir, "src", "malloc", "liballotheque_malloc.so")
        if h == "segregated" and not os.path.exists(path) and os.path.exists(default):
            path = default
        libs.append(("allotheque-" + h, path, h))
    libs += [("allotheque-" + n, p, n) for n, p in extra.items()]
    libs.append(("harness", None, None))
    malloc_rows, heap_rows = [], []
    if not os.access(malloc_exe, os.X_OK):
        notes.append("{} not built: no malloc table".format(malloc_exe))
    else:
        for name, lib, heap in libs:
            if want_a and name not in want_a:
                continue
            if lib and not os.path.exists(lib):
                notes.append("{}: {} not found, skipped".format(name, lib))
                continue
            malloc_rows.append(name)
            expect = None if name == "harness" else ("allotheque", heap) if heap else (name, None)
            argv = [malloc_exe] + (["--allocator", "harness"] if name == "harness" else [])
            for p in MALLOC_PATTERNS:
                if not want_p or p in want_p:
                    jobs.append({"program": "malloc", "allocator": name, "pattern": p, "preload": lib,
                                 "expect": expect, "argv": argv})
    # The rows are the program's own list (instructions_heaps --list); a
    # program from an older tree, without the option, gives no heap table.
    heaps = []
    if not os.access(heaps_exe, os.X_OK):
        notes.append("{} not built: no heap table".format(heaps_exe))
    else:
        listed = subprocess.run([heaps_exe, "--list"], capture_output=True, text=True)
        if listed.returncode != 0:
            notes.append("{} --list failed (exit {}): no heap table".format(heaps_exe, listed.returncode))
        else:
            heaps = listed.stdout.split()
    for h in heaps:
        if want_a and ("heap:" + h) not in want_a and h not in want_a:
            continue
        heap_rows.append(h)
        for p in HEAP_PATTERNS:
            if not want_p or p in want_p:
                jobs.append({"program": "heaps", "allocator": h, "pattern": p, "argv": [heaps_exe, "--heap", h]})
    return jobs, malloc_rows, heap_rows, notes


def sanity(recs, lo, hi):
    """--check: every allocator's cell in (lo, hi) and above its harness."""
    bad = []
    harness = {(r["program"], r["pattern"]): r["ir_per_op"] for r in recs
               if r["allocator"] == "harness" and "error" not in r}
    for r in recs:
        if "error" in r or r["allocator"] == "harness":
            continue
        v = r["ir_per_op"]
        floor = harness.get((r["program"], r["pattern"]))
        if not lo < v < hi:
            bad.append("{} {} {}: {:.1f} instructions per {}, outside ({}, {})".format(
                r["program"], r["allocator"], r["pattern"], v, r["unit"], lo, hi))
        elif floor is not None and v <= floor:
            bad.append("{} {} {}: {:.1f} per {}, not above the harness's {:.1f}".format(
                r["program"], r["allocator"], r["pattern"], v, r["unit"], floor))
    for (prog, pat), v in harness.items():
        if not 0 < v < hi:
            bad.append("{} harness {}: {:.1f} per op".format(prog, pat, v))
    return bad


def run_section(build_dir, steps=DEFAULT_STEPS, jobs=1, allocators=None, patterns=None, timeout=600,
                valgrind=None, malloc_exe=None, heaps_exe=None, extra_libs=(), level=2):
    """The whole section. Returns (markdown lines, details dict, errors)."""
    bdir = os.path.abspath(build_dir)
    here = os.path.join(bdir, "bench", "instructions")
    malloc_exe = malloc_exe or os.path.join(here, "instructions_malloc")
    heaps_exe = heaps_exe or os.path.join(here, "instructions_heaps")
    valgrind = valgrind or shutil.which("valgrind")
    h = "#" * level
    title = "{} Instructions per operation (callgrind)".format(h)
    if not valgrind or not shutil.which(valgrind):
        return [title, "", "(valgrind not found: section skipped; scripts/bench installs it)", ""], {}, []
    want_a = set(allocators) if allocators else None
    want_p = set(patterns) if patterns else None
    jobs_list, malloc_rows, heap_rows, notes = plan(bdir, malloc_exe, heaps_exe, extra_libs, want_a, want_p)

    t0 = time.time()
    log("instructions: {} callgrind runs, {} counted operations each, {} at a time".format(
        len(jobs_list), steps, jobs))
    with tempfile.TemporaryDirectory(prefix="instructions-") as tmp:
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            recs = list(pool.map(lambda j: run_one(valgrind, tmp, j, steps, timeout), jobs_list))
    elapsed = time.time() - t0
    errors = ["instructions {} {} {}: {}".format(r["program"], r["allocator"], r["pattern"], r["error"])
              for r in recs if "error" in r]

    date = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    commit = git_state()
    version = subprocess.run([valgrind, "--version"], capture_output=True, text=True).stdout.strip()
    machine = "{} ({} CPUs)".format(cpu_model(), os.cpu_count())
    compiler = compiler_of(bdir)
    mp = [p for p in MALLOC_PATTERNS if not want_p or p in want_p]
    hp = [p for p in HEAP_PATTERNS if not want_p or p in want_p]
    md = [title, "",
          "- date {}, commit {}; {}; machine {}; programs built with {}".format(date, commit, version, machine,
                                                                              compiler),
          "- `valgrind --tool=callgrind --collect-atstart=no`; each program turns collection on (client request "
          "`CALLGRIND_TOGGLE_COLLECT`) around its counted loop only, after an uncounted warm-up of the same loop "
          "(max(steps / 10, 5000) operations); inputs are drawn before the loop from a fixed seed, so every "
          "allocator gets the same sizes and the counts repeat, exactly except where an allocator acts on the "
          "clock (jemalloc's decay, the allotheque back end's page ageing: within 0.5 % between runs). Cell = "
          "counted instructions (Ir) / counted operations ({} per cell, one process per cell). Nothing is "
          "subtracted: each block gets one store, and the `harness` row is the same loops around an allocator "
          "that does nothing (out-of-line calls in the malloc table, inlined in the heap table), the loops' own "
          "share of every row.".format(steps),
          "- patterns: *pair* malloc(32), free; *batch* 100 mallocs of 32–64 B, then their frees in allocation "
          "order (per pair); *random* 1000 live slots, each step frees a random slot's block and mallocs a random "
          "8–1024 B one in its place (per step: one free, one malloc); *realloc* malloc(16), realloc up to 64 KiB "
          "by +16–256 B steps, free (per realloc, the malloc and free shared among ~480 reallocs); *calloc* "
          "calloc(1, 64), free; *aligned* aligned_alloc(64, 48), free; *new* operator new(32), sized operator delete "
          "(a C++ program's calls); *remote* one thread mallocs a batch of 100 "
          "(32–64 B), another frees it, in turns (per block: both threads' counted loops, callgrind serialises "
          "the threads).", ""]
    idx = {(r["allocator"], r["pattern"]): r for r in recs if r["program"] == "malloc" and "error" not in r}
    if malloc_rows:
        md += ["{}# malloc + free (LD_PRELOAD; glibc without)".format(h), "",
               grid([r for r in recs if r["program"] == "malloc"], malloc_rows, mp), ""]
        for row in [r for r in malloc_rows if r.startswith("allotheque-")]:
            rs = ratios(idx, row, TARGET_PEER, mp)
            if rs:
                md.append("- {} / {}: {}".format(row, TARGET_PEER, ", ".join(rs)))
        md.append("")
    if heap_rows:
        hrecs = [r for r in recs if r["program"] == "heaps"]
        md += ["{}# Header-only heaps: allocate + sized deallocate, inlined".format(h), "",
               "`heap.allocate(request{n})` / `heap.deallocate(p, request{n})` of the library's ready-made heaps "
               "(default options, arena_source) inlined into the loop; the `twin-` rows are hand-written "
               "segregated free-list allocators with the same size classes (bench/instructions/twin.hpp: one "
               "list per class, a page refill cut into chunks, static arena). `velox` and `medius` are the "
               "paper's (exact sizes); the `-classed` rows are Velox and Medius over the segregated heap's "
               "classes (velox_classed_partition, medius_classed_partition), the partitions the malloc "
               "libraries use. `lea` coalesces at once; `lea_deferred` parks freed blocks up to 1 KiB first "
               "(Lea's fast bins), the Lea malloc library's partition.", "",
               grid(hrecs, heap_rows, hp), ""]
        hidx = {(r["allocator"], r["pattern"]): r for r in hrecs if "error" not in r}
        for fam in ("segregated", "quickfit", "kingsley"):
            rs = ratios(hidx, fam, "twin-" + fam, hp)
            if rs:
                md.append("- {} / its hand-written twin: {}".format(fam, ", ".join(rs)))
        md.append("")
    md += ["- " + n for n in notes]
    md += ["- section time {:.0f} s ({} callgrind runs, {} at a time)".format(elapsed, len(recs), jobs)]
    md += ["- ERROR " + e for e in errors] + [""]
    details = {"date": date, "commit": commit, "valgrind": version, "machine": machine, "compiler": compiler,
               "steps": steps, "notes": notes, "errors": errors, "elapsed_seconds": elapsed, "runs": recs}
    return md, details, errors


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default="build/bench", help="finds the programs and liballotheque_malloc_*.so here")
    ap.add_argument("--malloc-exe", default=None, help="default: <build>/bench/instructions/instructions_malloc")
    ap.add_argument("--heaps-exe", default=None, help="default: <build>/bench/instructions/instructions_heaps")
    ap.add_argument("--lib", action="append", default=[], metavar="HEAP=PATH",
                    help="an allotheque malloc library (default: <build>/src/malloc/liballotheque_malloc_<heap>.so)")
    ap.add_argument("--steps", type=int, default=DEFAULT_STEPS, help="counted operations per (allocator, pattern)")
    ap.add_argument("--patterns", default=None, help="comma-separated subset")
    ap.add_argument("--allocators", default=None,
                    help="comma-separated subset of row names (malloc rows: glibc, ..., allotheque-<heap>, harness; "
                         "heap rows: segregated, twin-segregated, ..., harness)")
    ap.add_argument("--jobs", type=int, default=1, help="callgrind runs at a time (counts do not depend on it)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per callgrind run")
    ap.add_argument("--out-dir", default=None, help="default: build/bench-report/instructions")
    ap.add_argument("--valgrind", default=shutil.which("valgrind") or "valgrind")
    ap.add_argument("--check", default=None, metavar="LO,HI",
                    help="fail unless every allocator's cell is in (LO, HI) and above the harness's (smoke test)")
    ap.add_argument("--skip-code", type=int, default=None,
                    help="exit with this status when valgrind is missing (ctest's SKIP_RETURN_CODE)")
    args = ap.parse_args()

    if not shutil.which(args.valgrind):
        log("instructions: valgrind not found (scripts/bench installs it)")
        return args.skip_code if args.skip_code is not None else 1
    md, details, errors = run_section(
        args.build_dir, steps=args.steps, jobs=args.jobs,
        allocators=args.allocators.split(",") if args.allocators else None,
        patterns=args.patterns.split(",") if args.patterns else None, timeout=args.timeout,
        valgrind=args.valgrind, malloc_exe=args.malloc_exe, heaps_exe=args.heaps_exe,
        extra_libs=[x.split("=", 1) for x in args.lib], level=1)
    if args.check:
        lo, hi = (float(x) for x in args.check.split(","))
        bad = sanity(details.get("runs", []), lo, hi)
        if not details.get("runs"):
            bad.append("no cell was measured")
        bad += details.get("notes", [])   # a row asked for and skipped (not built, not found)
        errors += ["check: " + b for b in bad]
        md += ["- CHECK FAILED " + b for b in bad]
    text = "\n".join(md).rstrip() + "\n"
    print(text)
    out_dir = args.out_dir or os.path.join(ROOT, "build", "bench-report", "instructions")
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "instructions.md"), "w") as f:
        f.write(text)
    with open(os.path.join(out_dir, "instructions.json"), "w") as f:
        json.dump(details, f, indent=1)
    log("instructions: wrote {}/instructions.md and instructions.json".format(out_dir))
    for e in errors:
        log("ERROR: " + e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
