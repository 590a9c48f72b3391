#!/usr/bin/env python3
"""Client matrix: `litellm` against `ninfer serve` on the demo model, as an OpenAI-compatible
endpoint (`model="openai/<name>"`, `api_base=.../v1`, litellm's documented route for
OpenAI-compatible servers): chat whole and streamed (`stream_chunk_builder` rebuilds the
stream), a forced tool call whose arguments validate, and a pydantic `response_format`.

litellm is kept offline: LITELLM_LOCAL_MODEL_COST_MAP makes it read its bundled model map
instead of fetching it at import."""
import json
import os
import sys
import unittest
import warnings

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_TELEMETRY", "False")
import litellm  # noqa: E402

litellm.suppress_debug_info = True  # no "Provider List" banner when costing an unknown model

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clients_util import (KEY, MODEL, NO_THINK, TIME_TOOL, USER, WEATHER_SCHEMA,  # noqa: E402
                          WEATHER_TOOL, Person, Weather, demo_server, valid)

SERVER = None
PROMPT = [{"role": "user", "content": "Write a Python function that adds two numbers."}]


def setUpModule():
    global SERVER
    # litellm's TypedDicts make pydantic warn at every call (unittest resets filters at start)
    warnings.filterwarnings("ignore", category=UserWarning, module="pydantic")
    SERVER = demo_server()


def tearDownModule():
    assert SERVER.stop() == 0


def completion(**kw):
    return litellm.completion(model="openai/" + MODEL, api_base=SERVER.url + "/v1", api_key=KEY,
                              num_retries=0, timeout=120, **kw)


class LiteLLM(unittest.TestCase):
    def test_chat_whole_and_streamed(self):
        kw = dict(messages=PROMPT, max_tokens=40, seed=7, temperature=0.7, extra_body=NO_THINK)
        whole = completion(**kw)
        text = whole.choices[0].message.content
        self.assertTrue(text, whole)
        self.assertIn(whole.choices[0].finish_reason, ("stop", "length"))
        self.assertGreater(whole.usage.prompt_tokens, 0)
        self.assertLessEqual(whole.usage.completion_tokens, 40)
        chunks = list(completion(stream=True, **kw))
        streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        self.assertTrue(streamed)
        self.assertEqual(streamed, text)  # one seed: the same tokens
        rebuilt = litellm.stream_chunk_builder(chunks, messages=PROMPT)
        self.assertEqual(rebuilt.choices[0].message.content, text)

    def test_forced_tool_call(self):
        for seed in (1, 2, 3):
            r = completion(messages=USER, tools=[WEATHER_TOOL, TIME_TOOL],
                           tool_choice={"type": "function", "function": {"name": "get_weather"}},
                           max_tokens=256, seed=seed, temperature=1.0)
            c = r.choices[0]
            self.assertEqual(c.finish_reason, "tool_calls", c)
            self.assertTrue(c.message.tool_calls, c)
            for call in c.message.tool_calls:
                self.assertEqual(call.function.name, "get_weather")
                ok, why = valid(WEATHER_SCHEMA, json.loads(call.function.arguments))
                self.assertTrue(ok, (call.function.arguments, why))
                Weather.model_validate_json(call.function.arguments)

    def test_forced_tool_call_streamed(self):
        chunks = list(completion(stream=True, messages=USER, tools=[WEATHER_TOOL],
                                 tool_choice="required", parallel_tool_calls=False,
                                 max_tokens=256, seed=4, temperature=1.0, extra_body=NO_THINK))
        r = litellm.stream_chunk_builder(chunks, messages=USER)
        calls = r.choices[0].message.tool_calls
        self.assertEqual(len(calls), 1, r)
        self.assertEqual(r.choices[0].finish_reason, "tool_calls")
        ok, why = valid(WEATHER_SCHEMA, json.loads(calls[0].function.arguments))
        self.assertTrue(ok, (calls[0].function.arguments, why))

    def test_pydantic_response_format(self):
        for seed in (1, 2):
            r = completion(messages=[{"role": "user", "content": "A user called Ada."}],
                           response_format=Person, max_tokens=200, seed=seed, temperature=1.0,
                           extra_body=NO_THINK)
            self.assertEqual(r.choices[0].finish_reason, "stop", r)
            Person.model_validate_json(r.choices[0].message.content)


if __name__ == "__main__":
    unittest.main()
