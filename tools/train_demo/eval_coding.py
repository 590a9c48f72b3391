#!/usr/bin/env python3
"""Scores an exported demo model on simple coding prompts (issue 13's parse-rate goal): the
PyTorch reference (HF transformers, float32 from the bf16 checkpoint, eager attention and
experts, as eval_mtp.py) answers each prompt of --prompts greedily, rendered with the model's
chat template with thinking off (enable_thinking=false), up to --max-new tokens or a stop id
(generation_config.json). The code of an answer is its first fenced block (```python ... ```;
an unclosed fence runs to the end), else the whole answer after any </think>. The score is the
fraction of answers whose code `ast.parse` accepts; also reported: how many answers stopped on
their own and how many define the function the prompt names.

Prompts are answered in batches (left-padded; HF generate with its cache).

usage: eval_coding.py --model DIR --out FILE.json [--prompts coding_prompts.txt] [--max-new 320]
"""
import argparse
import ast
import os
import re
import time

import demo_model
from common import HERE, read_json, write_json

import torch  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)(?:```|\Z)", re.S)
NAMED = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*)\(")


def read_prompts(path):
    with open(path, encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip() and not line.startswith("#")]


def extract_code(answer):
    answer = answer.split("</think>")[-1]
    m = FENCE.search(answer)
    return (m.group(2) if m else answer).strip("\n")


def parses(code):
    if not code.strip():
        return False
    try:
        ast.parse(code)
        return True
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False


def defines(code, name):
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name
               for n in ast.walk(tree))


@torch.no_grad()
def answer_all(model, raw, prompts, stop_ids, pad_id, max_new, batch, device):
    """Greedy answers (new token ids, cut after the first stop id) of the rendered prompts."""
    out = []
    for i in range(0, len(prompts), batch):
        group = [raw.encode(p, add_special_tokens=False).ids for p in prompts[i:i + batch]]
        width = max(map(len, group))
        ids = torch.tensor([[pad_id] * (width - len(g)) + g for g in group], device=device)
        mask = torch.tensor([[0] * (width - len(g)) + [1] * len(g) for g in group],
                            device=device)
        gen = model.lm.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_new,
                                do_sample=False, eos_token_id=stop_ids, pad_token_id=pad_id)
        for row in gen[:, width:].tolist():
            cut = next((k for k, t in enumerate(row) if t in stop_ids), None)
            out.append((row if cut is None else row[:cut], cut is not None))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--prompts", default=os.path.join(HERE, "coding_prompts.txt"))
    ap.add_argument("--max-new", type=int, default=320)
    ap.add_argument("--batch", type=int, default=30)
    ap.add_argument("--limit", type=int, default=0, help="only the first N prompts (smoke test)")
    ap.add_argument("--device", default="auto")
    args = ap.parse_args()
    device = demo_model.fp32_device(args.device)
    t0 = time.time()
    model = demo_model.load_exported(args.model, device=device)
    raw = Tokenizer.from_file(os.path.join(args.model, "tokenizer.json"))
    hf_tok = AutoTokenizer.from_pretrained(args.model)
    gen_cfg = read_json(os.path.join(args.model, "generation_config.json"))
    stop = gen_cfg["eos_token_id"]
    stop_ids = stop if isinstance(stop, list) else [stop]
    prompts = read_prompts(args.prompts)
    if args.limit:
        prompts = prompts[:args.limit]
    rendered = [hf_tok.apply_chat_template([{"role": "user", "content": p}], tokenize=False,
                                           add_generation_prompt=True, enable_thinking=False)
                for p in prompts]
    answers = answer_all(model, raw, rendered, stop_ids, gen_cfg["pad_token_id"], args.max_new,
                         max(1, args.batch), device)
    items = []
    for prompt, (ids, stopped) in zip(prompts, answers):
        text = raw.decode(ids, skip_special_tokens=False)
        code = extract_code(text)
        named = NAMED.search(prompt)
        items.append(dict(prompt=prompt, answer=text, tokens=len(ids), stopped=stopped,
                          parses=parses(code),
                          defines_name=bool(named) and defines(code, named.group(1))))
    n = max(1, len(items))
    result = dict(
        prompts=len(items), parse_rate=round(sum(i["parses"] for i in items) / n, 4),
        parsed=sum(i["parses"] for i in items), stopped=sum(i["stopped"] for i in items),
        defines_name=sum(i["defines_name"] for i in items), max_new=args.max_new,
        thinking=False, device=str(device), seconds=round(time.time() - t0, 1), items=items)
    write_json(args.out, result)
    training = os.path.join(args.model, "training.json")
    if os.path.exists(training):  # the model card's figures (eval_mtp.py writes "evaluation")
        extra = read_json(training)
        extra.setdefault("evaluation", {})["coding"] = {
            k: result[k] for k in ("prompts", "parsed", "parse_rate", "stopped", "defines_name",
                                   "max_new", "thinking")}
        write_json(training, extra)
    print(f"coding: {result['parsed']} of {len(items)} answers parse "
          f"({100 * result['parse_rate']:.0f}%; goal 70%), {result['stopped']} stopped on their "
          f"own, {result['defines_name']} define the named function ({result['seconds']:.0f} s)",
          flush=True)


if __name__ == "__main__":
    main()
