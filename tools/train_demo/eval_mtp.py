#!/usr/bin/env python3
"""Evaluates an exported demo model with the PyTorch reference (HF transformers for the main
model, demo_model.MTP for the MTP head), in float32 from the saved bf16 weights, eager attention
and experts, TF32 off, kernels blocked: the oracle ninfer is compared with.

1. Held-out perplexity: non-overlapping windows of --context tokens of --val, each from an empty
   state, tokens 1..n-1 scored (the definition `ninfer perplexity` uses).
2. MTP acceptance at K = 1..--max-k: prompts are --windows snippets of the held-out text; the main
   model continues each greedily; at every position n of the continuation the MTP head drafts K
   tokens by greedy chaining (MODEL_QWEN3_5.md section 3); draft k is accepted when it equals the
   main model's greedy token at n+k. Reported per position k (the fraction of k-th drafts that
   match), as the fraction whose first k drafts all match, and as the mean accepted length per
   verification of K drafts (sum of the latter).
3. Greedy continuations of a few code and chat prompts with per-step logprobs, top-5 and the
   top-1/top-2 gap, in the format of tests/fixtures/*/reference.json (WRITES MODEL/reference.json)
   for ninfer's parity check (check_ninfer.py).

usage: eval_mtp.py --model DIR --val FILE --out FILE.json
"""
import argparse
import math
import os
import time

import demo_model
from common import read_json, write_json

import torch  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

CODE_PROMPTS = [
    "def fibonacci(n):\n",
    "import os\nimport sys\n\n\ndef main():\n",
    "class Stack:\n    \"\"\"A last-in first-out stack.\"\"\"\n\n    def __init__(self):\n",
    "# Read a JSON file and return its contents.\ndef read_json(path):\n",
    "def is_prime(n: int) -> bool:\n    \"\"\"Return True if n is a prime number.\"\"\"\n",
]
CHAT_PROMPTS = [
    "Write a Python function `reverse_words` that reverses the order of words in a string.",
    "Implement `flatten` in Python. Flatten a nested list into a single list.",
]
TOP_K = 5


@torch.no_grad()
def greedy_case(model, prompt, new_tokens, device):
    """Greedy continuation by full forwards (no cache), as tools/reference/make_fixtures.py."""
    ids, steps = list(prompt), []
    for _ in range(new_tokens):
        logits = model.lm(input_ids=torch.tensor([ids], device=device)).logits[0, -1].double()
        lp = torch.log_softmax(logits, dim=-1)
        top = torch.topk(lp, TOP_K + 1)
        choice = int(top.indices[0])
        steps.append(dict(id=choice, logprob=float(lp[choice]),
                          gap=float(top.values[0] - top.values[1]),
                          top=[[int(i), float(v)] for i, v in zip(top.indices[:TOP_K],
                                                                   top.values[:TOP_K])]))
        ids.append(choice)
    return dict(prompt=list(prompt), greedy=[s["id"] for s in steps], steps=steps)


@torch.no_grad()
def mtp_acceptance(model, val_ids, args, device):
    P, G, K = args.prompt_tokens, args.gen_tokens, args.max_k
    span = max(P + 1, len(val_ids) // max(1, args.windows))
    prompts = [val_ids[i * span:i * span + P] for i in range(args.windows)]
    prompts = [p for p in prompts if len(p) == P]
    seqs = torch.tensor(prompts, device=device)
    for _ in range(G):  # batched greedy continuation by full forwards
        nxt = model.lm(input_ids=seqs).logits[:, -1].argmax(-1, keepdim=True)
        seqs = torch.cat([seqs, nxt], dim=1)
    hidden = model.hidden(seqs[:, :-1])                     # h_0 .. h_{L-2}
    greedy = model.lm.lm_head(hidden).argmax(-1)            # g_t: main greedy token after t
    drafts = model.mtp_logits(hidden, [seqs[:, 1:]], demo_model.GreedyNext(K))
    drafts = [d.argmax(-1) for d in drafts]                 # step k at n predicts x_{n+k+2}
    L = seqs.size(1) - 1
    rows = range(P - 1, L - K)                              # positions n of the continuation
    hits = torch.stack([torch.stack([drafts[k][:, n] == greedy[:, n + k + 1] for n in rows], 1)
                        for k in range(K)])                 # [K, B, N]
    per_position = hits.float().mean(dim=(1, 2))
    prefix = hits.int().cumprod(0).float().mean(dim=(1, 2))
    return dict(per_position=[round(float(v), 4) for v in per_position],
                all_first_k=[round(float(v), 4) for v in prefix],
                mean_accepted={str(k + 1): round(float(prefix[:k + 1].sum()), 4) for k in range(K)},
                positions=int(hits.shape[1] * hits.shape[2]), prompts=len(prompts),
                prompt_tokens=P, continuation_tokens=G)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--val", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--max-k", type=int, default=4)
    ap.add_argument("--windows", type=int, default=32, help="MTP prompts from the val text")
    ap.add_argument("--prompt-tokens", type=int, default=64)
    ap.add_argument("--gen-tokens", type=int, default=64)
    ap.add_argument("--new-tokens", type=int, default=32, help="greedy tokens per parity prompt")
    ap.add_argument("--val-windows", type=int, default=0, help="0: the whole held-out file")
    ap.add_argument("--device", default="auto")
    args = ap.parse_args()
    device = demo_model.fp32_device(args.device)
    t0 = time.time()
    model = demo_model.load_exported(args.model, device=device)
    raw = Tokenizer.from_file(os.path.join(args.model, "tokenizer.json"))
    hf_tok = AutoTokenizer.from_pretrained(args.model)
    with open(args.val, encoding="utf-8") as f:
        val_ids = raw.encode(f.read(), add_special_tokens=False).ids

    scored = val_ids[:args.val_windows * args.context] if args.val_windows else val_ids
    nll, count = demo_model.sequence_nll(model, scored, args.context, device)
    t_ppl = time.time()
    acceptance = mtp_acceptance(model, val_ids, args, device)
    t_mtp = time.time()

    cases = []
    for text in CODE_PROMPTS:
        case = greedy_case(model, raw.encode(text, add_special_tokens=False).ids,
                           args.new_tokens, device)
        cases.append(dict(name="code", text=text, **case))
    for question in CHAT_PROMPTS:
        for thinking in (False, True):
            text = hf_tok.apply_chat_template([{"role": "user", "content": question}],
                                              tokenize=False, add_generation_prompt=True,
                                              enable_thinking=thinking)
            case = greedy_case(model, raw.encode(text, add_special_tokens=False).ids,
                               args.new_tokens, device)
            cases.append(dict(name="chat" if thinking else "chat_no_thinking", text=text,
                              question=question, **case))
    for c in cases:
        c["greedy_text"] = raw.decode(c["greedy"], skip_special_tokens=False)
    reference = dict(model=os.path.basename(os.path.normpath(args.model)),
                     transformers=demo_model.transformers.__version__, torch=torch.__version__,
                     dtype="float32 from the bf16 checkpoint", new_tokens=args.new_tokens,
                     top_k=TOP_K, cases=cases)
    write_json(os.path.join(args.model, "reference.json"), reference)
    result = dict(val_tokens=count, val_nll=round(nll / count, 6),
                  val_ppl=round(math.exp(nll / count), 4), context=args.context,
                  val_windows=args.val_windows,
                  mtp_acceptance=acceptance, device=str(device),
                  seconds=dict(perplexity=round(t_ppl - t0, 1), mtp=round(t_mtp - t_ppl, 1),
                               greedy=round(time.time() - t_mtp, 1)),
                  greedy=[dict(name=c["name"], text=c["text"], continuation=c["greedy_text"],
                               min_gap=round(min(s["gap"] for s in c["steps"]), 6))
                          for c in cases])
    write_json(args.out, result)
    training = os.path.join(args.model, "training.json")
    if os.path.exists(training):  # the model card's figures
        extra = read_json(training)
        extra["evaluation"] = {k: result[k] for k in ("val_tokens", "val_nll", "val_ppl",
                                                      "context", "mtp_acceptance")}
        write_json(training, extra)
    acc = acceptance["per_position"]
    print(f"eval: held-out ppl {result['val_ppl']:.3f} (fp32, {count:,} tokens); MTP acceptance "
          f"per position k=1..{len(acc)}: {acc}, mean accepted "
          f"{acceptance['mean_accepted']}; {len(cases)} greedy cases "
          f"({time.time() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
