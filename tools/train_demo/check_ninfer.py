#!/usr/bin/env python3
"""Checks ninfer on a trained demo model against the PyTorch reference (eval_mtp.py):

1. tokenization: `ninfer tokenize` of the held-out text equals HF tokenizers' ids;
2. perplexity: `ninfer perplexity` on the held-out text is within --ppl-rel (1%) of PyTorch's
   (from EVAL.json of eval_mtp.py, or recomputed here with --recompute);
3. greedy: `ninfer run --prompt-ids ... --greedy --json` reproduces MODEL/reference.json (HF's
   greedy ids; logprobs reported), and `ninfer render` makes the same chat prompts as HF's
   apply_chat_template.

Needs only the Python standard library, unless --recompute (torch + transformers).
Exit status 0 when everything matches.

usage: check_ninfer.py --model DIR --val FILE --eval EVAL.json [--ninfer BIN] [--device cpu]
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def ninfer(binary, *args, stdin=None):
    r = subprocess.run([binary, *args], input=stdin, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"check_ninfer: {' '.join(args[:2])} failed:\n{r.stderr}")
    return r.stdout


def hf_ids(model, text):
    from tokenizers import Tokenizer
    return Tokenizer.from_file(os.path.join(model, "tokenizer.json")).encode(
        text, add_special_tokens=False).ids


def check_tokenize(args, text, report):
    ours = json.loads(ninfer(args.ninfer, "tokenize", "--model", args.model, stdin=text))
    try:
        ref = hf_ids(args.model, text)
    except ImportError:
        report["tokenize"] = dict(tokens=len(ours), skipped="no `tokenizers` module")
        return True
    ok = ours == ref
    report["tokenize"] = dict(tokens=len(ours), equal_to_hf=ok)
    return ok


def reference_ppl(args, report_eval):
    if args.recompute:
        sys.path.insert(0, HERE)
        import demo_model
        import torch
        model = demo_model.load_exported(args.model)
        with open(args.val, encoding="utf-8") as f:
            ids = hf_ids(args.model, f.read())
        if args.chunks:
            ids = ids[:args.chunks * args.context]
        nll, count = demo_model.sequence_nll(model, ids, args.context, torch.device("cpu"))
        return nll / count, count
    ev = report_eval
    if ev.get("context") != args.context or ev.get("val_windows", 0) != args.chunks:
        sys.exit(f"check_ninfer: EVAL.json was scored with --context {ev.get('context')} and "
                 f"{ev.get('val_windows') or 'all'} windows; pass the same or use --recompute")
    return ev["val_nll"], ev["val_tokens"]


def check_perplexity(args, report):
    cmd = ["perplexity", "--model", args.model, "--file", args.val, "--context", str(args.context),
           "--device", args.device]
    if args.chunks:
        cmd += ["--chunks", str(args.chunks)]
    ours = json.loads(ninfer(args.ninfer, *cmd))
    ev = json.load(open(args.eval)) if args.eval else {}
    ref_nll, ref_tokens = reference_ppl(args, ev)
    rel = abs(math.exp(ours["mean_nll"]) / math.exp(ref_nll) - 1)
    ok = rel <= args.ppl_rel and ours["tokens"] == ref_tokens
    report["perplexity"] = dict(ninfer=ours["ppl"], pytorch=math.exp(ref_nll),
                                ninfer_nll=ours["mean_nll"], pytorch_nll=ref_nll,
                                tokens=ours["tokens"], pytorch_tokens=ref_tokens,
                                relative_difference=rel, ok=ok, ninfer_seconds=ours["seconds"])
    return ok


def check_greedy(args, report):
    ref = json.load(open(os.path.join(args.model, "reference.json")))
    results, ok_all = [], True
    for i, case in enumerate(ref["cases"]):
        out = json.loads(ninfer(args.ninfer, "run", "--model", args.model, "--prompt-ids",
                                ",".join(map(str, case["prompt"])), "--max-new",
                                str(len(case["greedy"])), "--greedy", "--ignore-eos", "--json",
                                "--device", args.device))
        ids = [t["id"] for t in out["tokens"]]
        first_diff = next((k for k, (a, b) in enumerate(zip(ids, case["greedy"])) if a != b),
                          None if len(ids) == len(case["greedy"]) else min(len(ids),
                                                                           len(case["greedy"])))
        agree = len(ids) if first_diff is None else first_diff
        lp_err = max((abs(t["logprob"] - s["logprob"])
                      for t, s in zip(out["tokens"][:agree], case["steps"])), default=0.0)
        item = dict(case=i, name=case["name"], equal=first_diff is None, max_logprob_diff=lp_err)
        if first_diff is not None:
            item.update(first_diff=first_diff, hf_gap_there=case["steps"][first_diff]["gap"])
        if "question" in case:  # the chat template renders as HF's
            with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
                json.dump([{"role": "user", "content": case["question"]}], f)
            # the template's own default is not assumed: the demo's is no thinking
            flags = ["--var", "enable_thinking=true"] if case["name"] == "chat" else [
                "--no-thinking"]
            rendered = ninfer(args.ninfer, "render", "--model", args.model, "--messages", f.name,
                              *flags)
            os.unlink(f.name)
            item["template_equal"] = rendered == case["text"]
            ok_all &= item["template_equal"]
        ok_all &= item["equal"]
        results.append(item)
    report["greedy"] = results
    return ok_all


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--val", required=True, help="held-out text (val.txt of build_corpus.py)")
    ap.add_argument("--eval", help="eval_mtp.py's JSON (the PyTorch perplexity)")
    ap.add_argument("--ninfer", default=os.path.join(ROOT, "build", "apps", "ninfer", "ninfer"))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--chunks", type=int, default=0, help="score only the first N windows")
    ap.add_argument("--ppl-rel", type=float, default=0.01)
    ap.add_argument("--recompute", action="store_true", help="PyTorch perplexity here (CPU)")
    ap.add_argument("--report", help="write the report JSON here too")
    args = ap.parse_args()
    if not args.eval and not args.recompute:
        ap.error("give --eval EVAL.json or --recompute")
    with open(args.val, encoding="utf-8") as f:
        text = f.read()
    report = {}
    ok = check_tokenize(args, text, report)
    ok &= check_perplexity(args, report)
    ok &= check_greedy(args, report)
    report["ok"] = bool(ok)
    print(json.dumps(report, indent=1))
    if args.report:
        with open(args.report, "w") as f:
            json.dump(report, f, indent=1)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
