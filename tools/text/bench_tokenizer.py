#!/usr/bin/env python3
"""Encode throughput of ninfer's tokenizer against HF `tokenizers`, measured in one run on the
same corpus (tests/text/corpus.py) and the same real Qwen3.5/3.6 tokenizer.json, one thread each,
interleaved A/B rounds. Tokenizer loading is not timed.

usage: venv/bin/python tools/text/bench_tokenizer.py NINFER_BIN [MB] [ROUNDS]
"""
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "text"))
import corpus  # noqa: E402


def main():
    ninfer = sys.argv[1]
    mb = float(sys.argv[2]) if len(sys.argv) > 2 else 4
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    os.environ["RAYON_NUM_THREADS"] = "1"
    from tokenizers import Tokenizer
    work = os.path.join(tempfile.gettempdir(), "ninfer_bench_tokenizer")
    if not os.path.exists(os.path.join(work, "tokenizer.json")):
        subprocess.run([sys.executable, os.path.join(ROOT, "tools", "text",
                                                     "make_qwen_tokenizer.py"), work], check=True)
    file = os.path.join(work, "tokenizer.json")
    items = corpus.items(int(mb * 1e6))
    size = sum(len(s.encode()) for s in items)
    data = "".join(json.dumps(s, ensure_ascii=False) + "\n" for s in items).encode()
    hf = Tokenizer.from_file(file)
    ours, theirs = [], []
    for _ in range(rounds):
        out = subprocess.run([ninfer, "tokenize", "--tokenizer", file, "--jsonl", "--bench", "1"],
                             input=data, capture_output=True, check=True)
        ours.append(json.loads(out.stdout)["mb_per_s"])
        t0 = time.perf_counter()
        for s in items:
            hf.encode(s, add_special_tokens=False)
        theirs.append(size / 1e6 / (time.perf_counter() - t0))
    print(json.dumps({"schema": 1, "corpus_items": len(items), "corpus_bytes": size,
                      "ninfer_mb_per_s": max(ours), "hf_tokenizers_mb_per_s": max(theirs),
                      "speedup": max(ours) / max(theirs)}))


if __name__ == "__main__":
    main()
