#!/usr/bin/env python3
"""Our hot ops against their best public implementations, at our shapes, in one run (issue: peers
side by side). Runs our one-op benches (bench_decode_ops, bench_prefill_ops: JSON lines) and times
each peer the same way in PyTorch on the same GPU, then prints ours / peer:

  decode (a CUDA graph of 20 back-to-back calls, replayed; us per call, as bench_decode_ops):
    gated_delta_rule T=1 Hv=32|48   FLA fused_recurrent_gated_delta_rule (qk L2 norm in kernel,
                                    GVA: 16 key heads)
    paged_attention T=1 ctx=N ...   FlashInfer BatchDecodeWithPagedKVCacheWrapper (16-row pages)
    linear gemv <shape> T=1..8      cuBLAS through torch.nn.functional.linear
  prefill (median of eager calls, ms, as bench_prefill_ops):
    gated_delta_rule T Hv=32|48     FLA chunk_gated_delta_rule
    paged_attention T nH nKV        FlashInfer single_prefill_with_kv_cache (causal), else
                                    PyTorch's SDPA (its FlashAttention-2 / cuDNN backends)
    linear T N K                    cuBLAS through torch.nn.functional.linear

A peer that is not importable is reported as missing, never silently skipped. The wheels come
from PyPI (flash-linear-attention + fla-core + einops; flashinfer-python): carry them to the GPU
machine and pass --wheels DIR (installed with pip --no-index into a scratch target).

  python3 bench/peers/peer_table.py --bin-dir /tmp/g [--prefill-T 8192] [--wheels DIR] \
      [--json out.jsonl]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

CALLS_PER_GRAPH = 20  # bench_decode_ops' kCallsPerGraph


def run_ours(binary, args):
    out = subprocess.run([binary, *map(str, args)], check=True, capture_output=True, text=True)
    rows = {}
    for line in out.stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            j = json.loads(line)
            rows[j["op"]] = j
    return rows


def install_wheels(wheels):
    target = "/tmp/peer_wheels"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", "-q",
                    "--target", target] + [os.path.join(wheels, w) for w in os.listdir(wheels)],
                   check=True)
    sys.path.insert(0, target)


def graph_us(torch, fn, reps=20):
    """us per call of fn, CALLS_PER_GRAPH calls captured in one graph and replayed."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()  # warm-up: JIT, autotune, workspaces
        fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(CALLS_PER_GRAPH):
            fn()
    g.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        g.replay()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / (reps * CALLS_PER_GRAPH)


def eager_ms(torch, fn, reps=5):
    """median ms of reps eager calls (after two warm-ups), as bench_prefill_ops' time_ms."""
    fn()
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


class Table:
    def __init__(self, json_path):
        self.rows = []
        self.json = open(json_path, "w") if json_path else None

    def add(self, op, ours, unit, peer_name, peer):
        ratio = ours / peer if (ours and peer) else None
        row = {"op": op, "ours": ours, "unit": unit, "peer": peer_name, "peer_time": peer,
               "ours_over_peer": ratio}
        self.rows.append(row)
        if self.json:
            self.json.write(json.dumps(row) + "\n")
            self.json.flush()

    def print(self):
        print("| op | ours | peer | peer time | ours / peer |")
        print("|---|---|---|---|---|")
        for r in self.rows:
            fmt = lambda v: "%.2f %s" % (v, r["unit"]) if v else "missing"
            ratio = "%.2f" % r["ours_over_peer"] if r["ours_over_peer"] else "-"
            print("| %s | %s | %s | %s | %s |" % (r["op"], fmt(r["ours"]), r["peer"],
                                                  fmt(r["peer_time"]), ratio))


def import_or_none(name):
    try:
        return __import__(name, fromlist=["_"])
    except Exception as e:  # noqa: BLE001 - any import failure means "peer missing"
        print("peer %s not importable: %s" % (name, e), file=sys.stderr)
        return None


def gdn_peers(torch, table, ours_decode, ours_prefill, prefill_T):
    fla = import_or_none("fla.ops.gated_delta_rule")
    Hk, d = 16, 128
    for Hv in (32, 48):
        for T, ours, unit in ((1, ours_decode, "us"), (prefill_T, ours_prefill, "ms")):
            op = "gated_delta_rule T=%d Hv=%d" % (T, Hv)
            mine = ours.get(op, {}).get(unit)
            if fla is None:
                table.add(op, mine, unit, "FLA", None)
                continue
            q = torch.randn(1, T, Hk, d, device="cuda", dtype=torch.bfloat16)
            k = torch.randn(1, T, Hk, d, device="cuda", dtype=torch.bfloat16)
            v = torch.randn(1, T, Hv, d, device="cuda", dtype=torch.bfloat16)
            g = -torch.rand(1, T, Hv, device="cuda", dtype=torch.float32) * 0.01
            beta = torch.rand(1, T, Hv, device="cuda", dtype=torch.float32) * 0.1
            h0 = torch.randn(1, Hv, d, d, device="cuda", dtype=torch.float32) * 0.01
            if T == 1:
                fn = lambda: fla.fused_recurrent_gated_delta_rule(
                    q, k, v, g=g, beta=beta, initial_state=h0, output_final_state=True,
                    use_qk_l2norm_in_kernel=True)
                table.add(op, mine, unit, "FLA fused_recurrent", graph_us(torch, fn))
            else:
                fn = lambda: fla.chunk_gated_delta_rule(
                    q, k, v, g=g, beta=beta, initial_state=h0, output_final_state=True,
                    use_qk_l2norm_in_kernel=True)
                table.add(op, mine, unit, "FLA chunk", eager_ms(torch, fn))


def decode_attention_peers(torch, table, ours_decode):
    fi = import_or_none("flashinfer")
    D, page = 256, 16
    for op, j in ours_decode.items():
        if not op.startswith("paged_attention T=1 ") or " kv=" in op:
            continue
        f = dict(part.split("=") for part in op.split()[1:])
        ctx_len, nH, nKV = int(f["ctx"]), int(f["nH"]), int(f["nKV"])
        if fi is None:
            table.add(op, j["us"], "us", "FlashInfer", None)
            continue
        pages = (ctx_len + page - 1) // page
        kv = torch.randn(pages, 2, page, nKV, D, device="cuda", dtype=torch.bfloat16)
        q = torch.randn(1, nH, D, device="cuda", dtype=torch.bfloat16)
        workspace = torch.empty(128 << 20, dtype=torch.uint8, device="cuda")
        # Tensor cores: FlashInfer's advice for GQA groups of 4 or more (ours are 8 and 6).
        w = fi.BatchDecodeWithPagedKVCacheWrapper(workspace, "NHD", use_cuda_graph=True,
                                                  use_tensor_cores=True,
                                                  paged_kv_indptr_buffer=torch.tensor(
                                                      [0, pages], dtype=torch.int32, device="cuda"),
                                                  paged_kv_indices_buffer=torch.arange(
                                                      pages, dtype=torch.int32, device="cuda"),
                                                  paged_kv_last_page_len_buffer=torch.tensor(
                                                      [ctx_len - (pages - 1) * page],
                                                      dtype=torch.int32, device="cuda"))
        w.plan(torch.tensor([0, pages], dtype=torch.int32, device="cuda"),
               torch.arange(pages, dtype=torch.int32, device="cuda"),
               torch.tensor([ctx_len - (pages - 1) * page], dtype=torch.int32, device="cuda"),
               nH, nKV, D, page, q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16)
        table.add(op, j["us"], "us", "FlashInfer decode", graph_us(torch, lambda: w.run(q, kv)))


def prefill_attention_peers(torch, table, ours_prefill):
    fi = import_or_none("flashinfer")
    D = 256
    for op, j in ours_prefill.items():
        if not op.startswith("paged_attention T=") or " kv=" in op:
            continue
        f = dict(part.split("=") for part in op.split()[1:])
        T, nH, nKV = int(f["T"]), int(f["nH"]), int(f["nKV"])
        q = torch.randn(T, nH, D, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(T, nKV, D, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(T, nKV, D, device="cuda", dtype=torch.bfloat16)
        if fi is not None:
            fn = lambda: fi.single_prefill_with_kv_cache(q, k, v, causal=True)
            table.add(op, j["ms"], "ms", "FlashInfer prefill", eager_ms(torch, fn))
        qs, ks, vs = (x.transpose(0, 1).unsqueeze(0) for x in (q, k, v))
        fn = lambda: torch.nn.functional.scaled_dot_product_attention(
            qs, ks, vs, is_causal=True, enable_gqa=True)
        table.add(op, j["ms"], "ms", "torch SDPA", eager_ms(torch, fn))


def linear_peers(torch, table, ours_decode, ours_prefill):
    for op, j in ours_prefill.items():
        if not op.startswith("linear T=") :
            continue
        f = dict(part.split("=") for part in op.split()[1:4])
        T, N, K = int(f["T"]), int(f["N"]), int(f["K"])
        x = torch.randn(T, K, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(N, K, device="cuda", dtype=torch.bfloat16) * 0.02
        table.add(op, j["ms"], "ms", "cuBLAS (torch)",
                  eager_ms(torch, lambda: torch.nn.functional.linear(x, w)))
    for op, j in ours_decode.items():  # "linear gemv <model> <what> T=.. N=.. K=.."
        if not op.startswith("linear gemv "):
            continue
        f = dict(part.split("=") for part in op.split() if "=" in part)
        T, N, K = int(f["T"]), int(f["N"]), int(f["K"])
        x = torch.randn(T, K, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(N, K, device="cuda", dtype=torch.bfloat16) * 0.02
        table.add(op, j["us"], "us", "cuBLAS (torch)",
                  graph_us(torch, lambda: torch.nn.functional.linear(x, w)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin-dir", required=True, help="where bench_decode_ops and "
                    "bench_prefill_ops are")
    ap.add_argument("--prefill-T", type=int, default=8192)
    ap.add_argument("--wheels", help="a folder of peer wheels to install (no network)")
    ap.add_argument("--json", help="write each row as a JSON line here")
    a = ap.parse_args()
    if a.wheels:
        install_wheels(a.wheels)
    import torch
    ours_decode = run_ours(os.path.join(a.bin_dir, "bench_decode_ops"), [20])
    ours_prefill = run_ours(os.path.join(a.bin_dir, "bench_prefill_ops"), [a.prefill_T, 5])
    table = Table(a.json)
    print("GPU:", torch.cuda.get_device_name(), file=sys.stderr)
    gdn_peers(torch, table, ours_decode, ours_prefill, a.prefill_T)
    decode_attention_peers(torch, table, ours_decode)
    prefill_attention_peers(torch, table, ours_prefill)
    linear_peers(torch, table, ours_decode, ours_prefill)
    table.print()


if __name__ == "__main__":
    main()
