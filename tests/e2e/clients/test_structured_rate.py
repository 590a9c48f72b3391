#!/usr/bin/env python3
"""Issue 13's acceptance gate for structured output on the demo model: 50 seeded, sampled
requests with thinking on (the template default is off, so it is asked for) and max_tokens 256,
served with the default reasoning reserve (no --reasoning-budget): 25 forced tool calls (OpenAI
tool_choice naming get_weather) and 25 json_schema responses. Every one of them must come back
with arguments / content that validate against the schema, and finish_reason "tool_calls" or
"stop" (never "length" with a cut-off object). parallel_tool_calls is on (the default), so a
forced call may come more than once: every call must name the tool and validate."""
import json
import os
import sys
import unittest
from concurrent.futures import ThreadPoolExecutor

import openai

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clients_util import (DEMO, KEY, MODEL, USER, WEATHER_SCHEMA, WEATHER_TOOL,  # noqa: E402
                          Person, Server, valid)

SERVER = None
PERSON_SCHEMA = Person.model_json_schema()
THINK = {"chat_template_kwargs": {"enable_thinking": True}}
REQUESTS = 25  # of each kind


def setUpModule():
    global SERVER
    SERVER = Server("--max-sequences", "8", model=DEMO)


def tearDownModule():
    assert SERVER.stop() == 0


def client():
    return openai.OpenAI(base_url=SERVER.url + "/v1", api_key=KEY, max_retries=0, timeout=300)


def forced_call(seed):
    r = client().chat.completions.create(
        model=MODEL, messages=USER, tools=[WEATHER_TOOL], max_tokens=256, seed=seed,
        temperature=0.8, tool_choice={"type": "function", "function": {"name": "get_weather"}},
        extra_body=THINK)
    calls = r.choices[0].message.tool_calls or []
    if r.choices[0].finish_reason != "tool_calls" or not calls:
        return False, f"seed {seed}: finish {r.choices[0].finish_reason}, {len(calls)} calls"
    for call in calls:  # parallel_tool_calls is on by default: each call is the forced one
        if call.function.name != "get_weather":
            return False, f"seed {seed}: called {call.function.name}"
        ok, why = valid(WEATHER_SCHEMA, json.loads(call.function.arguments))
        if not ok:
            return False, f"seed {seed}: {why}"
    return True, ""


def schema_answer(seed):
    r = client().chat.completions.create(
        model=MODEL, max_tokens=256, seed=seed, temperature=0.8, extra_body=THINK,
        messages=[{"role": "user", "content": "Describe a person as JSON."}],
        response_format={"type": "json_schema",
                         "json_schema": {"name": "person", "schema": PERSON_SCHEMA}})
    if r.choices[0].finish_reason != "stop":
        return False, f"seed {seed}: finish {r.choices[0].finish_reason}"
    try:
        value = json.loads(r.choices[0].message.content)
    except ValueError as e:
        return False, f"seed {seed}: not JSON ({e})"
    ok, why = valid(PERSON_SCHEMA, value)
    return ok, f"seed {seed}: {why}"


class StructuredRate(unittest.TestCase):
    def run_all(self, fn):
        with ThreadPoolExecutor(max_workers=8) as pool:
            results = list(pool.map(fn, range(REQUESTS)))
        failures = [why for ok, why in results if not ok]
        self.assertEqual(failures, [], f"{len(failures)} of {REQUESTS} failed")

    def test_forced_tool_calls_always_validate(self):
        self.run_all(forced_call)

    def test_json_schema_outputs_always_validate(self):
        self.run_all(schema_answer)


if __name__ == "__main__":
    unittest.main()
