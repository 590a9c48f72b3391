#!/usr/bin/env python3
"""CLI checks with the real binary (stdlib only): `ninfer run --json` reproduces the HF reference
of every fixture (ids identical, top-5 logprobs within tolerance, any --prefill-chunk), and
`ninfer info --config` reports the published parameter counts of the real configs."""
import json
import os
import subprocess
import sys
import unittest

NINFER = os.environ["NINFER_BIN"]
ROOT = os.environ["NINFER_SOURCE_DIR"]
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
LOGPROB_ABS = 2e-4  # kLogprobVsHfAbs in tests/common/tolerance.h


def run_json(model, prompt, new, *extra):
    out = subprocess.run([NINFER, "run", "--model", model, "--prompt-ids",
                          ",".join(map(str, prompt)), "--max-new", str(new), "--greedy",
                          "--json", "--top-logprobs", "5", *extra],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)  # stdout must be exactly one JSON object


class RunJson(unittest.TestCase):
    def test_fixtures_match_hf(self):
        for name in sorted(os.listdir(FIXTURES)):
            ref = json.load(open(os.path.join(FIXTURES, name, "reference.json")))
            for case in ref["cases"]:
                for chunk in ("512", "5"):
                    with self.subTest(fixture=name, prompt=len(case["prompt"]), chunk=chunk):
                        got = run_json(os.path.join(FIXTURES, name), case["prompt"],
                                       len(case["steps"]), "--prefill-chunk", chunk)
                        self.assertEqual(got["prompt_tokens"], len(case["prompt"]))
                        self.assertEqual([t["id"] for t in got["tokens"]], case["greedy"])
                        for t, s in zip(got["tokens"], case["steps"]):
                            self.assertAlmostEqual(t["logprob"], s["logprob"], delta=LOGPROB_ABS)
                            ours = {a["id"]: a["logprob"] for a in t["top_logprobs"]}
                            for tid, lp in s["top"]:
                                if tid in ours:
                                    self.assertAlmostEqual(ours[tid], lp, delta=LOGPROB_ABS)
                                else:  # only a near-tie at rank 5 may swap
                                    self.assertAlmostEqual(lp, s["top"][-1][1], delta=LOGPROB_ABS)

    def test_bad_input_is_a_clear_error(self):
        model = os.path.join(FIXTURES, sorted(os.listdir(FIXTURES))[0])
        for ids in ("1,x,3", "", "99999999"):
            out = subprocess.run([NINFER, "run", "--model", model, "--prompt-ids", ids],
                                 capture_output=True, text=True)
            self.assertEqual(out.returncode, 1, out.stderr)
            self.assertIn("error", out.stderr)
        out = subprocess.run([NINFER, "run", "--model", "/nonexistent", "--prompt-ids", "1"],
                             capture_output=True, text=True)
        self.assertEqual(out.returncode, 1)
        self.assertIn("/nonexistent", out.stderr)


class Info(unittest.TestCase):
    def info(self, config):
        out = subprocess.run([NINFER, "info", "--config", os.path.join(ROOT, "configs", config),
                              "--json"], capture_output=True, text=True, check=True)
        return json.loads(out.stdout)

    def test_qwen36_35b_a3b_counts(self):
        p = self.info("qwen3.6-35b-a3b.json")["parameters"]
        hidden = 2048
        blocks = p["text_total"] - p["embedding"] - p["lm_head"] - hidden  # minus final norm
        self.assertEqual(blocks, 33_643_489_920)  # the 40 blocks of the real checkpoint header
        self.assertEqual(p["mtp"], 844_640_768)

    def test_qwen36_27b_has_dense_mlp(self):
        j = self.info("qwen3.6-27b.json")
        self.assertEqual(j["config"]["mlp_intermediate"], 17408)
        p = j["parameters"]
        # Dense: every parameter is read per token except the embedding (one row of it).
        self.assertEqual(p["active_per_token"], p["text_total"] - p["embedding"] + 5120)


if __name__ == "__main__":
    unittest.main(verbosity=2)
