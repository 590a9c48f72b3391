#!/usr/bin/env python3
"""CLI checks with the real binary (stdlib only): `ninfer run --json` reproduces the HF reference
of every fixture (ids identical, top-5 logprobs within tolerance, any --prefill-chunk), the
default model is found through NINFER_MODEL (or reported as missing), `ninfer perplexity` scores
its windows independently of the prefill chunk, `ninfer info --config` reports the published
parameter counts of the real configs (and `info` alone the default model), `chat` lists its
commands, and common user errors name the flag at fault rather than an internal function."""
import contextlib
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import unittest
import urllib.error
import urllib.request

NINFER = os.environ["NINFER_BIN"]
ROOT = os.environ["NINFER_SOURCE_DIR"]
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
LOGPROB_ABS = 2e-4  # kLogprobVsHfAbs in tests/common/tolerance.h


DEMO = os.path.join(ROOT, "models", "ninfer-demo")


@contextlib.contextmanager
def demo_server(*flags, env=None):
    """`ninfer serve` on the demo model (any free port, these flags): yields its stderr lines as
    they come; the process is killed on exit."""
    proc = subprocess.Popen([NINFER, "serve", "--model", DEMO, "--port", "0", *flags],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
    try:
        yield proc.stderr
    finally:
        proc.kill()
        proc.wait()
        proc.stderr.close()


def cache_snapshot(cache, repo_id, source, snapshot, ref):
    """A Hugging Face cache entry of `repo_id` as huggingface-cli leaves it: each file of `source`
    a blob that snapshots/<snapshot>/ links to (relatively), and refs/main naming it when `ref`."""
    org, name = repo_id.split("/")
    repo = os.path.join(cache, f"models--{org}--{name}")
    snap = os.path.join(repo, "snapshots", snapshot)
    os.makedirs(os.path.join(repo, "blobs"))
    os.makedirs(snap)
    for i, file in enumerate(sorted(os.listdir(source))):
        os.symlink(os.path.join(source, file), os.path.join(repo, "blobs", f"blob{i}"))
        os.symlink(os.path.join("..", "..", "blobs", f"blob{i}"), os.path.join(snap, file))
    if ref:
        os.makedirs(os.path.join(repo, "refs"))
        with open(os.path.join(repo, "refs", "main"), "w") as f:
            f.write(snapshot)


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

    def test_logit_bias(self):
        """--logit-bias ID=BIAS (repeatable): +100 forces the token, a ban moves the greedy pick
        off it, and a malformed or out-of-range pair is an error naming the flag."""
        model = os.path.join(FIXTURES, sorted(os.listdir(FIXTURES))[0])
        base = [NINFER, "run", "--model", model, "--prompt-ids", "1,2,3", "--max-new", "5",
                "--greedy", "--json"]

        def ids(*extra):
            out = subprocess.run(base + list(extra), capture_output=True, text=True)
            self.assertEqual(out.returncode, 0, out.stderr)
            return [t["id"] for t in json.loads(out.stdout)["tokens"]]

        plain = ids()
        self.assertEqual(ids("--logit-bias", "17=100"), [17] * 5)
        banned = ids("--logit-bias", f"{plain[0]}=-100", "--logit-bias", "17=0.5")
        self.assertNotEqual(banned[0], plain[0])
        for bad in ("17", "x=1", "17=101", "-1=2", "17=nan"):
            out = subprocess.run(base + ["--logit-bias", bad], capture_output=True, text=True)
            self.assertNotEqual(out.returncode, 0, bad)
            self.assertIn("--logit-bias", out.stderr, bad)

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
        self.assertIn("--model /nonexistent: no such directory", out.stderr)
        out = subprocess.run([NINFER, "run", "--model", ROOT, "--prompt-ids", "1"],
                             capture_output=True, text=True)
        self.assertEqual(out.returncode, 1)
        self.assertIn("not a model directory (no config.json", out.stderr)


class UserErrors(unittest.TestCase):
    """The first error a user sees names the flag and the problem, not an internal call."""
    MODEL = os.path.join(ROOT, "tests", "fixtures_text", "tiny_chat")
    INTERNAL = ("create_stream", "bind_device", "allocator", "parse_device")

    def run_cli(self, *args):
        return subprocess.run([NINFER, "run", "--model", self.MODEL, "--prompt-ids", "1",
                               "--max-new", "1", *args], capture_output=True, text=True)

    def test_unknown_device(self):
        for device in ("gpu", "cuda:x", "cuda:"):
            with self.subTest(device=device):
                out = self.run_cli("--device", device)
                self.assertNotEqual(out.returncode, 0)
                self.assertIn("--device", out.stderr)
                self.assertIn(device, out.stderr)
                for name in self.INTERNAL:
                    self.assertNotIn(name, out.stderr)

    def test_files_and_stdin_name_the_flag(self):
        out = subprocess.run([NINFER, "tokenize", "--model", self.MODEL, "--detokenize"],
                             input="[1,", capture_output=True, text=True)
        self.assertEqual(out.returncode, 1)
        self.assertIn("--detokenize: stdin is not JSON", out.stderr)
        self.assertNotIn("json.exception", out.stderr)
        out = subprocess.run([NINFER, "perplexity", "--model", self.MODEL, "--file",
                              "/nonexistent.txt"], capture_output=True, text=True)
        self.assertEqual(out.returncode, 1)
        self.assertIn("--file /nonexistent.txt: cannot open", out.stderr)
        out = subprocess.run([NINFER, "chat", "--model", self.MODEL, "--tools", "/nonexistent"],
                             input="", capture_output=True, text=True)
        self.assertEqual(out.returncode, 1)
        self.assertIn("--tools /nonexistent: cannot open", out.stderr)

    def test_random_weights_run(self):
        """`run --random-weights --config` generates from ids at a config's shapes, the same ids
        for the same seed, and refuses the combinations it cannot run, naming the flag."""
        config = os.path.join(self.MODEL, "config.json")
        args = [NINFER, "run", "--random-weights", "--config", config, "--prompt-ids", "1,2,3",
                "--max-new", "4", "--greedy", "--json"]
        first = subprocess.run(args, capture_output=True, text=True, check=True)
        again = subprocess.run(args, capture_output=True, text=True, check=True)
        ids = [t["id"] for t in json.loads(first.stdout)["tokens"]]
        self.assertEqual(len(ids), 4)
        self.assertEqual(ids, [t["id"] for t in json.loads(again.stdout)["tokens"]])
        other = subprocess.run(args + ["--weight-seed", "7"], capture_output=True, text=True, check=True)
        self.assertNotEqual(json.loads(other.stdout)["tokens"], json.loads(first.stdout)["tokens"])
        for extra, flag in ((["--random-weights", "--prompt-ids", "1"], "--config"),
                            (["--random-weights", "--config", config, "--prompt", "hi"],
                             "--prompt-ids"),
                            (["--random-weights", "--config", config, "--model", self.MODEL,
                              "--prompt-ids", "1"], "--model"),
                            (["--config", config, "--prompt-ids", "1"], "--random-weights")):
            with self.subTest(extra=extra):
                out = subprocess.run([NINFER, "run", *extra], capture_output=True, text=True)
                self.assertEqual(out.returncode, 1)
                self.assertIn(flag, out.stderr)

    def test_cuda_on_a_cpu_only_build(self):
        out = self.run_cli("--device", "cuda")
        if "no CUDA backend" not in out.stderr:
            self.skipTest("this build has the CUDA backend")
        self.assertNotEqual(out.returncode, 0)
        first = out.stderr.splitlines()[0]
        self.assertTrue(first.startswith("--device: this build of ninfer has no CUDA backend"),
                        out.stderr)
        self.assertIn("-DNINFER_CUDA=ON", first)
        for name in self.INTERNAL:
            self.assertNotIn(name, out.stderr)


class DefaultModel(unittest.TestCase):
    """Without --model, run uses $NINFER_MODEL, else models/ninfer-demo (README)."""

    def run_cli(self, env_model, *args):
        env = dict(os.environ)
        env.pop("NINFER_MODEL", None)
        if env_model is not None:
            env["NINFER_MODEL"] = env_model
        return subprocess.run([NINFER, *args], capture_output=True, text=True, env=env)

    def test_env_override_and_errors(self):
        model = os.path.join(FIXTURES, sorted(os.listdir(FIXTURES))[0])
        prompt = json.load(open(os.path.join(model, "reference.json")))["cases"][0]["prompt"]
        args = ["run", "--prompt-ids", ",".join(map(str, prompt)), "--max-new", "3", "--greedy",
                "--json", "--top-logprobs", "5"]
        via_env = self.run_cli(model, *args)
        self.assertEqual(via_env.returncode, 0, via_env.stderr)
        self.assertEqual(json.loads(via_env.stdout), run_json(model, prompt, 3))
        bad = self.run_cli("/nonexistent", *args)
        self.assertEqual(bad.returncode, 1)
        self.assertIn("NINFER_MODEL=/nonexistent", bad.stderr)
        default = self.run_cli(None, *args)
        if os.path.isfile(os.path.join(ROOT, "models", "ninfer-demo", "config.json")):
            self.assertEqual(default.returncode, 0, default.stderr)
        else:
            self.assertEqual(default.returncode, 1)
            self.assertIn("looked in", default.stderr)

    def test_info_without_model(self):
        """`info` alone describes the default model, as `run` uses it."""
        model = os.path.join(FIXTURES, sorted(os.listdir(FIXTURES))[0])
        via_env = self.run_cli(model, "info", "--json")
        self.assertEqual(via_env.returncode, 0, via_env.stderr)
        given = self.run_cli(None, "info", "--json", "--model", model)
        self.assertEqual(given.returncode, 0, given.stderr)
        self.assertEqual(json.loads(via_env.stdout), json.loads(given.stdout))
        demo = DEMO
        if os.path.isfile(os.path.join(demo, "config.json")):
            default = self.run_cli(None, "info", "--json")
            self.assertEqual(default.returncode, 0, default.stderr)
            self.assertEqual(json.loads(default.stdout),
                             json.loads(self.run_cli(None, "info", "--json", "--model",
                                                     demo).stdout))
        both = self.run_cli(None, "info", "--model", model, "--config", "x.json")
        self.assertEqual(both.returncode, 1)
        self.assertIn("not both", both.stderr)


class PeerSpellings(unittest.TestCase):
    """vLLM's and SGLang's names of the same engine flags act as ninfer's own."""

    def test_run_aliases(self):
        fixture = os.path.join(FIXTURES, sorted(os.listdir(FIXTURES))[0])
        prompt = json.load(open(os.path.join(fixture, "reference.json")))["cases"][0]["prompt"]
        want = run_json(fixture, prompt, 4, "--max-context", "96", "--kv-dtype", "int8")
        for extra in (["--max-model-len", "96", "--kv-cache-dtype", "int8"],
                      ["--context-length", "96", "--kv-cache-dtype", "int8"]):
            with self.subTest(flags=extra):
                self.assertEqual(run_json(fixture, prompt, 4, *extra), want)
        # vLLM's value spellings: auto is the activation dtype, fp8_e4m3 is fp8.
        self.assertEqual(run_json(fixture, prompt, 4, "--kv-cache-dtype", "auto"),
                         run_json(fixture, prompt, 4))
        self.assertEqual(run_json(fixture, prompt, 4, "--kv-cache-dtype", "fp8_e4m3"),
                         run_json(fixture, prompt, 4, "--kv-dtype", "fp8"))
        bad = subprocess.run([NINFER, "run", "--model", fixture, "--prompt-ids", "1",
                              "--kv-cache-dtype", "fp8_e5m2"], capture_output=True, text=True)
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("fp8_e5m2", bad.stderr)

    def serve_banner(self, *flags):
        """The engine line `serve` prints at start-up with these flags."""
        with demo_server(*flags) as lines:
            for line in lines:
                if "engine:" in line:
                    return line
        self.fail(f"serve {flags} printed no engine line")

    def test_serve_aliases(self):
        native = self.serve_banner("--max-sequences", "3", "--max-batch-tokens", "96",
                                   "--no-prefix-cache")
        self.assertIn("3 sequence slots", native)
        self.assertIn("prefix cache off", native)
        for flags in (["--max-num-seqs", "3", "--max-num-batched-tokens", "96",
                       "--no-enable-prefix-caching"],
                      ["--max-running-requests", "3", "--max-num-batched-tokens", "96",
                       "--disable-radix-cache"]):
            with self.subTest(flags=flags):
                self.assertEqual(self.serve_banner(*flags), native)
        self.assertIn("prefix cache on", self.serve_banner("--enable-prefix-caching"))
        # vLLM's Qwen parser switches name what ninfer always does; other parsers are refused.
        self.assertIn("engine:", self.serve_banner("--reasoning-parser", "qwen3",
                                                   "--enable-auto-tool-choice",
                                                   "--tool-call-parser", "qwen3_coder"))
        bad = subprocess.run([NINFER, "serve", "--tool-call-parser", "mistral"],
                             capture_output=True, text=True)
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("qwen3_coder", bad.stderr)


class ApiKeyFromEnvironment(unittest.TestCase):
    def test_ninfer_api_key(self):
        """$NINFER_API_KEY is the key when no --api-key is given (kept off the command line)."""
        with demo_server(env=dict(os.environ, NINFER_API_KEY="s3cret")) as lines:
            port = None
            for line in lines:
                m = re.search(r"serving '.*' on http://[\d.]+:(\d+)", line)
                if m:
                    port = m.group(1)
                    break
            self.assertIsNotNone(port, "no serving line")

            def status(headers):
                req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/models",
                                             headers=headers)
                try:
                    with urllib.request.urlopen(req, timeout=30) as r:
                        return r.status
                except urllib.error.HTTPError as e:
                    return e.code
            self.assertEqual(status({}), 401)
            self.assertEqual(status({"Authorization": "Bearer wrong"}), 401)
            self.assertEqual(status({"Authorization": "Bearer s3cret"}), 200)


class HubCache(unittest.TestCase):
    """--model ORG/NAME finds a checkpoint that huggingface-cli downloaded: the cache's layout
    (refs/main, snapshots/<hash>/ of symlinks into blobs/) built here from a fixture."""

    def test_repo_id_resolves_in_the_cache(self):
        fixture = os.path.join(FIXTURES, sorted(os.listdir(FIXTURES))[0])
        prompt = json.load(open(os.path.join(fixture, "reference.json")))["cases"][0]["prompt"]
        with tempfile.TemporaryDirectory() as cache:
            cache_snapshot(cache, "Qwen/Tiny-Fixture", fixture, "0123abcd", ref=True)
            env = dict(os.environ, HF_HUB_CACHE=cache)
            args = ["run", "--prompt-ids", ",".join(map(str, prompt)), "--max-new", "3",
                    "--greedy", "--json", "--top-logprobs", "5"]
            got = subprocess.run([NINFER, *args, "--model", "Qwen/Tiny-Fixture"],
                                 capture_output=True, text=True, env=env)
            self.assertEqual(got.returncode, 0, got.stderr)
            self.assertEqual(json.loads(got.stdout), run_json(fixture, prompt, 3))
            info = subprocess.run([NINFER, "info", "--json", "--model", "Qwen/Tiny-Fixture"],
                                  capture_output=True, text=True, env=env)
            self.assertEqual(info.returncode, 0, info.stderr)
            missing = subprocess.run([NINFER, *args, "--model", "Qwen/Not-Downloaded"],
                                     capture_output=True, text=True, env=env)
            self.assertEqual(missing.returncode, 1)
            self.assertIn("huggingface-cli download Qwen/Not-Downloaded", missing.stderr)
            self.assertIn(cache, missing.stderr)
        # --draft-model ORG/NAME: the demo model's drafter through the cache, and a missing one.
        demo = DEMO
        if os.path.isdir(os.path.join(demo, "dflash2")):
            with tempfile.TemporaryDirectory() as cache:  # one snapshot and no refs/main
                cache_snapshot(cache, "z-lab/demo-drafter", os.path.join(demo, "dflash2"), "d1",
                               ref=False)
                env = dict(os.environ, HF_HUB_CACHE=cache)
                args = [NINFER, "run", "--model", demo, "--spec", "dflash2", "--prompt-ids",
                        "1,2,3,4", "--max-new", "4", "--greedy", "--json"]
                ok = subprocess.run([*args, "--draft-model", "z-lab/demo-drafter"],
                                    capture_output=True, text=True, env=env)
                self.assertEqual(ok.returncode, 0, ok.stderr)
                gone = subprocess.run([*args, "--draft-model", "z-lab/not-there"],
                                      capture_output=True, text=True, env=env)
                self.assertNotEqual(gone.returncode, 0)
                self.assertIn("huggingface-cli download z-lab/not-there", gone.stderr)
        # The text commands' --model too: tokenize through the cache equals the directory's.
        if os.path.isfile(os.path.join(demo, "tokenizer.json")):
            with tempfile.TemporaryDirectory() as cache:
                cache_snapshot(cache, "ninfer/demo", demo, "s1", ref=False)
                env = dict(os.environ, HF_HUB_CACHE=cache)
                ids = [subprocess.run([NINFER, "tokenize", "--model", m], input="def f(x):",
                                      capture_output=True, text=True, env=env)
                       for m in ("ninfer/demo", demo)]
                self.assertEqual(ids[0].returncode, 0, ids[0].stderr)
                self.assertEqual(ids[0].stdout, ids[1].stdout)
                gone = subprocess.run([NINFER, "render", "--model", "ninfer/gone"],
                                      capture_output=True, text=True, env=env)
                self.assertNotEqual(gone.returncode, 0)
                self.assertIn("huggingface-cli download ninfer/gone", gone.stderr)
                tok = subprocess.run([NINFER, "serve", "--random-weights", "--config",
                                      os.path.join(demo, "config.json"), "--tokenizer",
                                      "ninfer/gone"], capture_output=True, text=True, env=env)
                self.assertNotEqual(tok.returncode, 0)
                self.assertIn("--tokenizer: ninfer/gone", tok.stderr)
        # `serve MODEL` (vLLM's spelling) takes the model as --model does, never both.
        both = subprocess.run([NINFER, "serve", "Qwen/A", "--model", "Qwen/B"],
                              capture_output=True, text=True)
        self.assertNotEqual(both.returncode, 0)
        self.assertIn("excludes", both.stderr)


class Chat(unittest.TestCase):
    """`chat` without a terminal reads one turn per line; commands work there too."""
    MODEL = os.path.join(ROOT, "tests", "fixtures_text", "tiny_chat")

    def chat(self, text):
        return subprocess.run([NINFER, "chat", "--model", self.MODEL], input=text,
                              capture_output=True, text=True, timeout=120)

    def test_banner_and_help(self):
        out = self.chat("/help\n/bogus\n/reset\n/exit\nnot read\n")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout, "")  # no turn was generated
        lines = out.stderr.splitlines()
        self.assertTrue(lines[0].startswith("ninfer chat: tiny_chat ("), out.stderr)
        self.assertIn(" on cpu, ", lines[0])
        self.assertIn("/help for commands", lines[0])
        for command in ("/reset", "/exit", "/help"):
            self.assertTrue(any(l.strip().startswith(command) for l in lines), out.stderr)
        self.assertIn("unknown command /bogus", out.stderr)
        self.assertIn("(conversation cleared)", out.stderr)

    def test_a_long_conversation_drops_its_oldest_turns(self):
        """Past the context the oldest turns go (the system message stays), and every turn is
        still answered, as llama.cpp's context shift keeps a chat going."""
        turns = "".join(f"tell me about the number {i} in detail please\n" for i in range(12))
        out = subprocess.run([NINFER, "chat", "--model", self.MODEL, "--max-context", "160",
                              "--max-new", "24", "--system", "be brief", "--greedy"],
                             input=turns, capture_output=True, text=True, timeout=300)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("the conversation outgrew the context of 160 tokens", out.stderr)
        self.assertNotIn("does not fit", out.stderr)
        stats = [l for l in out.stderr.splitlines() if l.startswith("ninfer: prompt ")]
        self.assertEqual(len(stats), 12, out.stderr)  # every turn answered
        for line in stats:
            self.assertLessEqual(int(line.split()[2]), 160 - 24, line)

    def test_passive_omp_wait_by_default(self):
        """Without OMP_WAIT_POLICY ninfer re-executes itself with PASSIVE; a user's value stays."""
        for given, expected in ((None, "PASSIVE"), ("ACTIVE", "ACTIVE")):
            env = dict(os.environ)
            env.pop("OMP_WAIT_POLICY", None)
            env.pop("GOMP_SPINCOUNT", None)
            if given:
                env["OMP_WAIT_POLICY"] = given
            with self.subTest(given=given):
                p = subprocess.Popen([NINFER, "chat", "--model", self.MODEL], env=env, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
                try:
                    banner = p.stderr.readline()  # printed once the model is loaded
                    with open(f"/proc/{p.pid}/environ", "rb") as f:
                        environ = f.read().split(b"\0")
                finally:
                    out, err = p.communicate("/exit\n", timeout=60)
                self.assertEqual(p.returncode, 0, err)
                self.assertTrue(banner.startswith("ninfer chat: "), banner + err)
                self.assertIn(f"OMP_WAIT_POLICY={expected}".encode(), environ)


class DemoModel(unittest.TestCase):
    """The shipped demo model reproduces HF's greedy continuations (models/ninfer-demo/
    reference.json, written by tools/train_demo/eval_mtp.py), up to any near-tie."""
    MODEL = DEMO
    NEAR_TIE = 1e-4  # HF top-1/top-2 logprob gap below which the choice may flip

    @unittest.skipUnless(os.path.isfile(os.path.join(MODEL, "reference.json")), "no demo model")
    def test_greedy_matches_hf(self):
        self.check_reference()

    @unittest.skipUnless(os.path.isfile(os.path.join(MODEL, "reference.json")), "no demo model")
    def test_tensor_parallel_matches_hf(self):  # two CPU ranks, each half the heads and rows
        self.check_reference("--tensor-parallel", "2")

    @unittest.skipUnless(os.path.isfile(os.path.join(MODEL, "reference.json")), "no demo model")
    def test_expert_parallel_matches_hf(self):  # two CPU ranks, each 8 of the 16 experts whole
        self.check_reference("--tensor-parallel", "2", "--expert-parallel")

    def check_reference(self, *extra):
        with open(os.path.join(self.MODEL, "reference.json")) as f:
            ref = json.load(f)
        compared = total = 0
        for i, case in enumerate(ref["cases"]):
            n = next((k for k, s in enumerate(case["steps"]) if s["gap"] < self.NEAR_TIE),
                     len(case["steps"]))
            compared += n
            total += len(case["steps"])
            with self.subTest(case=i, name=case["name"]):
                got = run_json(self.MODEL, case["prompt"], len(case["steps"]), "--ignore-eos",
                               *extra)
                self.assertEqual([t["id"] for t in got["tokens"]][:n], case["greedy"][:n])
                for t, s in zip(got["tokens"][:n], case["steps"]):
                    self.assertAlmostEqual(t["logprob"], s["logprob"], delta=LOGPROB_ABS)
                if n < len(case["steps"]):  # the near-tie itself: one of the two tied tokens
                    tied = {tid for tid, _ in case["steps"][n]["top"][:2]}
                    self.assertIn(got["tokens"][n]["id"], tied)
        # A reference whose near-ties come early would compare next to nothing: refuse it.
        self.assertGreaterEqual(compared, total // 2, "too few steps before near-ties")


class Perplexity(unittest.TestCase):
    MODEL = os.path.join(ROOT, "tests", "fixtures_text", "tiny_chat")

    def ppl(self, path, *extra):
        out = subprocess.run([NINFER, "perplexity", "--model", self.MODEL, "--file", path, *extra],
                             capture_output=True, text=True, check=True)
        return json.loads(out.stdout)  # stdout must be exactly one JSON object

    def test_windows_and_schedule(self):
        text = "the quick brown fox jumps over the lazy dog. " * 12
        path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"ninfer_ppl_{os.getpid()}.txt")
        with open(path, "w") as f:
            f.write(text)
        try:
            a = self.ppl(path, "--context", "16")
            b = self.ppl(path, "--context", "16", "--prefill-chunk", "3")
            one = self.ppl(path, "--context", "16", "--chunks", "1")
        finally:
            os.unlink(path)
        windows = -(-a["file_tokens"] // 16)
        self.assertEqual(a["windows"], windows)
        self.assertEqual(a["tokens"], a["file_tokens"] - windows)
        self.assertEqual((one["windows"], one["tokens"]), (1, 15))
        self.assertAlmostEqual(a["mean_nll"], b["mean_nll"], delta=1e-4)
        self.assertAlmostEqual(a["ppl"], math.exp(a["mean_nll"]), delta=1e-6 * a["ppl"])


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

    def test_expert_parallel_plan(self):
        """--plan ep:N: whole experts a rank, the bytes of tp:N when N divides the experts; a
        dense model is refused with the reason."""
        def plan(config, layout):
            return subprocess.run([NINFER, "info", "--config", os.path.join(ROOT, "configs", config),
                                   "--plan", layout, "--json"], capture_output=True, text=True)
        ep = json.loads(plan("qwen3.6-35b-a3b.json", "ep:8").stdout)["placement"]
        tp = json.loads(plan("qwen3.6-35b-a3b.json", "tp:8").stdout)["placement"]
        self.assertEqual(ep["mode"], "ep")
        self.assertIn("--expert-parallel", ep["note"])
        shares = [t["share"] for t in ep["tensors"] if t["device"] == 7]
        self.assertTrue(any("experts 224..255 of 256 whole" in s for s in shares), shares)
        self.assertEqual(ep["devices"][7]["weight_bytes"], tp["devices"][7]["weight_bytes"])
        self.assertEqual(ep["kv_tokens"], tp["kv_tokens"])
        dense = plan("qwen3.6-27b.json", "ep:2")
        self.assertEqual(dense.returncode, 1)
        self.assertIn("this model is dense", dense.stderr)

    def test_qwen36_27b_has_dense_mlp(self):
        j = self.info("qwen3.6-27b.json")
        self.assertEqual(j["config"]["mlp_intermediate"], 17408)
        p = j["parameters"]
        # Dense: every parameter is read per token except the embedding (one row of it).
        self.assertEqual(p["active_per_token"], p["text_total"] - p["embedding"] + 5120)


class RouteTables(unittest.TestCase):
    """The kernel route table on the command line: `tune --show` prints each decision's bands,
    `info` names the table in force, a table file is validated wherever it is named, and tune
    itself asks for a CUDA device (docs/ROUTES.md)."""

    def ninfer(self, *args):
        return subprocess.run([NINFER, *args], capture_output=True, text=True)

    def table_file(self, name, decisions):
        path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"ninfer_routes_{os.getpid()}_{name}.json")
        with open(path, "w") as f:
            json.dump({"device": {"gpu": "NVIDIA H200", "sm_count": 132, "cuda_version": 13000},
                       "decisions": decisions}, f)
        self.addCleanup(os.remove, path)
        return path

    def test_show_builtin(self):
        r = self.ninfer("tune", "--show", "builtin", "--device", "cpu")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("route table: builtin", r.stdout)
        self.assertIn("moe_block.fp8", r.stdout)
        self.assertIn("fused_decode 1-192, composed 193+", r.stdout)
        self.assertIn("gemv 1-4, cublas 5+", r.stdout)

    def test_info_names_the_table(self):
        j = json.loads(self.ninfer("info", "--json").stdout)
        self.assertEqual(j["route_table"]["source"], "builtin")
        path = self.table_file("ok", {"moe_block.dense": {"bands": [
            {"kernel": "fused_decode", "last": 96}, {"kernel": "composed"}]}})
        r = self.ninfer("info", "--json", "--route-table", path)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["route_table"]["source"], path)
        r = self.ninfer("tune", "--show", path, "--device", "cpu")
        self.assertIn("fused_decode 1-96, composed 97+", r.stdout)

    def test_bad_tables_are_clear_errors(self):
        past = self.table_file("past", {"linear.bf16.small": {"bands": [
            {"kernel": "gemv", "last": 64}, {"kernel": "cublas"}]}})
        for cmd in (["info"], ["run", "--prompt-ids", "1,2", "--max-new", "1"]):
            r = self.ninfer(*cmd, "--route-table", past)
            self.assertEqual(r.returncode, 1, cmd)
            self.assertIn("routes up to 64 to gemv, whose domain ends at 8", r.stderr)
        r = self.ninfer("info", "--route-table", "/nonexistent/table.json")
        self.assertIn("cannot be read", r.stderr)

    def test_tune_needs_cuda(self):
        r = self.ninfer("tune", "--device", "cpu")
        self.assertEqual(r.returncode, 1)
        self.assertIn("pass --device cuda", r.stderr)


class Bench(unittest.TestCase):
    """ninfer bench on a tiny fixture (CPU): the JSON it prints for each kind of test, and the
    options it refuses with a message naming them (figures only on real shapes: bench/NOTES.md)."""
    MODEL = os.path.join(FIXTURES, "moe_text_fused")

    def bench(self, *args):
        return subprocess.run([NINFER, "bench", "--device", "cpu", *args],
                              capture_output=True, text=True)

    def test_prefill_chunk_defaults(self):
        """One request (run, chat, bench) prefills in chunks of 8,192; serve and perplexity keep
        the engine's 512 (serve: short steps beside other users' decode rows, snapshots every 512
        prompt tokens); an explicit --prefill-chunk wins everywhere."""
        for cmd, chunk in (("run", 8192), ("chat", 8192), ("bench", 8192), ("serve", 512),
                           ("perplexity", 512)):
            r = subprocess.run([NINFER, cmd, "--help"], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertRegex(r.stdout, r"--prefill-chunk INT:POSITIVE=%d\b" % chunk, cmd)
        out = self.bench("--model", self.MODEL, "-p", "8", "-r", "1", "--warmup", "0",
                         "--prefill-chunk", "64", "-o", "json")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(json.loads(out.stdout)["prefill_chunk"], 64)

    def test_json_schema(self):
        out = self.bench("--model", self.MODEL, "-p", "16", "-n", "4", "--pg", "8,3", "-r", "2",
                         "--warmup", "0", "-o", "json")
        self.assertEqual(out.returncode, 0, out.stderr)
        j = json.loads(out.stdout)  # stdout must be exactly one JSON object
        for key in ("model", "model_type", "device", "dtype", "kv_dtype", "load_s",
                    "prefill_chunk", "route_table"):
            self.assertIn(key, j)
        self.assertEqual(j["device"], "cpu")
        self.assertEqual(j["route_table"], "builtin")
        self.assertEqual(j["prefill_chunk"], 8192)  # one request: no mid-prompt snapshots needed
        self.assertGreater(j["ceilings"]["copy_bytes_per_s"], 0)
        self.assertGreater(j["ceilings"]["gemm_flops"], 0)
        self.assertGreater(j["parameters"]["text_total"], j["parameters"]["active_per_token"])
        for key in ("weights", "kv_cache", "state", "workspace"):
            self.assertGreater(j["memory_bytes"][key], 0)
        tests = {r["test"]: r for r in j["results"]}
        self.assertEqual(sorted(tests), ["pg8,3", "pp16", "tg4"])

        def stat(r, key):  # {"mean", "std"} with one run per repetition
            self.assertGreater(r[key]["mean"], 0, key)
            self.assertGreaterEqual(r[key]["std"], 0, key)
            self.assertEqual(len(r[key + "_runs"]), 2, key)

        pp, tg, pg = tests["pp16"], tests["tg4"], tests["pg8,3"]
        self.assertEqual((pp["prompt_tokens"], pp["reps"]), (16, 2))
        stat(pp, "prefill_tok_s")
        self.assertGreater(pp["prefill_tflops"]["mean"], 0)
        # against the GEMM rate of the same run's ceilings
        self.assertAlmostEqual(pp["prefill_gemm_fraction"]["mean"],
                               pp["prefill_tflops"]["mean"] * 1e12 / j["ceilings"]["gemm_flops"],
                               delta=1e-9 + 1e-6 * pp["prefill_gemm_fraction"]["mean"])
        self.assertEqual(tg["gen_tokens"], 4)
        stat(tg, "decode_tok_s")
        self.assertGreater(tg["decode_bytes_per_step"], 0)
        self.assertTrue(0 < tg["decode_roofline_fraction"]["mean"] <= 1)
        self.assertEqual((pg["prompt_tokens"], pg["gen_tokens"]), (8, 3))
        stat(pg, "prefill_tok_s")
        stat(pg, "decode_tok_s")

    def test_batch(self):  # --batch B: B requests at once, a B-row decode step's roofline
        runs = {}
        for b in (1, 3):
            out = self.bench("--model", self.MODEL, "-p", "8", "-n", "4", "-r", "1", "--warmup",
                             "0", "--batch", str(b), "-o", "json")
            self.assertEqual(out.returncode, 0, out.stderr)
            runs[b] = json.loads(out.stdout)
            self.assertEqual(runs[b]["batch"], b)
            tests = {r["test"]: r for r in runs[b]["results"]}
            self.assertEqual(tests["tg4"]["batch"], b)
            self.assertGreater(tests["pp8"]["prefill_tok_s"]["mean"], 0)
            self.assertTrue(0 < tests["tg4"]["decode_roofline_fraction"]["mean"] <= 1)
        step = {b: {r["test"]: r for r in runs[b]["results"]}["tg4"]["decode_bytes_per_step"]
                for b in runs}
        # three rows' KV and GDN state (and, on a MoE model, more routed experts) per step
        self.assertGreater(step[3], step[1])
        out = self.bench("--model", self.MODEL, "-n", "2", "--batch", "0")
        self.assertNotEqual(out.returncode, 0)

    def test_default_model(self):  # as run: the demo model without --model
        out = self.bench("-n", "2", "-r", "1", "--warmup", "0", "-o", "json")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(os.path.basename(json.loads(out.stdout)["model"].rstrip("/")),
                         "ninfer-demo")

    def test_step_trace_table(self):
        """NINFER_STEP_PROFILE=2 traces every step; tools/gpu/step_trace_table.py reads those
        lines back. pp8 at --batch 3: the 3 prompts of 8 rows in one step (a pool too small for
        them, as the bench sized it once, left the third for a step of its own); tg5: 5 steps of
        one row for each of the 3 (a 1-token prompt, then 4 decode rows)."""
        env = dict(os.environ, NINFER_STEP_PROFILE="2")
        out = subprocess.run([NINFER, "bench", "--device", "cpu", "--model", self.MODEL, "-p",
                              "8", "-n", "5", "-r", "1", "--warmup", "0", "--batch", "3"],
                             capture_output=True, text=True, env=env)
        self.assertEqual(out.returncode, 0, out.stderr)
        with tempfile.NamedTemporaryFile("w", suffix=".log") as log:
            log.write(out.stderr)
            log.flush()
            table = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "gpu",
                                                                 "step_trace_table.py"), log.name],
                                   check=True, capture_output=True, text=True).stdout
        rows = {l.split("|")[1].strip(): l.split("|")[2:] for l in table.splitlines()
                if l.startswith("| ") and not l.startswith("| steps")}
        # n, prompt rows a step, decode rows a step
        self.assertEqual([c.strip() for c in rows["decode only"][:3]], ["5", "0", "3"], table)
        self.assertEqual([c.strip() for c in rows["mixed <= 512 rows"][:3]], ["1", "24", "0"],
                         table)
        self.assertRegex(table, r"traced: 6 steps, 39 rows in ")

    def test_table(self):
        out = self.bench("--model", self.MODEL, "-n", "2", "-r", "1", "--warmup", "0")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("tg2", out.stdout)

    def test_refused_options(self):
        cases = [
            (("--model", self.MODEL, "-p", "x"), "is not a count"),
            (("--model", self.MODEL, "--pg", "8"), "PROMPT,GEN"),
            (("--model", self.MODEL, "--pg", "0,4"), "PROMPT,GEN"),
            (("--model", self.MODEL, "-p", "", "-n", ""), "nothing to run"),
            (("--model", self.MODEL, "-n", "2", "-r", "0"), "--reps"),
            (("--model", self.MODEL, "-n", "2", "-o", "yaml"), "--output"),
            (("--random-weights", "-n", "2"), "--random-weights and --config FILE go together"),
            (("--model", self.MODEL, "--random-weights", "--config",
              os.path.join(self.MODEL, "config.json"), "-n", "2"), "not both"),
            (("--model", "/nonexistent", "-n", "2"), "/nonexistent"),
            (("--model", self.MODEL, "-n", "2", "--gpu-memory-utilization", "1.5"), "(0, 1]"),
        ]
        for args, message in cases:
            with self.subTest(args=args):
                out = self.bench(*args)
                self.assertNotEqual(out.returncode, 0, out.stdout)
                self.assertIn(message, out.stderr)
                self.assertEqual(out.stdout.strip(), "")


class Images(unittest.TestCase):
    """`run --image` and chat's /image on the demo model, whose answers equal HF's (its
    vision_eval.json); a file that is no image is an error naming it."""
    IMAGES = os.path.join(ROOT, "tests", "fixtures_vision", "demo_images")

    def expected(self, name):
        with open(os.path.join(DEMO, "vision_eval.json")) as f:
            return next(x["answer"] for x in json.load(f)["fixtures"] if x["file"] == name)

    def test_run_image(self):
        out = subprocess.run([NINFER, "run", "--model", DEMO, "--image",
                              os.path.join(self.IMAGES, "image_2.png"), "--prompt",
                              "What is in the picture?", "--temperature", "0"],
                             capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), self.expected("image_2.png"))
        bad = subprocess.run([NINFER, "run", "--model", DEMO, "--image", __file__,
                              "--prompt", "hi"], capture_output=True, text=True, timeout=120)
        self.assertEqual(bad.returncode, 1)
        self.assertIn("check_cli.py", bad.stderr)
        self.assertIn("image:", bad.stderr)

    def test_chat_image_command(self):
        text = ("/image " + os.path.join(self.IMAGES, "image_4.png") + "\n"
                "What is in the picture?\n/image /nonexistent.png\nhello\n/exit\n")
        out = subprocess.run([NINFER, "chat", "--model", DEMO, "--temperature", "0"],
                             input=text, capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.splitlines()[0].strip(), self.expected("image_4.png"))
        self.assertIn("attached to your next message", out.stderr)
        self.assertIn("/nonexistent.png: cannot open", out.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
