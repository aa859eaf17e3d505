#!/usr/bin/python3
"""Does replaying a trace rank the allocators the way the real runs do?

For each Olden-style program (build/bench/bench/olden --list):

  1. record its allocation trace under glibc with `allotheque-trace record`
     (olden --program P --allocator glibc --scale S);
  2. replay the trace on every allocator with `allotheque-trace replay`
     (--repeat N, median; each run a fresh process);
  3. run the program itself on every allocator (olden --allocator A, N times,
     interleaved, median, LD_PRELOAD for jemalloc/mimalloc/tcmalloc exactly as
     bench/run.py does) -- or read those real results from a bench/run.py
     results.json (--real-results);
  4. compare: Spearman rank correlation of the allocators' times and of their
     peak OS memory (replay vs real), and whether the allocator the replay
     recommends (lowest time_ratio x memory_ratio vs glibc) is within
     --tolerance of the real best by the same score in the real runs; the same
     for the replay's fastest (real time) and leanest (real memory).

Writes <out-dir>/agreement.md (tables) and agreement.json (everything), plus
the replay and real results per program. Standard library only.

    bench/trace/agreement.py --build-dir build/bench --scale standard
    bench/trace/agreement.py --scale quick --programs treeadd,health --repeat 1
    bench/trace/agreement.py --real-results build/bench-report/results.json
"""
import argparse
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))
# The allocator list, their LD_PRELOAD libraries and the table helpers are
# bench/run.py's, so a real run here is exactly a bench run.
from run import ALL_ALLOCATORS, MALLOC_LIBS, PRELOAD, env_for, fmt, log, table  # noqa: E402,F401

# The replay names this project's malloc libraries malloc-<heap> and finds them
# itself; the bench's allotheque-<heap> rows are left out of the comparison.
REPLAYED = [a for a in ALL_ALLOCATORS if a not in MALLOC_LIBS]

PAGE = 4096


# ---------------------------------------------------------------------------
# Statistics
# ---------------------------------------------------------------------------

def ranks(xs):
    """Ranks 1..n, ties get their average rank."""
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    r = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return r


def spearman(xs, ys):
    """Spearman's rho (Pearson correlation of the ranks); None if undefined."""
    if len(xs) < 3:
        return None
    rx, ry = ranks(xs), ranks(ys)
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sx = math.sqrt(sum((a - mx) ** 2 for a in rx))
    sy = math.sqrt(sum((b - my) ** 2 for b in ry))
    if sx == 0 or sy == 0:
        return None
    return sxy / (sx * sy)


def rep_consistency(res, common, key):
    """Mean Spearman rho between the repetitions of one set of runs (rep i vs rep j
    over the allocators): how reproducible the ranking itself is -- a ceiling for
    any agreement with it. None with fewer than two repetitions."""
    n = min(len(res[a].get(key) or []) for a in common)
    rhos = [spearman([res[a][key][i] for a in common], [res[a][key][j] for a in common])
            for i in range(n) for j in range(i + 1, n)]
    rhos = [r for r in rhos if r is not None]
    return statistics.fmean(rhos) if rhos else None


def scores(res, base="glibc"):
    """time_ratio x memory_ratio per allocator, as `allotheque-trace replay` ranks them
    (memory below one page counts as one page)."""
    b = res.get(base) or next(iter(res.values()))
    bt, bm = max(b["seconds"], 1e-6), max(b["peak_os_bytes"], PAGE)
    return {a: (max(r["seconds"], 1e-6) / bt) * (max(r["peak_os_bytes"], PAGE) / bm) for a, r in res.items()}


# ---------------------------------------------------------------------------
# Runs
# ---------------------------------------------------------------------------

def run(cmd, timeout, env=None):
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError("{} exited {}: {}".format(" ".join(cmd), p.returncode,
                                                     (p.stderr or p.stdout).strip()[-600:]))
    return p


def record(cli, olden, program, scale, trace, timeout):
    if os.path.exists(trace):
        os.remove(trace)
    p = run([cli, "record", "-o", trace, "--", olden, "--program", program, "--allocator", "glibc",
             "--scale", scale], timeout)
    line = [l for l in p.stdout.splitlines() if l.startswith("{")]
    return json.loads(line[-1]) if line else {}


def replay(cli, trace, allocators, repeat, json_out, text_out, timeout):
    cmd = [cli, "replay", "--repeat", str(repeat), "--json", json_out, "--allocators", ",".join(allocators), trace]
    p = run(cmd, timeout)
    with open(text_out, "w") as f:
        f.write(p.stdout)
    with open(json_out) as f:
        data = json.load(f)
    res = {r["allocator"]: r for r in data["results"] if r["status"] == "ok"}
    return data, res


def real_runs(olden, program, scale, allocators, repeat, timeout):
    """Every allocator `repeat` times, interleaved; medians (as bench/run.py)."""
    runs = {a: [] for a in allocators}
    errors = {}
    for rep in range(repeat):
        for a in allocators:
            if a in errors:
                continue
            cmd = [olden, "--program", program, "--allocator", a, "--scale", scale]
            try:
                p = run(cmd, timeout, env_for(a))
                rec = json.loads([l for l in p.stdout.splitlines() if l.startswith("{")][-1])
                if a in PRELOAD and rec.get("malloc_library") != a:
                    raise RuntimeError("active malloc is {}, not {}".format(rec.get("malloc_library"), a))
                runs[a].append(rec)
            except Exception as e:   # noqa: BLE001 - reported, the others go on
                errors[a] = str(e)
                log("  real {} {}: FAILED {}".format(program, a, e))
    res = {}
    for a, rs in runs.items():
        if not rs or a in errors:
            continue
        peak = int(statistics.median(r["peak_rss_delta_bytes"] for r in rs))
        req = rs[0]["peak_requested_bytes"]
        res[a] = {"allocator": a, "seconds": statistics.median(r["seconds"] for r in rs),
                  "seconds_all": [r["seconds"] for r in rs], "peak_os_bytes": peak,
                  "peak_rss_delta_bytes_all": [r["peak_rss_delta_bytes"] for r in rs],
                  "peak_requested_bytes": req, "fragmentation": (peak - req) / req if req else None,
                  "checksum": rs[0]["checksum"]}
    return res, errors


def load_real_results(path, scale):
    with open(path) as f:
        data = json.load(f)
    if isinstance(data, dict):   # {"olden": [...], "threads": [...]} since the threads section
        data = data.get("olden", [])
    out = {}
    for r in data:
        if r.get("scale") == scale and not r.get("aged"):
            out.setdefault(r["program"], {})[r["allocator"]] = r
    return out


# ---------------------------------------------------------------------------
# Comparison
# ---------------------------------------------------------------------------

def compare(program, rep_data, rep, real, tolerance):
    common = [a for a in ALL_ALLOCATORS if a in rep and a in real]
    out = {"program": program, "allocators": common, "events": rep_data.get("events"),
           "objects": rep_data.get("objects"), "hinted": rep_data.get("hinted"),
           "allocs": rep_data.get("allocs")}
    if len(common) < 3:
        out["error"] = "fewer than 3 allocators in both the replay and the real runs"
        return out
    rp = {a: rep[a] for a in common}
    rl = {a: real[a] for a in common}
    out["rho_time"] = spearman([rp[a]["seconds"] for a in common], [rl[a]["seconds"] for a in common])
    out["rho_memory"] = spearman([rp[a]["peak_os_bytes"] for a in common], [rl[a]["peak_os_bytes"] for a in common])
    out["rho_time_real_reps"] = rep_consistency(rl, common, "seconds_all")
    out["rho_time_replay_reps"] = rep_consistency(rp, common, "seconds_all")
    rs, ls = scores(rp), scores(rl)
    out["rho_score"] = spearman([rs[a] for a in common], [ls[a] for a in common])
    # The replay's picks among the common allocators (the CLI's own picks may
    # include an allocator the real runs lack; recomputed here the same way).
    pick = min(common, key=lambda a: rs[a])
    fastest = min(common, key=lambda a: rp[a]["seconds"])
    leanest = min(common, key=lambda a: (rp[a]["peak_os_bytes"], rp[a]["seconds"]))
    best = min(common, key=lambda a: ls[a])
    real_fastest = min(common, key=lambda a: rl[a]["seconds"])
    real_leanest = min(common, key=lambda a: (rl[a]["peak_os_bytes"], rl[a]["seconds"]))
    out.update({
        "replay_pick": pick, "real_best": best,
        "pick_gap": ls[pick] / ls[best] - 1,
        "replay_fastest": fastest, "real_fastest": real_fastest,
        "fastest_gap": rl[fastest]["seconds"] / rl[real_fastest]["seconds"] - 1,
        "replay_leanest": leanest, "real_leanest": real_leanest,
        "leanest_gap": max(rl[leanest]["peak_os_bytes"], PAGE) / max(rl[real_leanest]["peak_os_bytes"], PAGE) - 1,
        "replay_scores": rs, "real_scores": ls,
        "replay_over_real_time": {a: rp[a]["seconds"] / rl[a]["seconds"] if rl[a]["seconds"] > 0 else None
                                  for a in common},
        "replay_over_real_memory": {a: rp[a]["peak_os_bytes"] / rl[a]["peak_os_bytes"]
                                    if rl[a]["peak_os_bytes"] > 0 else None for a in common},
    })
    out["pick_within"] = out["pick_gap"] <= tolerance
    out["fastest_within"] = out["fastest_gap"] <= tolerance
    out["leanest_within"] = out["leanest_gap"] <= tolerance
    return out


def report(rows, args, meta):
    tol = "{:.0%}".format(args.tolerance)
    body = []
    for c in rows:
        if "error" in c:
            body.append([c["program"], fmt(c.get("events"), "{:,}"), "-", "-", "-", "-", "-", "-", "-", "-", "-", "-",
                         c["error"]])
            continue
        body.append([
            c["program"], fmt(c["events"], "{:,}"), fmt(c["rho_time"]), fmt(c["rho_time_real_reps"]),
            fmt(c["rho_time_replay_reps"]), fmt(c["rho_memory"]), fmt(c["rho_score"]),
            c["replay_pick"], c["real_best"], "{:+.1%}{}".format(c["pick_gap"], "" if c["pick_within"] else " ✗"),
            "{} {:+.1%}{}".format(c["replay_fastest"], c["fastest_gap"], "" if c["fastest_within"] else " ✗"),
            "{} {:+.1%}{}".format(c["replay_leanest"], c["leanest_gap"], "" if c["leanest_within"] else " ✗"),
            "{:.2f}".format(c["replay_over_real_time"].get("glibc") or float("nan")),
        ])
    ok = [c for c in rows if "error" not in c]
    def mean(k):
        xs = [c[k] for c in ok if c.get(k) is not None]
        return statistics.fmean(xs) if xs else None   # e.g. rep-to-rep ρ with --repeat 1
    med = lambda k: statistics.median([c[k] for c in ok if c.get(k) is not None]) if ok else None  # noqa: E731
    summary = {
        "programs": len(rows), "compared": len(ok),
        "mean_rho_time": mean("rho_time"), "median_rho_time": med("rho_time"),
        "mean_rho_memory": mean("rho_memory"), "median_rho_memory": med("rho_memory"),
        "mean_rho_score": mean("rho_score"),
        "mean_rho_time_real_reps": mean("rho_time_real_reps"),
        "mean_rho_time_replay_reps": mean("rho_time_replay_reps"),
        "pick_within": sum(c["pick_within"] for c in ok),
        "fastest_within": sum(c["fastest_within"] for c in ok),
        "leanest_within": sum(c["leanest_within"] for c in ok),
        "tolerance": args.tolerance,
    }
    body.append(["**mean**", "", fmt(summary["mean_rho_time"]), fmt(summary["mean_rho_time_real_reps"]),
                 fmt(summary["mean_rho_time_replay_reps"]), fmt(summary["mean_rho_memory"]),
                 fmt(summary["mean_rho_score"]), "", "",
                 "{}/{} within {}".format(summary["pick_within"], len(ok), tol),
                 "{}/{}".format(summary["fastest_within"], len(ok)), "{}/{}".format(summary["leanest_within"], len(ok)),
                 ""])
    md = ["# Replay vs real runs: do they rank the allocators alike?", "",
          "{} scale, {} repetition(s) (median) of every replay and real run, {}. Real runs: {}.".format(
              args.scale, args.repeat, meta["date"], meta["real_source"]),
          "Machine: {}, load average at start {}.".format(meta["machine"], meta["load_start"]), "",
          "ρ = Spearman rank correlation over the allocators (replay vs real): time, peak OS memory, and the "
          "balanced score time_ratio × memory_ratio (vs glibc). *ρ real reps* / *ρ replay reps*: mean ρ of the "
          "time ranking between two repetitions of the real runs / of the replays -- how reproducible each "
          "ranking is on this machine (a ceiling for *ρ time*). *pick gap*: how much worse the replay's "
          "recommended allocator scores in the real runs than the real best ({} tolerance; ✗ = beyond). "
          "*fastest* / *leanest*: the replay's fastest (leanest) allocator and how much slower (bigger) it really "
          "is than the real fastest (leanest). *replay/real glibc*: replay time over the real run's time.".format(tol),
          "",
          table(body, ["program", "events", "ρ time", "ρ real reps", "ρ replay reps", "ρ memory", "ρ score",
                       "replay pick", "real best",
                       "pick gap", "fastest (gap)", "leanest (gap)", "replay/real glibc"]),
          ""]
    return "\n".join(md), summary


# ---------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build", "bench"))
    ap.add_argument("--scale", choices=["quick", "standard", "full"], default="standard")
    ap.add_argument("--programs", default=None, help="comma-separated subset (default: olden --list)")
    ap.add_argument("--allocators", default=None, help="comma-separated subset (glibc is always added)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per allocator, replay and real (median)")
    ap.add_argument("--real-results", default=None,
                    help="a bench/run.py results.json to take the real runs from instead of running them")
    ap.add_argument("--tolerance", type=float, default=0.10, help="pick gap counted as agreement (default 0.10)")
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "build", "trace-agreement"))
    ap.add_argument("--keep-traces", action="store_true", help="keep the recorded traces in <out-dir>/traces")
    ap.add_argument("--wait-for-tracer", type=float, default=0,
                    help="seconds to wait for liballotheque_trace.so to appear (default: fail at once)")
    ap.add_argument("--timeout", type=float, default=3600, help="per command, seconds")
    ap.add_argument("--reuse", action="store_true",
                    help="reuse <out-dir>/replay/P.json and real/P.json from an earlier run (analysis only)")
    args = ap.parse_args()

    bd = os.path.abspath(args.build_dir)
    olden = os.path.join(bd, "bench", "olden")
    cli = os.path.join(bd, "tools", "allotheque-trace")
    tracer = os.path.join(bd, "tools", "liballotheque_trace.so")
    deadline = time.time() + args.wait_for_tracer
    while not os.path.exists(tracer) and time.time() < deadline:
        time.sleep(10)
    for path in (olden, cli, tracer):
        if not os.path.exists(path):
            sys.exit("agreement.py: {} not found (cmake --preset bench && cmake --build build/bench -j2)".format(path))

    programs = args.programs.split(",") if args.programs else \
        subprocess.run([olden, "--list"], capture_output=True, text=True, check=True).stdout.split()
    allocators = REPLAYED if not args.allocators else \
        ["glibc"] + [a for a in args.allocators.split(",") if a and a != "glibc"]
    for a in allocators:
        if a not in REPLAYED:
            sys.exit("agreement.py: unknown allocator '{}'".format(a))
    allocators = [a for a in allocators if not PRELOAD.get(a) or os.path.exists(PRELOAD[a])]
    real_file = load_real_results(args.real_results, args.scale) if args.real_results else None

    for sub in ("traces", "replay", "real"):
        os.makedirs(os.path.join(args.out_dir, sub), exist_ok=True)
    meta = {"date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
            "machine": "{} {} CPUs, {}".format(platform.machine(), os.cpu_count(), platform.platform()),
            "load_start": "{:.2f}".format(os.getloadavg()[0]),
            "real_source": "{} (bench/run.py)".format(args.real_results) if args.real_results else
            "measured here, interleaved, right after each program's replay",
            "scale": args.scale, "repeat": args.repeat, "allocators": allocators}

    rows, details = [], []
    t0 = time.time()
    for k, program in enumerate(programs, 1):
        head = "[{}/{}] {}".format(k, len(programs), program)
        trace = os.path.join(args.out_dir, "traces", program + ".trace")
        rep_json = os.path.join(args.out_dir, "replay", program + ".json")
        real_json = os.path.join(args.out_dir, "real", program + ".json")
        traced = {}
        try:
            if args.reuse and os.path.exists(rep_json):
                with open(rep_json) as f:
                    rep_data = json.load(f)
                rep = {r["allocator"]: r for r in rep_data["results"] if r["status"] == "ok"}
            else:
                traced = record(cli, olden, program, args.scale, trace, args.timeout)
                log("{}: recorded {:.1f} MB".format(head, os.path.getsize(trace) / 1e6))
                rep_data, rep = replay(cli, trace, allocators, args.repeat, rep_json,
                                       os.path.join(args.out_dir, "replay", program + ".txt"), args.timeout)
                log("{}: replayed on {} allocators ({:.0f} s elapsed)".format(head, len(rep), time.time() - t0))
            if real_file is not None:
                real, errors = real_file.get(program, {}), {}
            elif args.reuse and os.path.exists(real_json):
                with open(real_json) as f:
                    real = {r["allocator"]: r for r in json.load(f)["results"]}
            else:
                real, errors = real_runs(olden, program, args.scale, allocators, args.repeat, args.timeout)
                with open(real_json, "w") as f:
                    json.dump({"results": list(real.values()), "errors": errors}, f, indent=1)
            log("{}: real runs on {} allocators ({:.0f} s elapsed)".format(head, len(real), time.time() - t0))
        except Exception as e:   # noqa: BLE001 - one program's failure does not stop the others
            log("{}: FAILED: {}".format(head, e))
            rows.append({"program": program, "error": str(e)[:200]})
            continue
        finally:
            if not args.keep_traces and os.path.exists(trace):
                os.remove(trace)
        c = compare(program, rep_data, rep, real, args.tolerance)
        c["traced_run"] = {k2: traced.get(k2) for k2 in ("seconds", "peak_requested_bytes", "checksum")}
        rows.append(c)
        details.append({"program": program, "replay": rep, "real": real, "recommendation": rep_data.get(
            "recommendation")})
        if "error" not in c:
            log("{}: rho time {} memory {}; replay picks {} (real best {}, gap {:+.1%})".format(
                head, fmt(c["rho_time"]), fmt(c["rho_memory"]), c["replay_pick"], c["real_best"], c["pick_gap"]))

    md, summary = report(rows, args, meta)
    with open(os.path.join(args.out_dir, "agreement.md"), "w") as f:
        f.write(md)
    with open(os.path.join(args.out_dir, "agreement.json"), "w") as f:
        json.dump({"meta": meta, "summary": summary, "programs": rows, "details": details}, f, indent=1)
    print(md)
    print("wrote {}/agreement.md and agreement.json ({:.0f} s)".format(args.out_dir, time.time() - t0))
    return 0 if summary["compared"] else 1


if __name__ == "__main__":
    sys.exit(main())
