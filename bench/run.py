#!/usr/bin/python3
"""Benchmark driver for allotheque (see bench/README.md).

Runs every (Olden program, allocator) in fresh processes of the `olden` runner,
interleaved across allocators (round-robin within each repetition), takes
medians, checks that checksums agree, prints tables normalised to glibc and
writes build/bench-report/{results.json,report.md,*.png}. The threads section
runs `threads_bench` (bench/threads) under every malloc, the allotheque malloc
libraries of the build tree included.

    bench/run.py --build-dir build/bench            standard scale, fresh + aged, micro
    bench/run.py --build-dir build/bench --quick    quick scale, fresh + aged, no micro
    bench/run.py --build-dir build/bench --full     the paper's inputs
    bench/run.py ... --cachegrind                   also D1/LL misses under cachegrind (quick scale)
    bench/run.py ... --threads-only                 only the multi-threaded malloc section (threads_bench)
    bench/run.py --build-dir build/bench --order-only   only the "order" section (allocation order != traversal)
    bench/run.py --build-dir build/bench --cliff-only   only the "cliffs" section (slowest op vs steady state)
    bench/run.py --build-dir build/bench --instructions-only   only the instruction counts (callgrind)

The peers' libraries are Debian's, in /usr/lib/x86_64-linux-gnu; set
ALLOTHEQUE_PEER_LIBDIR to take them from another folder (a machine without
the packages, given copies of them).
"""
import argparse
import datetime
import glob
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIBDIR = os.environ.get("ALLOTHEQUE_PEER_LIBDIR", "/usr/lib/x86_64-linux-gnu")
PRELOAD = {
    "glibc": None,
    "jemalloc": LIBDIR + "/libjemalloc.so.2",
    "mimalloc": LIBDIR + "/libmimalloc.so.2",
    "tcmalloc": LIBDIR + "/libtcmalloc_minimal.so.4",
}
PEERS = ["glibc", "jemalloc", "mimalloc", "tcmalloc", "pmr"]
HEAPS = ["kingsley", "quickfit", "segregated", "velox", "medius", "defero", "lea", "lea_deferred", "kingsley_coalescing"]
# This project's malloc libraries, run under the Olden programs like the peers
# (LD_PRELOAD, hints ignored: the library's own placement); <heap> names
# <build>/src/malloc/liballotheque_malloc_<heap>.so (added to PRELOAD in main).
MALLOC_LIBS = ["allotheque-segregated", "allotheque-velox", "allotheque-medius"]
ALL_ALLOCATORS = PEERS + HEAPS + MALLOC_LIBS
CACHEGRIND = ["valgrind", "--tool=cachegrind", "--cache-sim=yes", "--LL=33554432,16,64",
              "--cachegrind-out-file=/dev/null"]


def log(msg):
    print(msg, flush=True)


def env_with_preload(lib):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if lib:
        env["LD_PRELOAD"] = lib
    return env


def env_for(allocator):
    return env_with_preload(PRELOAD.get(allocator))


def gmean(xs):
    xs = [x for x in xs if x is not None and x > 0]
    if not xs:
        return None
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def amean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def fmt(x, spec="{:.2f}"):
    return "-" if x is None else spec.format(x)


# ---------------------------------------------------------------------------
# Olden runs
# ---------------------------------------------------------------------------

def run_olden(exe, program, allocator, scale, aged, timeout, prefix=None):
    cmd = list(prefix or []) + [exe, "--program", program, "--allocator", allocator, "--scale", scale]
    if aged:
        cmd.append("--aged")
    p = subprocess.run(cmd, env=env_for(allocator), capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError("{} exited {}: {}".format(" ".join(cmd), p.returncode, p.stderr.strip()[-500:]))
    line = [l for l in p.stdout.splitlines() if l.startswith("{")][-1]
    rec = json.loads(line)
    want = "allotheque" if allocator in MALLOC_LIBS else allocator
    if allocator in PRELOAD and rec.get("malloc_library") != want:
        raise RuntimeError("{}: active malloc is {}, not {}".format(program, rec.get("malloc_library"), want))
    return rec, p.stderr


def parse_cachegrind(stderr):
    out = {}
    for key, name in (("D1  misses", "d1_misses"), ("LLd misses", "lld_misses"), ("LL misses", "ll_misses"),
                      ("D   refs", "d_refs"), ("I   refs", "i_refs")):
        m = re.search(r"==\d+== " + re.escape(key) + r":\s+([\d,]+)", stderr)
        if m:
            out[name] = int(m.group(1).replace(",", ""))
    return out


def perf_available():
    if not shutil.which("perf"):
        return False
    try:
        p = subprocess.run(["perf", "stat", "-x,", "-e", "instructions", "true"], capture_output=True, text=True,
                           timeout=20)
    except Exception:
        return False
    return p.returncode == 0 and "not supported" not in p.stderr and "<not counted>" not in p.stderr


def run_suite(args, exe, programs, allocators, scale, aged_modes, reps):
    """Every (program, allocator) `reps` times in fresh processes; within a
    repetition the allocators take turns (round-robin) for each program. With
    --jobs 2 two runs overlap (smoke runs only: they share the memory bus)."""
    from concurrent.futures import ThreadPoolExecutor
    jobs = [(rep, aged, program, allocator) for rep in range(reps) for aged in aged_modes
            for program in programs for allocator in allocators]
    runs, errors = [], []
    t_start = time.time()

    def one(job):
        rep, aged, program, allocator = job
        rec, _ = run_olden(exe, program, allocator, scale, aged, args.timeout)
        rec["rep"] = rep
        return rec

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futs = [(job, pool.submit(one, job)) for job in jobs]
        for k, (job, f) in enumerate(futs, 1):
            rep, aged, program, allocator = job
            head = "[{:4d}/{}] {} rep {} {:5s} {:10s} {:9s}".format(k, len(jobs), scale, rep + 1,
                                                                   "aged" if aged else "fresh", program, allocator)
            try:
                rec = f.result()
            except Exception as e:   # noqa: BLE001 - reported, the run continues
                errors.append(str(e))
                log(head + " FAILED: {}".format(e))
                continue
            runs.append(rec)
            log(head + " {:8.3f} s  rss {:7.1f} MiB  ({:.0f} s elapsed)".format(
                rec["seconds"], rec["peak_rss_delta_bytes"] / 2**20, time.time() - t_start))
    return runs, errors


def summarise(runs, scale):
    groups = {}
    for r in runs:
        groups.setdefault((r["program"], r["allocator"], r["aged"]), []).append(r)
    results = []
    for (program, allocator, aged), rs in groups.items():
        secs = [r["seconds"] for r in rs]
        rss = [r["peak_rss_delta_bytes"] for r in rs]
        req = rs[0]["peak_requested_bytes"]
        peak_os = int(statistics.median(rss))
        res = {
            "program": program, "allocator": allocator, "scale": scale, "aged": aged,
            "seconds": statistics.median(secs), "seconds_all": secs,
            "peak_os_bytes": peak_os, "peak_rss_delta_bytes_all": rss,
            "peak_requested_bytes": req,
            "fragmentation": (peak_os - req) / req if req else None,
            "checksum": rs[0]["checksum"], "repetitions": len(rs),
        }
        if "malloc_library" in rs[0]:
            res["malloc_library"] = rs[0]["malloc_library"]
        if "heap_peak_os_bytes" in rs[0]:
            res["heap_peak_os_bytes"] = int(statistics.median(r["heap_peak_os_bytes"] for r in rs))
            res["heap_os_bytes_before"] = rs[0]["heap_os_bytes_before"]
        if aged:
            res["aged_bytes_live"] = rs[0]["aged_bytes_live"]
        results.append(res)
    return results


def check_checksums(records):
    """All runs of one program at one scale must agree, whatever the allocator or heap age."""
    by = {}
    for r in records:
        by.setdefault((r["program"], r["scale"]), {}).setdefault(r["checksum"], set()).add(
            "{}{}".format(r["allocator"], "/aged" if r.get("aged") else ""))
    bad = {k: v for k, v in by.items() if len(v) > 1}
    return bad


# ---------------------------------------------------------------------------
# Micro-benchmarks
# ---------------------------------------------------------------------------

def run_micro(args, micro_dir):
    out = {"alloc_patterns": [], "kingsley_overhead": [], "other": {}}
    if not os.path.isdir(micro_dir):
        return out
    min_time = ["--benchmark_min_time={}".format(args.micro_min_time)]
    for name in sorted(os.listdir(micro_dir)):
        exe = os.path.join(micro_dir, name)
        if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
            continue
        variants = [("glibc", None)]
        if name == "alloc_patterns":
            variants += [(a, "malloc") for a in ("jemalloc", "mimalloc", "tcmalloc")]
        for label, filt in variants:
            cmd = [exe, "--benchmark_format=json"] + min_time
            if filt:
                cmd.append("--benchmark_filter=/" + filt + "/")
            if name == "kingsley_overhead":
                # The composed / hand-written ratio compares a few nanoseconds:
                # on a shared machine one noisy second would decide it, so each
                # pair is measured five times, interleaved, and the medians kept.
                cmd += ["--benchmark_repetitions=5", "--benchmark_enable_random_interleaving=true",
                        "--benchmark_report_aggregates_only=true"]
            log("micro: {} ({})".format(name, label if filt else "all"))
            try:
                p = subprocess.run(cmd, env=env_for(label), capture_output=True, text=True, timeout=1800)
                data = json.loads(p.stdout)
            except Exception as e:   # noqa: BLE001
                log("micro: {} failed: {}".format(name, e))
                continue
            rows = []
            for b in data.get("benchmarks", []):
                if b.get("run_type") == "aggregate":
                    if b.get("aggregate_name") != "median":
                        continue
                    b = dict(b, name=b.get("run_name", b["name"]))
                parts = b["name"].split("/")
                row = {"benchmark": name, "name": b["name"], "real_time": b.get("real_time"),
                       "time_unit": b.get("time_unit"), "label": b.get("label", "")}
                if "ns_per_pair" in b:
                    row["ns_per_pair"] = b["ns_per_pair"]   # the counter is already ns per pair
                if len(parts) == 3:
                    row["pattern"], row["allocator"], row["size"] = parts[0], parts[1], int(parts[2])
                    if row["allocator"] == "malloc":
                        row["allocator"] = b.get("label") or label
                rows.append(row)
            if name in ("alloc_patterns", "kingsley_overhead"):
                out[name] += rows
            else:
                out["other"].setdefault(name, []).extend(rows)
    return out


# ---------------------------------------------------------------------------
# Threads section: bench/threads/threads.cpp (`threads_bench`) under every
# malloc, one (workload, threads, allocator) per process.
# ---------------------------------------------------------------------------

THREAD_WORKLOADS = ["server", "prodcons", "local", "mixed", "xmalloc"]
MALLOC_BASELINES = ["glibc", "jemalloc", "mimalloc", "tcmalloc"]


def usable_cpus():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def default_thread_counts(n):
    """Powers of two up to n, n itself and 2n: 1, 2, 4 on 2 cores; 1 ... 16, 32 on 16."""
    counts = {n, 2 * n}
    k = 1
    while k <= n:
        counts.add(k)
        k *= 2
    return sorted(counts)


def threads_allocators(exe, bdir, want, extra_libs):
    """The mallocs to compare: the baselines whose library exists, then every
    allotheque malloc library in <build>/src/malloc (liballotheque_malloc*.so)
    and in extra_libs, named after the heap the library reports
    (allotheque_malloc_heap_name()). Returns dicts with name, preload,
    malloc_library and heap: what every run's own report must say."""
    out = []
    for a in MALLOC_BASELINES:
        if a != "glibc" and want is not None and a not in want:
            continue
        lib = PRELOAD[a]
        if lib and not os.path.exists(lib):
            log("threads: warning: {} not found, {} skipped".format(lib, a))
            continue
        out.append({"name": a, "preload": lib, "malloc_library": a, "heap": None})
    libs = sorted(glob.glob(os.path.join(bdir, "src", "malloc", "liballotheque_malloc*.so"))) + list(extra_libs)
    found = []
    for lib in libs:
        lib = os.path.abspath(lib)
        try:
            p = subprocess.run([exe, "--identify"], env=env_with_preload(lib), capture_output=True, text=True,
                               timeout=30)
            rec = json.loads(p.stdout)
        except Exception as e:   # noqa: BLE001 - a library that cannot even start is reported and skipped
            log("threads: warning: {} does not run ({}), skipped".format(lib, e))
            continue
        if rec.get("malloc_library") != "allotheque" or not rec.get("allotheque_heap"):
            log("threads: warning: {} is not an allotheque malloc (no allotheque_malloc_heap_name), "
                "skipped".format(lib))
            continue
        found.append({"name": "allotheque-" + rec["allotheque_heap"], "preload": lib,
                      "malloc_library": "allotheque", "heap": rec["allotheque_heap"]})
    # Two libraries naming the same heap (the configure-time one and its
    # per-heap twin) keep apart by their file name.
    for a in found:
        if sum(b["name"] == a["name"] for b in found) > 1:
            a["name"] += "@" + os.path.basename(a["preload"])[:-3]
    for a in found:
        if a["name"] in {b["name"] for b in out}:
            continue
        if want is None or "allotheque" in want or a["name"] in want:
            out.append(a)
    return out


def run_threads_one(exe, alloc, workload, threads, seconds, timeout, seed):
    """One run; returns its JSON record with `status` ok, timeout, failed (the
    program exited non-zero: exit 2 is a verification failure) or
    wrong-malloc (the library active in the run is not the one asked for)."""
    cmd = [exe, "--workload", workload, "--threads", str(threads), "--seconds", str(seconds), "--seed", str(seed)]
    base = {"workload": workload, "threads": threads, "allocator": alloc["name"], "library": alloc["preload"]}
    try:
        p = subprocess.run(cmd, env=env_with_preload(alloc["preload"]), capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return dict(base, status="timeout", error="no result after {:.0f} s".format(timeout))
    if p.returncode != 0:
        what = "verification failed" if p.returncode == 2 else "exit {}".format(p.returncode)
        return dict(base, status="failed", error="{}: {}".format(what, p.stderr.strip()[-300:]))
    rec = json.loads([l for l in p.stdout.splitlines() if l.startswith("{")][-1])
    rec.update(base, status="ok")
    if rec.get("malloc_library") != alloc["malloc_library"] or rec.get("allotheque_heap") != alloc["heap"]:
        rec["status"] = "wrong-malloc"
        rec["error"] = "active malloc is {}/{}, not {}/{}".format(rec.get("malloc_library"),
                                                                  rec.get("allotheque_heap"),
                                                                  alloc["malloc_library"], alloc["heap"])
    return rec


def summarise_threads(runs):
    groups = {}
    for r in runs:
        groups.setdefault((r["workload"], r["threads"], r["allocator"]), []).append(r)
    rows = []
    for (workload, threads, allocator), rs in groups.items():
        ok = [r for r in rs if r["status"] == "ok"]
        bad = [r for r in rs if r["status"] != "ok"]
        row = {"workload": workload, "threads": threads, "allocator": allocator, "library": rs[0]["library"],
               "status": bad[0]["status"] if bad else "ok", "repetitions": len(rs),
               "ops_per_second": None, "ops_per_second_all": [r["ops_per_second"] for r in ok]}
        if bad:
            row["errors"] = sorted({r["error"] for r in bad})
        if ok:
            med = lambda k: statistics.median(r[k] for r in ok)   # noqa: E731
            row.update(ops_per_second=med("ops_per_second"), remote_free_fraction=med("remote_free_fraction"),
                       peak_rss_bytes=int(med("peak_rss_bytes")),
                       cpu_per_wall=statistics.median(r["cpu_seconds"] / r["seconds"] for r in ok),
                       ops_per_cpu_second=statistics.median(r["ops"] / r["cpu_seconds"] for r in ok
                                                            if r["cpu_seconds"] > 0) if any(
                           r["cpu_seconds"] > 0 for r in ok) else None,
                       seconds=ok[0]["seconds_requested"], malloc_library=ok[0]["malloc_library"],
                       allotheque_heap=ok[0]["allotheque_heap"])
            if bad:   # a failure anywhere disqualifies the cell: a broken allocator must not score
                row["ops_per_second"] = row["ops_per_cpu_second"] = None
        rows.append(row)
    return rows


def threads_tables(rows, allocators, workloads, counts, n):
    """Markdown tables: Mops/s per workload, the allotheque libraries' ratios
    to mimalloc and glibc, and the issue-13 targets."""
    idx = {(r["workload"], r["threads"], r["allocator"]): r for r in rows}

    def ops(w, t, a):
        r = idx.get((w, t, a))
        return r["ops_per_second"] if r else None

    def cell(w, t, a):
        r = idx.get((w, t, a))
        if r is None:
            return "-"
        return fmt(r["ops_per_second"] / 1e6) if r["ops_per_second"] else r["status"]

    def scaling(w, a):
        lo, hi = ops(w, 1, a), ops(w, n, a)
        return hi / lo if lo and hi else None

    parts = []
    for w in workloads:
        body = [[a] + [cell(w, t, a) for t in counts] + [fmt(scaling(w, a))] for a in allocators]
        parts.append("### {} (Mops/s: allocations + frees per second, all threads)\n\n".format(w) +
                     table(body, ["allocator"] + ["{} thr".format(t) for t in counts] +
                           ["{}→{} thr".format(1, n)]))
    # Whether the runs had their cores: CPU seconds per wall second, ideally
    # min(threads, CPUs); less when another load shares the machine or threads
    # sleep on a lock.
    body = []
    for w in workloads:
        vals = [[r["cpu_per_wall"] for r in rows if r["workload"] == w and r["threads"] == t
                 and r.get("cpu_per_wall") is not None] for t in counts]
        body.append([w] + [fmt(statistics.median(v) if v else None) for v in vals])
    body.append(["ideal"] + [fmt(float(min(t, n))) for t in counts])
    text = "### CPU seconds per wall second (median over allocators)\n\n" + \
        table(body, ["workload"] + ["{} thr".format(t) for t in counts])
    # The median over allocators is not moved by one allocator's threads
    # sleeping on its lock: when it is far below the ideal, the machine was shared.
    short = []
    for t in counts:
        v = [r["cpu_per_wall"] for r in rows if r["threads"] == t and r.get("cpu_per_wall") is not None]
        if v and statistics.median(v) < 0.75 * min(t, n):
            short.append("{} thr: {:.2f} of {}".format(t, statistics.median(v), min(t, n)))
    if short:
        text += ("\n\n**Warning: the runs did not get their CPUs** ({}): another load shared the machine, so "
                 "throughput is low and noisy, and threads that take turns on fewer cores than they number "
                 "contend less than on a quiet machine. Compare allocators within this report only; re-run on "
                 "a quiet machine for scaling figures.".format("; ".join(short)))
    parts.append(text)
    # Per CPU-second: robust to other load on the machine, but blind to time
    # spent asleep on a lock (that shows in the wall-clock tables only).
    body = []
    for a in allocators:
        row = [a]
        for w in workloads:
            for t in counts:
                r = idx.get((w, t, a))
                row.append(fmt(r["ops_per_cpu_second"] / 1e6) if r and r.get("ops_per_cpu_second") else "-")
        body.append(row)
    parts.append("### Mops per CPU-second (load-robust; blind to threads asleep on a lock)\n\n" +
                 table(body, ["allocator"] + ["{} {}".format(w, t) for w in workloads for t in counts]))
    mine = [a for a in allocators if a.startswith("allotheque-")]
    checks = []
    for a in mine:
        body = []
        for w in workloads:
            row = [w]
            for t in counts:
                v = ops(w, t, a)
                mi, gl = ops(w, t, "mimalloc"), ops(w, t, "glibc")
                row.append("{} / {}".format(fmt(v / mi if v and mi else None), fmt(v / gl if v and gl else None)))
            row += [fmt(scaling(w, a)), fmt(scaling(w, "glibc"))]
            body.append(row)
            for t in (1, 2):
                if t not in counts:
                    continue
                # A target whose reference did not run is left out; one whose
                # allotheque cell has no number (failed, timed out) is missed.
                v, mi, gl = ops(w, t, a), ops(w, t, "mimalloc"), ops(w, t, "glibc")
                if mi:
                    checks.append((a, w, "{} thr >= 0.8 x mimalloc".format(t), v is not None and v >= 0.8 * mi))
                if gl:
                    checks.append((a, w, "{} thr >= glibc".format(t), v is not None and v >= gl))
            s, g = scaling(w, a), scaling(w, "glibc")
            if g:
                checks.append((a, w, "scaling 1→{} >= glibc's".format(n), s is not None and s >= g))
        parts.append("### {}: throughput / mimalloc / glibc\n\n".format(a) +
                     table(body, ["workload"] + ["{} thr".format(t) for t in counts] +
                           ["scaling 1→{}".format(n), "glibc scaling"]))
    if checks:
        failed = [c for c in checks if not c[3]]
        text = "### Issue 13 targets: {} of {} met\n\n".format(len(checks) - len(failed), len(checks))
        text += "\n".join("- {} {}: {}".format(a, w, what) for a, w, what, _ in failed) if failed else \
            "all met"
        parts.append(text)
    return "\n\n".join(parts)


def threads_plot(report_dir, rows, allocators, workloads, counts, n):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as e:   # noqa: BLE001
        log("matplotlib unavailable, no threads plot: {}".format(e))
        return None
    idx = {(r["workload"], r["threads"], r["allocator"]): r for r in rows}
    cols = 2 if len(workloads) > 1 else 1
    nrows = (len(workloads) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(6 * cols, 4 * nrows), squeeze=False)
    for ax, w in zip(axes.flat, workloads):
        for i, a in enumerate(allocators):
            pts = [(t, idx[(w, t, a)]["ops_per_second"] / 1e6) for t in counts
                   if (w, t, a) in idx and idx[(w, t, a)]["ops_per_second"]]
            if pts:
                style = "-" if a.startswith("allotheque-") else "--"
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style, marker="o", label=a,
                        color=plt.cm.tab10(i % 10), linewidth=2.2 if a.startswith("allotheque-") else 1.4)
        ax.axvline(n, color="grey", linestyle=":", linewidth=1)
        ax.set_xscale("log", base=2)
        ax.set_xticks(counts)
        ax.set_xticklabels([str(t) for t in counts])
        ax.set_xlabel("threads ({} CPUs)".format(n))
        ax.set_ylabel("Mops/s (allocations + frees)")
        ax.set_ylim(bottom=0)
        ax.set_title(w)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(workloads):]:
        ax.set_visible(False)
    fig.tight_layout()
    fig.savefig(os.path.join(report_dir, "threads.png"), dpi=110)
    plt.close(fig)
    return "threads.png"


def run_threads_section(args, bdir, report_dir):
    """Returns (result rows, every run, markdown lines, errors)."""
    exe = os.path.join(bdir, "bench", "threads_bench")
    if not os.access(exe, os.X_OK):
        return [], [], ["## Threads", "", "skipped: {} not built".format(exe), ""], []
    n = usable_cpus()
    counts = sorted({int(c) for c in args.thread_counts.split(",")}) if args.thread_counts else \
        default_thread_counts(n)
    if counts[0] < 1:
        sys.exit("run.py: --thread-counts must be >= 1")
    workloads = args.threads_workloads.split(",") if args.threads_workloads else list(THREAD_WORKLOADS)
    unknown = [w for w in workloads if w not in THREAD_WORKLOADS]
    if unknown:
        sys.exit("run.py: unknown --threads-workloads {} (known: {})".format(unknown, THREAD_WORKLOADS))
    want = set(args.allocators.split(",")) if args.allocators else None
    allocs = threads_allocators(exe, bdir, want, args.threads_lib or [])
    seconds = args.threads_seconds if args.threads_seconds else (0.1 if args.quick else 0.25)
    reps = args.threads_reps or args.reps
    timeout = args.threads_timeout
    names = [a["name"] for a in allocs]
    jobs = [(rep, w, t, k) for rep in range(reps) for w in workloads for t in counts for k in range(len(allocs))]
    log("\nthreads: {} CPUs; threads {}; workloads {}; {} s per run; {} repetitions; {} runs".format(
        n, counts, " ".join(workloads), seconds, reps, len(jobs)))
    log("threads: allocators {}".format(" ".join(
        a["name"] + (" ({})".format(a["preload"]) if a["heap"] else "") for a in allocs)))
    load_start = os.getloadavg()[0]
    t0 = time.time()
    runs = []
    for i, (rep, w, t, k) in enumerate(jobs, 1):
        # Round-robin, and the turn order rotates with the repetition, so drift
        # on the machine and cache warmth from the run before spread evenly.
        a = allocs[(k + rep) % len(allocs)]
        rec = run_threads_one(exe, a, w, t, seconds, timeout, seed=rep + 1)
        rec["rep"] = rep
        runs.append(rec)
        head = "[{:4d}/{}] rep {} {:8s} {:2d} thr {:24s}".format(i, len(jobs), rep + 1, w, t, a["name"])
        if rec["status"] == "ok":
            log(head + " {:8.2f} Mops/s  remote {:4.0%}  cpu/wall {:4.2f}".format(
                rec["ops_per_second"] / 1e6, rec["remote_free_fraction"], rec["cpu_seconds"] / rec["seconds"]))
        else:
            log(head + " {}: {}".format(rec["status"].upper(), rec["error"]))
    rows = summarise_threads(runs)
    errors = sorted({"threads {} {} thr {}: {}".format(r["workload"], r["threads"], r["allocator"], e)
                     for r in rows for e in r.get("errors", [])})
    text = threads_tables(rows, names, workloads, counts, n)
    log("\n" + text)
    plot = threads_plot(report_dir, rows, names, workloads, counts, n)
    md = ["## Threads", "",
          "- programs: `threads_bench` (bench/threads/threads.cpp), one (workload, threads, allocator) per "
          "process, {} s each, median of {} repetitions, allocators interleaved".format(seconds, reps),
          "- machine: {} usable CPUs; load average at start / end: {:.1f} / {:.1f}; section time {:.0f} s".format(
              n, load_start, os.getloadavg()[0], time.time() - t0),
          "- allocators: " + ", ".join("{} (`{}`)".format(a["name"], a["preload"]) if a["preload"] else a["name"]
                                       for a in allocs),
          "- every block is stamped at allocation and checked before its free; a run that fails the check, "
          "times out ({:.0f} s) or runs under the wrong malloc is an error and has no throughput".format(timeout),
          ""]
    if errors:
        md += ["Errors:", ""] + ["- " + e for e in errors] + [""]
    md += [text, ""]
    if plot:
        md += ["![throughput vs threads]({})".format(plot), ""]
    return rows, runs, md, errors


# ---------------------------------------------------------------------------
# Tables and plots
# ---------------------------------------------------------------------------

def table(rows, header):
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = lambda r: "| " + " | ".join(str(x).rjust(w) for x, w in zip(r, widths)) + " |"   # noqa: E731
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(header), sep] + [line(r) for r in rows])


def normalised_tables(results, programs, allocators, aged):
    idx = {(r["program"], r["allocator"]): r for r in results if r["aged"] == aged}
    out = {}
    for metric in ("time", "memory", "fragmentation"):
        rows = []
        cols = {a: [] for a in allocators}
        for p in programs:
            base = idx.get((p, "glibc"))
            row = [p]
            for a in allocators:
                r = idx.get((p, a))
                v = None
                if r is not None:
                    if metric == "time" and base and base["seconds"] > 0:
                        v = r["seconds"] / base["seconds"]
                    elif metric == "memory" and base and base["peak_os_bytes"] > 0:
                        v = r["peak_os_bytes"] / base["peak_os_bytes"]
                    elif metric == "fragmentation":
                        v = r["fragmentation"]
                cols[a].append(v)
                row.append(fmt(v, "{:.1%}" if metric == "fragmentation" else "{:.2f}"))
            rows.append(row)
        if metric == "fragmentation":
            rows.append(["mean"] + [fmt(amean(cols[a]), "{:.1%}") for a in allocators])
            rows.append(["median"] + [fmt(statistics.median([v for v in cols[a] if v is not None])
                                          if any(v is not None for v in cols[a]) else None, "{:.1%}")
                                      for a in allocators])
        else:
            rows.append(["geomean"] + [fmt(gmean(cols[a])) for a in allocators])
        out[metric] = (table(rows, ["program"] + allocators), cols)
    return out


# Plot styles, fixed per allocator so that every report and every panel draws
# an allocator the same way, whatever subset ran: the peers in greys with
# hollow markers, allotheque's heaps in a qualitative palette (tab10 without
# its grey) with filled markers. Colour and marker together are unique; legends
# list the peers first, then the heaps.
PEER_GREYS = ["#111111", "#3d3d3d", "#636363", "#898989", "#adadad"]
HEAP_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf"]
MARKERS = ["o", "s", "^", "v", "D", "P", "X", "*", "h"]


def plot_style(allocator):
    if allocator in PEERS:
        i = PEERS.index(allocator)
        return {"color": PEER_GREYS[i % len(PEER_GREYS)], "marker": MARKERS[i % len(MARKERS)], "peer": True}
    if allocator in MALLOC_LIBS:   # the heap's colour, hollow markers: the malloc library of that heap
        return dict(plot_style(allocator.split("-", 1)[1]), hollow=True)
    i = HEAPS.index(allocator) if allocator in HEAPS else len(HEAPS)
    return {"color": HEAP_COLOURS[i % len(HEAP_COLOURS)], "marker": MARKERS[i % len(MARKERS)], "peer": False}


def plot_order(allocators):
    return sorted(allocators, key=lambda a: (0, PEERS.index(a)) if a in PEERS else
                  (1, HEAPS.index(a)) if a in HEAPS else (2, MALLOC_LIBS.index(a) if a in MALLOC_LIBS else 0))


def grouped_legend(fig, entries):
    """One legend for the figure, right of the plots: the peers, then allotheque's
    heaps; entries = [(label, allocator, handle)]."""
    peers = [(h, label) for label, a, h in entries if plot_style(a)["peer"]]
    heaps = [(h, label) for label, a, h in entries if not plot_style(a)["peer"]]
    top = 0.98
    for title, group in (("peers", peers), ("allotheque", heaps)):
        if not group:
            continue
        kw = dict(title=title, loc="upper left", bbox_to_anchor=(1.0, top), frameon=False, fontsize=9,
                  title_fontsize=9)
        try:
            leg = fig.legend([h for h, _ in group], [a for _, a in group], alignment="left", **kw)
        except TypeError:   # matplotlib < 3.6: title centred
            leg = fig.legend([h for h, _ in group], [a for _, a in group], **kw)
        fig.add_artist(leg)
        fig.canvas.draw()                # the next group starts below this one
        top = leg.get_window_extent().transformed(fig.transFigure.inverted()).y0 - 0.01


def ratio_panel(ax, labels, series, ylabel, title):
    """Per-label ratios to glibc, one marker per (label, allocator), dodged
    within the label's slot; series = [(allocator, [ratio or None per label])].
    Log scale, so 0.5x and 2x sit as far from the glibc line as each other."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator
    n = len(series)
    step = 0.8 / max(1, n)
    for i in range(len(labels)):
        if i % 2:
            ax.axvspan(i - 0.5, i + 0.5, color="#f2f2f2", zorder=0)
    ax.axvspan(len(labels) - 1.5, len(labels) - 0.5, color="#fff4d6", zorder=0)   # the geomean slot
    ax.axvline(len(labels) - 1.5, color="#999999", linewidth=0.8)
    baseline = ax.axhline(1.0, color="black", linewidth=1.0, zorder=2)
    handles = [("glibc = 1", "glibc", baseline)]
    values = []
    for j, (a, vals) in enumerate(series):
        st = plot_style(a)
        pts = [(i + (j - (n - 1) / 2) * step, v) for i, v in enumerate(vals) if v]
        values += [v for _, v in pts]
        h, = ax.plot([x for x, _ in pts], [v for _, v in pts], linestyle="none", marker=st["marker"],
                     markersize=6.5, color=st["color"], markeredgecolor=st["color"], markeredgewidth=1.3,
                     markerfacecolor="white" if st["peer"] or st.get("hollow") else st["color"], zorder=3)
        handles.append((a, a, h))
    ax.set_yscale("log")
    lo, hi = min(values + [1.0]), max(values + [1.0])
    ax.set_ylim(lo / 1.15, hi * 1.15)
    ticks = (0.1, 0.2, 0.3, 0.5, 0.7, 1, 1.5, 2, 3, 5, 7, 10, 15, 20, 30, 50, 70, 100) if hi / lo > 4 else \
        (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1, 1.2, 1.4, 1.6, 1.8, 2, 2.5, 3, 3.5, 4, 5)
    ticks = [t for t in ticks if lo / 1.15 <= t <= hi * 1.15]
    ax.yaxis.set_major_locator(FixedLocator(ticks))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: "{:g}".format(v)))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.grid(axis="y", color="#dddddd", linewidth=0.6, zorder=0)
    ax.set_xlim(-0.5, len(labels) - 0.5)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=30, ha="right")
    ax.get_xticklabels()[-1].set_fontweight("bold")
    ax.set_ylabel(ylabel + " (log scale)")
    ax.set_title(title)
    return handles


def plots(report_dir, results, programs, allocators, variants, cg):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
    except Exception as e:   # noqa: BLE001
        log("matplotlib unavailable, no plots: {}".format(e))
        return []
    made = []
    allocators = plot_order(allocators)
    others = [a for a in allocators if a != "glibc"]

    # Figure 10 style: normalised run time per program.
    fig, axes = plt.subplots(len(variants), 1, figsize=(max(11, len(programs) * 1.1), 4.2 * len(variants)),
                             squeeze=False)
    handles = []
    for ax, (sc, aged) in zip(axes[:, 0], variants):
        idx = {(r["program"], r["allocator"]): r for r in results if r["aged"] == aged and r["scale"] == sc}
        series = []
        for a in others:
            vals = []
            for p in programs:
                b, r = idx.get((p, "glibc")), idx.get((p, a))
                vals.append(r["seconds"] / b["seconds"] if r and b and b["seconds"] > 0 else None)
            series.append((a, vals + [gmean(vals)]))
        handles = ratio_panel(ax, programs + ["geomean"], series, "run time / glibc",
                              "Olden run time normalised to glibc ({} heap, {} scale)".format(
                                  "aged" if aged else "fresh", sc))
    fig.tight_layout()
    grouped_legend(fig, handles)
    path = os.path.join(report_dir, "time.png")
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    made.append(("Run time normalised to glibc (Figure 10 style)", "time.png"))

    # Table 6 style: fragmentation per allocator (mean over programs); each
    # allocator in its own colour, the heap variants told apart by hatching.
    gap = 0.7   # between the peers and the heaps
    xs = [i + (gap if not plot_style(a)["peer"] else 0) for i, a in enumerate(allocators)]
    fig, ax = plt.subplots(figsize=(max(9, len(allocators) * 0.75), 4.2))
    width = 0.8 / len(variants)
    hatches = ["", "////", "..", "xx"]
    variant_handles = []
    for j, (sc, aged) in enumerate(variants):
        vals = []
        for a in allocators:
            fr = [r["fragmentation"] for r in results if r["aged"] == aged and r["scale"] == sc and r["allocator"] == a]
            vals.append(100 * (amean(fr) or 0))
        colours = [plot_style(a)["color"] for a in allocators]
        ax.bar([x + (j - (len(variants) - 1) / 2) * width for x in xs], vals, width,
               color=colours, alpha=1.0 if j == 0 else 0.55, hatch=hatches[j % len(hatches)],
               edgecolor=colours, linewidth=0.8, zorder=2)
        variant_handles.append((Patch(facecolor="#888888", alpha=1.0 if j == 0 else 0.55, edgecolor="#888888",
                                      hatch=hatches[j % len(hatches)]),
                                "{} heap, {}".format("aged" if aged else "fresh", sc)))
    ax.set_xticks(xs)
    ax.set_xticklabels(allocators, rotation=30, ha="right")
    for label, a in zip(ax.get_xticklabels(), allocators):
        label.set_color("#555555" if plot_style(a)["peer"] else "black")
    npeers = sum(1 for a in allocators if plot_style(a)["peer"])
    if 0 < npeers < len(allocators):
        ax.axvline((xs[npeers - 1] + xs[npeers]) / 2, color="#999999", linewidth=0.8, linestyle="--")
    for title, group in (("peers", xs[:npeers]), ("allotheque", xs[npeers:])):
        if group:
            ax.text((group[0] + group[-1]) / 2, 1.01, title, transform=ax.get_xaxis_transform(),
                    ha="center", va="bottom", fontsize=9, color="#444444")
    ax.set_ylabel("fragmentation, % (mean over programs)")
    ax.set_title("Fragmentation = (peak RSS delta - peak requested) / peak requested", pad=18)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.grid(axis="y", color="#dddddd", linewidth=0.6, zorder=0)
    ax.legend([h for h, _ in variant_handles], [t for _, t in variant_handles], fontsize=9)
    fig.tight_layout()
    fig.savefig(os.path.join(report_dir, "fragmentation.png"), dpi=110)
    plt.close(fig)
    made.append(("Fragmentation per allocator (Table 6 style)", "fragmentation.png"))

    # Figure 11 style: cachegrind misses normalised to glibc.
    if cg:
        idx = {(r["program"], r["allocator"]): r for r in cg}
        cprogs = [p for p in programs if (p, "glibc") in idx]
        fig, axes = plt.subplots(2, 1, figsize=(max(11, len(cprogs) * 1.1), 8.4), squeeze=False)
        for ax, key, title in ((axes[0, 0], "d1_misses", "D1 data misses"), (axes[1, 0], "ll_misses", "LL misses")):
            series = []
            for a in others:
                vals = []
                for p in cprogs:
                    b, r = idx.get((p, "glibc")), idx.get((p, a))
                    vals.append(r[key] / b[key] if r and b and b.get(key) and r.get(key) is not None else None)
                series.append((a, vals + [gmean(vals)]))
            handles = ratio_panel(ax, cprogs + ["geomean"], series, "misses / glibc",
                                  "{} (cachegrind, quick scale, fresh heap)".format(title))
        fig.tight_layout()
        grouped_legend(fig, handles)
        fig.savefig(os.path.join(report_dir, "locality.png"), dpi=110, bbox_inches="tight")
        plt.close(fig)
        made.append(("Cache misses normalised to glibc (Figure 11 style)", "locality.png"))
    return made


def micro_tables(micro):
    parts = []
    ap = micro["alloc_patterns"]
    if ap:
        allocs = []
        for r in ap:
            if "allocator" in r and r["allocator"] not in allocs:
                allocs.append(r["allocator"])
        keys = sorted({(r["pattern"], r["size"]) for r in ap if "pattern" in r},
                      key=lambda k: (["lifo", "random", "churn"].index(k[0]) if k[0] in ("lifo", "random", "churn")
                                     else 9, k[1]))
        idx = {(r["pattern"], r["size"], r["allocator"]): r.get("ns_per_pair") for r in ap if "pattern" in r}
        rows = [["{} {} B".format(p, s)] + [fmt(idx.get((p, s, a)), "{:.1f}") for a in allocs] for p, s in keys]
        parts.append("### alloc_patterns: ns per allocate/free pair\n\n" + table(rows, ["pattern"] + allocs))
    ko = micro["kingsley_overhead"]
    ratio = None
    if ko:
        # Allocators are named "<family>.<variant>": composed (the ready-made
        # heap), never (the same with reclaim_policy::never) and plain (the
        # hand-written twin).
        idx = {(r["pattern"], r["size"], r["allocator"]): r.get("ns_per_pair") for r in ko if "pattern" in r}
        families = sorted({a.split(".")[0] for (_, _, a) in idx if "." in a})
        order = {"lifo": 0, "random": 1, "churn": 2}
        keys = sorted({(p, s) for (p, s, _) in idx}, key=lambda k: (order.get(k[0], 9), k[1]))
        rows, ratios = [], {}
        for (p, s) in keys:
            row = ["{} {} B".format(p, s)]
            for f in families:
                h = idx.get((p, s, f + ".plain"))
                c = idx.get((p, s, f + ".composed"))
                n = idx.get((p, s, f + ".never"))
                rc = c / h if c and h else None
                rn = n / h if n and h else None
                ratios.setdefault((f, "composed"), []).append(rc)
                ratios.setdefault((f, "never"), []).append(rn)
                row += [fmt(c, "{:.2f}"), fmt(h, "{:.2f}"), fmt(rc, "{:.3f}"), fmt(rn, "{:.3f}")]
            rows.append(row)
        geo = ["geomean"]
        for f in families:
            geo += ["", "", fmt(gmean(ratios.get((f, "composed"), [])), "{:.3f}"),
                    fmt(gmean(ratios.get((f, "never"), [])), "{:.3f}")]
        rows.append(geo)
        head = ["pattern"]
        for f in families:
            head += ["{} composed ns".format(f), "{} plain ns".format(f), "{} composed / plain".format(f),
                     "{} never / plain".format(f)]
        ratio = {f: {"composed": gmean(ratios.get((f, "composed"), [])), "never": gmean(ratios.get((f, "never"), []))}
                 for f in families}
        parts.append("### Composed heaps vs hand-written twins (ns per pair; `never`: reclaim_policy::never, as "
                     "the twins give nothing back)\n\n" + table(rows, head))
    for name, rows in micro["other"].items():
        t = [[r["name"], fmt(r.get("real_time"), "{:.1f}"), r.get("time_unit", "")] for r in rows]
        parts.append("### {}\n\n".format(name) + table(t, ["benchmark", "real time", "unit"]))
    return "\n\n".join(parts), ratio


# ---------------------------------------------------------------------------

def run_trace_section(args, bdir, report_dir, scale):
    """Runs bench/trace/overhead.py and agreement.py; returns (markdown lines, errors)."""
    here = os.path.join(ROOT, "bench", "trace")
    tool = os.path.join(bdir, "tools", "allotheque-trace")
    if not os.access(tool, os.X_OK):
        return ["## Profiler", "", "skipped: {} not built".format(tool), ""], []
    md, errors = ["## Profiler (allotheque-trace)", ""], []
    programs = ["--programs", args.programs] if args.programs else []
    steps = [
        ("tracer overhead", "overhead.py", "trace-overhead", "overhead.md",
         ["--reps", str(args.reps)]),
        ("replay agreement", "agreement.py", "trace-agreement", "agreement.md",
         ["--repeat", str(args.reps), "--real-results", os.path.join(report_dir, "results.json")]
         + (["--allocators", args.allocators] if args.allocators else [])),
    ]
    for title, script, sub, out, extra in steps:
        out_dir = os.path.join(report_dir, sub)
        cmd = [sys.executable, os.path.join(here, script), "--build-dir", bdir, "--scale", scale,
               "--out-dir", out_dir] + programs + extra
        log("\n{}: {}".format(title, " ".join(cmd)))
        t = time.time()
        r = subprocess.run(cmd)
        if r.returncode != 0:
            errors.append("{} failed (exit {})".format(script, r.returncode))
            md += ["{}: FAILED (exit {})".format(title, r.returncode), ""]
            continue
        with open(os.path.join(out_dir, out)) as f:
            text = f.read()
        # Demote the sub-report's headings under this section.
        text = "\n".join("##" + line if line.startswith("#") else line for line in text.splitlines())
        md += [text, "", "({}: {:.0f} s; files in {}/)".format(title, time.time() - t, sub), ""]
    return md, errors


# ---------------------------------------------------------------------------
# Back end section: bench/backend/backend_bench.cpp (`backend_bench`): large
# block churn and the memory given back after a workload frees everything,
# for the malloc baselines (LD_PRELOAD), every allotheque malloc library and
# allotheque heaps used directly.
# ---------------------------------------------------------------------------
BACKEND_HEAPS = ["segregated", "kingsley", "velox", "lea"]


def run_backend_section(args, bdir):
    exe = os.path.join(bdir, "bench", "backend_bench")
    if not os.access(exe, os.X_OK):
        return ["## Back end", "", "(backend_bench not built)", ""], {}, []
    mallocs = threads_allocators(os.path.join(bdir, "bench", "threads_bench"), bdir, None, [])
    targets = [(m["name"], m["preload"], "malloc") for m in mallocs] + \
              [("heap:" + h, None, h) for h in BACKEND_HEAPS]
    reps = 1 if args.quick else 3
    steps = "20000" if args.quick else "100000"
    runs, errors = [], []
    for rep in range(reps):
        for name, lib, heap in targets:
            for wl in ("large_churn", "after_free"):
                cmd = [exe, "--workload", wl, "--heap", heap, "--steps", steps]
                try:
                    p = subprocess.run(cmd, env=env_with_preload(lib), capture_output=True, text=True, timeout=300)
                    rec = json.loads(p.stdout.strip().splitlines()[-1])
                except Exception as e:   # noqa: BLE001
                    errors.append("backend {} {}: {}".format(name, wl, e))
                    continue
                rec.update({"allocator": name, "workload": wl, "rep": rep})
                runs.append(rec)
    def med(name, key):
        return statistics.median([r[key] for r in runs if r["allocator"] == name and key in r] or [float("nan")])
    names = [t[0] for t in targets]
    glibc_churn = med("glibc", "large_churn_ns_per_step")
    rows, summary = [], {}
    for n in names:
        churn = med(n, "large_churn_ns_per_step")
        after = med(n, "given_back_after_free")
        trimmed = med(n, "given_back_after_trim")
        peak = med(n, "after_free_peak_bytes")
        summary[n] = {"large_churn_ns": churn, "large_churn_vs_glibc": churn / glibc_churn if glibc_churn else None,
                      "given_back_after_free": after, "given_back_after_trim": trimmed}
        rows.append([n, fmt(churn / 1000, "{:.1f}"), fmt(churn / glibc_churn if glibc_churn else None, "{:.2f}"),
                     fmt(peak / 2**20, "{:.0f}"), fmt(100 * after, "{:.0f} %"), fmt(100 * trimmed, "{:.0f} %")])
    text = table(rows, ["allocator", "large churn µs/step", "vs glibc", "peak MiB", "given back after free",
                        "after one trim"])
    log("\nBack end: large-block churn and memory given back\n" + text)
    md = ["## Back end: large blocks and memory given back", "",
          "`backend_bench` (bench/backend): *large churn* keeps 32 blocks of 64 KiB - 1 MiB live and replaces a "
          "random one per step (first and last page written); *given back* is the share of a 100 MB workload's "
          "resident peak (blocks of 16 B - 1 MiB) that left the resident set right after everything was freed, "
          "and after one trim (`malloc_trim(0)`, or the heap's `trim()`). Medians of {} runs; `heap:` rows use the "
          "header-only heap directly, the others are mallocs under LD_PRELOAD.".format(reps), "", text, ""]
    return md, {"runs": runs, "summary": summary}, errors


# ---------------------------------------------------------------------------
# Cliffs section: bench/cliff/cliff_bench.cpp (`cliff_bench`): every operation
# of a pattern timed on its own; the slowest single operation against the
# steady state, for the malloc baselines (LD_PRELOAD) and the
# locality heaps and Lea used directly. Issue 14's target: slowest within 100x.
# ---------------------------------------------------------------------------
CLIFF_PATTERNS = ["alternating", "every_other", "absent_size", "aged", "lea_bin", "holes_1m"]
CLIFF_HEAPS = ["velox", "medius", "lea"]


def run_cliff_section(args, bdir):
    exe = os.path.join(bdir, "bench", "cliff_bench")
    if not os.access(exe, os.X_OK):
        return ["## Cliffs", "", "(cliff_bench not built)", ""], {}, []
    targets = [(a, PRELOAD[a], "malloc") for a in MALLOC_BASELINES if not PRELOAD[a] or os.path.exists(PRELOAD[a])]
    targets += [("heap:" + h, None, h) for h in CLIFF_HEAPS]
    # Five: "slow in every run" is the slowest of each step's fastest time,
    # and with three runs an interrupt still landed on one step in all three
    # now and then (Medius aged read 32 µs in one run, 10 µs in the next).
    reps = 5
    steps = "20000" if args.quick else "100000"
    runs, errors = [], []
    for pattern in CLIFF_PATTERNS:
        for name, lib, heap in targets:
            cmd = [exe, "--pattern", pattern, "--heap", heap, "--steps", steps, "--reps", str(reps)]
            try:
                p = subprocess.run(cmd, env=env_with_preload(lib), capture_output=True, text=True,
                                   timeout=args.timeout)
                rec = json.loads(p.stdout.strip().splitlines()[-1])
            except Exception as e:   # noqa: BLE001
                errors.append("cliff {} {}: {}".format(name, pattern, e))
                continue
            rec.update({"allocator": name})
            runs.append(rec)
    rows, summary = [], {}
    worst = {}
    for r in runs:
        steady = statistics.median(x["steady_ns"] for x in r["reps"])
        p999 = statistics.median(x["p999_ns"] for x in r["reps"])
        slow = statistics.median(x["max_ns"] for x in r["reps"])
        ratio = slow / steady if steady > 0 else None
        again = r.get("repeatable_max_ns")
        again_ratio = again / steady if again is not None and steady > 0 else None
        summary.setdefault(r["pattern"], {})[r["allocator"]] = {
            "steady_ns": steady, "p999_ns": p999, "max_ns": slow, "max_over_steady": ratio,
            "repeatable_max_ns": again, "repeatable_max_over_steady": again_ratio}
        if ratio is not None:
            worst[r["allocator"]] = max(worst.get(r["allocator"], 0), ratio)
        rows.append([r["pattern"], r["allocator"], fmt(steady, "{:.0f}"), fmt(p999, "{:.0f}"),
                     fmt(p999 / steady if steady > 0 else None, "{:.0f}"), fmt(slow / 1000, "{:.1f}"),
                     fmt(ratio, "{:.0f}"), fmt(again / 1000 if again is not None else None, "{:.1f}"),
                     fmt(again_ratio, "{:.0f}")])
    text = table(rows, ["pattern", "allocator", "steady ns/op", "p99.9 ns", "p99.9 / steady", "slowest µs",
                        "slowest / steady", "slow in every run µs", "/ steady"])
    log("\nCliffs: slowest single operation against the steady state\n" + text)
    md = ["## Cliffs: slowest single operation against the steady state", "",
          "`cliff_bench` (bench/cliff): every allocate and free of the timed phase ({} steps) is timed on its own "
          "(rdtsc, timer cost subtracted); *steady* is the median over windows of 64 consecutive operations of their "
          "mean time, *slowest* the slowest single operation, each the median over {} runs of the pattern on one allocator (one process). Patterns: *alternating* 32/544 B (32 B blocks below the 544 B ones); *every_other* "
          "64 B holes then 48 B requests; *absent_size*: a size the hint's block does not have; *aged*: 1 M "
          "mixed operations first; *lea_bin*: a Lea bin of 20 k blocks too small for the request; *holes_1m*: "
          "1 M blocks of 32 B, every other freed, then mixed sizes. Target (issue 14): slowest within 100x the "
          "steady state. A slowest time of tens of µs on any allocator is usually the process being descheduled or a "
          "page fault: read p99.9 beside it, and compare on a quiet machine. *Slow in every run*: each step's "
          "fastest time over the {} runs, which repeat the same operations, then the slowest of those: an "
          "allocator's own slow step (a walk, a refill that maps and faults in pages) recurs at the same step in "
          "every run, an interrupt does not; a slow step triggered by the clock (a timed sweep) shows only in "
          "*slowest*. `heap:` rows use the header-only "
          "heap directly (with the previous block as hint), the others are mallocs under LD_PRELOAD.".format(
              steps, reps, reps), "", text, ""]
    return md, {"runs": runs, "summary": summary, "worst_ratio": worst}, errors


# ---------------------------------------------------------------------------
# Instructions section: bench/instructions (`instructions_malloc`,
# `instructions_heaps`) under callgrind, counted inside the measured loops
# only: instructions per malloc + free for every malloc (LD_PRELOAD) and per
# allocate + deallocate for the header-only heaps and their hand-written
# twins. bench/instructions/run.py does the work (it also runs alone).
# ---------------------------------------------------------------------------
def run_instructions_section(args, bdir):
    import importlib.util
    path = os.path.join(ROOT, "bench", "instructions", "run.py")
    spec = importlib.util.spec_from_file_location("allotheque_instructions_run", path)
    mod = importlib.util.module_from_spec(spec)
    # No __pycache__ in the source tree.
    saved, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.dont_write_bytecode = saved
    steps = args.instructions_steps or (10000 if args.quick else mod.DEFAULT_STEPS)
    md, details, errors = mod.run_section(bdir, steps=steps, jobs=args.instructions_jobs, level=2)
    log("\n" + "\n".join(md))
    return md, details, errors


def section_only(report_dir, name, head, md, details, errors):
    """Writes one section's <name>.md and <name>.json (a --<name>-only run); the exit status."""
    with open(os.path.join(report_dir, name + ".md"), "w") as f:
        f.write("\n".join(head + md) + "\n")
    with open(os.path.join(report_dir, name + ".json"), "w") as f:
        json.dump(details, f, indent=1)
    log("\nwrote {0}/{1}.md and {1}.json".format(report_dir, name))
    for e in errors:
        log("ERROR: " + e)
    return 1 if errors else 0


def report_preamble():
    return ["# allotheque benchmark report", "",
            "- date: {}".format(datetime.datetime.now().isoformat(timespec="seconds")),
            "- machine: {} ({} CPUs), {}".format(platform.node(), os.cpu_count(), platform.platform())]


def threads_only(args, bdir, report_dir):
    """--threads-only: the threads section alone; results.json holds only its
    "threads" key."""
    t0 = time.time()
    rows, runs, md, errors = run_threads_section(args, bdir, report_dir)
    with open(os.path.join(report_dir, "results.json"), "w") as f:
        json.dump({"threads": rows}, f, indent=1)
    with open(os.path.join(report_dir, "details.json"), "w") as f:
        json.dump({"threads_runs": runs, "errors": errors, "elapsed_seconds": time.time() - t0}, f, indent=1)
    with open(os.path.join(report_dir, "report.md"), "w") as f:
        f.write("\n".join(report_preamble() + [""] + md) + "\n")
    log("\nwrote {}/results.json, details.json, report.md ({:.0f} s)".format(report_dir, time.time() - t0))
    if errors:
        log("ERROR: {} threads cell(s) failed".format(len(errors)))
        return 1
    return 0
# ---------------------------------------------------------------------------
# Order section: allocation order != traversal order (bench/order, order_bench)
# ---------------------------------------------------------------------------

# (label, order_bench arguments). The first malloc run is the baseline rows are divided by.
ORDER_BASELINE = "mimalloc"
# The std containers on each malloc (LD_PRELOAD), first in every workload's table.
ORDER_MALLOC_VARIANTS = [(m, ["--allocator", m]) for m in ("glibc", "jemalloc", "mimalloc", "tcmalloc")]
# The project's heaps that place by size alone, through the same allocator and
# containers as the locality heaps: what placement adds over them. Every row is
# also divided by the first (ORDER_SIZE_BASELINE).
ORDER_SIZE_BASELINE = "quickfit"
ORDER_SIZE_HEAPS = [(h, ["--allocator", h]) for h in (ORDER_SIZE_BASELINE, "segregated")]
ORDER_TREE_VARIANTS = ORDER_MALLOC_VARIANTS + ORDER_SIZE_HEAPS + [
    ("mimalloc, hinted container, no hint", ["--allocator", "mimalloc", "--container", "hinted", "--hint", "none"]),
    ("velox, std + near_previous", ["--allocator", "velox"]),
    ("medius, std + near_previous", ["--allocator", "medius"]),
    ("velox, hinted (parent)", ["--allocator", "velox", "--container", "hinted", "--hint", "parent"]),
    ("medius, hinted (parent)", ["--allocator", "medius", "--container", "hinted", "--hint", "parent"]),
    ("velox, hinted (parent), own heap", ["--allocator", "velox", "--container", "hinted", "--hint", "parent",
                                          "--layout", "isolated"]),
    ("room layer over velox, hinted (parent), fill 25 %",
     ["--allocator", "room", "--container", "hinted", "--hint", "parent", "--fill", "25"]),
    ("velox, hinted (parent), reorganize()",
     ["--allocator", "velox", "--container", "hinted", "--hint", "parent", "--reorganize", "1"]),
    ("medius, hinted (parent), reorganize()",
     ["--allocator", "medius", "--container", "hinted", "--hint", "parent", "--reorganize", "1"]),
    ("mimalloc, hinted container, no hint, reorganize()",
     ["--allocator", "mimalloc", "--container", "hinted", "--hint", "none", "--reorganize", "1"]),
    ("packed (key order, bump arena)", ["--allocator", "packed"]),
]
ORDER_LIST_VARIANTS = ORDER_MALLOC_VARIANTS + ORDER_SIZE_HEAPS + [
    ("velox, std + near_previous", ["--allocator", "velox"]),
    ("medius, std + near_previous", ["--allocator", "medius"]),
    ("velox, hinted_list", ["--allocator", "velox", "--container", "hinted"]),
    ("medius, hinted_list", ["--allocator", "medius", "--container", "hinted"]),
    ("velox, hinted_list, reorganize()", ["--allocator", "velox", "--container", "hinted", "--reorganize", "1"]),
    ("medius, hinted_list, reorganize()", ["--allocator", "medius", "--container", "hinted", "--reorganize", "1"]),
    ("mimalloc, hinted_list, no hint, reorganize()",
     ["--allocator", "mimalloc", "--container", "hinted", "--hint", "none", "--reorganize", "1"]),
    ("packed (list order, bump arena)", ["--allocator", "packed"]),
]
ORDER_GRAPH_VARIANTS = ORDER_MALLOC_VARIANTS + ORDER_SIZE_HEAPS + [
    ("velox, near_previous", ["--allocator", "velox"]),
    ("medius, near_previous", ["--allocator", "medius"]),
    ("velox, hinted", ["--allocator", "velox", "--container", "hinted", "--hint", "source"]),
    ("medius, hinted", ["--allocator", "medius", "--container", "hinted", "--hint", "source"]),
    ("room layer over velox, hinted, fill 25 %",
     ["--allocator", "room", "--container", "hinted", "--hint", "source", "--fill", "25"]),
    ("packed (BFS order, bump arena)", ["--allocator", "packed"]),
]
ORDER_SCENE_VARIANTS = ORDER_MALLOC_VARIANTS + ORDER_SIZE_HEAPS + [
    ("velox, near_previous", ["--allocator", "velox"]),
    ("medius, near_previous", ["--allocator", "medius"]),
    ("velox, hinted (parent)", ["--allocator", "velox", "--container", "hinted"]),
    ("medius, hinted (parent)", ["--allocator", "medius", "--container", "hinted"]),
    ("room layer over velox, hinted (parent), fill 25 %",
     ["--allocator", "room", "--container", "hinted", "--fill", "25"]),
    ("packed (depth-first order, bump arena)", ["--allocator", "packed"]),
]
ORDER_VARIANTS = {"map": ORDER_TREE_VARIANTS, "set": ORDER_TREE_VARIANTS, "list": ORDER_LIST_VARIANTS,
                  "graph": ORDER_GRAPH_VARIANTS, "scene": ORDER_SCENE_VARIANTS}
ORDER_SIZES = {   # per scale: the order_bench size arguments of each workload
    "quick": {"map": ["--n", "100000", "--lookups", "50000", "--passes", "2"],
              "set": ["--n", "100000", "--lookups", "50000", "--passes", "2"],
              "list": ["--n", "100000", "--passes", "2"],
              "graph": ["--n", "40000", "--roots", "2"],
              "scene": ["--n", "100000", "--passes", "2"]},
    "standard": {"map": ["--n", "400000", "--lookups", "200000", "--passes", "2"],
                 "set": ["--n", "400000", "--lookups", "200000", "--passes", "2"],
                 "list": ["--n", "400000", "--passes", "2"],
                 "graph": ["--n", "150000", "--roots", "2"],
                 "scene": ["--n", "400000", "--passes", "3"]},
    "full": {"map": ["--n", "2000000", "--lookups", "1000000", "--passes", "4"],
             "set": ["--n", "2000000", "--lookups", "1000000", "--passes", "4"],
             "list": ["--n", "2000000", "--passes", "4"],
             "graph": ["--n", "1000000", "--roots", "4"],
             "scene": ["--n", "2000000", "--passes", "4"]},
}


def run_order_section(args, bdir, scale):
    """Every (workload, variant) of order_bench `reps` times in fresh processes,
    variants interleaved within each repetition; medians; checksums must agree
    within a workload. Returns (markdown lines, details dict, errors)."""
    exe = os.path.join(bdir, "bench", "order_bench")
    if not os.access(exe, os.X_OK):
        return ["## Allocation order != traversal order", "", "skipped: {} not built".format(exe), ""], {}, []
    workloads = args.order_workloads.split(",")
    unknown = [w for w in workloads if w not in ORDER_VARIANTS]
    if unknown:
        return ([], {}, ["order: unknown workload(s) {} (known: {})".format(
            ",".join(unknown), ",".join(ORDER_VARIANTS))])
    reps = args.order_reps if args.order_reps is not None else (1 if scale == "quick" else 3)
    jobs = []
    for rep in range(reps):
        for w in workloads:
            for label, extra in ORDER_VARIANTS[w]:
                allocator = extra[extra.index("--allocator") + 1]
                if allocator in PRELOAD and PRELOAD[allocator] and not os.path.exists(PRELOAD[allocator]):
                    continue
                jobs.append((rep, w, label, allocator, ["--workload", w] + ORDER_SIZES[scale][w] + extra))
    log("\norder: {} runs ({} workload(s) x variants x {} repetitions), scale {}".format(
        len(jobs), len(workloads), reps, scale))
    runs, errors = [], []
    t0 = time.time()
    load_start = os.getloadavg()
    for k, (rep, w, label, allocator, argv) in enumerate(jobs, 1):
        head = "[{:3d}/{}] rep {} {:5s} {:45s}".format(k, len(jobs), rep + 1, w, label)
        try:
            p = subprocess.run([exe] + argv, env=env_for(allocator), capture_output=True, text=True,
                               timeout=args.timeout)
            if p.returncode != 0:
                raise RuntimeError("exit {}: {}".format(p.returncode, p.stderr.strip()[-300:]))
            rec = json.loads([l for l in p.stdout.splitlines() if l.startswith("{")][-1])
            if allocator in PRELOAD and rec.get("malloc_library") != allocator:
                raise RuntimeError("active malloc is {}, not {}".format(rec.get("malloc_library"), allocator))
        except Exception as e:   # noqa: BLE001 - reported, the section goes on
            errors.append("order {} {}: {}".format(w, label, e))
            log(head + " FAILED: {}".format(e))
            continue
        rec.update({"rep": rep, "variant": label})
        runs.append(rec)
        main_ns = rec["bfs_ns"] if w == "graph" else rec["walk_ns"]
        log(head + " {:7.1f} ns  rss {:6.1f} MiB  ({:.0f} s)".format(main_ns, rec["peak_rss_delta_bytes"] / 2**20,
                                                                    time.time() - t0))
    # Checksums: one per workload, whatever the allocator.
    bad = {}
    for w in workloads:
        sums = {}
        for r in runs:
            if r["workload"] == w:
                sums.setdefault(r["checksum"], set()).add(r["variant"])
        if len(sums) > 1:
            bad[w] = {c: sorted(v) for c, v in sums.items()}
            errors.append("order {}: checksums differ: {}".format(w, json.dumps(bad[w])))
    summary = {}
    for r in runs:
        summary.setdefault((r["workload"], r["variant"]), []).append(r)
    metrics = ("walk_ns", "lookup_ns", "bfs_ns", "build_ns", "reorganize_ns", "peak_rss_delta_bytes")
    med = {k: {m: statistics.median(x[m] for x in rs) for m in metrics} for k, rs in summary.items()}
    # The fastest repetition too: other work on a shared machine only ever adds time.
    best = {k: {m: min(x[m] for x in rs) for m in metrics} for k, rs in summary.items()}
    md = ["## Allocation order != traversal order (bench/order)", "",
          "- {} repetitions, fresh process each, variants interleaved; medians. Times are thread CPU time per "
          "walked node, per lookup, per scanned edge (bench/README.md); memory is the peak RSS growth of the whole "
          "run, unrelated allocations included. Ratios are to std containers on {}.".format(reps, ORDER_BASELINE),
          "- sizes ({} scale): {}".format(scale, "; ".join("{}: {}".format(w, " ".join(ORDER_SIZES[scale][w]))
                                                          for w in workloads)),
          "- load average at start / end: {:.1f} / {:.1f}; wall time {:.0f} s".format(
              load_start[0], os.getloadavg()[0], time.time() - t0),
          "- checksums: {}".format("all agree within each workload" if not bad else "MISMATCH " + json.dumps(bad)),
          ""]
    for w in workloads:
        base, base_best = med.get((w, ORDER_BASELINE)), best.get((w, ORDER_BASELINE))
        ratio = lambda v, m: v[m] / base[m] if base and base[m] else None   # noqa: E731
        qf = med.get((w, ORDER_SIZE_BASELINE))
        qf_ratio = lambda v, m: fmt(v[m] / qf[m] if qf and qf[m] else None)   # noqa: E731
        best_ratio = lambda label, m: (best[(w, label)][m] / base_best[m]   # noqa: E731
                                       if base_best and base_best[m] else None)
        rows = []
        for label, _ in ORDER_VARIANTS[w]:
            v = med.get((w, label))
            if v is None:
                continue
            first = summary[(w, label)][0]
            packed = label.startswith("packed")
            mem = "-" if packed and w in ("graph", "list", "scene") else fmt(ratio(v, "peak_rss_delta_bytes"))
            if w == "graph":
                rows.append([label, fmt(v["bfs_ns"], "{:.1f}"), fmt(ratio(v, "bfs_ns")),
                             fmt(best_ratio(label, "bfs_ns")), qf_ratio(v, "bfs_ns"), mem, fmt(v["build_ns"], "{:.0f}"),
                             fmt(first["same_line"], "{:.2f}"), fmt(first["same_page"], "{:.2f}")])
                continue
            # map, set, list: the list has no lookups
            lookups = [] if w in ("list", "scene") else [fmt(v["lookup_ns"], "{:.0f}"), fmt(ratio(v, "lookup_ns")),
                                                         fmt(best_ratio(label, "lookup_ns"))]
            rows.append([label, fmt(v["walk_ns"], "{:.1f}"), fmt(ratio(v, "walk_ns")),
                         fmt(best_ratio(label, "walk_ns")), qf_ratio(v, "walk_ns")] + lookups +
                        [mem, fmt(v["build_ns"], "{:.0f}"),
                         fmt(v["reorganize_ns"], "{:.0f}") if v["reorganize_ns"] else "-",
                         fmt(first["within_256"], "{:.2f}"), fmt(first["same_page"], "{:.2f}")])
        if w == "graph":
            head = ["variant", "BFS ns/edge", "BFS / " + ORDER_BASELINE, "(fastest)", "BFS / quickfit",
                    "memory / " + ORDER_BASELINE,
                    "build ns/edge", "cells: same line", "cells: same page"]
            title = "graph: breadth-first search, graph built in random edge order"
        else:
            lookups = [] if w in ("list", "scene") else ["lookup ns", "lookup / " + ORDER_BASELINE, "(fastest)"]
            head = (["variant", "walk ns/node", "walk / " + ORDER_BASELINE, "(fastest)", "walk / quickfit"] + lookups +
                    ["memory / " + ORDER_BASELINE, "build ns/insert", "reorganize ns/node", "neighbours: <256 B",
                     "neighbours: same page"])
            title = ("list: inserts at random positions, walks front to back" if w == "list" else
                     "scene: a tree grown under random parents, aged by subtree edits, walked depth first"
                     if w == "scene" else "{}: random-order inserts, in-order walks, random lookups".format(w))
        text = table(rows, head)
        log("\norder, {}\n{}".format(title, text))
        md += ["### " + title, "", text, ""]
    md += ["Ratios are of medians; `(fastest)` divides the fastest repetitions instead (other work on a shared "
           "machine only adds time). "
           "`neighbours`: share of in-order neighbours (graph: consecutive cells of one adjacency list, the node "
           "included) within 256 bytes / in one 64-byte line / in one 4 KiB page. The packed list's, graph's and "
           "scene's memory holds the original and the copy, so it is not shown. A reorganize() run's memory includes its "
           "scratch (16 bytes per element, mapped while it runs).", ""]
    details = {"scale": scale, "repetitions": reps, "workloads": workloads, "runs": runs,
               "checksum_mismatches": bad}
    return md, details, errors


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default="build/bench")
    ap.add_argument("--report-dir", default=None, help="default: build/bench-report")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="quick scale (< 2 min)")
    g.add_argument("--full", action="store_true", help="the paper's inputs")
    ap.add_argument("--reps", type=int, default=3, help="repetitions per (program, allocator), >= 3 recommended")
    ap.add_argument("--heap", choices=["both", "fresh", "aged"], default=None,
                    help="fresh heap, aged heap or both (default: both; --quick: fresh)")
    ap.add_argument("--aged-scale", choices=["quick", "standard", "full"], default=None,
                    help="scale of the aged-heap runs (default: quick in the default mode, else the main scale)")
    ap.add_argument("--jobs", type=int, default=None,
                    help="concurrent Olden runs (default 1; --quick: 2, a smoke run on 2 cores)")
    ap.add_argument("--programs", default=None, help="comma-separated subset")
    ap.add_argument("--allocators", default=None, help="comma-separated subset (glibc is always added)")
    ap.add_argument("--micro", dest="micro", action="store_true", default=None, help="run micro-benchmarks")
    ap.add_argument("--no-micro", dest="micro", action="store_false")
    ap.add_argument("--micro-min-time", type=float, default=0.2, help="--benchmark_min_time, seconds")
    ap.add_argument("--cachegrind", action="store_true", help="D1/LL misses under cachegrind, quick scale, once")
    ap.add_argument("--cachegrind-jobs", type=int, default=2, help="parallel cachegrind runs (counts, not times)")
    ap.add_argument("--trace", dest="trace", action="store_true", default=True,
                    help="profiler section (default): tracer overhead and replay-vs-real agreement")
    ap.add_argument("--no-trace", dest="trace", action="store_false")
    ap.add_argument("--order", dest="order", action="store_true", default=True,
                    help="order section (default): allocation order != traversal order, bench/order")
    ap.add_argument("--no-order", dest="order", action="store_false")
    ap.add_argument("--order-only", action="store_true", help="run the order section alone (order.md, order.json)")
    ap.add_argument("--order-workloads", default="map,list,graph,scene",
                    help="comma-separated: map,set,list,graph,scene")
    ap.add_argument("--order-reps", type=int, default=None, help="repetitions in the order section (default 3; "
                    "--quick: 1)")
    ap.add_argument("--backend", dest="backend", action="store_true", default=True,
                    help="back end section (default): large-block churn, memory given back (bench/backend)")
    ap.add_argument("--no-backend", dest="backend", action="store_false")
    ap.add_argument("--cliff", dest="cliff", action="store_true", default=True,
                    help="cliffs section (default): slowest single operation vs steady state (bench/cliff)")
    ap.add_argument("--no-cliff", dest="cliff", action="store_false")
    ap.add_argument("--cliff-only", action="store_true", help="run the cliffs section alone (cliff.md, cliff.json)")
    ap.add_argument("--instructions", dest="instructions", action="store_true", default=True,
                    help="instructions section (default): instructions per operation under callgrind "
                         "(bench/instructions)")
    ap.add_argument("--no-instructions", dest="instructions", action="store_false")
    ap.add_argument("--instructions-only", action="store_true",
                    help="run the instructions section alone (instructions.md, instructions.json)")
    ap.add_argument("--instructions-steps", type=int, default=None,
                    help="counted operations per (allocator, pattern) (default 100000; --quick: 10000)")
    ap.add_argument("--instructions-jobs", type=int, default=2,
                    help="callgrind runs at a time (default 2; the counts do not depend on it)")
    ap.add_argument("--timeout", type=float, default=900)
    t = ap.add_argument_group("threads section (bench/threads, multi-threaded malloc throughput)")
    t.add_argument("--threads", dest="threads", action="store_true", default=True, help="run it (default)")
    t.add_argument("--no-threads", dest="threads", action="store_false")
    t.add_argument("--threads-only", action="store_true",
                   help="run only this section (no Olden, micro-benchmarks or profiler)")
    t.add_argument("--thread-counts", default=None,
                   help="comma-separated thread counts (default: powers of two up to nproc, nproc, 2 x nproc)")
    t.add_argument("--threads-workloads", default=None, help="comma-separated subset of " + ",".join(THREAD_WORKLOADS))
    t.add_argument("--threads-seconds", type=float, default=None,
                   help="timed window of one run (default 0.25; --quick: 0.1)")
    t.add_argument("--threads-reps", type=int, default=None, help="repetitions (default: --reps)")
    t.add_argument("--threads-timeout", type=float, default=30, help="seconds before a run counts as hung")
    t.add_argument("--threads-lib", action="append", default=None, metavar="PATH",
                   help="one more allotheque malloc library to compare (repeatable)")
    args = ap.parse_args()

    os.chdir(ROOT)
    scale = "quick" if args.quick else "full" if args.full else "standard"
    if args.micro is None:
        args.micro = not args.quick
    if args.heap is None:
        args.heap = "fresh" if args.quick else "both"
    if args.jobs is None:
        args.jobs = 2 if args.quick else 1
    aged_scale = args.aged_scale or ("quick" if scale == "standard" else scale)
    variants = {"both": [(scale, False), (aged_scale, True)], "fresh": [(scale, False)],
                "aged": [(aged_scale, True)]}[args.heap]
    report_dir = args.report_dir or os.path.join(ROOT, "build", "bench-report")
    os.makedirs(report_dir, exist_ok=True)
    bdir = os.path.abspath(args.build_dir)
    if args.threads_only:
        return threads_only(args, bdir, report_dir)
    if args.instructions_only:
        return section_only(report_dir, "instructions", report_preamble() + [""],
                            *run_instructions_section(args, bdir))
    if args.cliff_only:
        return section_only(report_dir, "cliff", report_preamble() + [""], *run_cliff_section(args, bdir))
    if args.order_only:
        return section_only(report_dir, "order", ["# allotheque benchmark report: order section", ""],
                            *run_order_section(args, bdir, scale))
    exe = os.path.join(bdir, "bench", "olden")
    if not os.access(exe, os.X_OK):
        sys.exit("run.py: {} not found; build first (cmake --preset bench && cmake --build --preset bench)".format(exe))

    programs = subprocess.run([exe, "--list"], capture_output=True, text=True, check=True).stdout.split()
    if args.programs:
        want = args.programs.split(",")
        programs = [p for p in programs if p in want]
    for a in MALLOC_LIBS:
        PRELOAD[a] = os.path.join(bdir, "src", "malloc", "liballotheque_malloc_{}.so".format(a.split("-", 1)[1]))
    allocators = list(ALL_ALLOCATORS)
    if args.allocators:
        want = args.allocators.split(",")
        allocators = ["glibc"] + [a for a in ALL_ALLOCATORS if a in want and a != "glibc"]
    for a in list(allocators):
        lib = PRELOAD.get(a)
        if lib and not os.path.exists(lib):
            log("warning: {} not found, {} skipped".format(lib, a))
            allocators.remove(a)

    t0 = time.time()
    load_start = os.getloadavg()
    vtext = ", ".join("{} heap at {} scale".format("aged" if a else "fresh", s) for s, a in variants)
    log("olden: {}; {} repetitions; {} job(s); programs: {}".format(vtext, args.reps, args.jobs, " ".join(programs)))
    log("allocators: {}".format(" ".join(allocators)))
    runs, errors, results = [], [], []
    for sc, aged in variants:
        r, e = run_suite(args, exe, programs, allocators, sc, [aged], args.reps)
        runs += r
        errors += e
        results += summarise(r, sc)
    t_olden = time.time() - t0

    # Cachegrind: one run per (program, allocator), quick scale, fresh heap.
    cg = []
    if args.cachegrind:
        if not shutil.which("valgrind"):
            log("cachegrind: valgrind not found, skipped")
        else:
            from concurrent.futures import ThreadPoolExecutor
            jobs = [(p, a) for p in programs for a in allocators]
            log("cachegrind: {} runs, {} at a time".format(len(jobs), args.cachegrind_jobs))

            def one(job):
                p, a = job
                rec, err = run_olden(exe, p, a, "quick", False, args.timeout * 4, prefix=CACHEGRIND)
                rec.update(parse_cachegrind(err))
                return rec

            with ThreadPoolExecutor(max_workers=max(1, args.cachegrind_jobs)) as pool:
                futs = {pool.submit(one, j): j for j in jobs}
                for n, f in enumerate(futs, 1):
                    p, a = futs[f]
                    try:
                        rec = f.result()
                    except Exception as e:   # noqa: BLE001
                        errors.append("cachegrind {} {}: {}".format(p, a, e))
                        log("cachegrind [{}/{}] {} {} FAILED: {}".format(n, len(jobs), p, a, e))
                        continue
                    cg.append(rec)
                    log("cachegrind [{}/{}] {:10s} {:9s} D1 {:>14,} LL {:>12,}".format(
                        n, len(jobs), p, a, rec.get("d1_misses", -1), rec.get("ll_misses", -1)))
    perf_ok = perf_available()
    log("perf stat: {}".format("available (not used by this driver yet)" if perf_ok else
                               "hardware counters not supported here, skipped"))

    # Merge cachegrind counts into the result rows.
    for rec in cg:
        row = next((r for r in results if r["program"] == rec["program"] and r["allocator"] == rec["allocator"]
                    and r["scale"] == "quick" and not r["aged"]), None)
        if row is None:
            row = {"program": rec["program"], "allocator": rec["allocator"], "scale": "quick", "aged": False,
                   "seconds": None, "peak_os_bytes": None, "peak_requested_bytes": rec["peak_requested_bytes"],
                   "fragmentation": None, "checksum": rec["checksum"], "measure": "cachegrind"}
            results.append(row)
        for k in ("d1_misses", "lld_misses", "ll_misses", "d_refs", "i_refs"):
            if k in rec:
                row[k] = rec[k]

    bad = check_checksums(runs + cg)
    micro = {"alloc_patterns": [], "kingsley_overhead": [], "other": {}}
    if args.micro:
        micro = run_micro(args, os.path.join(bdir, "bench", "micro"))
    micro_md, k_ratio = micro_tables(micro)
    instructions_md, instructions_details = [], {}
    if args.instructions:
        instructions_md, instructions_details, instructions_errors = run_instructions_section(args, bdir)
        errors += instructions_errors
    threads_rows, threads_runs, threads_md = [], [], []
    if args.threads:
        threads_rows, threads_runs, threads_md, threads_errors = run_threads_section(args, bdir, report_dir)
        errors += threads_errors
    backend_md, backend_details = [], {}
    if args.backend:
        backend_md, backend_details, backend_errors = run_backend_section(args, bdir)
        errors += backend_errors
    cliff_md, cliff_details = [], {}
    if args.cliff:
        cliff_md, cliff_details, cliff_errors = run_cliff_section(args, bdir)
        errors += cliff_errors
    order_md, order_details = [], {}
    if args.order:
        order_md, order_details, order_errors = run_order_section(args, bdir, scale)
        errors += order_errors
    elapsed = time.time() - t0

    # ---- console tables and report ----
    md = report_preamble() + [
        "- runs: {}; repetitions: {} (median); concurrent runs: {}".format(vtext, args.reps, args.jobs),
        "- Olden wall time: {:.0f} s; total: {:.0f} s".format(t_olden, elapsed),
        "- load average at start / end: {:.1f} / {:.1f} (other work on the machine inflates and scatters "
        "times)".format(load_start[0], os.getloadavg()[0]),
        "- malloc baselines: the same binary with LD_PRELOAD; the library active in each run is read from "
        "/proc/self/maps and checked (column `malloc_library` in results.json)",
        "- memory: peak_os = VmHWM after the program - VmRSS before it (VmHWM reset via /proc/self/clear_refs "
        "after ageing; file-backed pages made resident first, so library code is not counted), the same measure for every allocator; fragmentation = (peak_os - peak_requested) / "
        "peak_requested. On an aged heap peak_requested counts the program's bytes only, and holes left by "
        "ageing can make fragmentation negative.",
        "- checksums: {}".format("all agree" if not bad else "MISMATCH: " + json.dumps(
            {"{}@{}".format(*k): {c: sorted(v) for c, v in d.items()} for k, d in bad.items()})),
        ""]
    if errors:
        md += ["## Errors", ""] + ["- " + e for e in errors] + [""]
    for sc, aged in variants:
        tabs = normalised_tables([r for r in results if r["scale"] == sc], programs, allocators, aged)
        heap = "aged" if aged else "fresh"
        for metric, title in (("time", "Run time / glibc"), ("memory", "Peak memory (RSS delta) / glibc"),
                              ("fragmentation", "Fragmentation")):
            text = tabs[metric][0]
            log("\n{} ({} heap, {} scale)\n{}".format(title, heap, sc, text))
            md += ["## {} ({} heap, {} scale)".format(title, heap, sc), "", text, ""]
    if cg:
        idx = {(r["program"], r["allocator"]): r for r in cg}
        for key, title in (("d1_misses", "D1 misses / glibc"), ("ll_misses", "LL misses / glibc")):
            rows, cols = [], {a: [] for a in allocators}
            for p in programs:
                b = idx.get((p, "glibc"))
                row = [p]
                for a in allocators:
                    r = idx.get((p, a))
                    v = r[key] / b[key] if r and b and b.get(key) and key in r else None
                    cols[a].append(v)
                    row.append(fmt(v))
                rows.append(row)
            rows.append(["geomean"] + [fmt(gmean(cols[a])) for a in allocators])
            text = table(rows, ["program"] + allocators)
            log("\n{} (cachegrind, quick, fresh)\n{}".format(title, text))
            md += ["## {} (cachegrind, quick scale, fresh heap)".format(title), "", text, ""]
    if micro_md:
        log("\n" + micro_md)
        md += ["## Micro-benchmarks", "", micro_md, ""]
        for fam, r in (k_ratio or {}).items():
            md += ["Composed {0} / hand-written {0}, geometric mean over the patterns: **{1}** (default heap), "
                   "**{2}** (reclaim_policy::never, like the twin)".format(fam, fmt(r["composed"], "{:.3f}"),
                                                                          fmt(r["never"], "{:.3f}")), ""]
    md += instructions_md
    made = plots(report_dir, [r for r in results if r.get("seconds") is not None], programs, allocators,
                 variants, cg)
    md += backend_md
    md += cliff_md
    md += order_md
    md += ["## Plots", ""]
    for title, f in made:
        md += ["### " + title, "", "![{}]({})".format(title, f), ""]
    md += threads_md

    with open(os.path.join(report_dir, "results.json"), "w") as f:
        json.dump({"olden": results, "threads": threads_rows}, f, indent=1)
    doc = {"scale": scale, "variants": [{"scale": s, "aged": a} for s, a in variants], "repetitions": args.reps,
           "jobs": args.jobs, "allocators": allocators,
           "programs": programs, "runs": runs, "cachegrind": cg, "micro": micro, "errors": errors,
           "checksum_mismatches": {"{}@{}".format(*k): {c: sorted(v) for c, v in d.items()} for k, d in bad.items()},
           "composed_over_plain": k_ratio, "threads_runs": threads_runs, "order": order_details,
           "backend": backend_details, "cliff": cliff_details, "instructions": instructions_details,
           "elapsed_seconds": elapsed}
    with open(os.path.join(report_dir, "details.json"), "w") as f:
        json.dump(doc, f, indent=1)
    if args.micro:
        with open(os.path.join(report_dir, "micro.json"), "w") as f:
            json.dump({"alloc_patterns": micro["alloc_patterns"], "kingsley_overhead": micro["kingsley_overhead"],
                       "composed_over_plain_geomean": k_ratio, "other": micro["other"]}, f, indent=1)
    # Profiler section: how much the tracer slows the suite down, and whether
    # replaying each program's trace ranks the allocators as the runs above
    # did (bench/trace/*.py; they read this run's results.json).
    if args.trace:
        trace_md, trace_errors = run_trace_section(args, bdir, report_dir, scale)
        errors += trace_errors
        md += trace_md
        elapsed = time.time() - t0
        doc["elapsed_seconds"] = elapsed
        with open(os.path.join(report_dir, "details.json"), "w") as f:
            json.dump(doc, f, indent=1)

    with open(os.path.join(report_dir, "report.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    log("\nwrote {}/results.json, details.json, report.md and {} plots ({:.0f} s)".format(
        report_dir, len(made), elapsed))
    if bad:
        log("ERROR: checksums differ across allocators: {}".format(sorted(bad)))
        return 1
    if errors:
        log("ERROR: {} run(s) failed".format(len(errors)))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
