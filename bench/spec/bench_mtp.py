#!/usr/bin/env python3
"""Speculative decoding figures with `ninfer run --json` (one JSON line per run on stdout).

For the demo model (or any checkpoint with mtp.* weights, or a <model>/dflash2 drafter): greedy
decoding of a prose and a code prompt without speculation and with --spec METHOD --draft-tokens K
for each method of --spec (mtp, dflash, dflash2) and each K, reporting decode
tok/s (from ninfer's own stats line), the speedup over plain decoding in the same invocation,
acceptance per position and tokens per round. The greedy ids are checked equal to the plain
run's (speculation must not change them).

usage: bench_mtp.py --ninfer BIN [--model DIR] [--device cpu|cuda] [--spec mtp,dflash2]
                    [--ks 1,2,3,4] [--new 256] [--engine-args "--graph-warmup 0"]
"""
import argparse
import json
import re
import subprocess
import sys

PROMPTS = {
    "code": 'import os\nimport sys\n\n\ndef main(argv):\n    """Parse the command line and run '
            'the program."""\n    parser = argparse.ArgumentParser(description=__doc__)\n',
    "prose": "The history of the river begins in the mountains, where the snow melts every "
             "spring and the water runs down through the forests to the valley. ",
}


def tokenize(ninfer, model, text):
    out = subprocess.run([ninfer, "tokenize", "--model", model], input=text, text=True,
                         capture_output=True, check=True).stdout
    return ",".join(str(i) for i in json.loads(out))


def run(ninfer, model, device, ids, new, spec, engine_args):
    cmd = [ninfer, "run", "--model", model, "--device", device, "--prompt-ids", ids,
           "--max-new", str(new), "--temperature", "0", "--ignore-eos", "--json"] + spec + \
        engine_args
    p = subprocess.run(cmd, text=True, capture_output=True)
    if p.returncode != 0:
        sys.exit(f"bench_mtp: {' '.join(cmd)} failed:\n{p.stderr}")
    result = json.loads(p.stdout.splitlines()[0])
    m = re.search(r"decode ([0-9.]+) tok/s", p.stderr)
    result["decode_tok_s"] = float(m.group(1)) if m else None
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ninfer", required=True)
    ap.add_argument("--model", default="models/ninfer-demo")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--spec", default="mtp", help="methods, comma separated")
    ap.add_argument("--ks", default="1,2,3,4")
    ap.add_argument("--new", type=int, default=256)
    ap.add_argument("--reps", type=int, default=3, help="runs per setting; the best is kept")
    ap.add_argument("--engine-args", default="", help="more ninfer run flags, every setting")
    args = ap.parse_args()
    failed = False
    for name, text in PROMPTS.items():
        ids = tokenize(args.ninfer, args.model, text)
        settings = [("plain", [])]
        for method in args.spec.split(","):
            prefix = "" if method == "mtp" else method + " "  # MTP keeps its old labels
            settings += [(f"{prefix}K={k}", ["--spec", method, "--draft-tokens", k])
                         for k in args.ks.split(",")] + [(f"{prefix}auto", ["--spec", method])]
        base = None
        for label, spec in settings:
            runs = [run(args.ninfer, args.model, args.device, ids, args.new, spec,
                        args.engine_args.split())
                    for _ in range(args.reps)]
            best = max(runs, key=lambda r: r["decode_tok_s"] or 0)
            tokens = [t["id"] for t in best["tokens"]]
            if base is None:
                base = best
            same = tokens == [t["id"] for t in base["tokens"]]
            failed |= not same
            line = {"prompt": name, "device": args.device, "setting": label,
                    "decode_tok_s": best["decode_tok_s"],
                    "speedup": best["decode_tok_s"] / base["decode_tok_s"],
                    "same_tokens_as_plain": same}
            if "speculative" in best:
                line["speculative"] = best["speculative"]
            print(json.dumps(line), flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
