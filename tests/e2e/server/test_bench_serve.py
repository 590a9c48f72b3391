#!/usr/bin/env python3
"""bench/serve/bench_serve.py against a real `ninfer serve` on the tiny chat fixture (CPU):
tiny random, decode and multi-turn runs, a concurrency sweep and a run whose every request
fails. Checks the JSON report: every request succeeded, token counts are exact (ignore_eos),
percentiles are ordered, throughputs are positive, the prefix-cache hit rates are present and in
[0, 1] (not that they are above 0), failures are counted without ending the run, and /metrics
saw exactly the requests the report says were sent. Also that the workload is seeded."""
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from server_util import KEY, NINFER, ROOT, Server  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "bench", "serve"))
import decode_roofline  # noqa: E402

BENCH = os.path.join(ROOT, "bench", "serve", "bench_serve.py")
VOCAB = 296  # the fixture's first added (special) token id; its model has 320 rows
SERVER = None


def setUpModule():
    global SERVER
    SERVER = Server("--max-context", "2048")


def tearDownModule():
    assert SERVER.stop() == 0


def bench(*extra, key=KEY, quiet=True):
    """Runs bench_serve.py; returns (exit code, JSON document or None, stdout, stderr)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "bench.json")
        args = [sys.executable, BENCH, "--base-url", SERVER.url, "--vocab-limit", str(VOCAB),
                "-o", out, *extra]
        if key:
            args += ["--api-key", key]
        if quiet:
            args.append("--quiet")
        p = subprocess.run(args, capture_output=True, text=True, timeout=240)
        doc = None
        if os.path.exists(out):
            with open(out) as f:
                doc = json.load(f)
        return p.returncode, doc, p.stdout, p.stderr


def completions_sent():
    """ninfer_requests_total of /v1/completions, all statuses."""
    status, _, text = SERVER.request("GET", "/metrics")
    assert status == 200, text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith('ninfer_requests_total{endpoint="/v1/completions"'))


class BenchServe(unittest.TestCase):
    def check_doc(self, doc, workload):
        self.assertEqual(doc["schema_version"], 1)
        self.assertEqual(doc["tool"], "bench_serve")
        self.assertEqual(doc["workload"], workload)
        self.assertEqual(doc["server"]["model"], "tiny_chat")
        self.assertEqual(doc["config"]["workload"], workload)
        self.assertEqual(doc["config"]["seed"], 7)

    def check_run(self, run, requests, output_tokens, input_tokens=None, multiturn=False):
        self.assertEqual((run["num_requests"], run["completed"], run["failed"], run["skipped"]),
                         (requests, requests, 0, 0), run)
        self.assertEqual(run["errors"], {})
        self.assertEqual(run["total_output_tokens"], output_tokens)
        self.assertEqual(run["output_len_mismatches"], 0)
        if input_tokens is not None:
            self.assertEqual(run["total_input_tokens"], input_tokens)
        self.assertGreater(run["total_input_tokens"], 0)
        self.assertGreater(run["duration"], 0)
        for key in ("request_throughput", "output_throughput", "total_token_throughput"):
            self.assertGreater(run[key], 0, key)
        self.assertAlmostEqual(run["total_token_throughput"],
                               (run["total_input_tokens"] + output_tokens) / run["duration"])
        for m in ("ttft", "tpot", "itl", "e2el"):
            values = [run[f"{s}_{m}_ms"] for s in ("p50", "p90", "p99", "max")]
            self.assertTrue(all(v is not None and v >= 0 for v in values), (m, values))
            self.assertEqual(values, sorted(values), m)
            self.assertEqual(run[f"median_{m}_ms"], run[f"p50_{m}_ms"])
            self.assertGreater(run[f"mean_{m}_ms"], 0, m)
            self.assertLessEqual(run[f"mean_{m}_ms"], run[f"max_{m}_ms"], m)
        self.assertEqual(run["num_ttft_samples"] + run["requests_without_content"], requests)
        self.assertLessEqual(run["p99_ttft_ms"], run["max_e2el_ms"])
        rate = run["prefix_cache_hit_rate"]
        self.assertIsNotNone(rate)
        self.assertTrue(0 <= rate <= 1, rate)
        self.assertLessEqual(run["cached_tokens"], run["total_input_tokens"])
        later = run["prefix_cache_hit_rate_after_first_turn"]
        if multiturn:
            self.assertIsNotNone(later)
            self.assertTrue(0 <= later <= 1, later)
            self.assertGreater(run["prompt_tokens_after_first_turn"], 0)
        else:
            self.assertIsNone(later)
            self.assertEqual(run["prompt_tokens_after_first_turn"], 0)

    def test_random_sweep(self):
        before = completions_sent()
        rc, doc, _, err = bench("--workload", "random", "--num-prompts", "12", "--input-len",
                                "40", "--output-len", "8", "--concurrency", "1,4", "--seed", "7",
                                "--warmup", "2")
        self.assertEqual(rc, 0, err)
        self.check_doc(doc, "random")
        self.assertEqual(doc["warmup"]["completed"], 2, doc["warmup"])
        self.assertEqual([r["concurrency"] for r in doc["runs"]], [1, 4])
        for run in doc["runs"]:
            self.check_run(run, 12, 12 * 8, input_tokens=12 * 40)
        # The table on stderr, one per run.
        self.assertEqual(err.count("Serving Benchmark Result"), 2, err)
        for label in ("Successful requests:", "Benchmark duration (s):", "Total input tokens:",
                      "Total generated tokens:", "Request throughput (req/s):",
                      "Output token throughput (tok/s):", "Total Token throughput (tok/s):",
                      "Mean TTFT (ms):", "Median TTFT (ms):", "P99 TTFT (ms):", "Mean ITL (ms):",
                      "Median ITL (ms):", "P99 ITL (ms):", "Prefix cache hit rate:"):
            self.assertIn(label, err)
        end = time.time() + 10  # the counter settles just after the last response
        while completions_sent() < before + 26 and time.time() < end:
            time.sleep(0.05)
        self.assertEqual(completions_sent(), before + 26)

    def test_decode_defaults_and_stdout(self):
        rc, doc, out, err = bench("--workload", "decode", "--num-prompts", "3", "--input-len", "6",
                                  "--output-len", "24", "--concurrency", "2", "--seed", "7",
                                  quiet=False)
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out), doc)
        self.check_doc(doc, "decode")
        self.check_run(doc["runs"][0], 3, 3 * 24, input_tokens=3 * 6)

    def test_multiturn(self):
        rc, doc, _, err = bench("--workload", "multiturn", "--num-conversations", "3", "--turns",
                                "3", "--input-len", "10", "--output-len", "8", "--concurrency",
                                "2", "--seed", "7", "--system-prompt-words", "5")
        self.assertEqual(rc, 0, err)
        self.check_doc(doc, "multiturn")
        run = doc["runs"][0]
        self.check_run(run, 9, 9 * 8, multiturn=True)
        # Later turns carry the history: their prompts are longer than the first turns'.
        first = run["total_input_tokens"] - run["prompt_tokens_after_first_turn"]
        self.assertGreater(run["prompt_tokens_after_first_turn"] / 6, first / 3)

    def test_failures_are_counted(self):
        rc, doc, _, err = bench("--model", "tiny_chat", "--num-prompts", "4", "--input-len", "5",
                                "--output-len", "2", "--concurrency", "2", "--seed", "7",
                                key="wrong-key")
        self.assertEqual(rc, 0, err)
        run = doc["runs"][0]
        self.assertEqual((run["completed"], run["failed"]), (0, 4), run)
        self.assertEqual(run["errors"], {"HTTP 401": 4})
        self.assertEqual(run["total_output_tokens"], 0)
        self.assertIsNone(run["mean_ttft_ms"])
        self.assertIsNone(run["prefix_cache_hit_rate"])
        self.assertIn("Failed requests:", err)
        # Without --model it needs /v1/models: a clear message and exit status 2.
        rc, doc, _, err = bench("--num-prompts", "1", key="wrong-key")
        self.assertEqual(rc, 2)
        self.assertIn("cannot list the server's models", err)

    def test_workload_is_seeded(self):
        sys.path.insert(0, os.path.dirname(BENCH))
        import bench_serve

        def make(argv, tag):
            args = bench_serve.parse_args(argv)
            return bench_serve.make_workload(args, random.Random(tag))

        argv = ["--num-prompts", "5", "--input-len", "16", "--vocab-limit", str(VOCAB)]
        a, b = make(argv, "7/random/c1"), make(argv, "7/random/c1")
        self.assertEqual(a, b)
        self.assertNotEqual(a, make(argv, "7/random/c4"))
        self.assertEqual([len(p) for p in a], [16] * 5)
        self.assertTrue(all(0 <= t < VOCAB for p in a for t in p))
        argv = ["--workload", "multiturn", "--num-conversations", "2", "--turns", "3"]
        system, users, images = make(argv, "x")
        self.assertEqual(system, "")
        self.assertEqual(images, [])
        self.assertEqual([len(u) for u in users], [3, 3])
        self.assertEqual(len(users[0][0].split()), 128)
        self.assertEqual((system, users, images), make(argv, "x"))
        # --image-size: one distinct seeded PNG per conversation
        _, _, images = make(argv + ["--image-size", "8x6"], "x")
        self.assertEqual(len(images), 2)
        self.assertNotEqual(images[0], images[1])
        self.assertTrue(images[0].startswith("data:image/png;base64,"))
        self.assertEqual(images, make(argv + ["--image-size", "8x6"], "x")[2])


class DecodeRoofline(unittest.TestCase):
    """bench/serve/decode_roofline.py, through `ninfer info --decode-batch` (model::decode_step_bytes,
    also `ninfer bench`'s roofline): the parts by hand against `ninfer info`'s own per-token and
    per-sequence figures, and the 35B's decode-heavy rooflines that bench/NOTES.md derived by hand
    on 2026-12-01 (3,920 tok/s at 64 and 10,360 at 256, 4.2 TB/s; theirs rounded the parts)."""

    CFG = os.path.join(ROOT, "configs", "qwen3.6-35b-a3b.json")

    def test_parts_by_hand(self):
        out = subprocess.run([NINFER, "info", "--config", self.CFG, "--device", "cpu", "--json"],
                             check=True, capture_output=True, text=True).stdout
        info = json.loads(out)
        cfg, mem = info["config"], info["memory_bytes"]
        E, k, layers = cfg["moe"]["experts"], cfg["moe"]["top_k"], cfg["layers"]
        expert = 3.0 * cfg["hidden_size"] * cfg["moe"]["expert_intermediate"] * 2  # bf16
        for batch, state in ((1, "f32"), (5, "bf16")):
            s = decode_roofline.step(NINFER, self.CFG, batch, 100, False, "int8", state)["bytes_by_part"]
            self.assertAlmostEqual(s["weights_every_token"],
                                   mem["weights_read_per_token_bf16"] - layers * k * expert,
                                   delta=1e3)
            self.assertAlmostEqual(s["routed_experts"],
                                   layers * E * (1 - (1 - k / E) ** batch) * expert, delta=1e3)
            per_seq = mem["gdn_state_per_sequence" + ("_bf16" if state == "bf16" else "")]
            self.assertEqual(s["gdn_state"], 2 * batch * per_seq)
            self.assertEqual(s["kv"], batch * 100 * mem["kv_per_token_int8"])
        # One sequence reads one token's weights: the top-k experts are the routed part.
        one = decode_roofline.step(NINFER, self.CFG, 1, 0, False)["bytes_by_part"]
        self.assertAlmostEqual(one["weights_every_token"] + one["routed_experts"],
                               mem["weights_read_per_token_bf16"], delta=1e3)

    def test_35b_decode_heavy(self):
        at64 = decode_roofline.roofline(NINFER, self.CFG, 64, 640, 4.2e12, False)["roofline_tok_s"]
        at256 = decode_roofline.roofline(NINFER, self.CFG, 256, 640, 4.2e12, False)["roofline_tok_s"]
        self.assertAlmostEqual(at64, 3920, delta=40)
        self.assertAlmostEqual(at256, 10360, delta=110)


if __name__ == "__main__":
    unittest.main(verbosity=2)
