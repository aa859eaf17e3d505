#!/usr/bin/python3
"""Overhead of the allocation tracer (liballotheque_trace.so) on the Olden suite.

Every program of `olden --list` runs with glibc malloc, plain and under
`allotheque-trace record`, in fresh processes, interleaved (plain and traced
take turns, and swap who goes first each repetition); the median of the
repetitions is reported:

  run time   the program's own measured time (olden's "seconds": the
             computation, where the allocations are)
  wall       the whole process, start to exit (for the traced run: as timed
             by `record`, fork to wait, so without record's own check of the
             trace afterwards)
  events/s   events recorded per second of traced wall time
  trace      trace file size, and bytes per event

Output: a markdown table on stdout and in OUT_DIR/overhead.md, the numbers in
OUT_DIR/overhead.json.

    cmake --preset bench && cmake --build build/bench -j2
    bench/trace/overhead.py                        standard scale, 3 repetitions
    bench/trace/overhead.py --scale quick --reps 1 smoke run
"""
import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import run as bench  # noqa: E402  (bench/run.py: env_for, gmean, table, fmt, log)

RECORDED = re.compile(r"recorded (\d+) events, (\d+) threads?, .* the program ran ([0-9.]+) s")


def olden_json(stdout, what):
    lines = [l for l in stdout.splitlines() if l.startswith("{")]
    if not lines:
        raise RuntimeError("{}: no result line from olden".format(what))
    return json.loads(lines[-1])


def run_plain(exe, program, scale, timeout):
    cmd = [exe, "--program", program, "--allocator", "glibc", "--scale", scale]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=bench.env_for("glibc"), capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError("{} exited {}: {}".format(" ".join(cmd), p.returncode, p.stderr.strip()[-500:]))
    rec = olden_json(p.stdout, program)
    return {"seconds": rec["seconds"], "wall": wall, "checksum": rec["checksum"]}


def run_traced(cli, exe, program, scale, trace, timeout):
    cmd = [cli, "record", "-o", trace, "--", exe, "--program", program, "--allocator", "glibc", "--scale", scale]
    p = subprocess.run(cmd, env=bench.env_for("glibc"), capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError("{} exited {}: {}".format(" ".join(cmd), p.returncode, p.stderr.strip()[-500:]))
    rec = olden_json(p.stdout, program)
    m = RECORDED.search(p.stderr)
    if not m:
        raise RuntimeError("{}: no summary line from record: {}".format(program, p.stderr.strip()[-500:]))
    if "(" in p.stderr.split("recorded", 1)[1].split(" in ", 1)[0]:
        raise RuntimeError("{}: the trace is not complete: {}".format(program, p.stderr.strip()))
    out = {"seconds": rec["seconds"], "wall": float(m.group(3)), "checksum": rec["checksum"],
           "events": int(m.group(1)), "threads": int(m.group(2)), "trace_bytes": os.path.getsize(trace)}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build", "bench"))
    ap.add_argument("--scale", choices=["quick", "standard", "full"], default="standard")
    ap.add_argument("--reps", type=int, default=3, help="repetitions of each (program, mode); the median is kept")
    ap.add_argument("--programs", default=None, help="comma-separated subset")
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "build", "trace-overhead"))
    ap.add_argument("--trace-dir", default=None, help="where traces are written (default: OUT_DIR)")
    ap.add_argument("--keep-traces", action="store_true")
    ap.add_argument("--timeout", type=float, default=900)
    args = ap.parse_args()

    bdir = os.path.abspath(args.build_dir)
    exe = os.path.join(bdir, "bench", "olden")
    cli = os.path.join(bdir, "tools", "allotheque-trace")
    for f, what in ((exe, "the olden runner"), (cli, "allotheque-trace")):
        if not os.access(f, os.X_OK):
            sys.exit("overhead.py: {} ({}) not found; build first: cmake --preset bench && "
                     "cmake --build build/bench -j2".format(f, what))
    os.makedirs(args.out_dir, exist_ok=True)
    trace_dir = args.trace_dir or args.out_dir
    os.makedirs(trace_dir, exist_ok=True)

    programs = subprocess.run([exe, "--list"], capture_output=True, text=True, check=True).stdout.split()
    if args.programs:
        want = args.programs.split(",")
        programs = [p for p in programs if p in want]
    bench.log("tracer overhead: {} scale, {} repetitions, programs: {}".format(args.scale, args.reps,
                                                                             " ".join(programs)))
    load_start = os.getloadavg()
    t_start = time.time()
    runs = {p: {"plain": [], "traced": []} for p in programs}
    errors = []
    for rep in range(args.reps):
        for program in programs:
            order = ["plain", "traced"] if rep % 2 == 0 else ["traced", "plain"]
            for mode in order:
                trace = os.path.join(trace_dir, "{}.trace".format(program))
                try:
                    if mode == "plain":
                        r = run_plain(exe, program, args.scale, args.timeout)
                    else:
                        r = run_traced(cli, exe, program, args.scale, trace, args.timeout)
                except Exception as e:  # noqa: BLE001 - reported, the run continues
                    errors.append(str(e))
                    bench.log("[rep {}] {:10s} {:6s} FAILED: {}".format(rep + 1, program, mode, e))
                    continue
                finally:
                    if mode == "traced" and not args.keep_traces:
                        for f in os.listdir(trace_dir):
                            if f == program + ".trace" or f.startswith(program + ".trace."):
                                os.unlink(os.path.join(trace_dir, f))
                runs[program][mode].append(r)
                extra = "" if mode == "plain" else "  {:>10,} events  {:6.1f} MiB".format(
                    r["events"], r["trace_bytes"] / 2**20)
                bench.log("[rep {}] {:10s} {:6s} {:8.3f} s  wall {:8.3f} s{}".format(
                    rep + 1, program, mode, r["seconds"], r["wall"], extra))

    results = []
    for program in programs:
        pl, tr = runs[program]["plain"], runs[program]["traced"]
        if not pl or not tr:
            continue
        med = lambda rs, k: statistics.median(r[k] for r in rs)  # noqa: E731
        res = {
            "program": program,
            "plain_seconds": med(pl, "seconds"), "traced_seconds": med(tr, "seconds"),
            "plain_wall": med(pl, "wall"), "traced_wall": med(tr, "wall"),
            "events": int(med(tr, "events")), "trace_bytes": int(med(tr, "trace_bytes")),
            "threads": tr[0]["threads"],
            "plain_seconds_all": [r["seconds"] for r in pl], "traced_seconds_all": [r["seconds"] for r in tr],
            "plain_wall_all": [r["wall"] for r in pl], "traced_wall_all": [r["wall"] for r in tr],
            "checksums_agree": len({r["checksum"] for r in pl + tr}) == 1,
        }
        res["time_ratio"] = res["traced_seconds"] / res["plain_seconds"] if res["plain_seconds"] else None
        res["wall_ratio"] = res["traced_wall"] / res["plain_wall"] if res["plain_wall"] else None
        res["events_per_second"] = res["events"] / res["traced_wall"] if res["traced_wall"] else None
        res["bytes_per_event"] = res["trace_bytes"] / res["events"] if res["events"] else None
        extra_s = res["traced_wall"] - res["plain_wall"]
        res["ns_per_event"] = extra_s * 1e9 / res["events"] if res["events"] else None
        results.append(res)
        if not res["checksums_agree"]:
            errors.append("{}: checksums differ between plain and traced runs".format(program))

    rows = []
    for r in results:
        rows.append([r["program"], bench.fmt(r["plain_seconds"], "{:.3f}"), bench.fmt(r["traced_seconds"], "{:.3f}"),
                     bench.fmt(r["time_ratio"]), bench.fmt(r["plain_wall"], "{:.3f}"),
                     bench.fmt(r["traced_wall"], "{:.3f}"), bench.fmt(r["wall_ratio"]),
                     "{:,}".format(r["events"]), "{:.1f}".format(r["trace_bytes"] / 2**20),
                     bench.fmt(r["bytes_per_event"], "{:.1f}"),
                     bench.fmt(r["events_per_second"] / 1e6 if r["events_per_second"] else None, "{:.1f}"),
                     bench.fmt(r["ns_per_event"], "{:.1f}")])
    g_time = bench.gmean([r["time_ratio"] for r in results])
    g_wall = bench.gmean([r["wall_ratio"] for r in results])
    rows.append(["geomean", "", "", bench.fmt(g_time), "", "", bench.fmt(g_wall), "", "", "", "", ""])
    header = ["program", "run s", "traced s", "ratio", "wall s", "traced wall s", "wall ratio", "events",
              "trace MiB", "B/event", "Mevents/s", "ns/event"]
    text = bench.table(rows, header)
    worst = max((r["time_ratio"] for r in results if r["time_ratio"]), default=None)
    elapsed = time.time() - t_start
    md = ["# Tracer overhead (liballotheque_trace.so, glibc malloc, Olden suite)", "",
          "- date: {}".format(datetime.datetime.now().isoformat(timespec="seconds")),
          "- machine: {} ({} CPUs), {}".format(platform.node(), os.cpu_count(), platform.platform()),
          "- scale: {}; {} repetitions, median; plain and traced interleaved".format(args.scale, args.reps),
          "- load average at start / end: {:.1f} / {:.1f}".format(load_start[0], os.getloadavg()[0]),
          "- run s: the program's own timing of its computation; wall: process start to exit (traced: "
          "timed by `record`, without its check of the trace); ns/event: extra wall time per recorded event",
          "- geomean ratio: run time {}, wall {}; worst run-time ratio {}".format(
              bench.fmt(g_time), bench.fmt(g_wall), bench.fmt(worst)),
          "", text, ""]
    if errors:
        md += ["## Errors", ""] + ["- " + e for e in errors] + [""]
    bench.log("\n" + text)
    bench.log("\ngeomean ratio: run time {}, wall {} ({:.0f} s)".format(bench.fmt(g_time), bench.fmt(g_wall), elapsed))
    with open(os.path.join(args.out_dir, "overhead.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    with open(os.path.join(args.out_dir, "overhead.json"), "w") as f:
        json.dump({"scale": args.scale, "repetitions": args.reps, "programs": programs, "results": results,
                   "geomean_time_ratio": g_time, "geomean_wall_ratio": g_wall, "worst_time_ratio": worst,
                   "errors": errors, "load_average_start": load_start[0], "elapsed_seconds": elapsed}, f, indent=1)
    bench.log("wrote {}/overhead.md and overhead.json".format(args.out_dir))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
