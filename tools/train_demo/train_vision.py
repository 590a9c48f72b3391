#!/usr/bin/env python3
"""Gives the demo model (models/ninfer-demo) a tiny vision tower: HF's
Qwen3_5MoeForConditionalGeneration with the demo checkpoint as its text model and a fresh
Qwen3_5MoeVisionModel (vision_data.VISION_CONFIG: 3 blocks, hidden 128, 4 heads, MLP 512, patch
16, temporal patch 2, merge 2, a 16 x 16 learned position grid, merger to the text hidden size
256; about 1.2M parameters, 2.4 MB in bf16), trained in float32 to answer "What is in the
picture?" about synthetic pictures of one coloured shape (vision_data.py).

The whole text model (embeddings, layers, norm, lm_head) is frozen: only model.visual.* gets
gradients and the optimizer. The loss is the next-token cross entropy on the answer tokens
("A red circle." and <|im_end|>) only. Batches are right-padded (no attention mask: with causal
attention and the recurrent layers, padding after the answer changes nothing before it); the batch
of step i depends on (seed, i) only. With --time-budget-s the run times its first --calib-steps
steps, then fixes the step count (printed; --max-steps N replays the run) so that the cosine
schedule ends inside the budget. Checkpoints (tower and optimizer) go to WORK/vision_ckpt.pt;
--resume continues.

Export (into --model, default models/ninfer-demo): model.safetensors gets the model.visual.*
tensors in bf16; every other tensor (model.language_model.*, lm_head.weight, mtp.*) is copied from
the existing file unchanged, and the script checks that each one's sha256 (dtype, shape, bytes)
is the same before and after, so reference.json and the text figures stay valid. config.json
gains vision_config, image_token_id 8171, video_token_id 8172, vision_start_token_id 8168,
vision_end_token_id 8169 and architectures [Qwen3_5MoeForConditionalGeneration]; every other
field stays. preprocessor_config.json and video_preprocessor_config.json are the processors'
save_pretrained (vision_data.PROCESSOR: 64*64 to 256*256 pixels, at most 64 merged tokens).
The training figures go to MODEL/vision_eval.json under "training" (eval_vision.py keeps them).

Retrain, then evaluate (from the repository root; the defaults are the committed run's):

    /tmp/trainvenv/bin/python tools/train_demo/train_vision.py     # --device auto: cuda if any
    /tmp/trainvenv/bin/python tools/train_demo/eval_vision.py      # rewrites vision_eval.json

(any python with torch, transformers >= 5.17, torchvision, pillow and safetensors; on a machine
with a GPU, e.g. the device machine's python3). The committed tower: one H200, seed 1234, batch
192, lr 3e-3 (30 warm-up steps, cosine to 5%), 800 steps in 350 s (153,600 pictures; replay with
--max-steps 800), 8 batch-building workers; final training loss 0.082 on the answer tokens,
teacher-forced answers all right 78%. Held-out (eval_vision.py, 50 pictures, greedy): colour and
shape right 76% (38 of 50; chance 1/15), colour 98%, shape 78%. The text model's 160 tensors
(sha256 of all: 0165cd8dcc1878da...) are byte-identical to the text-only checkpoint's. On 2 busy
CPU cores a step of this size takes a minute or more, so a CPU run inside ~20 minutes (e.g.
--batch 24 --lr 2e-3 --time-budget-s 900: 6-15 s a step) sees a few thousand pictures; the colours
are learnt long before the shapes (a first GPU try, 823 steps of batch 64 on pictures with
smaller shapes, had colour 100% and shape 47% on 30 held-out pictures).
"""
import argparse
import hashlib
import math
import os
import time

import vision_data as vd  # blocks the fla / causal_conv1d kernels before transformers loads
from common import ROOT, read_json, write_json

import torch  # noqa: E402
from safetensors import safe_open  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoTokenizer, Qwen3_5MoeConfig  # noqa: E402
from transformers import Qwen3_5MoeForConditionalGeneration  # noqa: E402

DEFAULT_MODEL = os.path.join(ROOT, "models", "ninfer-demo")
VISUAL_PREFIX = "model.visual."
PAD_ID = 8159  # <|endoftext|>, the tokenizer's pad token
ARCHITECTURE = "Qwen3_5MoeForConditionalGeneration"
VISION_KEYS = ("depth", "hidden_act", "hidden_size", "in_channels", "initializer_range",
               "intermediate_size", "model_type", "num_heads", "num_position_embeddings",
               "out_hidden_size", "patch_size", "rope_parameters", "spatial_merge_size",
               "temporal_patch_size")
MAX_TOWER_BYTES = 8 * 10**6


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=DEFAULT_MODEL, help="the demo model directory (rewritten)")
    ap.add_argument("--work", default=os.path.join(ROOT, "out", "train_vision"))
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--time-budget-s", type=float, default=300)
    ap.add_argument("--max-steps", type=int, default=0, help="fixed step count (no calibration)")
    ap.add_argument("--batch", type=int, default=192)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.05)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--calib-steps", type=int, default=8)
    ap.add_argument("--ckpt-every", type=int, default=50)
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--threads", type=int, default=min(4, os.cpu_count() or 1),
                    help="torch CPU threads")
    ap.add_argument("--device", default="auto", help="auto: cuda when there is one, else cpu")
    ap.add_argument("--workers", type=int, default=-1,
                    help="batch-building processes (-1: 0 on the CPU, 8 on a GPU)")
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--no-export", action="store_true", help="train only")
    ap.add_argument("--tower-out", default="", help="also save the trained tower (float32) and "
                    "the training figures to this file (for --export-from)")
    ap.add_argument("--export-from", default="",
                    help="no training: export the tower saved by --tower-out")
    return ap.parse_args()


def tensor_digest(t):
    h = hashlib.sha256(f"{t.dtype} {tuple(t.shape)}\n".encode())
    h.update(t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def read_checkpoint(path):
    with safe_open(path, "pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}, f.metadata()


def text_digests(tensors):
    """sha256 of every tensor that is not part of the vision tower."""
    return {k: tensor_digest(v) for k, v in sorted(tensors.items())
            if not k.startswith(VISUAL_PREFIX)}


def combined_digest(digests):
    return hashlib.sha256("".join(f"{k} {v}\n" for k, v in sorted(digests.items()))
                          .encode()).hexdigest()


def build_model(model_dir, seed, attn="sdpa", experts="eager"):
    """Qwen3_5MoeForConditionalGeneration in float32: the text tensors of MODEL's checkpoint
    (mtp.* and any old model.visual.* left out) and a tower initialised from `seed`."""
    top = read_json(os.path.join(model_dir, "config.json"))
    cfg = Qwen3_5MoeConfig(text_config=dict(top["text_config"]),
                           vision_config=dict(vd.VISION_CONFIG),
                           tie_word_embeddings=top.get("tie_word_embeddings", False),
                           **vd.SPECIAL_IDS)
    torch.manual_seed(seed)
    model = Qwen3_5MoeForConditionalGeneration(cfg).float()
    model.set_attn_implementation(attn)
    model.set_experts_implementation(experts)
    tensors, _ = read_checkpoint(os.path.join(model_dir, "model.safetensors"))
    state = {k: v.float() for k, v in tensors.items()
             if not k.startswith(("mtp.", VISUAL_PREFIX))}
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected, unexpected
    assert all(k.startswith(VISUAL_PREFIX) for k in missing), missing
    return model


def make_batch(encoder, seed, step, batch):
    """The training batch of `step`: right-padded ids, labels on the answer tokens only."""
    images, answers = [], []
    for b in range(batch):
        rng = vd.sample_rng("train", seed, step * batch + b)
        image, colour, shape = vd.make_picture(rng)
        images.append(image)
        answers.append(vd.answer_text(colour, shape))
    samples = encoder(images, answers)
    length = max(len(s["input_ids"]) for s in samples)
    ids = torch.full((batch, length), PAD_ID, dtype=torch.long)
    types = torch.zeros((batch, length), dtype=torch.long)
    labels = torch.full((batch, length), -100, dtype=torch.long)
    for b, s in enumerate(samples):
        n = len(s["input_ids"])
        ids[b, :n] = torch.tensor(s["input_ids"])
        types[b, :n] = torch.tensor(s["mm_token_type_ids"])
        labels[b, n - s["n_answer"]:n] = ids[b, n - s["n_answer"]:n]
    return dict(input_ids=ids, mm_token_type_ids=types, labels=labels,
                pixel_values=torch.cat([s["pixel_values"] for s in samples]),
                image_grid_thw=torch.cat([s["image_grid_thw"] for s in samples]))


class Batches(torch.utils.data.IterableDataset):
    """make_batch for steps start, start + 1, ... (worker w of W builds the steps = w mod W; the
    DataLoader takes them round-robin, so they arrive in step order)."""

    def __init__(self, processor, seed, batch, start):
        self.encoder = vd.BatchEncoder(processor)
        self.seed, self.batch, self.start = seed, batch, start

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        w, n = (info.id, info.num_workers) if info else (0, 1)
        step = self.start + w
        while True:
            yield make_batch(self.encoder, self.seed, step, self.batch)
            step += n


def lr_at(step, total, args):
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    frac = (step - args.warmup) / max(1, total - args.warmup)
    return args.lr * (args.min_lr_frac + (1 - args.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * frac)))


def train_step(model, opt, batch):
    out = model(**batch, use_cache=False)
    opt.zero_grad(set_to_none=True)
    out.loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(model.model.visual.parameters(), 1.0)
    opt.step()
    with torch.no_grad():  # teacher-forced answer accuracy: per token and whole answers
        pred = out.logits[:, :-1].argmax(-1)
        target = batch["labels"][:, 1:]
        mask = target != -100
        right = (pred == target) | ~mask
        token_acc = float(((pred == target) & mask).sum() / mask.sum())
        answer_acc = float(right.all(-1).float().mean())
    return float(out.loss), token_acc, answer_acc, float(norm)


def vision_config_json(model):
    full = model.config.vision_config.to_dict()
    return {k: full[k] for k in VISION_KEYS}


def export(model, processor, model_dir, figures):
    path = os.path.join(model_dir, "model.safetensors")
    tensors, metadata = read_checkpoint(path)
    before = text_digests(tensors)
    visual = {VISUAL_PREFIX + k: v.detach().to(torch.bfloat16).contiguous()
              for k, v in model.model.visual.state_dict().items()}
    tower_bytes = sum(v.numel() * v.element_size() for v in visual.values())
    assert tower_bytes <= MAX_TOWER_BYTES, tower_bytes
    out = {k: v for k, v in tensors.items() if not k.startswith(VISUAL_PREFIX)}
    out.update(visual)
    mode = os.stat(path).st_mode & 0o777
    save_file(out, path + ".tmp", metadata=metadata or {"format": "pt"})
    os.chmod(path + ".tmp", mode)
    os.replace(path + ".tmp", path)
    after_tensors, _ = read_checkpoint(path)
    after = text_digests(after_tensors)
    assert after == before, "a text tensor changed"
    assert sorted(after_tensors) == sorted(before) + sorted(visual) or \
        set(after_tensors) == set(before) | set(visual)
    for k, v in visual.items():
        assert torch.equal(after_tensors[k], v), k
    print(f"model.safetensors: {len(before)} text/mtp tensors byte-identical "
          f"(sha256 of all {combined_digest(before)[:16]}...), {len(visual)} visual tensors, "
          f"{tower_bytes / 1e6:.2f} MB", flush=True)

    cfg_path = os.path.join(model_dir, "config.json")
    top = read_json(cfg_path)
    new = {}
    for key, value in top.items():
        if key in ("vision_config",) or key in vd.SPECIAL_IDS:
            continue
        new[key] = [ARCHITECTURE] if key == "architectures" else value
        if key == "text_config":
            new["vision_config"] = vision_config_json(model)
            new.update(vd.SPECIAL_IDS)
    assert {k: v for k, v in new.items() if k in top and k != "architectures"} == \
        {k: v for k, v in top.items()
         if k not in ("architectures", "vision_config") and k not in vd.SPECIAL_IDS}
    write_json(cfg_path, new)
    processor.image_processor.save_pretrained(model_dir)
    processor.video_processor.save_pretrained(model_dir)

    eval_path = os.path.join(model_dir, "vision_eval.json")
    record = read_json(eval_path) if os.path.exists(eval_path) else {}
    record["training"] = dict(figures, text_tensors=len(before),
                              text_sha256=combined_digest(before),
                              tower_parameters=sum(v.numel() for v in visual.values()),
                              tower_bf16_bytes=tower_bytes)
    write_json(eval_path, record)


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(("cuda" if torch.cuda.is_available() else "cpu")
                          if args.device == "auto" else args.device)
    os.makedirs(args.work, exist_ok=True)
    ckpt_path = os.path.join(args.work, "vision_ckpt.pt")
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    processor = vd.build_processor(tokenizer)
    model = build_model(args.model, args.seed)
    if args.export_from:
        saved = torch.load(args.export_from)
        model.model.visual.load_state_dict(saved["visual"])
        export(model, processor, args.model, saved["figures"])
        return
    model.to(device)
    for p in model.parameters():
        p.requires_grad_(False)
    visual = model.model.visual
    for p in visual.parameters():
        p.requires_grad_(True)
    model.eval()
    visual.train()
    frozen = {k: tensor_digest(v.cpu()) for k, v in model.state_dict().items()
              if not k.startswith(VISUAL_PREFIX)}
    n_params = sum(p.numel() for p in visual.parameters())
    print(f"tower: {n_params} parameters; text model frozen "
          f"({sum(p.numel() for p in model.parameters()) - n_params})", flush=True)
    opt = torch.optim.AdamW(visual.parameters(), lr=args.lr, betas=(0.9, 0.98),
                            weight_decay=args.weight_decay)
    step, total, log, train_s = 0, args.max_steps, [], 0.0
    if args.resume and os.path.exists(ckpt_path):
        ck = torch.load(ckpt_path, map_location=device)
        visual.load_state_dict(ck["visual"])
        opt.load_state_dict(ck["opt"])
        step, total, log, train_s = ck["step"], ck["total"], ck["log"], ck["train_s"]
        print(f"resumed at step {step} of {total}", flush=True)
    if total <= 0:
        total = 10**9  # until calibrated
    workers = args.workers if args.workers >= 0 else (0 if device.type == "cpu" else 8)
    loader = iter(torch.utils.data.DataLoader(
        Batches(processor, args.seed, args.batch, step), batch_size=None, num_workers=workers,
        worker_init_fn=lambda _: torch.set_num_threads(1), prefetch_factor=2 if workers else None))
    window, calib_from, calib_t = [], step + 2, None
    while step < total:
        t0 = time.time()
        if step == calib_from:
            calib_t = t0
        batch = {k: v.to(device) for k, v in next(loader).items()}
        for g in opt.param_groups:
            g["lr"] = lr_at(step, total if total < 10**9 else 1000, args)
        loss, tok_acc, ans_acc, norm = train_step(model, opt, batch)
        dt = time.time() - t0
        train_s += dt
        step += 1
        window.append((loss, tok_acc, ans_acc))
        if total >= 10**9 and step == calib_from + args.calib_steps:
            per_step = (time.time() - calib_t) / args.calib_steps
            total = max(step + 1, int((args.time_budget_s - train_s) / per_step) + step)
            print(f"calibrated: {per_step:.2f} s/step -> {total} steps "
                  f"(replay with --max-steps {total})", flush=True)
        if step % args.log_every == 0 or step == total:
            m = [sum(x) / len(x) for x in zip(*window)]
            window = []
            log.append(dict(step=step, loss=round(m[0], 4), token_acc=round(m[1], 4),
                            answer_acc=round(m[2], 4), lr=opt.param_groups[0]["lr"],
                            s=round(train_s, 1)))
            print(f"step {step}/{total if total < 10**9 else '?'} loss {m[0]:.4f} "
                  f"token acc {m[1]:.3f} answer acc {m[2]:.3f} |g| {norm:.2f} "
                  f"{dt:.2f} s/step {train_s:.0f} s", flush=True)
        if step % args.ckpt_every == 0 or step == total:
            torch.save(dict(visual=visual.state_dict(), opt=opt.state_dict(), step=step,
                            total=total, log=log, train_s=train_s), ckpt_path + ".tmp")
            os.replace(ckpt_path + ".tmp", ckpt_path)
    still = {k: tensor_digest(v.cpu()) for k, v in model.state_dict().items()
             if not k.startswith(VISUAL_PREFIX)}
    assert still == frozen, "a frozen text parameter changed during training"
    figures = dict(steps=total, batch=args.batch, seed=args.seed, lr=args.lr,
                   warmup=args.warmup, min_lr_frac=args.min_lr_frac,
                   weight_decay=args.weight_decay, train_s=round(train_s, 1),
                   samples_seen=total * args.batch, final=log[-1] if log else None,
                   curve=log, threads=args.threads, torch=str(torch.__version__),
                   transformers=transformers.__version__, vision_config=dict(vd.VISION_CONFIG),
                   processor=dict(vd.PROCESSOR), colours=sorted(vd.COLOURS),
                   shapes=list(vd.SHAPES), device=torch.cuda.get_device_name(device)
                   if device.type == "cuda" else "cpu", workers=workers)
    print(f"trained {total} steps in {train_s:.0f} s", flush=True)
    model.cpu()
    if args.tower_out:
        torch.save(dict(visual=visual.state_dict(), figures=figures), args.tower_out)
    if not args.no_export:
        export(model, processor, args.model, figures)


if __name__ == "__main__":
    main()
