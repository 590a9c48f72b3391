#!/usr/bin/env python3
"""The memory-bandwidth roofline of batched decode for a Qwen3.5/3.6 model: the output tok/s a
GPU of a given bandwidth could reach if a decode step of B sequences did nothing but move its
bytes once.

A step of B sequences, each with `context` tokens of KV, reads:
  - the weights every token reads whatever it routes to (`ninfer info`'s weights read per token,
    less the top_k experts of each MoE layer): embeddings row, attention, GDN, shared experts,
    router, head;
  - the routed experts some sequence of the batch picks: E * (1 - (1 - k/E)^B) of each MoE
    layer's E experts (uniform routing, as the random-weight benchmark's router gives; a trained
    router concentrates, so this is an upper bound of the bytes and a lower bound of the
    roofline);
  - every sequence's GDN state, read and written (f32, or bf16 with --gdn-state-dtype bf16);
  - every sequence's KV over its context.
Roofline tok/s = B / (bytes / bandwidth). Weights are bf16, or fp8 codes with F32 block scales
for an fp8 config with --fp8 (as `ninfer info` counts them resident). The bytes come from
`ninfer info --decode-batch B --decode-context C` (model::decode_step_bytes), the formula
`ninfer bench` uses for its own roofline, so the two cannot drift apart.

  python3 bench/serve/decode_roofline.py --config configs/qwen3.6-35b-a3b.json \\
      --concurrency 64 --context 640 --bandwidth 4.2e12 [--fp8] [--json]
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def step(ninfer, config, batch, context, fp8, kv_dtype="bf16", state_dtype="f32"):
    """`ninfer info --decode-batch`'s decode_step: the bytes by part (model::decode_step_bytes,
    the formula `ninfer bench` uses for its roofline)."""
    out = subprocess.run([ninfer, "info", "--config", config, "--device", "cpu", "--json",
                          "--decode-batch", str(batch), "--decode-context", str(context),
                          "--decode-weights", "fp8" if fp8 else "bf16", "--kv-dtype", kv_dtype,
                          "--gdn-state-dtype", state_dtype],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["decode_step"]


def roofline(ninfer, config, batch, context, bandwidth, fp8, kv_dtype="bf16", state_dtype="f32"):
    s = step(ninfer, config, batch, context, fp8, kv_dtype, state_dtype)
    total = s["bytes"]
    return {"concurrency": batch, "context": context, "bandwidth_bytes_per_s": bandwidth,
            "step_bytes": total, "step_bytes_by_part": s["bytes_by_part"],
            "step_ms": 1e3 * total / bandwidth, "roofline_tok_s": batch * bandwidth / total}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ninfer", default=os.path.join(ROOT, "build/apps/ninfer/ninfer"))
    ap.add_argument("--config", required=True)
    ap.add_argument("--concurrency", type=int, required=True, help="sequences per decode step")
    ap.add_argument("--context", type=float, required=True,
                    help="mean KV tokens per sequence over the run (decode-heavy 128/1024: 640)")
    ap.add_argument("--bandwidth", type=float, required=True,
                    help="bytes/s, e.g. the copy ceiling `ninfer bench` measured in the run")
    ap.add_argument("--fp8", action="store_true", help="fp8 weights resident (an fp8 config)")
    ap.add_argument("--kv-dtype", default="bf16", choices=["bf16", "int8", "fp8"])
    ap.add_argument("--gdn-state-dtype", default="f32", choices=["f32", "bf16"])
    ap.add_argument("--output-tok-s", type=float, help="measured output tok/s: print the fraction")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.concurrency < 1 or args.context < 0 or args.bandwidth <= 0:
        sys.exit("decode_roofline: --concurrency >= 1, --context >= 0 and --bandwidth > 0")
    r = roofline(args.ninfer, args.config, args.concurrency, args.context, args.bandwidth,
                 args.fp8, args.kv_dtype, args.gdn_state_dtype)
    if args.output_tok_s is not None:
        r["output_tok_s"] = args.output_tok_s
        r["roofline_fraction"] = args.output_tok_s / r["roofline_tok_s"]
    if args.json:
        print(json.dumps(r, indent=1))
        return
    parts = ", ".join(f"{k} {v / 1e9:.2f} GB" for k, v in r["step_bytes_by_part"].items())
    line = (f"C={args.concurrency}: step {r['step_bytes'] / 1e9:.1f} GB ({parts}), "
            f"{r['step_ms']:.2f} ms, roofline {r['roofline_tok_s']:.0f} tok/s")
    if "roofline_fraction" in r:
        line += f", measured {args.output_tok_s:.0f} = {100 * r['roofline_fraction']:.1f}%"
    print(line)


if __name__ == "__main__":
    main()
