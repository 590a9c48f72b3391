#!/usr/bin/env python3
"""Quality of fp8 weights against bf16 on the demo model, with the ninfer CLI (CPU by default).

The demo model is converted with `ninfer convert --to fp8` (the official block-wise layout), then
both checkpoints are measured the same way:
  - perplexity (`ninfer perplexity`) on a text: by default this repository's Python tools, code as
    the demo model was trained on;
  - greedy agreement: each prompt (the demo model's reference.json cases and mtp_eval.json
    prompts) continued greedily for --new tokens by both; the fraction of positions equal before
    the first divergence, and how many continuations are identical;
  - next-token KL(bf16 || fp8) on the same prefixes (the prompt plus bf16's greedy continuation
    cut every --kl-every tokens), over bf16's --top-logprobs alternatives (the mass outside them
    in one bucket), so a lower bound of the full KL.
On the CPU the fp8 checkpoint runs dequantized (the weights e4m3(code) x scale, bf16
activations): the numerics of CUDA's fp8 GEMV and tensor-core routes, not of W8A8.
  python3 tools/quality_fp8.py [--ninfer build/apps/ninfer/ninfer] [--device cpu] [-o out.json]
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


def generate(args, model, ids, new, top=0):
    cmd = [args.ninfer, "run", "--model", model, "--device", args.device, "--prompt-ids",
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
    ap.add_argument("-o", "--output")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="ninfer-quality-")
    fp8 = os.path.join(work, "demo-fp8")
    run([args.ninfer, "convert", "--model", args.model, "--to", "fp8", "--out", fp8])
    text = args.text
    if not text:
        text = os.path.join(work, "text.py")
        with open(text, "w") as f:
            for path in sorted(glob.glob(os.path.join(ROOT, "tools", "**", "*.py"), recursive=True)):
                source = open(path).read()
                if "<|" not in source:  # special tokens (image placeholders) would be matched
                    f.write(source + "\n")
    models = {"bf16": args.model, "fp8": fp8}
    report = {"model": args.model, "device": args.device, "new_tokens": args.new}
    for name, path in models.items():
        ppl = json.loads(run([args.ninfer, "perplexity", "--model", path, "--device", args.device,
                              "--file", text, "--context", str(args.context)]))
        report[f"ppl_{name}"] = ppl["ppl"]
        report["ppl_tokens"] = ppl["tokens"]

    ref = json.load(open(os.path.join(args.model, "reference.json")))
    prompts = [c["prompt"] for c in ref["cases"]]
    mtp = os.path.join(args.model, "mtp_eval.json")
    if os.path.exists(mtp):
        prompts += json.load(open(mtp))["prompts"]
    agree, positions, identical, kls = 0, 0, 0, []
    for ids in prompts:
        base = [t["id"] for t in generate(args, models["bf16"], ids, args.new)]
        other = [t["id"] for t in generate(args, models["fp8"], ids, args.new)]
        same = next((i for i, (a, b) in enumerate(zip(base, other)) if a != b), len(base))
        agree += same
        positions += len(base)
        identical += same == len(base)
        for cut in range(0, args.new, args.kl_every):
            prefix = ids + base[:cut]
            p = generate(args, models["bf16"], prefix, 1, args.top_logprobs)[0]["top_logprobs"]
            q = generate(args, models["fp8"], prefix, 1, args.top_logprobs)[0]["top_logprobs"]
            kls.append(kl_top([(t["id"], t["logprob"]) for t in p],
                              [(t["id"], t["logprob"]) for t in q]))
    report.update({
        "prompts": len(prompts),
        "greedy_agreement_before_first_divergence": agree / positions,
        "greedy_identical_continuations": identical,
        "kl_positions": len(kls),
        "mean_kl_top": sum(kls) / len(kls),
    })
    out = json.dumps(report, indent=1)
    print(out)
    if args.output:
        open(args.output, "w").write(out + "\n")


if __name__ == "__main__":
    sys.exit(main())
