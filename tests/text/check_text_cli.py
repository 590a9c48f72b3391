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
STATS = re.compile(r"ninfer: prompt (\d+) tokens, generated (\d+) tokens \((\w+)\); prefill "
                   r"[\d.]+ tok/s, decode [\d.]+ tok/s, TTFT [\d.]+ s")


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


class Run(unittest.TestCase):
    SAMPLING = ["--temperature", "1.5", "--seed", "11", "--max-new", "24"]

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
            self.assertEqual(int(m.group(2)), len(ids))
            self.assertEqual(m.group(3), ref["finish_reason"])
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
        model = os.path.join(WORK, "tiny_chat_stop")
        shutil.rmtree(model, ignore_errors=True)
        shutil.copytree(MODEL, model)
        with open(os.path.join(model, "generation_config.json"), "w") as f:
            json.dump({"eos_token_id": [ids[k]]}, f)
        out = ninfer("run", "--prompt", "Hello there", "--no-thinking", *self.SAMPLING, model=model)
        m = STATS.search(out.stderr.decode())
        self.assertEqual(m.group(3), "stop")
        self.assertEqual(out.stdout.decode().rstrip("\n"),
                         hf_tokenizer().decode(ids[:k], skip_special_tokens=True).strip())

    def test_stop_string_is_held_back(self):
        text = hf_tokenizer().decode([t["id"] for t in self.ids_for(False)["tokens"]],
                                     skip_special_tokens=True).strip()
        stop = text[len(text) // 2:len(text) // 2 + 2]
        out = ninfer("run", "--prompt", "Hello there", "--no-thinking", "--stop", stop,
                     *self.SAMPLING)
        self.assertEqual(out.stdout.decode().rstrip("\n"), text[:text.find(stop)].strip())
        self.assertEqual(STATS.search(out.stderr.decode()).group(3), "stop")

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
        self.assertEqual(m.group(3), "cancelled")
        self.assertLess(int(m.group(2)), 3000)


if __name__ == "__main__":
    unittest.main(verbosity=2)
