#!/usr/bin/env python3
"""Evaluates the demo model's vision tower (train_vision.py) with HF transformers as the oracle:
Qwen3_5MoeForConditionalGeneration.from_pretrained(MODEL) in float32 from the bf16 checkpoint,
eager attention and experts, TF32 off, kernels blocked; AutoProcessor.from_pretrained(MODEL) (the
saved preprocessor_config.json, video_preprocessor_config.json and tokenizer) builds the inputs.

--images held-out pictures (vision_data.make_picture from the "eval" stream of --seed; the first 8
have fixed sizes, four of them multiples of 32 and four that the processor resizes, and fixed
colour/shape pairs covering every colour and shape) are asked "What is in the picture?" with the
chat template's generation prompt (thinking off); the answer is generated greedily (full forwards,
so positions come from get_rope_index each step) until <|im_end|> or 16 tokens. An answer is
correct when it names exactly the picture's colour and shape (vision_data.parse_answer); colour and
shape accuracy are also given separately, and `exact` counts answers equal to "A red circle.".

WRITES MODEL/vision_eval.json (keeping train_vision.py's "training" record): the accuracies, every
picture's answer, and for the first 8 pictures ("fixtures") the prompt ids with the image pads
expanded, mm_token_type_ids, image_grid_thw and the pixel_values shape, and 16 greedy ids (not
stopped at <|im_end|>) with each step's log-probability and top-1/top-2 gap, for a C++ comparison.
Those 8 pictures are written as PNGs to --fixtures (tests/fixtures_vision/demo_images/) with
index.json (file, size, expected answer, the greedy answer) and pixels.safetensors (the processor's
float32 pixel_values of each, key = the PNG's stem).

    /tmp/trainvenv/bin/python tools/train_demo/eval_vision.py [--model DIR] [--fixtures DIR]

Figures of the committed tower (seed 0, 50 pictures, run on one H200 in float32, TF32 off):
colour and shape right 38 of 50 (76%; chance 1/15), colour 98%, shape 78%, every right answer
exactly "A <colour> <shape>."; of the 8 fixture pictures 6 are right (image_0 "A circle.",
image_3 yellow circle -> "A yellow square."). The fixture greedy ids were also reproduced on the
CPU (2 cores, from the PNGs through AutoProcessor: same ids, |logprob difference| <= 5e-6).
"""
import argparse
import os
import time

import vision_data as vd  # blocks the fla / causal_conv1d kernels before transformers loads
from common import ROOT, read_json, write_json

import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoProcessor, Qwen3_5MoeForConditionalGeneration  # noqa: E402

DEFAULT_MODEL = os.path.join(ROOT, "models", "ninfer-demo")
DEFAULT_FIXTURES = os.path.join(ROOT, "tests", "fixtures_vision", "demo_images")
EOS_IDS = (8161, 8159)  # <|im_end|>, <|endoftext|>
FIXTURE_SIZES = [(64, 64), (96, 96), (128, 128), (128, 64), (100, 80), (75, 120), (123, 91),
                 (90, 66)]
FIXTURE_LABELS = [("red", "circle"), ("green", "square"), ("blue", "triangle"),
                  ("yellow", "circle"), ("purple", "square"), ("red", "triangle"),
                  ("blue", "square"), ("green", "triangle")]
FIXTURES = len(FIXTURE_SIZES)
NEW_TOKENS = 16


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--fixtures", default=DEFAULT_FIXTURES, help="'' writes no fixtures")
    ap.add_argument("--images", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="auto", help="auto: cuda when there is one (TF32 off)")
    return ap.parse_args()


def picture(seed, index):
    rng = vd.sample_rng("eval", seed, index)
    if index < FIXTURES:
        colour, shape = FIXTURE_LABELS[index]
        return vd.make_picture(rng, FIXTURE_SIZES[index], colour, shape)
    return vd.make_picture(rng)


@torch.no_grad()
def greedy(model, enc, steps, stop, device):
    """Greedy ids by full forwards; each step's id, log-probability and top-1/top-2 gap."""
    ids, types = list(enc["input_ids"]), list(enc["mm_token_type_ids"])
    pixels, grid = enc["pixel_values"].to(device), enc["image_grid_thw"].to(device)
    out = []
    for _ in range(steps):
        logits = model(input_ids=torch.tensor([ids], device=device),
                       mm_token_type_ids=torch.tensor([types], device=device),
                       pixel_values=pixels, image_grid_thw=grid, use_cache=False).logits[0, -1]
        lp = torch.log_softmax(logits.double(), -1)
        top = torch.topk(lp, 2)
        choice = int(top.indices[0])
        out.append(dict(id=choice, logprob=round(float(lp[choice]), 6),
                        gap=round(float(top.values[0] - top.values[1]), 6)))
        ids.append(choice)
        types.append(0)
        if stop and choice in EOS_IDS:
            break
    return out


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = torch.device(("cuda" if torch.cuda.is_available() else "cpu")
                          if args.device == "auto" else args.device)
    processor = AutoProcessor.from_pretrained(args.model)
    model = Qwen3_5MoeForConditionalGeneration.from_pretrained(
        args.model, dtype=torch.float32, attn_implementation="eager",
        experts_implementation="eager")
    model.to(device).eval()
    tok = processor.tokenizer
    t0 = time.time()
    results, fixtures, pixels = [], [], {}
    right = dict(both=0, colour=0, shape=0, exact=0)
    for i in range(args.images):
        image, colour, shape = picture(args.seed, i)
        enc = vd.encode(processor, image)
        fixture = i < FIXTURES
        steps = greedy(model, enc, NEW_TOKENS, not fixture, device)
        ids = [s["id"] for s in steps]
        answer_ids = ids[:next((k for k, t in enumerate(ids) if t in EOS_IDS), len(ids))]
        text = tok.decode(answer_ids)
        got = vd.parse_answer(text)
        ok = dict(colour=got[0] == colour, shape=got[1] == shape,
                  exact=text.strip() == vd.answer_text(colour, shape))
        ok["both"] = ok["colour"] and ok["shape"]
        for k in right:
            right[k] += ok[k]
        grid = enc["image_grid_thw"][0].tolist()
        results.append(dict(index=i, size=list(image.size), grid_thw=grid, colour=colour,
                            shape=shape, answer=text, correct=ok["both"]))
        if fixture:
            name = f"image_{i}"
            fixtures.append(dict(
                name=name, file=name + ".png", size=list(image.size),
                expected=vd.answer_text(colour, shape), answer=text,
                prompt=enc["input_ids"], mm_token_type_ids=enc["mm_token_type_ids"],
                image_grid_thw=grid, pixel_values_shape=list(enc["pixel_values"].shape),
                image_pads=enc["input_ids"].count(vd.SPECIAL_IDS["image_token_id"]),
                greedy=ids, steps=steps))
            pixels[name] = enc["pixel_values"].float().contiguous()
            if args.fixtures:
                os.makedirs(args.fixtures, exist_ok=True)
                image.save(os.path.join(args.fixtures, name + ".png"), optimize=True)
        print(f"{i:2d} {image.size[0]}x{image.size[1]} {vd.answer_text(colour, shape):20s} -> "
              f"{text!r}{'' if ok['both'] else '  WRONG'}", flush=True)
    n = args.images
    accuracy = {k: round(v / n, 4) for k, v in right.items()}
    print(f"accuracy (colour and shape) {accuracy['both']:.3f}, colour {accuracy['colour']:.3f}, "
          f"shape {accuracy['shape']:.3f}, exact {accuracy['exact']:.3f}; chance "
          f"{1 / (len(vd.COLOURS) * len(vd.SHAPES)):.3f}; {time.time() - t0:.0f} s", flush=True)
    path = os.path.join(args.model, "vision_eval.json")
    old = read_json(path) if os.path.exists(path) else {}
    record = dict(
        model=os.path.basename(os.path.normpath(args.model)), transformers=transformers.__version__,
        torch=str(torch.__version__), dtype="float32 from the bf16 checkpoint",
        attention="eager", device=torch.cuda.get_device_name(device) if device.type == "cuda"
        else "cpu", question=vd.QUESTION, prompt_text=vd.prompt_text(processor),
        images=n, seed=args.seed, chance=round(1 / (len(vd.COLOURS) * len(vd.SHAPES)), 4),
        accuracy=accuracy, correct=right, new_tokens=NEW_TOKENS, eos_ids=list(EOS_IDS),
        fixtures=fixtures, results=results)
    if "training" in old:
        record["training"] = old["training"]
    write_json(path, record)
    if args.fixtures:
        keep = {f["file"] for f in fixtures} | {"index.json", "pixels.safetensors"}
        for name in os.listdir(args.fixtures):  # pictures of an earlier, longer fixture list
            if name.endswith(".png") and name not in keep:
                os.remove(os.path.join(args.fixtures, name))
        save_file(pixels, os.path.join(args.fixtures, "pixels.safetensors"))
        os.chmod(os.path.join(args.fixtures, "pixels.safetensors"), 0o644)
        write_json(os.path.join(args.fixtures, "index.json"), dict(
            model="models/ninfer-demo", source="tools/train_demo/eval_vision.py",
            question=vd.QUESTION, images=[{k: f[k] for k in (
                "file", "size", "expected", "answer", "image_grid_thw", "image_pads")}
                for f in fixtures]))


if __name__ == "__main__":
    main()
