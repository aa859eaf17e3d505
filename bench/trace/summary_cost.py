#!/usr/bin/python3
"""Time and peak memory of `allotheque-trace summary` against trace size and thread count.

Runs `allotheque-trace summary --no-symbols TRACE` (text report to /dev/null)
on synthetic traces from tools/trace/tests/summary_trace_gen — a growing
number of events on two threads, and a fixed number of events dealt out to
more and more threads — plus any traces given with --trace (recorded ones:
Olden programs, python3, ...). Each run is a fresh process; the median wall
time and the largest peak RSS (ru_maxrss of the child) over --reps runs are
reported, with the peak RSS as a multiple of the trace file's size.

Output: a markdown table on stdout and in OUT_DIR/summary_cost.md, the
numbers in OUT_DIR/summary_cost.json.

    cmake --preset release && cmake --build build/release --target allotheque-trace summary_trace_gen
    bench/trace/summary_cost.py                                   defaults
    bench/trace/summary_cost.py --events 100000 --threads 1000 --reps 1   smoke run
    bench/trace/summary_cost.py --trace olden-treeadd.trace --trace python.trace
    bench/trace/summary_cost.py --cli /path/to/older/allotheque-trace   the same traces, another build
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def measure(cli, trace, timeout):
    """One summary run: (wall seconds, peak RSS bytes)."""
    t0 = time.perf_counter()
    with open(os.devnull, "wb") as null:
        p = subprocess.Popen([cli, "summary", "--no-symbols", trace], stdout=null, stderr=subprocess.PIPE)
        deadline = t0 + timeout
        while True:
            pid, status, usage = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                p.kill()
                raise RuntimeError("{}: summary took more than {} s".format(trace, timeout))
            time.sleep(0.005)
    wall = time.perf_counter() - t0
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise RuntimeError("{}: summary exited {}: {}".format(trace, code, err.strip()[-300:]))
    return wall, usage.ru_maxrss * 1024


def trace_counts(cli, trace):
    """Events and threads, from the text report."""
    out = subprocess.run([cli, "summary", "--no-symbols", "--top", "0", trace], capture_output=True,
                         text=True, check=True).stdout
    events = threads = None
    for line in out.splitlines():
        s = line.strip()
        if s.startswith("events ") and events is None:
            events = int(s.split()[1].replace(",", ""))
        if s.startswith("Threads"):
            threads = int(s.split("(")[1].split(";")[0].replace(",", "")) if "(" in s else None
    if threads is None:  # listed one by one: count the rows of the table
        sect = out.split("\nThreads\n", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
        threads = sum(1 for l in sect if l.strip() and l.strip()[0].isdigit())
    return events, threads


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build", "release"))
    ap.add_argument("--cli", default=None, help="the allotheque-trace to measure (default: BUILD_DIR's; e.g. an "
                    "older build, to compare)")
    ap.add_argument("--events", default="250000,1000000,4000000",
                    help="event counts of the two-thread synthetic traces")
    ap.add_argument("--threads", default="1000,10000,150000",
                    help="thread counts of the many-thread traces (--thread-events events each)")
    ap.add_argument("--thread-events", type=int, default=600000)
    ap.add_argument("--trace", action="append", default=[], help="also measure this trace (repeatable)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "build", "trace-summary-cost"))
    args = ap.parse_args()

    bdir = os.path.abspath(args.build_dir)
    cli = os.path.abspath(args.cli) if args.cli else os.path.join(bdir, "tools", "allotheque-trace")
    gen = os.path.join(bdir, "tools", "trace", "tests", "summary_trace_gen")
    for f, what in ((cli, "allotheque-trace"), (gen, "summary_trace_gen")):
        if not os.access(f, os.X_OK):
            sys.exit("summary_cost.py: {} ({}) not found; build first: cmake --preset release && cmake --build "
                     "build/release --target allotheque-trace summary_trace_gen".format(f, what))
    os.makedirs(args.out_dir, exist_ok=True)

    cases = []
    for n in [int(x) for x in args.events.split(",") if x]:
        cases.append(("synthetic, 2 threads", os.path.join(args.out_dir, "events-{}.trace".format(n)), [n]))
    for k in [int(x) for x in args.threads.split(",") if x]:
        cases.append(("synthetic, {:,} threads".format(k),
                      os.path.join(args.out_dir, "threads-{}.trace".format(k)), [args.thread_events, k]))
    for t in args.trace:
        cases.append((os.path.basename(t), os.path.abspath(t), None))

    load_start = os.getloadavg()
    results = []
    for name, path, gen_args in cases:
        if gen_args is not None:
            subprocess.run([gen, path] + [str(a) for a in gen_args], check=True)
        size = os.path.getsize(path)
        events, threads = trace_counts(cli, path)
        walls, rss = [], []
        for _ in range(args.reps):
            w, r = measure(cli, path, args.timeout)
            walls.append(w)
            rss.append(r)
        res = {"trace": name, "path": path, "bytes": size, "events": events, "threads": threads,
               "seconds": statistics.median(walls), "seconds_all": walls, "peak_rss_bytes": max(rss),
               "rss_over_size": max(rss) / size if size else None}
        results.append(res)
        print("{:28s} {:>11,} events {:>8,} threads {:8.1f} MiB  {:7.3f} s  {:8.1f} MiB RSS ({:.1f}x)".format(
            name, events, threads, size / 2**20, res["seconds"], res["peak_rss_bytes"] / 2**20,
            res["rss_over_size"]), file=sys.stderr)
        if gen_args is not None:
            os.unlink(path)
    load_end = os.getloadavg()

    lines = ["| trace | events | threads | size MiB | summary s (median) | peak RSS MiB | RSS / size |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        lines.append("| {} | {:,} | {:,} | {:.1f} | {:.3f} | {:.1f} | {:.1f} |".format(
            r["trace"], r["events"], r["threads"], r["bytes"] / 2**20, r["seconds"], r["peak_rss_bytes"] / 2**20,
            r["rss_over_size"]))
    header = "allotheque-trace summary cost, {} ({}), {} runs each; load average {:.1f} before, {:.1f} after\n".format(
        datetime.date.today().isoformat(), platform.node(), args.reps, load_start[0], load_end[0])
    text = header + "\n" + "\n".join(lines) + "\n"
    print(text)
    with open(os.path.join(args.out_dir, "summary_cost.md"), "w") as f:
        f.write(text)
    with open(os.path.join(args.out_dir, "summary_cost.json"), "w") as f:
        json.dump({"date": datetime.date.today().isoformat(), "host": platform.node(), "reps": args.reps,
                   "load_before": load_start[0], "load_after": load_end[0], "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
