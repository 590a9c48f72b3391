#!/usr/bin/env python3
"""Builds tiny random multimodal Qwen3.5 checkpoints (a text model and a vision tower) with HF
transformers and writes multimodal reference outputs, all in float64 on CPU.

    /path/to/venv/bin/python tools/reference/make_vision_fixture.py --out tests/fixtures_vision

Each fixture directory holds the checkpoint (save_pretrained + the real layout's rewrites from
make_fixtures.py), pixels.safetensors (the cases' pixel values, as a processor would give them)
and reference.json:
- tower: for each media item, HF's merged vision embeddings (Qwen3_5VisionModel pooler output);
- cases: a prompt of token ids with the media placeholders already expanded (images:
  <vision_start> <image_pad> x n <vision_end>; a video: per temporal group a timestamp's text
  tokens, then <vision_start> <video_pad> x n <vision_end>, as Qwen3VLProcessor lays it out), the
  media of the case (which pixel tensor, its grid), and 24 greedy continuation ids with the
  chosen id's log-probability and the top-5 (full forwards, so positions come from HF's
  get_rope_index each step).
The token ids of the vision specials are moved inside the tiny vocabulary (config.json says
which), so the checkpoint is self-consistent.
"""
import argparse
import copy
import json
import os
import random
import sys

sys.modules["fla"] = None
sys.modules["causal_conv1d"] = None

import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
import transformers  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as mf  # noqa: E402

NEW_TOKENS = 24
TOP_K = 5
VOCAB = 256
SPECIALS = dict(vision_start_token_id=248, vision_end_token_id=249, image_token_id=250,
                video_token_id=251)
VISION = dict(depth=2, hidden_size=32, num_heads=2, intermediate_size=64, patch_size=16,
              temporal_patch_size=2, spatial_merge_size=2, num_position_embeddings=36,
              hidden_act="gelu_pytorch_tanh")

FIXTURES = [
    dict(name="dense_vision", kind="dense", layout="vlm", dtype="float32", layers="LFLF",
         hk=2, hv=4, rotary=0.25, tie=False, seed=11, vocab=VOCAB),
    dict(name="moe_vision", kind="moe", layout="vlm", dtype="bfloat16", layers="LLFLF",
         hk=1, hv=2, rotary=0.5, tie=False, seed=12, vocab=VOCAB, mtp=True),
]

# Media of the cases: grids (t, h, w) in patches. Images have t = 1 (two copies of the picture
# form one temporal patch); the video has two temporal groups.
MEDIA = {
    "image_a": (1, 6, 8),
    "image_b": (1, 4, 10),
    "image_c": (1, 2, 2),
    "video_a": (2, 4, 6),
}


def build_model(spec):
    kw = mf.text_kwargs(spec)
    moe = spec["kind"] == "moe"
    attn = kw.pop("attn_implementation")
    tie = kw.pop("tie_word_embeddings")
    vision = dict(VISION, out_hidden_size=kw["hidden_size"])
    cls_cfg = transformers.Qwen3_5MoeConfig if moe else transformers.Qwen3_5Config
    cfg = cls_cfg(text_config=kw, vision_config=vision, tie_word_embeddings=tie,
                  attn_implementation=attn, **SPECIALS)
    cls = (transformers.Qwen3_5MoeForConditionalGeneration if moe
           else transformers.Qwen3_5ForConditionalGeneration)
    torch.manual_seed(spec["seed"])
    model = cls(cfg)
    model.eval()
    return model


def make_pixels(seed):
    gen = torch.Generator().manual_seed(seed)
    px = {}
    for name, (t, h, w) in MEDIA.items():
        frames = 2 * t  # temporal_patch_size frames per temporal group
        patches = t * h * w
        # Values in [-1, 1] as a processor's normalised output (mean = std = 0.5).
        px[name] = (torch.rand((patches, 3 * 2 * 16 * 16), generator=gen) * 2 - 1).double()
        assert frames > 0
    return px


def merged_tokens(grid, merge=2):
    t, h, w = grid
    return t * (h // merge) * (w // merge)


def text(rng, n):
    return [rng.randrange(240) for _ in range(n)]  # plain ids, below every special


def build_case(rng, parts):
    """parts: list of ints (text lengths) and media names. Returns ids, types, media list."""
    ids, types, media = [], [], []
    for p in parts:
        if isinstance(p, int):
            ids += text(rng, p)
            types += [0] * p
            continue
        t, h, w = MEDIA[p]
        per_group = (h // 2) * (w // 2)
        video = p.startswith("video")
        pad = SPECIALS["video_token_id" if video else "image_token_id"]
        offsets = []
        for _g in range(t):
            if video:
                stamp = text(rng, 3)  # "<0.5 seconds>" in a real tokenizer
                ids += stamp
                types += [0] * len(stamp)
            ids.append(SPECIALS["vision_start_token_id"])
            types.append(0)
            offsets.append(len(ids))
            ids += [pad] * per_group
            types += [2 if video else 1] * per_group
            ids.append(SPECIALS["vision_end_token_id"])
            types.append(0)
        media.append(dict(name=p, grid=[t, h, w], video=video, offsets=offsets))
    return ids, types, media


def model_inputs(ids, types, media, px):
    kw = dict(input_ids=torch.tensor([ids]), mm_token_type_ids=torch.tensor([types]))
    images = [m for m in media if not m["video"]]
    videos = [m for m in media if m["video"]]
    if images:
        kw["pixel_values"] = torch.cat([px[m["name"]] for m in images])
        kw["image_grid_thw"] = torch.tensor([m["grid"] for m in images])
    if videos:
        kw["pixel_values_videos"] = torch.cat([px[m["name"]] for m in videos])
        kw["video_grid_thw"] = torch.tensor([m["grid"] for m in videos])
    return kw


@torch.no_grad()
def greedy(model, ids, types, media, px, recorder):
    ids, types = list(ids), list(types)
    n = len(ids)
    steps = []
    for _ in range(NEW_TOKENS):
        logits = model(**model_inputs(ids, types, media, px)).logits[0, -1].double()
        lp = torch.log_softmax(logits, -1)
        top = torch.topk(lp, TOP_K + 1)
        if float(top.values[0] - top.values[1]) < mf.LOGIT_GAP:
            return None
        if recorder.min_gap() < mf.ROUTER_GAP:
            return None
        choice = int(top.indices[0])
        if choice in SPECIALS.values():
            return None  # a generated placeholder would be read as media by HF
        steps.append(dict(id=choice, logprob=float(lp[choice]),
                          top=[[int(i), float(v)] for i, v in
                               zip(top.indices[:TOP_K], top.values[:TOP_K])]))
        ids.append(choice)
        types.append(0)
    return dict(prompt=ids[:n], greedy=[s["id"] for s in steps], steps=steps)


@torch.no_grad()
def well_conditioned(model, model32, case, types, media, px):
    """HF in float32 reproduces HF in float64 on the case (make_fixtures.CONDITION_LIMIT)."""
    n = len(case["prompt"])
    ids = case["prompt"] + case["greedy"][:-1]
    types = types + [0] * (len(ids) - n)
    px32 = {k: v.float() for k, v in px.items()}
    lp64 = torch.log_softmax(model(**model_inputs(ids, types, media, px)).logits[0, n - 1:].double(), -1)
    lp32 = torch.log_softmax(model32(**model_inputs(ids, types, media, px32)).logits[0, n - 1:].double(), -1)
    worst = 0.0
    for i, step in enumerate(case["steps"]):
        for tid, _ in step["top"]:
            worst = max(worst, abs(float(lp64[i, tid] - lp32[i, tid])))
    return worst <= mf.CONDITION_LIMIT


@torch.no_grad()
def tower_outputs(model, px):
    out = {}
    for name, grid in MEDIA.items():
        emb = model.model.visual(px[name].to(model.model.visual.dtype),
                                 grid_thw=torch.tensor([grid])).pooler_output
        out[name] = emb.double()
    return out


CASES = [
    ("one_image", [7, "image_a", 60]),          # > 64 tokens: several GDN chunks
    ("two_images", [3, "image_b", 5, "image_c", 4, "image_a", 6]),
    ("video", [5, "video_a", 9]),
    ("image_first", ["image_c", 11]),
]


def make_fixture(spec, out_root):
    out_dir = os.path.join(out_root, spec["name"])
    os.makedirs(out_dir, exist_ok=True)
    model = build_model(spec)
    mf.rerandomise(model, spec["seed"])
    mf.set_parameter_dtype(model, getattr(torch, spec["dtype"]))
    model.save_pretrained(out_dir, safe_serialization=True)
    spec = dict(spec, experts="fused") if spec["kind"] == "moe" else spec
    mf.rewrite_checkpoint(out_dir, spec)
    mf.set_parameter_dtype(model, torch.float64)
    model.set_experts_implementation("eager")
    px = make_pixels(spec["seed"])
    save_file({k: v.float().contiguous() for k, v in px.items()},
              os.path.join(out_dir, "pixels.safetensors"))
    # The cases use the float32-rounded pixels the C++ side reads.
    px = {k: v.float().double() for k, v in px.items()}
    model32 = copy.deepcopy(model)
    mf.set_parameter_dtype(model32, torch.float32)
    recorder = mf.RouterRecorder(model)
    rng = random.Random(spec["seed"])
    cases = []
    for name, parts in CASES:
        for _attempt in range(50):
            ids, types, media = build_case(rng, parts)
            got = greedy(model, ids, types, media, px, recorder)
            if got is not None and well_conditioned(model, model32, got, types, media, px):
                cases.append(dict(name=name, media=media, **got))
                break
        else:
            raise RuntimeError(f"{spec['name']}/{name}: no well-separated case in 50 draws")
    tower = {k: v.flatten().tolist() for k, v in tower_outputs(model, px).items()}
    reference = dict(fixture=spec, transformers=transformers.__version__, torch=torch.__version__,
                     new_tokens=NEW_TOKENS, top_k=TOP_K, media={k: list(v) for k, v in MEDIA.items()},
                     tower=tower, cases=cases)
    with open(os.path.join(out_dir, "reference.json"), "w") as f:
        json.dump(reference, f, indent=1)
    print(f"{spec['name']}: {out_dir}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    for spec in FIXTURES:
        make_fixture(copy.deepcopy(spec), args.out)


if __name__ == "__main__":
    main()
