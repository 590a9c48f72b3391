#!/usr/bin/env python3
"""bf16 against f32 at a real model's shapes, per prompt length and route table (issue 14's bf16
precision lead: a top-5 logprob error that peaked at some prompt lengths).

Writes a config of --config's per-layer shapes with its first --layers layers (random weights:
`ninfer run --random-weights`), then for each prompt length runs one greedy token in f32 (the
reference: f32 on CUDA matched fp64 HF at the 35B's shapes) and in bf16 under the built-in route
table and each --table, and prints one JSON line per (length, arm): the largest |logprob
difference| over f32's top-5 ids (an id missing from bf16's top-20 counts as missing), and
whether the greedy id agrees.

    python3 tools/gpu/precision_probe.py --ninfer /tmp/g/ninfer --config configs/qwen3.6-35b-a3b.json \
        --layers 4 --lengths 16,31,32,64 --table chunked=FILE ...

--torch asks whether ninfer's bf16 is worse than torch's own: HF transformers builds and saves a
checkpoint of those shapes, and torch f32 is the reference for torch bf16, ninfer f32 and ninfer
bf16 on the same weights (precision_torch.py; needs torch and transformers).
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile


def layered_config(path, layers, out_dir):
    c = json.load(open(path))
    t = c.get("text_config", c)
    t["num_hidden_layers"] = layers
    if "layer_types" in t:
        t["layer_types"] = t["layer_types"][:layers]
    out = os.path.join(out_dir, "config.json")
    json.dump(c, open(out, "w"))
    return out


def first_token(ninfer, source, dtype, prompt, table, device):
    """source: ["--random-weights", "--config", FILE] or ["--model", DIR]."""
    args = [ninfer, "run", *source, "--device", device,
            "--dtype", dtype, "--prompt-ids", ",".join(map(str, prompt)), "--max-new", "1",
            "--greedy", "--json", "--top-logprobs", "20", "--graph-warmup", "0"]
    if table:
        args += ["--route-table", table]
    out = subprocess.run(args, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{dtype} {table}: {out.stderr.strip()[-400:]}")
    tok = json.loads(out.stdout)["tokens"][0]
    return tok["id"], {a["id"]: a["logprob"] for a in tok["top_logprobs"]}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ninfer", required=True)
    p.add_argument("--config", required=True)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--lengths", default="16,31,32,48,64,65,96")
    p.add_argument("--table", action="append", default=[], help="NAME=FILE, a route table arm")
    p.add_argument("--device", default="cuda")
    p.add_argument("--test-dtype", default="bf16", help="the dtype under test (f32: a self-check)")
    p.add_argument("--torch", action="store_true", help="torch bf16 beside ninfer's (module doc)")
    p.add_argument("--seed", type=int, default=0, help="--torch: the HF initialisation's seed")
    a = p.parse_args()
    tables = [("builtin", None)] + [tuple(t.split("=", 1)) for t in a.table]
    with tempfile.TemporaryDirectory() as d:
        config = layered_config(a.config, a.layers, d)
        c = json.load(open(config))
        vocab = c.get("text_config", c)["vocab_size"]
        prompts = {}
        for length in map(int, a.lengths.split(",")):
            rng = random.Random(length)
            prompts[length] = [rng.randrange(min(1000, vocab // 2), min(vocab, 150000))
                               for _ in range(length)]
        if a.torch:
            import precision_torch
            return precision_torch.run(a, prompts, lambda *r: first_token(a.ninfer, *r), d)
        source = ["--random-weights", "--config", config]
        worst = {}
        for length, prompt in prompts.items():
            ref_id, ref = first_token(a.ninfer, source, "f32", prompt, None, a.device)
            top5 = sorted(ref, key=ref.get, reverse=True)[:5]
            for name, table in tables:
                got_id, got = first_token(a.ninfer, source, a.test_dtype, prompt, table, a.device)
                diffs = [abs(got[i] - ref[i]) for i in top5 if i in got]
                row = {"length": length, "arm": name, "same_greedy": got_id == ref_id,
                       "max_top5_abs": max(diffs) if diffs else None,
                       "missing_top5": len(top5) - len(diffs), "f32_top1_logprob": ref[top5[0]]}
                print(json.dumps(row), flush=True)
                if diffs:
                    worst[name] = max(worst.get(name, 0.0), max(diffs))
        print(json.dumps({"worst": worst}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
