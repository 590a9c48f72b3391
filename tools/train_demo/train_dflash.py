#!/usr/bin/env python3
"""Trains the demo model's DFlash2 drafter by distillation (the z-lab recipe, scaled down) and
writes it in z-lab's layout to OUT (config.json + model.safetensors, bf16) with OUT/eval.json:
PyTorch's acceptance on the MTP evaluation's prompts (MODEL/mtp_eval.json), the figures ninfer's
own acceptance is checked against.

Data: training text (the demo corpus's train.jsonl, tokenized with MODEL/tokenizer.json) whose
windows are continued greedily by the demo model itself, so the labels of every block are the
target's own greedy path (what verification accepts). Each step: the frozen target's features
(residual stream after the tap layers) of a batch of windows; in every window, blocks
[x_a, MASK x K] at random anchors a, each attending to the context before a and to its own
block (tools/dflash/reference.py's masks); loss: cross-entropy of the target's lm_head over
the mask rows against the target's greedy next tokens, plus the selector's cross-entropy over
its top-k candidates (teacher-forced predecessors).

    python3 tools/train_demo/train_dflash.py --model models/ninfer-demo --corpus DIR --out DIR \
        [--budget-s 240] [--layers 3] [--taps 1,3,5] [--block 8] [--window 512]
"""
import argparse
import json
import math
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "dflash"))
import demo_model  # noqa: E402  (blocks the Triton kernel imports first)
import reference  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

MASK_TOKEN = "<tts_pad>"  # an added token that no training text uses


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--corpus", help="directory with train.jsonl (training only)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-s", type=float, default=240, help="training seconds")
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--taps", default="1,3,5")
    ap.add_argument("--block", type=int, default=8, help="anchor + K masks")
    ap.add_argument("--window", type=int, default=512)
    ap.add_argument("--intermediate", type=int, default=768)
    ap.add_argument("--rank", type=int, default=32)
    ap.add_argument("--seq", type=int, default=384)
    ap.add_argument("--prompt", type=int, default=96, help="corpus tokens before generation")
    ap.add_argument("--pool", type=int, default=384, help="windows continued by the target")
    ap.add_argument("--corpus-windows", type=int, default=2048,
                    help="corpus windows, labelled with the target's greedy next tokens")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--blocks", type=int, default=40, help="blocks per window")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--selector-weight", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--eval-k", type=int, default=7)
    ap.add_argument("--device", default="auto", help="auto: cuda when there is one, else cpu")
    ap.add_argument("--profile", action="store_true",
                    help="print torch.profiler's table of one training step (after 20)")
    ap.add_argument("--eval-dtype", choices=["f32", "bf16"], default="f32",
                    help="with --eval-only: bf16 runs target and drafter in bf16, prints its "
                         "figures and adds its first round to eval.json as first_round_bf16 "
                         "(the bf16 gate's oracle; the f32 figures stay)")
    ap.add_argument("--eval-only", metavar="TRAIN_LOG",
                    help="no training: evaluate the drafter already in --out (trained where a run "
                         "ran out of time before its evaluation), its eval.json's training record "
                         "read from that run's log (this script's stdout); 'keep': from the "
                         "eval.json already there")
    args = ap.parse_args()
    if not args.eval_only and not args.corpus:
        ap.error("--corpus DIR is required to train (only --eval-only goes without it)")
    return args


def drafter_config(target_cfg, args, mask_id):
    H = target_cfg["hidden_size"]
    return {
        "architectures": ["DFlash2DraftModel"], "model_type": "qwen3", "dtype": "bfloat16",
        "hidden_size": H, "intermediate_size": args.intermediate,
        "num_hidden_layers": args.layers, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 64, "vocab_size": target_cfg["vocab_size"], "rms_norm_eps": 1e-6,
        "rope_theta": 1e4, "max_position_embeddings": 8192,
        "layer_types": ["sliding_attention"] * args.layers, "sliding_window": args.window,
        "use_sliding_window": True, "is_causal": False, "attention_bias": False,
        "hidden_act": "silu", "tie_word_embeddings": False,
        "dflash_config": {"block_size": args.block, "mask_token_id": mask_id,
                          "target_layer_ids": [int(t) for t in args.taps.split(",")],
                          "conv_kernel_size": 2, "conv_group_size": 16,
                          "selector_rank": args.rank, "selector_top_k": 16}}


def init_drafter(model):
    for name, p in model.named_parameters():
        if name.endswith("base_kernel"):
            with torch.no_grad():  # the identity: tap 0 passes the input, tap 1 adds nothing
                p.zero_()
                p[:, 0] = 1.0
        elif "kernel_projection" in name:
            torch.nn.init.normal_(p, std=0.002)
        elif "codebook" in name:
            torch.nn.init.normal_(p, std=0.05)


def corpus_windows(args, tok, n, length, seed=0):
    ids = []
    with open(os.path.join(args.corpus, "train.jsonl"), encoding="utf-8") as f:
        for line in f:
            ids += tok.encode(json.loads(line)["text"], add_special_tokens=False).ids
            if len(ids) >= max(n * length, 1 << 20) * 2:
                break
    rng = random.Random(args.seed + seed)
    starts = [rng.randrange(0, len(ids) - length) for _ in range(n)]
    return torch.tensor([ids[s:s + length] for s in starts])


@torch.no_grad()
def generate_pool(target, prompts, new_tokens, device):
    """Greedy continuations of every prompt by the target (KV-cached forwards, no stopping)."""
    out = []
    for i in range(0, prompts.shape[0], 128):
        x = prompts[i:i + 128].to(device)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda"):
            step = target(input_ids=x, use_cache=True)
            tokens = [x]
            for _ in range(new_tokens):
                nxt = step.logits[:, -1].argmax(-1, keepdim=True)
                tokens.append(nxt)
                step = target(input_ids=nxt, past_key_values=step.past_key_values, use_cache=True)
        out.append(torch.cat(tokens, 1).cpu())
    return torch.cat(out)


def block_loss(drafter, target, feats, greedy, x, args):
    """A batch of N windows: feats [N, S, n H], greedy [N, S] (the target's next-token argmax),
    x [N, S] ids; args.blocks random anchors per window."""
    N, S = x.shape
    W, nb = args.block, args.blocks
    device = x.device
    anchors = torch.stack([torch.randperm(S - W - 1, device=device)[:nb] + 1 for _ in range(N)])
    anchors = anchors.sort(1).values                                     # [N, B]
    offs = torch.arange(W, device=device)
    q_pos = (anchors[:, :, None] + offs).reshape(N, -1)                  # [N, B W]
    ids = torch.full((N, nb, W), drafter.mask_token_id, device=device)
    ids[:, :, 0] = x.gather(1, anchors)
    embeds = target.get_input_embeddings()(ids)
    ctx_pos = torch.arange(S, device=device)[None].expand(N, -1)
    h = drafter.forward_blocks(feats, ctx_pos, embeds, q_pos, anchors)[:, :, 1:]
    h = h.reshape(-1, h.shape[-1])
    lab_pos = (anchors[:, :, None] + offs[:W - 1]).reshape(N, -1)
    labels = greedy.gather(1, lab_pos).reshape(-1)                      # [N B (W - 1)]
    logits = drafter.logits(h, target.get_output_embeddings())
    loss = F.cross_entropy(logits.float(), labels)
    # The selector, teacher-forced: predecessor = the previous label (the anchor first).
    sel = drafter.candidate_selector
    unary, cand = torch.topk(logits.detach().float(), sel.top_k, dim=-1)
    pred = torch.cat([ids[:, :, :1], labels.view(N, nb, W - 1)[:, :, :-1]], 2).reshape(-1)
    g = sel.hidden_projection(h)
    scores = sel.scores(g, unary, cand, pred)
    hit = cand == labels[:, None]
    rows = hit.any(-1)
    sel_loss = F.cross_entropy(scores[rows], hit[rows].float().argmax(-1)) if rows.any() else \
        scores.sum() * 0
    acc = float((logits.argmax(-1) == labels).float().mean())
    return loss + args.selector_weight * sel_loss, acc


def without_eval_text(pool, model_dir, n=8):
    """The pool without windows that share an n-token run with mtp_eval.json's prompts (their
    files are held out of the corpus by path; this also catches copies under other paths)."""
    with open(os.path.join(model_dir, "mtp_eval.json"), encoding="utf-8") as f:
        prompts = json.load(f)["prompts"]
    grams = {tuple(p[i:i + n]) for p in prompts for i in range(len(p) - n + 1)}
    keep = [w for w in pool.tolist()
            if not any(tuple(w[i:i + n]) in grams for i in range(len(w) - n + 1))]
    return torch.tensor(keep, dtype=pool.dtype), pool.shape[0] - len(keep)


@torch.no_grad()
def pool_features(target, pool, taps, device):
    """The target's tap features (bf16) and greedy next ids of every pool window, once."""
    feats, greedy = [], []
    for i in range(0, pool.shape[0], 64):
        x = pool[i:i + 64].to(device)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda"):
            out = target(input_ids=x, output_hidden_states=True)
        feats.append(torch.cat([out.hidden_states[t + 1] for t in taps], -1).to(torch.bfloat16))
        greedy.append(out.logits.argmax(-1))
    return torch.cat(feats), torch.cat(greedy)


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    device = demo_model.fp32_device(args.device)
    print(f"train_dflash: device {device}"
          + (f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else ""))
    target = demo_model.load_exported(args.model, device=device).lm
    target.requires_grad_(False)
    tok = Tokenizer.from_file(os.path.join(args.model, "tokenizer.json"))
    if args.eval_only:
        if args.eval_only == "keep":
            with open(os.path.join(args.out, "eval.json"), encoding="utf-8") as f:
                training = json.load(f)["training"]
        else:
            training = training_from_log(args.eval_only, args.out, args.batch)
        return evaluate(args, target, tok, training)
    mask_id = tok.token_to_id(MASK_TOKEN)
    cfg = drafter_config(target.config.to_dict(), args, mask_id)
    drafter = reference.Drafter(cfg).to(device)
    init_drafter(drafter)
    taps = drafter.taps
    start = time.time()
    prompts = corpus_windows(args, tok, args.pool, args.prompt)
    try:
        pool = generate_pool(target, prompts, args.seq - args.prompt, device)
        source = "generated"
    except Exception as e:  # noqa: BLE001  (a generation failure falls back to corpus text)
        print(f"train_dflash: generation failed ({e!r}); training on corpus windows")
        pool = corpus_windows(args, tok, args.pool, args.seq)
        source = "corpus"
    if args.corpus_windows > 0:  # more text: the target's greedy labels on corpus windows
        pool = torch.cat([pool, corpus_windows(args, tok, args.corpus_windows, args.seq, 1)])
    pool, dropped = without_eval_text(pool, args.model)
    print(f"train_dflash: {pool.shape[0]} windows of {pool.shape[1]} ({source} + corpus) in "
          f"{time.time() - start:.0f} s, {dropped} dropped for sharing text with the evaluation "
          f"prompts; mask id {mask_id}")
    feats_all, greedy_all = pool_features(target, pool, taps, device)
    pool = pool.to(device)
    print(f"train_dflash: features in {time.time() - start:.0f} s")
    opt = torch.optim.AdamW(drafter.parameters(), lr=args.lr, weight_decay=0.01,
                            betas=(0.9, 0.95))
    t0, step, log = time.time(), 0, []
    while time.time() - t0 < args.budget_s:
        frac = min(1.0, (time.time() - t0) / args.budget_s)
        lr = args.lr * (min(1.0, (step + 1) / 50) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac))))
        for group in opt.param_groups:
            group["lr"] = lr
        run = lambda: train_step(drafter, target, opt, feats_all, greedy_all, pool, args)  # noqa: E731
        loss, acc = profile_step(run, device) if args.profile and step == 20 else run()
        step += 1
        if step % 100 == 0:
            log.append(dict(step=step, loss=round(float(loss), 4), top1=round(acc, 4), lr=lr,
                            s=round(time.time() - t0, 1)))
            print(json.dumps(log[-1]), flush=True)
    trained_s = time.time() - t0
    reference.save(drafter, args.out)
    size = os.path.getsize(os.path.join(args.out, "model.safetensors"))
    print(f"train_dflash: {step} steps in {trained_s:.0f} s on {device}, {size / 1e6:.2f} MB -> "
          f"{args.out}")
    evaluate(args, target, tok, dict(steps=step, source=source, log=log, bytes=size,
                                     device=str(device), batch=args.batch,
                                     step_ms=round(1000 * trained_s / max(1, step), 1)))


def training_from_log(path, out, batch):
    """eval.json's training record from a training run's stdout: its logged steps (JSON lines)
    and its summary line ("N steps in S s on DEVICE")."""
    log, summary, source = [], None, "generated"
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith('{"step"'):
                log.append(json.loads(line))
            elif line.startswith("train_dflash: ") and " windows of " in line and " + corpus)" in line:
                source = line.split("(")[1].split(" + ")[0]  # "generated", or "corpus" (fallback)
            elif line.startswith("train_dflash: ") and " steps in " in line:
                words = line.split()
                summary = dict(steps=int(words[1]), s=float(words[4]),
                               device=words[7].rstrip(","))
    if summary is None:
        raise SystemExit(f"train_dflash: {path} has no 'N steps in S s on DEVICE' line: not the "
                         f"log of a finished training run")
    return dict(steps=summary["steps"], source=source, log=log,
                bytes=os.path.getsize(os.path.join(out, "model.safetensors")),
                device=summary["device"], batch=batch,
                step_ms=round(1000 * summary["s"] / max(1, summary["steps"]), 1))


def train_step(drafter, target, opt, feats_all, greedy_all, pool, args):
    """One optimiser step on a random batch of pool windows; returns (loss, top-1 accuracy)."""
    device = pool.device
    pick = torch.randint(0, pool.shape[0], (args.batch,), device=device)
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda"):
        loss, acc = block_loss(drafter, target, feats_all[pick].float(), greedy_all[pick],
                               pool[pick], args)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(drafter.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.detach(), acc


def profile_step(step, device):
    """Runs step() under torch.profiler, prints where its time goes (device time first where
    there is a GPU) and returns step()'s result."""
    from torch.profiler import ProfilerActivity, profile
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        result = step()
        if device.type == "cuda":
            torch.cuda.synchronize()
    key = "cuda_time_total" if device.type == "cuda" else "cpu_time_total"
    print(prof.key_averages().table(sort_by=key, row_limit=15), flush=True)
    return result


FIRST_ROUND_CUTS = list(range(16, 65, 8))  # window lengths: 7 windows of each 64-token prompt


def first_round(target, drafter, prompts, K):
    """Drafts accepted in the first round after each fixed window (reference.first_round_accepted):
    the mean and per position (accepted with every earlier draft) over every window."""
    accepted = [reference.first_round_accepted(target, drafter, p[:cut], K)
                for p in prompts for cut in FIRST_ROUND_CUTS if cut <= len(p)]
    n = len(accepted)
    return dict(cuts=FIRST_ROUND_CUTS, windows=n,
                mean_accepted=round(sum(accepted) / n, 4),
                accepted_per_position=[round(sum(a > i for a in accepted) / n, 4)
                                       for i in range(K)])


@torch.no_grad()
def evaluate(args, target, tok, training):
    """PyTorch's acceptance of the exported (bf16) drafter in float32 on mtp_eval.json's
    prompts: greedy, K = eval_k, continuation_tokens new tokens each; and the first round's
    acceptance on fixed windows (each prompt cut at FIRST_ROUND_CUTS tokens), which a bf16 run
    can be held to: generated text diverges under bf16 (PyTorch's own bf16 moves the mean
    accepted a round over the continuations by 0.035 to 0.078), a fixed window only where its
    argmaxes flip (0.013 to 0.018)."""
    device = next(target.parameters()).device
    drafter = reference.load(args.out, device=device)
    if args.eval_dtype == "bf16":
        target, drafter = target.to(torch.bfloat16), drafter.to(torch.bfloat16)
    with open(os.path.join(args.model, "mtp_eval.json"), encoding="utf-8") as f:
        spec = json.load(f)
    K, new = args.eval_k, spec["continuation_tokens"]
    rounds, drafted, positions = [], [0] * K, [0] * K
    for prompt in spec["prompts"]:
        _, per_round = reference.generate(target, drafter, prompt, new, K)
        for k, a in per_round:
            rounds.append(a)
            for i in range(k):  # position i: drafted, and accepted with every earlier draft
                drafted[i] += 1
                positions[i] += int(i < a)
    result = dict(
        prompts="../mtp_eval.json", continuation_tokens=new, draft_tokens=K,
        pytorch=dict(rounds=len(rounds), mean_accepted=round(sum(rounds) / len(rounds), 4),
                     tokens_per_round=round(1 + sum(rounds) / len(rounds), 4),
                     accepted_per_position=[round(p / max(1, d), 4)
                                            for p, d in zip(positions, drafted)]),
        first_round=first_round(target, drafter, spec["prompts"], K),
        training=training)
    path = os.path.join(args.out, "eval.json")
    if args.eval_dtype == "bf16":
        # The bf16 first round is the oracle of a bf16 engine's gate (its text diverges from
        # f32's, a fixed window's first round only where an argmax flips); kept beside the f32
        # figures, which stay as they are.
        print(json.dumps(dict(bf16=result["pytorch"], first_round=result["first_round"])))
        with open(path, encoding="utf-8") as f:
            kept = json.load(f)
        kept["first_round_bf16"] = result["first_round"]
        with open(path, "w", encoding="utf-8") as f:
            json.dump(kept, f, indent=4)
        return
    with open(path, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=4)
    print(json.dumps(result["pytorch"]))


if __name__ == "__main__":
    main()
