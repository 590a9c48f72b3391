#!/usr/bin/env python3
"""The text CLI end to end on tests/fixtures_text/tiny_chat (a tiny random model with a real
byte-level tokenizer, chat template and stop ids): tokenize/render against HF tokenizers and
jinja2, `run --prompt` against `run --prompt-ids --json` with the same seed (the text output is
the decoded ids, split into reasoning on stderr and content on stdout), stop ids from
generation_config.json, stop strings, stderr statistics, and `chat` (multi-turn history, Ctrl-C
stops the answer and not the program).

env: NINFER_BIN, NINFER_SOURCE_DIR, NINFER_WORK_DIR
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import unittest

ROOT = os.environ["NINFER_SOURCE_DIR"]
NINFER = os.environ["NINFER_BIN"]
WORK = os.environ["NINFER_WORK_DIR"]
MODEL = os.path.join(ROOT, "tests", "fixtures_text", "tiny_chat")
sys.path.insert(0, os.path.join(ROOT, "tests", "text"))
ENV = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
STATS = re.compile(r"ninfer: prompt (\d+) tokens \((\d+) cached\), generated (\d+) tokens "
                   r"\((\w+)\); prefill [\d.]+ tok/s, decode [\d.]+ tok/s, TTFT [\d.]+ s")


def ninfer(*args, stdin=None, model=MODEL, check=True):
    out = subprocess.run([NINFER, *args[:1], "--model", model, *args[1:]], input=stdin,
                         capture_output=True, env=ENV, timeout=300)
    if check and out.returncode != 0:
        raise AssertionError(f"ninfer {args} failed: {out.stderr.decode(errors='replace')}")
    return out


def hf_tokenizer():
    from tokenizers import Tokenizer
    return Tokenizer.from_file(os.path.join(MODEL, "tokenizer.json"))


def write_json(name, obj):
    os.makedirs(WORK, exist_ok=True)
    path = os.path.join(WORK, name)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False)
    return path


class Inspection(unittest.TestCase):
    def test_tokenize_matches_hf_and_round_trips(self):
        tok = hf_tokenizer()
        for text in ["Hello, world!", "the dog <think>x</think> 東京 👍\n\n", "<|im_start|>user"]:
            ids = json.loads(ninfer("tokenize", stdin=text.encode()).stdout)
            self.assertEqual(ids, tok.encode(text).ids)
            back = ninfer("tokenize", "--detokenize", stdin=json.dumps(ids).encode()).stdout
            self.assertEqual(back.decode(), text)
        out = ninfer("tokenize", stdin=b"bad \xc3\x28", check=False)
        self.assertEqual(out.returncode, 1)
        self.assertIn(b"invalid UTF-8 at byte 4", out.stderr)

    def test_render_matches_jinja2(self):
        import check_template_oracle as oracle
        conv = {"messages": [{"role": "system", "content": "Be brief."},
                             {"role": "user", "content": "Weather in Paris?"},
                             {"role": "assistant", "content": "", "tool_calls": [{"type": "function",
                              "function": {"name": "w", "arguments": {"city": "Paris"}}}]},
                             {"role": "tool", "content": "sunny"}],
                "tools": [{"type": "function", "function": {"name": "w", "parameters": {
                    "type": "object", "properties": {"city": {"type": "string"}}}}}]}
        path = write_json("conv.json", conv)
        with open(os.path.join(MODEL, "tokenizer_config.json"), encoding="utf-8") as f:
            source = json.load(f)["chat_template"]
        env = oracle.hf_environment()
        for extra, variables in [((), {}), (("--no-thinking",), {"enable_thinking": False})]:
            got = ninfer("render", "--messages", path, *extra).stdout.decode()
            want = env.from_string(source).render(messages=conv["messages"], tools=conv["tools"],
                                                  add_generation_prompt=True, **variables)
            self.assertEqual(got, want)
        bad = write_json("bad.json", {"messages": [{"role": "user", "content": "x"},
                                                   {"role": "narrator", "content": "x"}]})
        out = ninfer("render", "--messages", bad, check=False)
        self.assertEqual(out.returncode, 1)
        self.assertIn(b"Unexpected message role", out.stderr)


def model_copy(name, generation_config=None):
    """A fresh copy of the tiny model in the work dir, with another generation_config.json when
    one is given."""
    model = os.path.join(WORK, name)
    shutil.rmtree(model, ignore_errors=True)
    shutil.copytree(MODEL, model)
    if generation_config is not None:
        with open(os.path.join(model, "generation_config.json"), "w") as f:
            json.dump(generation_config, f)
    return model


def model_with_template(name, template_file):
    """A copy of the tiny model whose chat_template.jinja (which wins over tokenizer_config.json)
    is one of tests/text/templates."""
    model = model_copy(name)
    shutil.copy(os.path.join(ROOT, "tests", "text", "templates", template_file),
                os.path.join(model, "chat_template.jinja"))
    return model


class TemplateVariables(unittest.TestCase):
    """--var, --reasoning-effort and --no-thinking reach the template in render and run."""

    def test_render_flags_match_jinja2(self):
        import check_template_oracle as oracle
        model = model_with_template("tiny_chat_q38", "qwen3_8.jinja")
        conv = {"messages": [{"role": "developer", "content": "D"},
                             {"role": "user", "content": "q"},
                             {"role": "assistant", "content": "a", "reasoning_content": "r"},
                             {"role": "user", "content": "q2"}]}
        path = write_json("conv_vars.json", conv)
        with open(os.path.join(model, "chat_template.jinja"), encoding="utf-8") as f:
            tpl = oracle.hf_environment().from_string(f.read())
        cases = [((), {}), (("--reasoning-effort", "low"), {"reasoning_effort": "low"}),
                 (("--var", "preserve_thinking=false", "--var", "reasoning_effort=medium"),
                  {"preserve_thinking": False, "reasoning_effort": "medium"}),
                 (("--var", "reasoning_effort=medium", "--reasoning-effort", "low", "--var",
                   "preserve_thinking=false"),
                  {"reasoning_effort": "low", "preserve_thinking": False}),  # the flag wins
                 (("--no-thinking", "--reasoning-effort", "bogus"),
                  {"enable_thinking": False, "reasoning_effort": "bogus"})]
        renders = set()
        for flags, variables in cases:
            got = ninfer("render", "--messages", path, *flags, model=model).stdout.decode()
            self.assertEqual(got, tpl.render(messages=conv["messages"], add_generation_prompt=True,
                                             **variables), flags)
            renders.add(got)
        self.assertEqual(len(renders), len(cases))  # every flag changed the prompt
        out = ninfer("render", "--messages", path, "--reasoning-effort", "bogus", model=model,
                     check=False)
        self.assertEqual(out.returncode, 1)
        self.assertIn(b"Unexpected reasoning effort bogus", out.stderr)
        for bad in ("novalue", "=1"):
            out = ninfer("render", "--messages", path, "--var", bad, model=model, check=False)
            self.assertEqual(out.returncode, 1)
            self.assertIn(b"--var: expected KEY=JSON", out.stderr)

    def test_chat_template_file_replaces_the_models(self):
        """--chat-template FILE (run, render): the file's template, not the model's."""
        tpl = os.path.join(ROOT, "tests", "text", "templates", "qwen3_8.jinja")
        copy = model_with_template("tiny_chat_q38_ref", "qwen3_8.jinja")
        conv = write_json("prompt_tpl.json", [{"role": "system", "content": "S"},
                                              {"role": "user", "content": "Hello there"}])
        flags = ("--reasoning-effort", "low")
        want = ninfer("render", "--messages", conv, *flags, model=copy).stdout
        self.assertEqual(ninfer("render", "--messages", conv, "--chat-template", tpl, *flags).stdout,
                         want)
        self.assertNotEqual(ninfer("render", "--messages", conv, *flags).stdout, want)
        n = len(json.loads(ninfer("tokenize", stdin=want).stdout))
        out = ninfer("run", "--messages", conv, "--chat-template", tpl, *flags, "--max-new", "1",
                     "--greedy")
        self.assertEqual(int(STATS.search(out.stderr.decode()).group(1)), n)
        out = ninfer("run", "--prompt", "x", "--chat-template", "/nonexistent.jinja", check=False)
        self.assertEqual(out.returncode, 1)
        self.assertIn(b"/nonexistent.jinja", out.stderr)

    def test_run_renders_with_the_flags(self):
        model = model_with_template("tiny_chat_q38_run", "qwen3_8.jinja")
        conv = write_json("prompt_vars.json", [{"role": "user", "content": "Hello there"}])
        counts = []
        for flags in ((), ("--reasoning-effort", "medium")):
            rendered = ninfer("render", "--messages", conv, *flags, model=model).stdout
            n = len(json.loads(ninfer("tokenize", stdin=rendered, model=model).stdout))
            out = ninfer("run", "--prompt", "Hello there", *flags, "--max-new", "1", "--greedy",
                         model=model)
            self.assertEqual(int(STATS.search(out.stderr.decode()).group(1)), n, flags)
            counts.append(n)
        self.assertNotEqual(counts[0], counts[1])


class Run(unittest.TestCase):
    # every sampling flag given: the model's generation_config.json defaults do not apply
    SAMPLING = ["--temperature", "1.5", "--top-k", "0", "--top-p", "1", "--seed", "11",
                "--max-new", "24"]

    def ids_for(self, thinking, model=MODEL):
        """The generated ids of the chat prompt, through --prompt-ids --json (same seed)."""
        conv = write_json("prompt.json", [{"role": "user", "content": "Hello there"}])
        extra = () if thinking else ("--no-thinking",)
        prompt = ninfer("render", "--messages", conv, *extra, model=model).stdout
        ids = json.loads(ninfer("tokenize", stdin=prompt, model=model).stdout)
        out = ninfer("run", "--prompt-ids", ",".join(map(str, ids)), "--json", *self.SAMPLING,
                     model=model)
        return json.loads(out.stdout)

    def test_text_output_is_the_decoded_ids(self):
        tok = hf_tokenizer()
        for thinking in (True, False):
            ref = self.ids_for(thinking)
            ids = [t["id"] for t in ref["tokens"]]
            text = tok.decode(ids, skip_special_tokens=True)
            extra = () if thinking else ("--no-thinking",)
            out = ninfer("run", "--prompt", "Hello there", *extra, *self.SAMPLING)
            stdout, stderr = out.stdout.decode(), out.stderr.decode()
            m = STATS.search(stderr)
            self.assertIsNotNone(m, stderr)
            self.assertEqual(int(m.group(3)), len(ids))
            self.assertEqual(m.group(4), ref["finish_reason"])
            if "</think>" in text or "<tool_call>" in text or "<function=" in text:
                self.skipTest("the sampled text holds tags; the parser tables cover those")
            if thinking:  # the prompt opened <think>: everything is reasoning, on stderr
                self.assertEqual(stdout.strip(), "")
                self.assertIn("[reasoning] " + text.strip(), stderr)
            else:
                self.assertEqual(stdout.rstrip("\n"), text.strip())

    def test_stop_ids_from_generation_config(self):
        ref = self.ids_for(False)
        ids = [t["id"] for t in ref["tokens"]]
        k = next(i for i in range(1, len(ids)) if ids[i] not in ids[:i])
        model = model_copy("tiny_chat_stop", {"eos_token_id": [ids[k]]})
        out = ninfer("run", "--prompt", "Hello there", "--no-thinking", *self.SAMPLING, model=model)
        m = STATS.search(out.stderr.decode())
        self.assertEqual(m.group(4), "stop")
        self.assertEqual(out.stdout.decode().rstrip("\n"),
                         hf_tokenizer().decode(ids[:k], skip_special_tokens=True).strip())

    def test_stop_string_is_held_back(self):
        text = hf_tokenizer().decode([t["id"] for t in self.ids_for(False)["tokens"]],
                                     skip_special_tokens=True).strip()
        stop = text[len(text) // 2:len(text) // 2 + 2]
        out = ninfer("run", "--prompt", "Hello there", "--no-thinking", "--stop", stop,
                     *self.SAMPLING)
        self.assertEqual(out.stdout.decode().rstrip("\n"), text[:text.find(stop)].strip())
        self.assertEqual(STATS.search(out.stderr.decode()).group(4), "stop")

    def test_messages_file_with_tools_and_system(self):
        conv = write_json("tools.json", {
            "messages": [{"role": "user", "content": "Weather in Paris?"}],
            "tools": [{"type": "function", "function": {"name": "w", "parameters": {
                "type": "object", "properties": {"city": {"type": "string"}}}}}]})
        out = ninfer("run", "--messages", conv, "--system", "Be brief.", "--max-new", "4",
                     "--greedy")
        m = STATS.search(out.stderr.decode())
        rendered = ninfer("render", "--messages", conv).stdout
        n_prompt = len(json.loads(ninfer("tokenize", stdin=rendered).stdout))
        self.assertGreater(int(m.group(1)), n_prompt)  # the system message was added

    def test_sampling_defaults_come_from_generation_config(self):
        """Flags not given take the model's generation_config.json values, as the server does
        (tiny_chat: temperature 1.0, top_k 20, top_p 0.95); do_sample false means greedy."""
        def ids(*flags, model=MODEL):
            out = ninfer("run", "--prompt-ids", "1,2,3", "--json", "--max-new", "16", *flags,
                         model=model)
            return [t["id"] for t in json.loads(out.stdout)["tokens"]]
        implicit = ids("--seed", "5")
        self.assertEqual(implicit, ids("--seed", "5", "--temperature", "1.0", "--top-k", "20",
                                       "--top-p", "0.95"))
        model = model_copy("tiny_chat_no_sample", {"eos_token_id": [298, 296], "do_sample": False})
        self.assertEqual(ids("--seed", "5", model=model), ids("--greedy", model=model))

    def test_bad_arguments_are_clear_errors(self):
        for args in (["run"], ["run", "--prompt", "x", "--prompt-ids", "1"],
                     ["run", "--prompt", "x", "--json"], ["run", "--messages", "/nonexistent.json"]):
            out = ninfer(*args, check=False)
            self.assertEqual(out.returncode, 1, args)
            self.assertIn(b"error", out.stderr)


class Chat(unittest.TestCase):
    def test_multi_turn_history(self):
        out = ninfer("chat", "--system", "Be brief.", "--no-thinking", "--greedy", "--max-new", "6",
                     stdin="first question\n/reset\nhi\nsecond\n/exit\nnever read\n".encode())
        prompts = [int(m.group(1)) for m in STATS.finditer(out.stderr.decode())]
        self.assertEqual(len(prompts), 3)
        self.assertLess(prompts[1], prompts[0])    # /reset forgot the first turn
        self.assertGreater(prompts[2], prompts[1] + 6)  # the second turn sees the first
        self.assertIn(b"(conversation cleared)", out.stderr)

    def test_next_turn_is_warmed_while_the_user_types(self):
        """With thinking on the template drops the answer's think block from the history, so
        the second turn leaves the generated tokens at the answer; the chat warms the next turn
        while the user types, and the second turn is then read from the cache up to its own
        message. --no-warm-next-turn: the answer is computed again."""
        fresh = {}
        for flags in ([], ["--no-warm-next-turn"]):
            proc = subprocess.Popen([NINFER, "chat", "--model", MODEL, "--greedy", "--max-new",
                                     "24", *flags], stdin=subprocess.PIPE,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV)
            proc.stdin.write(b"first question\n")
            proc.stdin.flush()
            while not STATS.search(proc.stderr.readline().decode()):  # the first answer ends
                pass
            time.sleep(1.0)  # the user types
            _, err = proc.communicate(input=b"second\n/exit\n", timeout=120)
            self.assertEqual(proc.returncode, 0, err)
            m = STATS.search(err.decode())
            fresh[bool(flags)] = int(m.group(1)) - int(m.group(2))
        # "second" (6 bytes of the byte-level tokenizer) and the template's turn markers
        self.assertLessEqual(fresh[False], 30, fresh)
        self.assertGreater(fresh[True], fresh[False], fresh)

    def test_ctrl_c_stops_the_answer_not_the_program(self):
        proc = subprocess.Popen([NINFER, "chat", "--model", MODEL, "--no-thinking", "--greedy",
                                 "--max-new", "100000"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
        proc.stdin.write(b"go on forever\n")
        proc.stdin.flush()
        first = proc.stdout.read(1)  # the answer is streaming
        self.assertTrue(first)
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(input=b"/exit\n", timeout=120)
        self.assertEqual(proc.returncode, 0, stderr)
        self.assertIn(b"(answer stopped)", stderr)
        m = STATS.search(stderr.decode())
        self.assertEqual(m.group(4), "cancelled")
        self.assertLess(int(m.group(3)), 3000)


if __name__ == "__main__":
    unittest.main(verbosity=2)
