#!/usr/bin/env python3
"""Makes the FP8 fixtures of tests/fixtures_quant from HF fixtures of tests/fixtures, in the layout
of the official Qwen FP8 checkpoints (Qwen/Qwen3.6-35B-A3B-FP8): block-wise float8_e4m3fn
weights, each with a `weight_scale_inv` [ceil(out/B0), ceil(in/B1)] (BF16 here, as Qwen stores
them; one fixture uses F32), MoE experts per expert as 2-D tensors, and config.json's
quantization_config {quant_method: fp8, fmt: e4m3, activation_scheme: dynamic,
weight_block_size, modules_to_not_convert}. Quantized: attention q/k/v/o, GDN in_proj_qkv,
in_proj_z and out_proj, and the dense, shared and routed MLP projections; everything else stays
as it was (embeddings, lm_head, norms, router, shared_expert_gate, in_proj_a/b, conv1d, A_log,
dt_bias, the vision tower, mtp.fc). The scale is amax / 448 per block (vLLM's and the reference
quantizer's rule), and a scale may sit in another shard than its weight (sharded output).

Next to each FP8 fixture it writes `dequantized/`: the same checkpoint with every FP8 weight
replaced by fp8 * scale in F32: the oracle an FP8 loader must reproduce exactly. And
`reference.json`: HF transformers (float64) run on those dequantized weights, greedy for 16
tokens from two seeded prompts (redrawn at near-ties), with the top-5 logprobs of each step.

usage: make_fp8_fixture.py [--block 32] (needs torch and safetensors)
"""
import argparse
import json
import os
import re
import shutil

import torch
from safetensors.torch import load_file, save_file

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
QUANTIZED = re.compile(r"(self_attn\.(q|k|v|o)_proj|linear_attn\.(in_proj_qkv|in_proj_z|out_proj)|"
                       r"mlp\.(gate|up|down)_proj|shared_expert\.(gate|up|down)_proj|"
                       r"experts\.\d+\.(gate|up|down)_proj)\.weight$")


def quantize(w, block, scale_dtype):
    """w [out, in] -> (fp8 [out, in], scale_inv [ceil(out/b0), ceil(in/b1)] in scale_dtype).
    The scale is amax / 448 rounded to scale_dtype first, then w / scale is clamped to +-448 and
    cast (round to nearest even): `ninfer convert --to fp8` (model/fp8.h) uses the same recipe,
    and tests/model/test_convert_fp8.cpp checks that both give the same bits."""
    out, inp = w.shape
    b0, b1 = block
    so, si = -(-out // b0), -(-inp // b1)
    q = torch.empty(out, inp, dtype=torch.float8_e4m3fn)
    s = torch.empty(so, si, dtype=scale_dtype)
    w = w.float()
    for i in range(so):
        for j in range(si):
            blk = w[i * b0:(i + 1) * b0, j * b1:(j + 1) * b1]
            amax = torch.clamp(blk.abs().max(), min=1e-12)
            scale = (amax / 448.0).to(torch.float32).to(scale_dtype)
            s[i, j] = scale
            q[i * b0:(i + 1) * b0, j * b1:(j + 1) * b1] = torch.clamp(
                blk / scale.float(), -448.0, 448.0).to(torch.float8_e4m3fn)
    return q, s


def convert(src, dst, block, scale_dtype, shards):
    tensors = {}
    for f in sorted(os.listdir(src)):
        if f.endswith(".safetensors"):
            tensors.update(load_file(os.path.join(src, f)))
    fp8, deq, not_converted = {}, {}, set()
    for name, t in tensors.items():
        if QUANTIZED.search(name) and t.dim() == 2 and not name.startswith("model.visual."):
            q, s = quantize(t, block, scale_dtype)
            fp8[name] = q
            fp8[name + "_scale_inv"] = s
            deq[name] = q.float() * s.float().repeat_interleave(
                block[0], 0)[:q.shape[0]].repeat_interleave(block[1], 1)[:, :q.shape[1]]
        else:
            fp8[name] = t
            deq[name] = t
            module = name.rsplit(".", 1)[0]
            if name.endswith(".weight"):
                not_converted.add(module)
    os.makedirs(dst, exist_ok=True)
    names = sorted(fp8)
    if shards == 1:
        save_file(fp8, os.path.join(dst, "model.safetensors"), metadata={"format": "pt"})
    else:  # weights and their scales in different shards: scales go to the last shard
        weight_map, parts = {}, [dict() for _ in range(shards)]
        for i, n in enumerate(names):
            part = shards - 1 if n.endswith("_scale_inv") else i % (shards - 1)
            parts[part][n] = fp8[n]
        for k, p in enumerate(parts):
            fname = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
            save_file(p, os.path.join(dst, fname), metadata={"format": "pt"})
            for n in p:
                weight_map[n] = fname
        with open(os.path.join(dst, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {}, "weight_map": weight_map}, f, indent=1)
    with open(os.path.join(src, "config.json")) as f:
        config = json.load(f)
    config["quantization_config"] = {
        "quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
        "weight_block_size": list(block),
        "modules_to_not_convert": sorted(m for m in not_converted if "norm" not in m)}
    for d in (dst, os.path.join(dst, "dequantized")):
        os.makedirs(d, exist_ok=True)
        cfg = dict(config)
        if d != dst:
            cfg.pop("quantization_config")
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f, indent=1)
        shutil.copy(os.path.join(src, "generation_config.json"), d)
    save_file({n: t.float() for n, t in deq.items()},
              os.path.join(dst, "dequantized", "model.safetensors"), metadata={"format": "pt"})
    write_hf_reference(dst)
    print(dst, sum(1 for n in fp8 if n.endswith("_scale_inv")), "fp8 weights")


@torch.no_grad()
def write_hf_reference(dst, new_tokens=16, top_k=5, gap=1e-4):
    """HF on the dequantized twin, in float64: the oracle of the FP8 fixture."""
    import random
    import transformers
    model = transformers.AutoModelForCausalLM.from_pretrained(
        os.path.join(dst, "dequantized"), dtype=torch.float64)
    model.eval()
    if hasattr(model, "set_experts_implementation"):
        model.set_experts_implementation("eager")  # grouped_mm rejects float64
    vocab = model.config.get_text_config().vocab_size
    rng = random.Random(1234)
    cases = []
    for length in (13, 40):
        for _ in range(50):
            ids = [rng.randrange(vocab) for _ in range(length)]
            prompt, steps, ok = list(ids), [], True
            for _ in range(new_tokens):
                lp = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0, -1].double(), -1)
                top = torch.topk(lp, top_k + 1)
                if float(top.values[0] - top.values[1]) < gap:
                    ok = False
                    break
                choice = int(top.indices[0])
                steps.append(dict(id=choice, logprob=float(lp[choice]),
                                  top=[[int(i), float(v)] for i, v in
                                       zip(top.indices[:top_k], top.values[:top_k])]))
                ids.append(choice)
            if ok:
                cases.append(dict(prompt=prompt, greedy=[s["id"] for s in steps], steps=steps))
                break
    with open(os.path.join(dst, "reference.json"), "w") as f:
        json.dump(dict(transformers=transformers.__version__, torch=torch.__version__,
                       weights="dequantized/ (fp8 * scale)", dtype="float64", cases=cases), f,
                  indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--block", type=int, default=32, help="block edge (Qwen: 128; the fixtures "
                    "are 64 wide, so 32 gives several blocks and partial edge blocks)")
    args = ap.parse_args()
    fixtures = os.path.join(ROOT, "tests", "fixtures")
    out = os.path.join(ROOT, "tests", "fixtures_quant")
    convert(os.path.join(fixtures, "moe_vlm_per_expert"), os.path.join(out, "moe_fp8"),
            (args.block, args.block), torch.bfloat16, shards=1)
    convert(os.path.join(fixtures, "dense_vlm_mtp"), os.path.join(out, "dense_fp8_sharded"),
            (args.block, args.block), torch.float32, shards=3)


if __name__ == "__main__":
    main()
