#!/usr/bin/env python3
"""The device scripts' Python helpers, on the CPU: tools/gpu/ncu_decode_table.py (one decode
token's kernels from two Nsight Compute logs), tools/gpu/ncu_kernel_metrics.py (each launch's
metrics and stall reasons) and tools/gpu/bench_lines.py (a bench JSON's lines).

The ncu logs are made up in ncu's --csv --print-units base format: kernels ncu names with
"<unnamed>" and "(anonymous namespace)" (a first version of the table cut every such name to
nothing), initialisation kernels whose time differs between the two runs but whose launch count
does not (they must not enter the token's total), and a decode step's kernels launched a whole
number of times per token.
"""
import csv
import io
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TABLE = os.path.join(ROOT, "tools", "gpu", "ncu_decode_table.py")
LINES = os.path.join(ROOT, "tools", "gpu", "bench_lines.py")
METRICS = os.path.join(ROOT, "tools", "gpu", "ncu_kernel_metrics.py")
HEADER = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
          "Block Size", "Grid Size", "Device", "CC", "Section Name", "Metric Name", "Metric Unit",
          "Metric Value"]
GEMV = "void ninfer::ops::cuda::<unnamed>::gemv_fp8_kernel<__nv_bfloat16, 1>(const __nv_bfloat16 *, long)"
MOE = "void ninfer::(anonymous namespace)::moe_up_kernel<moe_decode::Fp8Weights, 8>(ninfer::MoeArgs<T1>)"
INIT = "ninfer::<unnamed>::fill_normal_kernel(float *, long)"


def ncu_log(tokens, init_ns):
    out = io.StringIO()
    out.write("==PROF== Connected to process 1\n")
    w = csv.writer(out, quoting=csv.QUOTE_ALL)
    w.writerow(HEADER)
    rows = [(INIT, init_ns)] * 3 + [(GEMV, 10000), (MOE, 20000)] * 40 * tokens
    for i, (name, ns) in enumerate(rows):
        w.writerow([i, 1, "ninfer", "h", name, 1, 7, "(256, 1, 1)", "(64, 1, 1)", 0, "9.0",
                    "Command line profiler metrics", "gpu__time_duration.sum", "ns", f"{ns:,}"])
    return out.getvalue()


class NcuDecodeTable(unittest.TestCase):
    def run_table(self, *extra):
        with tempfile.TemporaryDirectory() as d:
            short, long_ = os.path.join(d, "a.csv"), os.path.join(d, "b.csv")
            open(short, "w").write(ncu_log(4, init_ns=1000))
            open(long_, "w").write(ncu_log(12, init_ns=900000))  # init timing noise
            wall = os.path.join(d, "wall.json")
            json.dump({"results": [{"test": "tg128", "decode_tok_s": {"mean": 500.0}}]},
                      open(wall, "w"))
            return subprocess.run([sys.executable, TABLE, short, long_, "8", "--wall", wall,
                                   *extra], check=True, capture_output=True, text=True).stdout

    def test_one_token(self):
        out = self.run_table()
        self.assertIn("gemv_fp8_kernel<__nv_bfloat16, 1>", out)
        self.assertIn("moe_up_kernel<Fp8Weights, 8>", out)
        self.assertNotIn("fill_normal_kernel", out)  # same launches in both runs
        total = [l for l in out.splitlines() if l.startswith("all kernels")][0].split()
        self.assertEqual(float(total[2]), 80.0)          # launches a token
        self.assertAlmostEqual(float(total[3]), 1200.0)  # 40 x (10 + 20) us
        self.assertIn("wall per token (plain bench, 500.0 tok/s): 2000.0 us", out)

    def test_names_without_templates(self):
        out = self.run_table("--no-templates")
        self.assertRegex(out, r"\ngemv_fp8_kernel +40\.0 +400\.0")
        self.assertRegex(out, r"\nmoe_up_kernel +40\.0 +800\.0")


class NcuKernelMetrics(unittest.TestCase):
    SCAN = ("void ninfer::ops::cuda::<unnamed>::tc_scan_kernel<8>(ninfer::ops::cuda::GdnArgs, "
            "ninfer::ops::cuda::gdn_tc::TcWork)")

    def test_launches_metrics_and_stalls_largest_first(self):
        rows = [(0, self.SCAN, "(64, 32, 1)", "gpu__time_duration.sum", "4,640,000"),
                (0, self.SCAN, "(64, 32, 1)",
                 "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio", "0.25"),
                (0, self.SCAN, "(64, 32, 1)",
                 "smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio",
                 "1.5"),
                (0, self.SCAN, "(64, 32, 1)",
                 "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
                 "0.75"),
                (1, MOE, "(64, 9, 1)", "gpu__time_duration.sum", "11,000")]
        out = io.StringIO()
        out.write("==PROF== Connected to process 1\n")
        w = csv.writer(out, quoting=csv.QUOTE_ALL)
        w.writerow(HEADER)
        for kid, name, grid, metric, value in rows:
            w.writerow([kid, 1, "bench", "h", name, 1, 7, "(256, 1, 1)", grid, 0, "9.0",
                        "Command line profiler metrics", metric, "", value])
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "ncu.csv")
            with open(path, "w") as f:
                f.write(out.getvalue())
            lines = subprocess.run([sys.executable, METRICS, path, "--top", "2"], check=True,
                                   capture_output=True, text=True).stdout.splitlines()
            missing = subprocess.run([sys.executable, METRICS, os.path.join(d, "none.csv")],
                                     capture_output=True, text=True)
        self.assertEqual(lines, [
            "0 tc_scan_kernel<8> grid (64, 32, 1)",
            "    gpu__time_duration.sum = 4,640,000",
            "    stall math_pipe_throttle = 1.5",  # largest first, and only the top 2
            "    stall long_scoreboard = 0.75",
            "1 moe_up_kernel<Fp8Weights, 8> grid (64, 9, 1)",  # the decode table's name
            "    gpu__time_duration.sum = 11,000"])
        self.assertNotEqual(missing.returncode, 0)
        self.assertIn("none.csv", missing.stderr)


class BenchLines(unittest.TestCase):
    def test_results_and_a_missing_file(self):
        bench = {"weights": "fp8 block-wise (resident)", "kv_dtype": "bf16",
                 "gdn_state_dtype": "bf16", "memory_bytes": {"weights": 37.5e9},
                 "ceilings": {"copy_bytes_per_s": 3.0e12},
                 "results": [{"test": "pp512", "batch": 1, "prefill_tok_s": {"mean": 17000.4},
                              "prefill_tflops": {"mean": 100.0}},
                             {"test": "tg64", "batch": 128, "decode_tok_s": {"mean": 5037.4},
                              "decode_roofline_fraction": {"mean": 0.559},
                              "decode_bytes_per_step": 42.66e9}]}
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "b.json")
            json.dump(bench, open(path, "w"))
            out = subprocess.run([sys.executable, LINES, path, "--label", "new"], check=True,
                                 capture_output=True, text=True).stdout.splitlines()
            missing = subprocess.run([sys.executable, LINES, os.path.join(d, "none.json")],
                                     check=True, capture_output=True, text=True).stdout
        self.assertEqual(out[0], "new fp8 block-wise (resident), kv bf16, state bf16, weights "
                                 "37.5 GB, copy 3000 GB/s")
        self.assertEqual(out[1], "new   pp512 prefill 17000 tok/s (100.0 TFLOP/s)")
        self.assertEqual(out[2], "new   tg64 batch 128 decode 5037.4 tok/s (55.9% roofline, "
                                 "42.66 GB/step)")
        self.assertIn("no json", missing)


if __name__ == "__main__":
    unittest.main(verbosity=2)
