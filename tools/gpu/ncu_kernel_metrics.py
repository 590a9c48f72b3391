#!/usr/bin/env python3
"""Each kernel launch's metrics from an Nsight Compute CSV log (ncu --metrics ... --csv
--print-units base), one block per launch: its id, short name (ncu_decode_table.py's, template
arguments kept: they say which variant ran) and grid, every plain metric, then its stall
reasons, largest first (smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio:
warps stalled for that reason per issued instruction). Used by tools/gpu/gdn_scan_profile.sh.
"""
import argparse
import collections
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ncu_decode_table import ncu_rows, short  # noqa: E402  (one log reader, one kernel name)

STALL = re.compile(r"issue_stalled_(.+)_per_issue_active")


def launches(path):
    """{(id, short name with template arguments, grid): {metric: value string}} in log order."""
    out = collections.OrderedDict()
    for row in ncu_rows(path):
        key = (row["ID"], short(row["Kernel Name"], True), row.get("Grid Size", ""))
        out.setdefault(key, {})[row["Metric Name"]] = row["Metric Value"]
    return out


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def report(path, top):
    lines = []
    for (kid, name, grid), metrics in launches(path).items():
        lines.append(f"{kid} {name} grid {grid}")
        stalls = []
        for metric, value in metrics.items():
            m = STALL.search(metric)
            if m:
                stalls.append((m.group(1), value))
            else:
                lines.append(f"    {metric} = {value}")
        stalls.sort(key=lambda kv: -number(kv[1]))
        lines += [f"    stall {reason} = {value}" for reason, value in stalls[:top]]
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("log", help="ncu --csv --print-units base log")
    p.add_argument("--top", type=int, default=6, help="stall reasons per launch")
    a = p.parse_args()
    try:
        print(report(a.log, a.top))
    except OSError as e:
        sys.exit(f"ncu_kernel_metrics: {e}")


if __name__ == "__main__":
    main()
