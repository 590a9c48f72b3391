#!/usr/bin/env python3
"""One decode token's GPU time by kernel, from two Nsight Compute CSV logs (tools/gpu/decode_profile.sh).

Each log holds gpu__time_duration.sum of every kernel a `ninfer bench` run launched; the runs
differ only in the number of decoded tokens, so the per-kernel difference divided by the token
difference is one token's cost. Kernels are grouped by their function name and template arguments
(--no-templates: by function name), largest first, with launches per token and microseconds per token.
--wall takes the plain bench's JSON and adds the token's wall time and the part no kernel covers.
"""
import argparse
import collections
import csv
import json
import re
import sys


def ncu_rows(path):
    """The metric rows (dicts by column name) of an ncu --csv --print-units base log."""
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]  # ncu prefixes its own messages with ==PROF==
    return list(csv.DictReader(lines))


def kernel_times(path):
    """{kernel name: (launches, total ns)} from an ncu --csv --print-units base log."""
    launches, total = collections.Counter(), collections.Counter()
    for row in ncu_rows(path):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        name = row["Kernel Name"]
        launches[name] += 1
        total[name] += float(row["Metric Value"].replace(",", ""))
    return launches, total


def short(name, templates):
    """A kernel's name without its parameter list, namespaces or (unless templates) arguments."""
    for anon in ("<unnamed>::", "(anonymous namespace)::"):  # ncu writes the former
        name = name.replace(anon, "")
    name = re.sub(r"^void ", "", name).split("(")[0]
    if not templates:
        name = name.split("<")[0]
    name = re.sub(r"\b(ninfer|ops|cuda|moe_decode|cutlass|gemm)::", "", name)
    return name[:90]


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("short_log")
    p.add_argument("long_log")
    p.add_argument("tokens", type=int, help="tokens the long run decoded beyond the short one")
    p.add_argument("--wall", help="plain `ninfer bench -o json` of the same config")
    p.add_argument("--no-templates", dest="templates", action="store_false",
                   help="group a kernel's instantiations together")
    a = p.parse_args()
    n_short, t_short = kernel_times(a.short_log)
    n_long, t_long = kernel_times(a.long_log)
    if not t_long:
        sys.exit(f"no kernel times in {a.long_log}")
    launches, ns = collections.Counter(), collections.Counter()
    for name in set(t_long) | set(t_short):
        key = short(name, a.templates)
        launches[key] += (n_long[name] - n_short[name]) / a.tokens
        ns[key] += (t_long[name] - t_short[name]) / a.tokens
    # A decode step's kernels launch a whole number of times a token; the rest (weight
    # initialisation, prefill, graph capture) cancels in launches but not quite in time.
    step = {key: t for key, t in ns.items() if launches[key] >= 0.5}
    total = sum(step.values())
    print(f"{'kernel':<60} {'launches':>8} {'us/token':>9} {'us each':>8} {'share':>6}")
    for key, t in sorted(step.items(), key=lambda kv: -kv[1]):
        print(f"{key:<60} {launches[key]:8.1f} {t / 1e3:9.1f} {t / 1e3 / launches[key]:8.2f} "
              f"{100 * t / total:5.1f}%")
    print(f"{'all kernels':<60} {sum(launches[k] for k in step):8.1f} {total / 1e3:9.1f}")
    if a.wall:
        j = json.load(open(a.wall))
        rates = [r["decode_tok_s"]["mean"] for r in j["results"] if "decode_tok_s" in r]
        if rates:
            wall_us = 1e6 / rates[0]
            print(f"wall per token (plain bench, {rates[0]:.1f} tok/s): {wall_us:.1f} us; "
                  f"kernels in isolation {total / 1e3:.1f} us; not covered by a kernel "
                  f"{wall_us - total / 1e3:.1f} us ({100 * (1 - total / 1e3 / wall_us):.0f}%)")


if __name__ == "__main__":
    main()
