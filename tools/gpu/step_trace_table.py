#!/usr/bin/env python3
"""Where a server's time went, step by step: a table of the engine's step trace.

  NINFER_STEP_PROFILE=2 ninfer serve ... 2> serve.log      (or serve_bench.sh, which keeps the log)
  python3 tools/gpu/step_trace_table.py serve.log

Each traced step is one stderr line (src/runtime/step_profile.cpp): its rows, decode rows, forward
time and whole time. Steps are grouped by what they ran: one row a sequence (decoding), or prompt
rows beside the decode rows, by the step's row count. Per group: steps, mean rows (prompt / decode), mean forward and
whole-step ms, the group's share of the traced time, and the rows it moved per second. The
profile synchronises after every phase, so the figures are for diagnosis, not a throughput claim.
"""
import argparse
import re
import sys

STEP = re.compile(
    r"ninfer: step \d+: kind (\d+), (\d+) entries, (\d+) rows, (\d+) decode rows, K \d+, "
    r"\d+ drafting, forward ([\d.]+) ms, ([\d.]+) ms")
# Upper bounds of the mixed steps' row groups.
BOUNDS = [512, 2048, 4096, 8192, 16384, 32768, 65536, float("inf")]


def group_of(rows, entries):
    if rows == entries:  # one row a sequence: decoding (a prompt's first sampled row included)
        return "decode only"
    for b in BOUNDS:
        if rows <= b:
            return "mixed <= %s rows" % ("inf" if b == float("inf") else f"{int(b):,}")
    return "?"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    args = ap.parse_args()
    groups = {}
    order = ["decode only"] + ["mixed <= %s rows" % ("inf" if b == float("inf") else f"{int(b):,}")
                               for b in BOUNDS]
    with open(args.log, errors="replace") as f:
        for line in f:
            m = STEP.search(line)
            if not m:
                continue
            entries, rows, dec = int(m.group(2)), int(m.group(3)), int(m.group(4))
            fwd, total = float(m.group(5)), float(m.group(6))
            g = groups.setdefault(group_of(rows, entries), [0, 0, 0, 0.0, 0.0])
            g[0] += 1
            dec = rows if rows == entries else dec
            g[1] += rows - dec
            g[2] += dec
            g[3] += fwd
            g[4] += total
    if not groups:
        print("no traced steps (NINFER_STEP_PROFILE=2 unset?)")
        return 0
    all_ms = sum(g[4] for g in groups.values())
    all_rows = sum(g[1] + g[2] for g in groups.values())
    print("| steps | n | prompt rows | decode rows | forward ms | step ms | share | rows/s |")
    print("|---|---|---|---|---|---|---|---|")
    for name in order:
        if name not in groups:
            continue
        n, p, d, fwd, total = groups[name]
        print(f"| {name} | {n} | {p / n:,.0f} | {d / n:,.0f} | {fwd / n:.2f} | {total / n:.2f} | "
              f"{100 * total / all_ms:.1f}% | {1e3 * (p + d) / total:,.0f} |")
    print(f"traced: {sum(g[0] for g in groups.values())} steps, {all_rows:,} rows in "
          f"{all_ms / 1e3:.2f} s ({1e3 * all_rows / all_ms:,.0f} rows/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
