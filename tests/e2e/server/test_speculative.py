#!/usr/bin/env python3
"""`ninfer serve --spec mtp` on the demo model (its trained MTP head drafts; with
NINFER_SPEC_METHOD=dflash2, its shipped DFlash2 drafter at K = 7): greedy answers are
the same text as a server without speculation, through the OpenAI and Anthropic SDKs, whole and
streamed, with forced tool calls and JSON-schema outputs (the constraint masks apply to every
verified column); a conversation's second turn is served from the prefix cache and still drafts;
/metrics carries the spec-decode counters (vLLM's names, ninfer_ prefixed) and the request log
each request's rounds, drafted and accepted tokens. `--draft-tokens` outside 1..8 or without
--spec is refused at startup."""
import json
import os
import subprocess
import sys
import unittest

import anthropic
import openai

sys.path.insert(0, os.path.dirname(__file__))
from server_util import KEY, NINFER, ROOT, Server  # noqa: E402

DEMO = os.path.join(ROOT, "models", "ninfer-demo")
METHOD = os.environ.get("NINFER_SPEC_METHOD", "mtp")
DRAFT_TOKENS = "3" if METHOD == "mtp" else "7"
PLAIN = SPEC = None
NO_THINK = {"chat_template_kwargs": {"enable_thinking": False}}
TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                    "days": {"type": "integer"}},
                   "required": ["city", "days"]}}}
SCHEMA = {"type": "json_schema", "json_schema": {"name": "point", "strict": True, "schema": {
    "type": "object", "properties": {"x": {"type": "integer"}, "label": {"type": "string"}},
    "required": ["x", "label"], "additionalProperties": False}}}


def setUpModule():
    global PLAIN, SPEC
    PLAIN = Server("--max-context", "4096", model=DEMO)
    SPEC = Server("--max-context", "4096", "--spec", METHOD, "--draft-tokens", DRAFT_TOKENS,
                  model=DEMO)


def tearDownModule():
    assert PLAIN.stop() == 0
    assert SPEC.stop() == 0


def oai(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0, timeout=120)


def chat(server, messages, **kw):
    return oai(server).chat.completions.create(model="ninfer-demo", messages=messages, temperature=0,
                                                extra_body=NO_THINK, **kw)


class SpeculativeServing(unittest.TestCase):
    def test_greedy_text_equals_the_plain_server(self):
        msgs = [{"role": "user", "content": "Write a Python function that adds two numbers."}]
        want = chat(PLAIN, msgs, max_tokens=96)
        got = chat(SPEC, msgs, max_tokens=96)
        self.assertEqual(got.choices[0].message.content, want.choices[0].message.content)
        self.assertEqual(got.choices[0].finish_reason, want.choices[0].finish_reason)
        self.assertEqual(got.usage.completion_tokens, want.usage.completion_tokens)
        streamed = oai(SPEC).chat.completions.create(model="ninfer-demo", messages=msgs, temperature=0,
                                                     max_tokens=96, stream=True,
                                                     extra_body=NO_THINK)
        text = "".join(c.choices[0].delta.content or "" for c in streamed if c.choices)
        self.assertEqual(text, want.choices[0].message.content)

    def test_anthropic_answer_equals_the_plain_server(self):
        def ask(server):
            c = anthropic.Anthropic(base_url=server.url, api_key=KEY, max_retries=0, timeout=120)
            m = c.messages.create(model="ninfer-demo", max_tokens=64,
                                  extra_body={"temperature": 0}, thinking={"type": "disabled"},
                                  messages=[{"role": "user", "content": "Tell me about rivers."}])
            return "".join(b.text for b in m.content if b.type == "text")
        self.assertEqual(ask(SPEC), ask(PLAIN))

    def test_forced_tool_call_and_json_schema_equal_the_plain_server(self):
        msgs = [{"role": "user", "content": "What is the weather in Paris?"}]
        forced = {"type": "function", "function": {"name": "get_weather"}}
        want = chat(PLAIN, msgs, max_tokens=96, tools=[TOOL], tool_choice=forced)
        got = chat(SPEC, msgs, max_tokens=96, tools=[TOOL], tool_choice=forced)
        call = got.choices[0].message.tool_calls[0]
        self.assertEqual(call.function.name, "get_weather")
        args = json.loads(call.function.arguments)
        self.assertIsInstance(args["days"], int)
        self.assertEqual(call.function.arguments,
                         want.choices[0].message.tool_calls[0].function.arguments)
        msgs = [{"role": "user", "content": "Give me a point."}]
        want = chat(PLAIN, msgs, max_tokens=96, response_format=SCHEMA)
        got = chat(SPEC, msgs, max_tokens=96, response_format=SCHEMA)
        self.assertEqual(got.choices[0].message.content, want.choices[0].message.content)
        value = json.loads(got.choices[0].message.content)
        self.assertEqual(set(value), {"x", "label"})

    def test_second_turn_hits_the_prefix_cache_and_drafts(self):
        # Over one 512-token snapshot stride: the turn resumes from a stride snapshot.
        turn = [{"role": "system", "content": "[spec turn] " + "You answer briefly. " * 200},
                {"role": "user", "content": "Name a colour."}]
        # Each server's next-turn warm request is let finish before the second turn, as a
        # client that reads the answer first finds it: both then resume from its end.
        warm = SPEC.warm_tokens()
        first = chat(SPEC, turn, max_tokens=32)
        SPEC.wait_warmed(warm)
        turn += [{"role": "assistant", "content": first.choices[0].message.content},
                 {"role": "user", "content": "And another one?"}]
        before = SPEC.metric("ninfer_spec_decode_num_drafts_total")
        got = chat(SPEC, turn, max_tokens=32)
        warm = PLAIN.warm_tokens()
        chat(PLAIN, turn[:2], max_tokens=32)  # the plain server's cache holds turn 1 too
        PLAIN.wait_warmed(warm)
        want = chat(PLAIN, turn, max_tokens=32)
        self.assertGreater(got.usage.prompt_tokens_details.cached_tokens, 0)
        self.assertEqual(got.usage.prompt_tokens_details.cached_tokens,
                         want.usage.prompt_tokens_details.cached_tokens)
        self.assertEqual(got.choices[0].message.content, want.choices[0].message.content)
        self.assertGreater(SPEC.metric("ninfer_spec_decode_num_drafts_total"), before)

    def test_metrics_and_request_log(self):
        chat(SPEC, [{"role": "user", "content": "Count to ten."}], max_tokens=48)
        drafted = SPEC.metric("ninfer_spec_decode_num_draft_tokens_total")
        accepted = SPEC.metric("ninfer_spec_decode_num_accepted_tokens_total")
        self.assertGreater(drafted, 0)
        self.assertGreater(accepted, 0)  # the demo model's MTP head and drafter are trained
        self.assertLessEqual(accepted, drafted)
        self.assertEqual(SPEC.metric("ninfer_spec_decode_num_accepted_tokens_per_pos"), accepted)
        self.assertEqual(PLAIN.metric("ninfer_spec_decode_num_drafts_total"), 0)
        logged = [json.loads(line) for line in SPEC.lines if line.startswith("{")]
        spec = [r["speculative"] for r in logged if "speculative" in r]
        self.assertTrue(spec, "no request log line reports speculation")
        self.assertTrue(all(s["accepted"] <= s["drafted"] for s in spec))

    def test_bad_draft_tokens_are_refused_at_startup(self):
        for args in (["--spec", "mtp", "--draft-tokens", "9"], ["--draft-tokens", "2"],
                     ["--spec", "eagle"], ["--spec", "dflash2", "--draft-tokens", "16"],
                     ["--spec", "mtp", "--draft-model", DEMO]):
            p = subprocess.run([NINFER, "serve", "--model", DEMO, "--port", "0", *args],
                               capture_output=True, text=True, timeout=60)
            self.assertNotEqual(p.returncode, 0, args)
            self.assertTrue("draft-tokens" in p.stderr or "spec" in p.stderr or
                            "draft-model" in p.stderr, p.stderr)


if __name__ == "__main__":
    unittest.main()
