#!/usr/bin/env python3
"""The DFlash proposal-head shortlist end to end: tools/dflash/make_shortlist.py's order (added
tokens, then ids by count in the text, then ids from 0 up) and its file; `ninfer run --spec
dflash2 --draft-shortlist` on the demo model gives plain decoding's greedy ids with the file, a
count or the full head, the shortlist still lands drafts, and a bad shortlist is a clear error
at startup. Run with the venv of tools/setup_python.sh (HF tokenizers)."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

NINFER = os.environ["NINFER_BIN"]
ROOT = os.environ["NINFER_SOURCE_DIR"]
DEMO = os.path.join(ROOT, "models", "ninfer-demo")
TOOL = os.path.join(ROOT, "tools", "dflash", "make_shortlist.py")
sys.path.insert(0, os.path.dirname(TOOL))
import make_shortlist  # noqa: E402

PROMPT = "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"


def prompt_ids():
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(DEMO, "tokenizer.json"))
    return ",".join(map(str, tok.encode(PROMPT, add_special_tokens=False).ids))


PROMPT_IDS = prompt_ids()


def make_list(d, n, repeats):
    """make_shortlist.py's list of n ids from PROMPT repeated, in directory d; its path."""
    text = os.path.join(d, "text.txt")
    with open(text, "w") as f:
        f.write(PROMPT * repeats)
    out = os.path.join(d, "sl.json")
    subprocess.run([sys.executable, TOOL, "--tokenizer", os.path.join(DEMO, "tokenizer.json"),
                    "-n", str(n), "--text", text, "--out", out], check=True, capture_output=True)
    return out


def run(*extra):
    return subprocess.run([NINFER, "run", "--model", DEMO, "--prompt-ids", PROMPT_IDS, "--max-new",
                           "48", "--greedy", "--json", *extra], capture_output=True, text=True)


class Order(unittest.TestCase):
    def test_added_then_counted_then_lowest(self):
        got = make_shortlist.shortlist(vocab=12, n=8, added=[11, 9], texts_ids=[5, 7, 7, 5, 5, 3, 9])
        # added (sorted), then 5 (3x), 7 (2x), 3 (1x; 9 already in), then 0, 1, 2
        self.assertEqual(got, [9, 11, 5, 7, 3, 0, 1, 2])

    def test_bounds(self):
        self.assertEqual(make_shortlist.shortlist(4, 4, [], []), [0, 1, 2, 3])
        self.assertEqual(make_shortlist.shortlist(4, 2, [3], [2, 2]), [3, 2])
        self.assertEqual(make_shortlist.shortlist(4, 2, [], [9, 9]), [0, 1])  # 9: past the head
        for n in (0, 5):
            with self.assertRaises(ValueError):
                make_shortlist.shortlist(4, n, [], [])


class Tool(unittest.TestCase):
    def test_writes_distinct_ids_with_added_tokens(self):
        with tempfile.TemporaryDirectory() as d:
            out = make_list(d, 1000, 20)
            ids = json.load(open(out))
            self.assertEqual(len(ids), 1000)
            self.assertEqual(len(set(ids)), 1000)
            added = [t["id"] for t in json.load(open(os.path.join(DEMO, "tokenizer.json")))["added_tokens"]]
            self.assertEqual(sorted(ids[:len(added)]), sorted(added))
            bad = subprocess.run([sys.executable, TOOL, "--tokenizer",
                                  os.path.join(DEMO, "tokenizer.json"), "-n", "0", "--out", out],
                                 capture_output=True, text=True)
            self.assertNotEqual(bad.returncode, 0)
            self.assertIn("-n 0 must be in", bad.stderr)


class Run(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        plain = run()
        assert plain.returncode == 0, plain.stderr
        cls.plain = [t["id"] for t in json.loads(plain.stdout)["tokens"]]

    def test_greedy_output_is_unchanged_and_drafts_land(self):
        with tempfile.TemporaryDirectory() as d:
            sl = make_list(d, 4096, 4)
            for shortlist in ("", "4096", sl):
                with self.subTest(shortlist=shortlist):
                    extra = ["--draft-shortlist", shortlist] if shortlist else []
                    out = run("--spec", "dflash2", "--draft-tokens", "7", *extra)
                    self.assertEqual(out.returncode, 0, out.stderr)
                    got = json.loads(out.stdout)
                    self.assertEqual([t["id"] for t in got["tokens"]], self.plain)
                    self.assertGreater(got["speculative"]["accepted"], 0)

    def test_bad_shortlist_is_a_clear_error(self):
        with tempfile.TemporaryDirectory() as d:
            broken = os.path.join(d, "broken.json")
            with open(broken, "w") as f:
                f.write("[1, 2")
            for shortlist, message in (("0", "a count must be in [1, "),
                                       ("99999999", "a count must be in [1, "),
                                       (broken, "is not JSON"),
                                       (os.path.join(d, "missing.json"), "cannot open")):
                with self.subTest(shortlist=shortlist):
                    out = run("--spec", "dflash2", "--draft-shortlist", shortlist)
                    self.assertEqual(out.returncode, 1, out.stderr)
                    self.assertIn("--draft-shortlist", out.stderr)
                    self.assertIn(message, out.stderr)
        out = run("--draft-shortlist", "100")
        self.assertEqual(out.returncode, 1)
        self.assertIn("--draft-shortlist needs --spec mtp, dflash or dflash2", out.stderr)
        # The MTP chain takes the first N ids only (a count, or exactly [0, N) listed in order).
        with tempfile.TemporaryDirectory() as d:
            swapped = os.path.join(d, "swapped.json")
            with open(swapped, "w") as f:
                json.dump([1, 0] + list(range(2, 100)), f)
            out = run("--spec", "mtp", "--draft-shortlist", swapped)
            self.assertEqual(out.returncode, 1)
            self.assertIn("--spec mtp takes a count N", out.stderr)


if __name__ == "__main__":
    unittest.main()
