#!/usr/bin/env python3
"""Trains the demo model: HF Qwen3_5MoeForCausalLM (about 15M parameters, see
demo_model.DEFAULT_SHAPE) jointly with its MTP module. Loss = next-token CE + mtp_weight * mean over
the chained MTP steps of their CE (step s predicts the token s+1 after next; teacher forced) +
aux_coef * the router load-balancing loss (Switch style, every MoE layer and the MTP layer).

Deterministic given --seed and the step count: the batch of step i depends on (seed, i) only, the
model and optimizer state are checkpointed, and with --time-budget-s the run measures its step
time over the first --calib-steps steps, then fixes the total step count (printed and stored; the
same run replays with --max-steps N) so the cosine schedule ends inside the budget. bf16 autocast
on CUDA (the gated delta rule core in fp32), fp32 on the CPU. Checkpoints to WORK/ckpt.pt every
--ckpt-every steps and at the end; --resume continues from it. Finally: held-out loss and
perplexity, and the bf16 checkpoint in the real layout to --out (demo_model.export).

usage: train.py --corpus DIR --tokenizer DIR --work DIR --out DIR [--time-budget-s S] ...
"""
import argparse
import json
import math
import os
import sys
import time

import demo_model  # blocks the fla / causal_conv1d kernels before transformers loads
from common import read_json, write_json

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402
from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS  # noqa: E402
from transformers.models.qwen3_5_moe import modeling_qwen3_5_moe as hf  # noqa: E402

MAX_BF16_BYTES = 40 * 10**6


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--work", required=True, help="token cache, checkpoint, logs")
    ap.add_argument("--out", required=True, help="the exported model directory")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--time-budget-s", type=float, default=0, help="0: none (needs --max-steps)")
    ap.add_argument("--max-steps", type=int, default=0)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--mtp-steps", type=int, default=3, help="chained MTP steps trained")
    ap.add_argument("--mtp-weight", type=float, default=0.3)
    ap.add_argument("--aux-coef", type=float, default=0.01)
    ap.add_argument("--calib-steps", type=int, default=25)
    ap.add_argument("--ckpt-every", type=int, default=500)
    ap.add_argument("--log-every", type=int, default=0, help="0: about 100 lines")
    ap.add_argument("--eval-windows", type=int, default=64, help="val windows of the curve")
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--experts", default="auto",
                    help="HF experts implementation (eager, grouped_mm, demo_grouped_bf16), or "
                         "auto: time each on a few forward+backward passes of the first batch "
                         "and train with the fastest whose loss agrees with eager")
    ap.add_argument("--amp", choices=("auto", "on", "off"), default="auto",
                    help="bf16 autocast (auto: on CUDA only)")
    ap.add_argument("--deterministic", choices=("on", "off"), default="on",
                    help="torch.use_deterministic_algorithms (warn only; off may be faster)")
    ap.add_argument("--profile-steps", type=int, default=0,
                    help="profile N steps (before calibration) and print the top ops")
    args = ap.parse_args()
    if args.time_budget_s <= 0 and args.max_steps <= 0:
        ap.error("give --time-budget-s or --max-steps")
    return args


def fp32_core(fn):
    """The chunked gated delta rule in fp32 with autocast off (as the recurrent state is kept)."""
    def wrapped(query, key, value, g, beta, *a, **kw):
        with torch.autocast(device_type=query.device.type, enabled=False):
            out, state = fn(query.float(), key.float(), value.float(), g.float(), beta.float(),
                            *a, **kw)
        return out.to(query.dtype), state
    return wrapped


def tokenize_corpus(args, eot):
    """Train ids (documents joined by <|endoftext|>) and val ids, cached in WORK."""
    cache = os.path.join(args.work, "tokens.pt")
    tok_path = os.path.join(args.tokenizer, "tokenizer.json")
    stamp = [os.path.getsize(tok_path), os.path.getmtime(tok_path)] + [
        os.path.getmtime(os.path.join(args.corpus, n)) for n in ("train.jsonl", "val.txt")]
    if os.path.exists(cache):
        data = torch.load(cache)
        if data.get("stamp") == stamp:
            return data["train"], data["val"]
    tok = Tokenizer.from_file(tok_path)
    parts, batch = [], []

    def flush():
        for enc in tok.encode_batch(batch, add_special_tokens=False):
            parts.append(torch.tensor(enc.ids + [eot], dtype=torch.int16))
        batch.clear()

    with open(os.path.join(args.corpus, "train.jsonl"), encoding="utf-8") as f:
        for line in f:
            batch.append(json.loads(line)["text"])
            if len(batch) == 2048:
                flush()
    flush()
    train = torch.cat(parts)
    with open(os.path.join(args.corpus, "val.txt"), encoding="utf-8") as f:
        val = torch.tensor(tok.encode(f.read(), add_special_tokens=False).ids, dtype=torch.int16)
    torch.save(dict(stamp=stamp, train=train, val=val), cache)
    return train, val


class RouterLoss:
    """Collects every router's logits and top-k choices during a forward; loss() is the mean
    over routers of E * sum_e f_e * P_e (f: fraction of assignments, P: mean probability)."""

    def __init__(self, model):
        self.items, self.active = [], False
        for m in model.modules():
            if isinstance(m, hf.Qwen3_5MoeTopKRouter):
                m.register_forward_hook(self.hook)

    def hook(self, module, inputs, output):
        if self.active:
            self.items.append((output[0], output[2], module.num_experts))

    def loss(self):
        total = torch.zeros(())
        for logits, idx, E in self.items:
            probs = torch.softmax(logits.float(), dim=-1).mean(0)
            frac = F.one_hot(idx, E).float().sum(1).mean(0) / idx.size(-1)
            total = total + E * (frac * probs).sum()
        n = len(self.items)
        self.items = []
        return total / max(1, n)


def grouped_bf16_experts_forward(self, hidden_states, top_k_index, top_k_weights):
    """The MoE experts as two grouped GEMMs (tokens sorted by expert, no host syncs), with the
    expert weights cast to bf16 when autocast is on (HF's grouped_mm runs in the fp32 master
    weights' dtype, since grouped_mm is not autocast-enabled). Same math as HF's eager loop."""
    num_tokens, hidden = hidden_states.shape
    k = top_k_index.size(-1)
    dtype = torch.get_autocast_dtype(hidden_states.device.type) \
        if torch.is_autocast_enabled(hidden_states.device.type) else self.gate_up_proj.dtype
    expert_ids, perm = torch.sort(top_k_index.reshape(-1), stable=True)
    x = hidden_states[perm // k].to(dtype)
    bounds = torch.arange(self.num_experts, device=expert_ids.device, dtype=expert_ids.dtype)
    offsets = torch.searchsorted(expert_ids, bounds, right=True).to(torch.int32)  # group ends
    with torch.autocast(device_type=hidden_states.device.type, enabled=False):
        gate_up = F.grouped_mm(x, self.gate_up_proj.to(dtype).transpose(-2, -1), offs=offsets)
        gate, up = gate_up.chunk(2, dim=-1)
        out = F.grouped_mm(self.act_fn(gate) * up, self.down_proj.to(dtype).transpose(-2, -1),
                           offs=offsets)
    out = out.float() * top_k_weights.reshape(-1)[perm].float().unsqueeze(-1)
    inv = torch.empty_like(perm)
    inv[perm] = torch.arange(perm.numel(), device=perm.device)
    return out[inv].view(num_tokens, k, hidden).sum(1).to(hidden_states.dtype)


def set_experts(model, name):
    for m in model.modules():
        cfg = getattr(m, "config", None)
        if cfg is not None and hasattr(cfg, "_experts_implementation"):
            cfg._experts_implementation = name


def pick_experts(model, x, args, router, amp, device):
    """--experts auto: forward+backward of one batch with each implementation (no optimizer
    step: the weights do not change), 1 warm-up and 3 timed passes each; the fastest whose loss
    is within 1% of eager's wins. Any error rules a candidate out."""
    candidates = ["eager", "grouped_mm"]
    if hasattr(F, "grouped_mm"):
        candidates.append("demo_grouped_bf16")
    if device.type != "cuda":
        return "eager", {}  # the CPU smoke test: no point timing
    timings, ref = {}, None
    for name in candidates:
        try:
            set_experts(model, name)
            for i in range(4):
                if i == 1:
                    torch.cuda.synchronize()
                    t0 = time.time()
                total = losses(model, x, args, router, amp)[0]
                model.zero_grad(set_to_none=True)
                total.backward()
            torch.cuda.synchronize()
            loss = float(total)
            ref = loss if ref is None else ref
            ok = math.isfinite(loss) and abs(loss - ref) <= 0.01 * abs(ref)
            timings[name] = dict(ms=round((time.time() - t0) / 3 * 1000, 1), loss=round(loss, 5),
                                 ok=ok)
        except Exception as e:  # noqa: BLE001  (an unsupported kernel, dtype or shape)
            timings[name] = dict(error=f"{type(e).__name__}: {str(e)[:200]}")
        router.items = []
        model.zero_grad(set_to_none=True)
    good = [n for n in candidates if timings[n].get("ok")]
    best = min(good, key=lambda n: timings[n]["ms"]) if good else "eager"
    set_experts(model, best)
    return best, timings


def lr_at(step, args, total):
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    progress = min(1.0, (step - args.warmup) / max(1, total - args.warmup))
    cosine = 0.5 * (1 + math.cos(math.pi * progress))
    return args.lr * (args.min_lr_frac + (1 - args.min_lr_frac) * cosine)


def make_optimizer(model, args):
    decay, plain = [], []
    for name, p in model.named_parameters():
        (decay if p.ndim >= 2 and "conv1d" not in name else plain).append(p)
    return torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                              {"params": plain, "weight_decay": 0.0}],
                             lr=args.lr, betas=(0.9, 0.95), eps=1e-8)


def get_batch(train, step, args, device):
    g = torch.Generator().manual_seed(args.seed * 1_000_003 + step)
    span = args.seq + 1 + args.mtp_steps
    starts = torch.randint(0, train.numel() - span, (args.batch,), generator=g)
    idx = starts[:, None] + torch.arange(span)[None, :]
    return train[idx.to(train.device)].long().to(device)


def losses(model, x, args, router, amp):
    T, K = args.seq, args.mtp_steps
    router.active = True
    with torch.autocast(device_type=x.device.type, dtype=torch.bfloat16, enabled=amp):
        hidden = model.hidden(x[:, :T])
        logits = model.lm.lm_head(hidden)
        main = F.cross_entropy(logits.float().flatten(0, 1), x[:, 1:T + 1].flatten())
        mtp = []
        if K > 0:
            step_logits = model.mtp_logits(hidden, [x[:, 1 + s:T + 1 + s] for s in range(K)])
            mtp = [F.cross_entropy(lg.float().flatten(0, 1), x[:, 2 + s:T + 2 + s].flatten())
                   for s, lg in enumerate(step_logits)]
    router.active = False
    aux = router.loss()
    total = main + args.aux_coef * aux
    if mtp:
        total = total + args.mtp_weight * sum(mtp) / len(mtp)
    return total, main, mtp, aux


def evaluate(model, val, args, device, amp, windows=0):
    ids = val.tolist()
    if windows:
        ids = ids[:windows * args.seq]
    model.eval()
    total, count = demo_model.sequence_nll(model, ids, args.seq, device, autocast=amp,
                                           batch=max(1, args.batch // 2))
    model.train()
    return total / max(1, count), count


def save_checkpoint(path, model, opt, step, total_steps, log):
    tmp = path + ".tmp"
    torch.save(dict(model=model.state_dict(), opt=opt.state_dict(), step=step,
                    total_steps=total_steps, log=log), tmp)
    os.replace(tmp, path)


def main():
    args = parse_args()
    t_start = time.time()
    os.makedirs(args.work, exist_ok=True)
    device = torch.device(("cuda" if torch.cuda.is_available() else "cpu")
                          if args.device == "auto" else args.device)
    amp = args.amp == "on" or (args.amp == "auto" and device.type == "cuda")
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(args.deterministic == "on", warn_only=True)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    hf.torch_chunk_gated_delta_rule = fp32_core(hf.torch_chunk_gated_delta_rule)

    tok_cfg = read_json(os.path.join(args.tokenizer, "generation_config.json"))
    eot = tok_cfg["pad_token_id"]
    vocab = Tokenizer.from_file(os.path.join(args.tokenizer, "tokenizer.json")).get_vocab_size()
    train, val = tokenize_corpus(args, eot)
    print(f"data: {train.numel():,} train tokens, {val.numel():,} val tokens, vocab {vocab} "
          f"({time.time() - t_start:.0f} s)", flush=True)
    train = train.to(device)

    ALL_EXPERTS_FUNCTIONS.register("demo_grouped_bf16", grouped_bf16_experts_forward)
    config = demo_model.make_config(vocab, eot, attn="sdpa",
                                    experts="eager" if args.experts == "auto" else args.experts,
                                    aux_coef=args.aux_coef)
    model = demo_model.DemoModel(config)
    model.mtp.init_weights(config.initializer_range)
    model.to(device).train()
    counts = demo_model.param_counts(model)
    print(f"model: {counts['main']:,} main + {counts['mtp']:,} MTP parameters "
          f"({2 * counts['total'] / 1e6:.1f} MB bf16)", flush=True)
    if 2 * counts["total"] > MAX_BF16_BYTES:
        sys.exit("train: the model exceeds 40 MB in bf16")
    opt = make_optimizer(model, args)
    router = RouterLoss(model)

    ckpt_path = os.path.join(args.work, "ckpt.pt")
    step, total_steps, log = 0, args.max_steps or 0, []
    if args.resume and os.path.exists(ckpt_path):
        ck = torch.load(ckpt_path, map_location=device)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        step, total_steps, log = ck["step"], args.max_steps or ck["total_steps"], ck["log"]
        print(f"resumed at step {step} of {total_steps or '(not calibrated yet)'}", flush=True)
    experts, experts_timings = args.experts, {}
    if args.experts == "auto":
        experts, experts_timings = pick_experts(model, get_batch(train, step, args, device), args,
                                                router, amp, device)
        print(f"experts: {experts} {json.dumps(experts_timings)}", flush=True)
    # Before calibration the schedule only needs the warmup; a placeholder total is harmless.
    planned = total_steps or 10**9
    log_every = args.log_every or max(1, (total_steps or 1000) // 100)
    eval_every = max(log_every, (total_steps or 1000) // 10)
    budget_end = t_start + args.time_budget_s if args.time_budget_s > 0 else float("inf")
    calib_from, calib_t0 = step + 5, None
    tokens_per_step = args.batch * args.seq
    last_print, last_step = time.time(), step
    while step < planned:
        if step == calib_from:
            if device.type == "cuda":
                torch.cuda.synchronize()
            calib_t0 = time.time()
        if not total_steps and step == calib_from + args.calib_steps:
            if device.type == "cuda":
                torch.cuda.synchronize()
            per_step = (time.time() - calib_t0) / args.calib_steps
            # What is left after the final evaluation and export (about 3% + 10 s).
            left = budget_end - time.time() - 10 - 0.03 * args.time_budget_s
            total_steps = step + max(0, int(left / per_step))
            if args.max_steps:
                total_steps = min(total_steps, args.max_steps)
            planned = total_steps
            log_every = args.log_every or max(1, total_steps // 100)
            eval_every = max(log_every, total_steps // 10)
            print(f"calibrated: {per_step * 1000:.0f} ms/step, "
                  f"{tokens_per_step / per_step:,.0f} tok/s -> {total_steps} steps "
                  f"(replay: --max-steps {total_steps})", flush=True)
            if step >= planned:
                break
        if time.time() > budget_end - 5:
            print(f"time budget reached at step {step}", flush=True)
            break
        for group in opt.param_groups:
            group["lr"] = lr_at(step, args, planned if total_steps else 10**9)
        profiling = args.profile_steps and step == 2
        if profiling:
            prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU] + (
                [torch.profiler.ProfilerActivity.CUDA] if device.type == "cuda" else []))
            prof.__enter__()
        x = get_batch(train, step, args, device)
        total, main_loss, mtp_losses, aux = losses(model, x, args, router, amp)
        opt.zero_grad(set_to_none=True)
        total.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        if args.profile_steps and step == 2 + args.profile_steps:
            prof.__exit__(None, None, None)
            key = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
            print(prof.key_averages().table(sort_by=key, row_limit=25), flush=True)
        if step % log_every == 0 or step == planned:
            now = time.time()
            rec = dict(step=step, loss=round(main_loss.item(), 4),
                       mtp=[round(v.item(), 4) for v in mtp_losses], aux=round(aux.item(), 4),
                       gnorm=round(float(gnorm), 3), lr=opt.param_groups[0]["lr"],
                       elapsed_s=round(now - t_start, 1),
                       tok_s=round(tokens_per_step * (step - last_step) /
                                   max(1e-9, now - last_print)))
            last_print, last_step = now, step
            if step % eval_every == 0 or step == planned:
                rec["val_loss"] = round(evaluate(model, val, args, device, amp,
                                                 args.eval_windows)[0], 4)
            log.append(rec)
            print(json.dumps(rec), flush=True)
        if args.ckpt_every and step % args.ckpt_every == 0:
            save_checkpoint(ckpt_path, model, opt, step, total_steps, log)
    save_checkpoint(ckpt_path, model, opt, step, total_steps, log)
    t_train = time.time() - t_start

    val_loss, val_tokens = evaluate(model, val, args, device, amp)
    metrics = dict(steps=step, planned_steps=total_steps, seed=args.seed, batch=args.batch,
                   seq=args.seq, tokens_seen=step * tokens_per_step,
                   train_tokens=int(train.numel()),
                   final_train_loss=log[-1]["loss"] if log else None,
                   final_mtp_losses=log[-1]["mtp"] if log else None,
                   val_loss=round(val_loss, 5), val_ppl=round(math.exp(val_loss), 4),
                   val_tokens=val_tokens, val_autocast_bf16=amp, params=counts,
                   experts=experts, experts_timings=experts_timings,
                   train_seconds=round(t_train, 1), device=str(device),
                   torch=torch.__version__, transformers=demo_model.transformers.__version__,
                   args=vars(args))
    write_json(os.path.join(args.work, "train_log.json"), log)
    write_json(os.path.join(args.work, "train_metrics.json"), metrics)
    manifest = read_json(os.path.join(args.corpus, "packages.json"))
    extra = dict(corpus=dict(packages=[{k: p[k] for k in ("name", "version", "license")}
                                       for p in manifest["packages"]],
                             accepted_licenses=manifest["accepted_licenses"],
                             python=manifest["python"]),
                 training={k: metrics[k] for k in ("steps", "seed", "batch", "seq", "tokens_seen",
                                                   "val_loss", "val_ppl", "params")})
    set_experts(model, "eager")  # the exported config as before
    demo_model.export(model, args.out, args.tokenizer, extra)
    print(f"held-out: loss {val_loss:.4f}, perplexity {math.exp(val_loss):.3f} over {val_tokens:,} "
          f"tokens; {step} steps in {t_train:.0f} s; exported to {args.out}", flush=True)


if __name__ == "__main__":
    main()
