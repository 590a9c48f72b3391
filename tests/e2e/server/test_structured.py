#!/usr/bin/env python3
"""Structured output under thinking, through the official SDKs: forced tool calls (OpenAI named
and `required`, Anthropic `tool` and `any`) are constrained to the whole qwen3_coder block, so
with thinking on and max_tokens 256 every seeded sampled request returns a call whose
arguments validate against the tool's schema, with finish reason tool_calls / tool_use;
parallel_tool_calls false gives exactly one call; reasoning budgets (reasoning_effort,
--reasoning-budget, Anthropic budget_tokens, the structured default) end the reasoning.

The tiny fixture is a random model: without the constraint its calls would be random text."""
import json
import os
import sys
import unittest

import anthropic
import openai

sys.path.insert(0, os.path.dirname(__file__))
from server_util import KEY, Server  # noqa: E402

try:
    import jsonschema

    def validates(schema, value):
        try:
            jsonschema.validate(value, schema)
            return True
        except jsonschema.ValidationError:
            return False
except ImportError:
    import jsonschema_rs

    def validates(schema, value):
        return jsonschema_rs.is_valid(schema, value)

SERVER = None
BUDGET_SERVER = None
SEEDS = range(1, 21)
WEATHER_PARAMS = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "minLength": 1, "maxLength": 40},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 10},
        "hourly": {"type": "boolean"},
    },
    "required": ["city", "unit"],
    "additionalProperties": False,
}
SUM_PARAMS = {
    "type": "object",
    "properties": {
        "values": {"type": "array", "items": {"type": "number"}, "minItems": 1,
                   "maxItems": 4},
        "label": {"$ref": "#/$defs/label"},
    },
    "required": ["values", "label"],
    "$defs": {"label": {"type": "string", "enum": ["total", "mean"]}},
}
WEATHER = {"type": "function", "function": {"name": "get_weather",
                                            "description": "Weather of a city",
                                            "parameters": WEATHER_PARAMS}}
SUM = {"type": "function", "function": {"name": "summarize", "parameters": SUM_PARAMS}}
SCHEMAS = {"get_weather": WEATHER_PARAMS, "summarize": SUM_PARAMS}
USER = [{"role": "user", "content": "What is the weather in Paris?"}]


def setUpModule():
    global SERVER, BUDGET_SERVER
    SERVER = Server()
    BUDGET_SERVER = Server("--reasoning-budget", "24")


def tearDownModule():
    assert SERVER.stop() == 0
    assert BUDGET_SERVER.stop() == 0


def oai(server=None):
    return openai.OpenAI(base_url=(server or SERVER).url + "/v1", api_key=KEY, max_retries=0,
                         timeout=120)


def claude():
    return anthropic.Anthropic(base_url=SERVER.url, api_key=KEY, max_retries=0, timeout=120)


class OpenAIForced(unittest.TestCase):
    def check(self, choice, tool_choice, names, parallel=None):
        self.assertEqual(choice.finish_reason, "tool_calls", choice)
        calls = choice.message.tool_calls
        self.assertTrue(calls, choice)
        if parallel is False:
            self.assertEqual(len(calls), 1)
        for call in calls:
            self.assertIn(call.function.name, names)
            args = json.loads(call.function.arguments)
            self.assertTrue(validates(SCHEMAS[call.function.name], args),
                            f"{tool_choice}: {call.function.arguments}")
        return calls

    def test_named_tool_every_seed_validates(self):
        tc = {"type": "function", "function": {"name": "get_weather"}}
        for seed in SEEDS:
            r = oai().chat.completions.create(model="tiny_chat", messages=USER,
                                              tools=[WEATHER, SUM], tool_choice=tc,
                                              max_tokens=256, seed=seed, temperature=1.0)
            calls = self.check(r.choices[0], tc, ["get_weather"])
            self.assertLessEqual(r.usage.completion_tokens, 256)
            self.assertGreater(r.usage.completion_tokens_details.reasoning_tokens, 0)

    def test_required_every_seed_validates_parallel_off(self):
        for seed in SEEDS:
            r = oai().chat.completions.create(model="tiny_chat", messages=USER,
                                              tools=[WEATHER, SUM], tool_choice="required",
                                              parallel_tool_calls=False, max_tokens=256,
                                              seed=seed, temperature=1.0)
            self.check(r.choices[0], "required", ["get_weather", "summarize"], parallel=False)

    def test_streamed_equals_whole(self):
        kw = dict(model="tiny_chat", messages=USER, tools=[WEATHER, SUM], tool_choice="required",
                  max_tokens=256, seed=5, temperature=1.0)
        whole = oai().chat.completions.create(**kw).choices[0]
        args, names, finish = {}, {}, None
        for chunk in oai().chat.completions.create(stream=True, **kw):
            for c in chunk.choices:
                for tc in c.delta.tool_calls or []:
                    if tc.function and tc.function.name:
                        names[tc.index] = tc.function.name
                    args[tc.index] = args.get(tc.index, "") + (tc.function.arguments or "")
                finish = c.finish_reason or finish
        self.assertEqual(finish, "tool_calls")
        self.assertEqual([names[i] for i in sorted(names)],
                         [c.function.name for c in whole.message.tool_calls])
        self.assertEqual([args[i] for i in sorted(args)],
                         [c.function.arguments for c in whole.message.tool_calls])

    def test_auto_stays_free(self):
        r = oai().chat.completions.create(model="tiny_chat", messages=USER, tools=[WEATHER],
                                          max_tokens=40, seed=3, temperature=1.0)
        self.assertNotEqual(r.choices[0].finish_reason, "tool_calls")


class AnthropicForced(unittest.TestCase):
    def check(self, r, names, one=False):
        self.assertEqual(r.stop_reason, "tool_use", r)
        uses = [b for b in r.content if b.type == "tool_use"]
        self.assertTrue(uses, r)
        if one:
            self.assertEqual(len(uses), 1)
        for b in uses:
            self.assertIn(b.name, names)
            self.assertTrue(validates(SCHEMAS[b.name], b.input), b.input)

    def test_tool_every_seed_validates_with_thinking(self):
        tools = [{"name": "get_weather", "input_schema": WEATHER_PARAMS},
                 {"name": "summarize", "input_schema": SUM_PARAMS}]
        for seed in SEEDS:
            r = claude().messages.create(model="tiny_chat", max_tokens=256, messages=USER,
                                         tools=tools,
                                         tool_choice={"type": "tool", "name": "summarize"},
                                         thinking={"type": "enabled", "budget_tokens": 1024},
                                         extra_body={"seed": seed, "temperature": 1.0})
            self.assertEqual(r.content[0].type, "thinking")
            self.check(r, ["summarize"])

    def test_any_every_seed_validates_one_call(self):
        tools = [{"name": "get_weather", "input_schema": WEATHER_PARAMS},
                 {"name": "summarize", "input_schema": SUM_PARAMS}]
        for seed in SEEDS:
            r = claude().messages.create(
                model="tiny_chat", max_tokens=256, messages=USER, tools=tools,
                tool_choice={"type": "any", "disable_parallel_tool_use": True},
                thinking={"type": "enabled", "budget_tokens": 2048},
                extra_body={"seed": seed, "temperature": 1.0})
            self.check(r, ["get_weather", "summarize"], one=True)


class Budgets(unittest.TestCase):
    def reasoning(self, server=None, **kw):
        r = oai(server).chat.completions.create(model="tiny_chat", messages=USER,
                                                temperature=1.0, **kw)
        return r, r.usage.completion_tokens_details.reasoning_tokens

    def test_server_default_budget_ends_reasoning(self):
        free, n_free = self.reasoning(max_tokens=200, seed=2)
        self.assertGreater(n_free, 150)  # the random model hardly ever closes </think> itself
        r, n = self.reasoning(BUDGET_SERVER, max_tokens=200, seed=2)
        self.assertLessEqual(n, 24 + 9)  # + "\\n</think>" spelled byte by byte at worst
        self.assertGreater(r.usage.completion_tokens, n)  # the answer came after the reasoning
        self.assertTrue(r.choices[0].message.content)

    def test_reasoning_effort_low_is_512(self):
        r, n = self.reasoning(max_tokens=700, seed=4, reasoning_effort="low")
        self.assertLessEqual(n, 512 + 9)
        self.assertGreater(r.usage.completion_tokens, n)

    def test_anthropic_budget_tokens(self):
        r = claude().messages.create(model="tiny_chat", max_tokens=120, messages=USER,
                                     thinking={"type": "enabled", "budget_tokens": 16},
                                     extra_body={"seed": 6, "temperature": 1.0})
        self.assertEqual(r.content[0].type, "thinking")
        self.assertTrue(any(b.type == "text" for b in r.content), r)

    def test_json_schema_every_seed_validates_with_thinking(self):
        schema = {"type": "object", "properties": {
            "name": {"type": "string"}, "age": {"type": "integer", "minimum": 0},
            "tags": {"type": "array", "items": {"type": "string"}},
            "role": {"enum": ["admin", "user"]}},
            "required": ["name", "age", "tags", "role"], "additionalProperties": False}
        for seed in SEEDS:
            r, n = self.reasoning(max_tokens=256, seed=seed,
                                  response_format={"type": "json_schema", "json_schema": {
                                      "name": "person", "schema": schema}})
            c = r.choices[0]
            self.assertEqual(c.finish_reason, "stop", c)
            self.assertTrue(validates(schema, json.loads(c.message.content)), c.message.content)

    def test_structured_default_leaves_room(self):
        schema = {"type": "object", "properties": {"ok": {"type": "boolean"}},
                  "required": ["ok"], "additionalProperties": False}
        for seed in range(1, 6):
            r, n = self.reasoning(max_tokens=256, seed=seed,
                                  response_format={"type": "json_schema", "json_schema": {
                                      "name": "r", "schema": schema}})
            self.assertLessEqual(n, 128 + 9)  # half of max_tokens is reserved for the answer
            self.assertTrue(r.choices[0].message.content)


if __name__ == "__main__":
    unittest.main()
