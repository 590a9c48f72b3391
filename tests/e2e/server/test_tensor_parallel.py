#!/usr/bin/env python3
"""`ninfer serve --tensor-parallel 2` (two CPU ranks, each half of every layer's heads and rows)
through the official OpenAI SDK against a one-device server on the demo model: greedy chat
completions, whole and streamed, and concurrent requests give the same text; a repeated
conversation is served from the prefix cache (every rank's KV and GDN state restored); usage and
/metrics add up."""
import concurrent.futures
import os
import sys
import unittest

import openai

sys.path.insert(0, os.path.dirname(__file__))
from server_util import KEY, ROOT, Server  # noqa: E402

# The trained demo model: its answers differ by prompt, so equal texts mean something.
DEMO = os.path.join(ROOT, "models", "ninfer-demo")

GREEDY = {"temperature": 0, "max_tokens": 24,
          "extra_body": {"chat_template_kwargs": {"enable_thinking": False}}}
PROMPTS = ["Name a colour.", "Count to five.", "Say hello in French.", "What is two plus two?",
           "Name an animal that can fly."]


def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0, timeout=120)


def chat(server, text, **extra):
    messages = [{"role": "system", "content": "You are a brief assistant. " * 8},
                {"role": "user", "content": text}]
    return client(server).chat.completions.create(model="ninfer-demo", messages=messages,
                                                  **GREEDY, **extra)


class TensorParallelServe(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.one = Server(model=DEMO)
        cls.two = Server("--tensor-parallel", "2", model=DEMO)

    @classmethod
    def tearDownClass(cls):
        assert cls.one.stop() == 0
        assert cls.two.stop() == 0

    def test_same_text_whole_streamed_and_concurrent(self):
        want = {p: chat(self.one, p).choices[0].message.content for p in PROMPTS}
        self.assertGreater(len(set(want.values())), 1, "the prompts' answers must differ")
        self.assertTrue(all(want.values()), "empty answers compare nothing")
        for p in PROMPTS:
            self.assertEqual(chat(self.two, p).choices[0].message.content, want[p], p)
        stream = chat(self.two, PROMPTS[0], stream=True)
        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        self.assertEqual(text, want[PROMPTS[0]])
        with concurrent.futures.ThreadPoolExecutor(len(PROMPTS)) as pool:
            got = list(pool.map(lambda p: chat(self.two, p).choices[0].message.content, PROMPTS))
        self.assertEqual(got, [want[p] for p in PROMPTS])

    def test_repeat_hits_the_prefix_cache(self):
        first = chat(self.two, "Describe a river in one sentence.")
        again = chat(self.two, "Describe a river in one sentence.")
        self.assertEqual(again.choices[0].message.content, first.choices[0].message.content)
        self.assertGreater(again.usage.prompt_tokens_details.cached_tokens, 0)
        self.assertEqual(again.usage.prompt_tokens, first.usage.prompt_tokens)
        status, _, metrics = self.two.request("GET", "/metrics")
        self.assertEqual(status, 200)
        self.assertIn("ninfer_prefix_cache_hits_tokens_total", metrics)


if __name__ == "__main__":
    unittest.main(verbosity=2)
