#!/usr/bin/env python3
"""Writes a DFlash proposal-head shortlist (`--draft-shortlist FILE`): a JSON array of N distinct
token ids, the rows of the target's lm_head the drafter proposes from (upstream's "optimized"
head: 131,072 of the 35B's 248,320 rows). Output never depends on the shortlist; a token outside
it is simply never drafted, so the list should hold what the target writes most.

The ids, in this order, until N are taken:
  1. every added token of the tokenizer (chat markup, <think>, tool-call tags: the structure a
     chat answer is made of), unless --no-added;
  2. the ids of TEXT files (the target's own outputs are best: a log of served answers, say),
     most frequent first, ties by lower id;
  3. the remaining ids from 0 up (byte-level BPE numbers merges in order, which roughly follows
     frequency in the tokenizer's training text).

    python3 tools/dflash/make_shortlist.py --tokenizer MODEL/tokenizer.json -n 131072 \
        --text answers.txt --out shortlist.json
"""
import argparse
import collections
import json
import sys


def shortlist(vocab, n, added, texts_ids):
    """The shortlist's ids: added ids, then ids by count, then ids from 0 up; n of them."""
    if not 1 <= n <= vocab:
        raise ValueError(f"-n {n} must be in [1, {vocab}]")
    chosen, seen = [], set()

    def take(i):
        if len(chosen) < n and 0 <= i < vocab and i not in seen:
            seen.add(i)
            chosen.append(i)

    for i in sorted(added):
        take(i)
    counts = collections.Counter(texts_ids)
    for i, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        take(i)
    for i in range(vocab):
        if len(chosen) == n:
            break
        take(i)
    return chosen


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", required=True, help="the target's tokenizer.json")
    ap.add_argument("-n", type=int, required=True, help="ids in the shortlist")
    ap.add_argument("--vocab", type=int, default=0,
                    help="the head's rows (default: the tokenizer's size); ids past it are left out")
    ap.add_argument("--text", action="append", default=[], help="a UTF-8 text file (repeatable)")
    ap.add_argument("--no-added", action="store_true", help="do not force the added tokens in")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(args.tokenizer)
    vocab = args.vocab or tok.get_vocab_size(with_added_tokens=True)
    added = [] if args.no_added else [t["id"] for t in
                                      json.load(open(args.tokenizer, encoding="utf-8"))["added_tokens"]]
    ids = []
    for path in args.text:
        with open(path, encoding="utf-8") as f:
            ids += tok.encode(f.read(), add_special_tokens=False).ids
    try:
        chosen = shortlist(vocab, args.n, added, ids)
    except ValueError as e:
        sys.exit(f"make_shortlist: {e}")
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(chosen, f)
    print(f"make_shortlist: {len(chosen)} of {vocab} ids ({len(set(ids))} distinct in the text) "
          f"-> {args.out}")


if __name__ == "__main__":
    main()
