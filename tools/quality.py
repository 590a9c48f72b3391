#!/usr/bin/env python3
"""Quality of quantized weights and KV caches against bf16 on the demo model, with the ninfer CLI.

Variants (--variants, each against bf16 weights with a bf16 KV cache):
  fp8      the demo model converted with `ninfer convert --to fp8` (the official block-wise layout);
  fp8_w8a8 the same checkpoint with `--fp8-weights w8a8` (CPU): every fp8 projection quantizes
           its input rows to e4m3 per 128 columns first, the numerics of CUDA's W8A8 routes
           (prefill and batched decode on sm_90);
  w8, q4   converted with `ninfer convert --to w8|q4` (groupwise 8- or 4-bit integers, default
           groups); w8_gN, q4_gN with groups of N;
  kv_int8  the bf16 model with `--kv-dtype int8` (int8 codes, an f16 scale per 64 dims);
  kv_fp8   the bf16 model with `--kv-dtype fp8` (e4m3 codes, a scale per token and head);
  state_bf16 the bf16 model with `--gdn-state-dtype bf16` (the GDN recurrent state stored in
           bf16: rounded at every decode step and at the end of every prefill chunk).
Each is measured the same way:
  - perplexity (`ninfer perplexity`) on a text: by default this repository's Python tools, code as
    the demo model was trained on;
  - greedy agreement: each prompt (the demo model's reference.json cases and mtp_eval.json
    prompts) continued greedily for --new tokens by both; the fraction of positions equal before
    the first divergence, and how many continuations are identical;
  - next-token KL(bf16 || fp8) on the same prefixes (the prompt plus bf16's greedy continuation
    cut every --kl-every tokens), over bf16's --top-logprobs alternatives (the mass outside them
    in one bucket), so a lower bound of the full KL.
On the CPU the fp8 checkpoint runs dequantized (the weights e4m3(code) x scale, f32
activations): the numerics of CUDA's weight-only fp8 routes (GEMV, fused MoE decode); fp8_w8a8
adds the activation quantization of its W8A8 routes.
On the CPU the KV variants quantize the f32 activations' keys and values with the same codecs as
CUDA (ops/kv_codec.h).
On every device the groupwise checkpoints run dequantized (code x scale, then the bf16 model).
  python3 tools/quality.py [--variants fp8,w8,q4,kv_int8,kv_fp8] [--device cpu] [-o out.json]
"""
import argparse
import glob
import json
import math
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return out.stdout


def generate(args, variant, ids, new, top=0):
    model, flags = variant
    cmd = [args.ninfer, "run", "--model", model, *flags, "--device", args.device, "--prompt-ids",
           ",".join(map(str, ids)), "--max-new", str(new), "--greedy", "--ignore-eos", "--json"]
    if top:
        cmd += ["--top-logprobs", str(top)]
    return json.loads(run(cmd))["tokens"]


def kl_top(p_top, q_top):
    """KL(p || q) over p's alternatives plus one bucket for the rest of each distribution."""
    q = {t: lp for t, lp in q_top}
    q_floor = min(lp for _, lp in q_top)  # an absent token has at most the last one's mass
    kl, p_mass, q_mass = 0.0, 0.0, 0.0
    for t, lp in p_top:
        lq = q.get(t, q_floor)
        kl += math.exp(lp) * (lp - lq)
        p_mass += math.exp(lp)
        q_mass += math.exp(lq)
    p_rest, q_rest = max(1.0 - p_mass, 1e-12), max(1.0 - q_mass, 1e-12)
    return max(kl + p_rest * math.log(p_rest / q_rest), 0.0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ninfer", default=os.path.join(ROOT, "build/apps/ninfer/ninfer"))
    ap.add_argument("--model", default=os.path.join(ROOT, "models/ninfer-demo"))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--text", help="perplexity text (default: tools/**/*.py concatenated)")
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--new", type=int, default=128)
    ap.add_argument("--kl-every", type=int, default=32)
    ap.add_argument("--top-logprobs", type=int, default=20)
    ap.add_argument("--variants", default="fp8,kv_int8,kv_fp8")
    ap.add_argument("-o", "--output")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="ninfer-quality-")
    variants = {"bf16": (args.model, [])}
    for name in args.variants.split(","):
        if name in ("fp8", "fp8_w8a8"):
            fp8 = os.path.join(work, "demo-fp8")
            if not os.path.isdir(fp8):
                run([args.ninfer, "convert", "--model", args.model, "--to", "fp8", "--out", fp8])
            variants[name] = (fp8, ["--fp8-weights", "w8a8"] if name == "fp8_w8a8" else [])
        elif name.split("_g")[0] in ("w8", "q4"):
            to, _, group = name.partition("_g")
            out = os.path.join(work, f"demo-{name}")
            run([args.ninfer, "convert", "--model", args.model, "--to", to, "--out", out,
                 *(["--group", group] if group else [])])
            variants[name] = (out, [])
        elif name in ("kv_int8", "kv_fp8"):
            variants[name] = (args.model, ["--kv-dtype", name[3:]])
        elif name == "state_bf16":
            variants[name] = (args.model, ["--gdn-state-dtype", "bf16"])
        else:
            sys.exit(f"unknown variant {name} (fp8, fp8_w8a8, w8, q4, w8_gN, q4_gN, kv_int8, "
                     "kv_fp8, state_bf16)")
    text = args.text
    if not text:
        text = os.path.join(work, "text.py")
        with open(text, "w") as f:
            for path in sorted(glob.glob(os.path.join(ROOT, "tools", "**", "*.py"), recursive=True)):
                source = open(path).read()
                if "<|" not in source:  # special tokens (image placeholders) would be matched
                    f.write(source + "\n")
    report = {"model": args.model, "device": args.device, "new_tokens": args.new}
    for name, (path, flags) in variants.items():
        ppl = json.loads(run([args.ninfer, "perplexity", "--model", path, *flags, "--device",
                              args.device, "--file", text, "--context", str(args.context)]))
        report[f"ppl_{name}"] = ppl["ppl"]
        report["ppl_tokens"] = ppl["tokens"]

    ref = json.load(open(os.path.join(args.model, "reference.json")))
    prompts = [c["prompt"] for c in ref["cases"]]
    mtp = os.path.join(args.model, "mtp_eval.json")
    if os.path.exists(mtp):
        prompts += json.load(open(mtp))["prompts"]
    base = {i: [t["id"] for t in generate(args, variants["bf16"], ids, args.new)]
            for i, ids in enumerate(prompts)}
    base_top = {}  # (prompt, cut) -> bf16's top alternatives
    for name, variant in variants.items():
        if name == "bf16":
            continue
        agree, positions, identical, kls = 0, 0, 0, []
        for i, ids in enumerate(prompts):
            other = [t["id"] for t in generate(args, variant, ids, args.new)]
            same = next((j for j, (a, b) in enumerate(zip(base[i], other)) if a != b), len(base[i]))
            agree += same
            positions += len(base[i])
            identical += same == len(base[i])
            for cut in range(0, args.new, args.kl_every):
                prefix = ids + base[i][:cut]
                if (i, cut) not in base_top:
                    base_top[(i, cut)] = generate(args, variants["bf16"], prefix, 1,
                                                  args.top_logprobs)[0]["top_logprobs"]
                q = generate(args, variant, prefix, 1, args.top_logprobs)[0]["top_logprobs"]
                kls.append(kl_top([(t["id"], t["logprob"]) for t in base_top[(i, cut)]],
                                  [(t["id"], t["logprob"]) for t in q]))
        report[name] = {
            "flags": variant[1],
            "greedy_agreement_before_first_divergence": agree / positions,
            "greedy_identical_continuations": identical,
            "kl_positions": len(kls),
            "mean_kl_top": sum(kls) / len(kls),
        }
    report["prompts"] = len(prompts)
    out = json.dumps(report, indent=1)
    print(out)
    if args.output:
        open(args.output, "w").write(out + "\n")


if __name__ == "__main__":
    sys.exit(main())
