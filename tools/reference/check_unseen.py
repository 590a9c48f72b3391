#!/usr/bin/env python3
"""Checks ninfer against HF transformers on checkpoints it has never seen.

Builds N random tiny checkpoints with make_fixtures.py --random (other sizes and seeds of both
model types, fp32/bf16/f16, nested text_config with model.visual.* tensors or text-only, experts
fused or per expert, tied or not, sharded or not, MTP or not), then runs
`ninfer run --json --greedy --top-logprobs 5` on prompts of 13 and 150 tokens and requires 24
identical greedy ids and top-5 logprobs within 2e-4 (kLogprobVsHfAbs).

    python3 tools/reference/check_unseen.py --ninfer build/apps/ninfer/ninfer --count 8 --seed 7

Needs torch and transformers (the fixture generator's requirements); exits 1 on any mismatch.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
LOGPROB_ABS = 2e-4


def compare(ninfer, model_dir, extra):
    ref = json.load(open(os.path.join(model_dir, "reference.json")))
    failures, worst = [], 0.0
    for case in ref["cases"]:
        out = subprocess.run([ninfer, "run", "--model", model_dir, "--prompt-ids",
                              ",".join(map(str, case["prompt"])), "--max-new",
                              str(len(case["steps"])), "--greedy", "--json", "--top-logprobs", "5",
                              *extra], capture_output=True, text=True)
        if out.returncode != 0:
            failures.append(f"exit {out.returncode}: {out.stderr.strip()}")
            continue
        got = json.loads(out.stdout)
        ids = [t["id"] for t in got["tokens"]]
        if ids != case["greedy"]:
            failures.append(f"prompt {len(case['prompt'])}: ids {ids} != {case['greedy']}")
            continue
        for t, s in zip(got["tokens"], case["steps"]):
            worst = max(worst, abs(t["logprob"] - s["logprob"]))
            ours = {a["id"]: a["logprob"] for a in t["top_logprobs"]}
            for tid, lp in s["top"]:
                if tid in ours:
                    worst = max(worst, abs(ours[tid] - lp))
                elif abs(lp - s["top"][-1][1]) > LOGPROB_ABS:
                    failures.append(f"prompt {len(case['prompt'])}: top id {tid} missing")
    if worst > LOGPROB_ABS:
        failures.append(f"max |logprob diff| {worst:.2e} > {LOGPROB_ABS}")
    return failures, worst


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ninfer", required=True)
    p.add_argument("--count", type=int, default=8)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", help="keep the checkpoints here (default: a temporary directory)")
    args = p.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="ninfer_unseen_")
    subprocess.run([sys.executable, os.path.join(HERE, "make_fixtures.py"), "--out", out,
                    "--random", str(args.count), "--seed", str(args.seed)], check=True)
    bad = 0
    for name in sorted(os.listdir(out)):
        model_dir = os.path.join(out, name)
        spec = json.load(open(os.path.join(model_dir, "reference.json")))["fixture"]
        for extra in ([], ["--prefill-chunk", "7"]):
            failures, worst = compare(args.ninfer, model_dir, extra)
            desc = (f"{spec['kind']:5} {spec['layout']:4} {spec['experts'] if spec['kind'] == 'moe' else '-':10} "
                    f"{spec['dtype']:8} layers={spec['layers']:6} hk={spec['hk']} hv={spec['hv']} "
                    f"rot={spec['rotary']} tie={int(spec['tie'])} mtp={int(spec['mtp'])} "
                    f"shards={int(spec['shards'])} rope={spec.get('rope', {}).get('rope_type', 'default')}")
            status = "OK  " if not failures else "FAIL"
            print(f"{status} {name:18} {desc} {' '.join(extra) or 'chunk=512':17} "
                  f"max|dlogprob|={worst:.1e}")
            for f in failures:
                print("     ", f)
            bad += bool(failures)
    print(f"{bad} failures in {args.count} checkpoints x 2 prompts x 2 chunkings ({out})")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
