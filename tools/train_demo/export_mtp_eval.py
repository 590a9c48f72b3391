#!/usr/bin/env python3
"""Writes MODEL/mtp_eval.json: the prompts of eval_mtp.py's MTP-acceptance measurement and
PyTorch's figures for them, so that ninfer's own MTP acceptance can be compared without torch.

The prompts are chosen exactly as eval_mtp.mtp_acceptance() chooses them: the held-out text
(--val, read as UTF-8 text) is tokenized with MODEL/tokenizer.json by HF tokenizers without
special tokens; span = max(P + 1, len(ids) // windows); prompt i = ids[i*span : i*span + P] for
i < windows, keeping those of exactly P ids. Each prompt is then continued greedily for G tokens
by the main model, and at each position of the continuation the MTP head drafts up to max_k
tokens (eval_mtp.py's docstring). "pytorch" holds that measurement: per_position,
all_first_k and mean_accepted, from the training.json (or eval.json) that eval_mtp.py wrote.

    python3 tools/train_demo/export_mtp_eval.py --model models/ninfer-demo \
        --val out/train_demo/eval/val.txt [--eval out/train_demo/eval/eval.json]

Needs HF tokenizers. --windows/--prompt-tokens/--gen-tokens/--max-k must be those eval_mtp.py
ran with (its defaults: 32, 64, 64, 4), and are checked against the stored measurement; its
other arguments are accepted and ignored, so run_all.sh passes both scripts the same ones.
"""
import argparse
import json
import os

from tokenizers import Tokenizer


def main():
    ap = argparse.ArgumentParser(description=__doc__, allow_abbrev=False,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--val", required=True, help="the held-out text eval_mtp.py read")
    ap.add_argument("--eval", help="eval_mtp.py's output (default: MODEL/training.json)")
    ap.add_argument("--out", help="default: MODEL/mtp_eval.json")
    ap.add_argument("--windows", type=int, default=32)
    ap.add_argument("--prompt-tokens", type=int, default=64)
    ap.add_argument("--gen-tokens", type=int, default=64)
    ap.add_argument("--max-k", type=int, default=4)
    args, _ = ap.parse_known_args()  # eval_mtp.py's other arguments (--context ...) are ignored

    P, G, K = args.prompt_tokens, args.gen_tokens, args.max_k
    tok = Tokenizer.from_file(os.path.join(args.model, "tokenizer.json"))
    with open(args.val, encoding="utf-8") as f:  # as eval_mtp.py: text mode, UTF-8
        val_ids = tok.encode(f.read(), add_special_tokens=False).ids
    span = max(P + 1, len(val_ids) // max(1, args.windows))
    prompts = [val_ids[i * span:i * span + P] for i in range(args.windows)]
    prompts = [p for p in prompts if len(p) == P]

    source = args.eval or os.path.join(args.model, "training.json")
    with open(source, encoding="utf-8") as f:
        stored = json.load(f)
    acc = stored.get("mtp_acceptance") or stored["evaluation"]["mtp_acceptance"]
    for key, want in (("prompts", len(prompts)), ("prompt_tokens", P),
                      ("continuation_tokens", G)):
        if acc.get(key, want) != want:
            raise SystemExit(f"export_mtp_eval: {source} has {key}={acc[key]}, here {want}: "
                             "pass the arguments eval_mtp.py ran with")
    if len(acc["per_position"]) != K:
        raise SystemExit(f"export_mtp_eval: {source} measured K={len(acc['per_position'])}")

    out = args.out or os.path.join(args.model, "mtp_eval.json")
    head = dict(prompt_tokens=P, continuation_tokens=G, max_k=K,
                pytorch={k: acc[k] for k in ("per_position", "all_first_k", "mean_accepted")})
    # One prompt per line keeps the file small and its diffs readable.
    lines = ",\n".join("  " + json.dumps(p, separators=(",", ":")) for p in prompts)
    body = json.dumps(head, indent=1)[:-2]  # drop the closing "\n}"
    with open(out, "w", encoding="utf-8") as f:
        f.write(f"{body},\n \"prompts\": [\n{lines}\n ]\n}}\n")
    json.load(open(out, encoding="utf-8"))  # well-formed
    print(f"export_mtp_eval: {len(prompts)} prompts of {P} ids ({len(val_ids):,} held-out ids, "
          f"span {span}) -> {out}")


if __name__ == "__main__":
    main()
