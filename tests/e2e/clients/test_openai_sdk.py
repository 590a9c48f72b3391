#!/usr/bin/env python3
"""Client matrix: the official `openai` SDK against `ninfer serve` on the demo model, the helpers
tests/e2e/server/test_openai.py and test_responses.py (raw shapes on the tiny random fixture) do
not cover: pydantic `.parse()` (`client.chat.completions.parse`, its `client.beta.chat.
completions.parse` alias, `openai.pydantic_function_tool` with `parsed_arguments`, the
`.stream()` helper), forced tool calls whose arguments the client validates, and
`client.responses.create` / `.parse` / `.stream`, whole and streamed, returning schema-valid
objects and non-empty text."""
import json
import os
import sys
import unittest

import openai

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clients_util import (KEY, MODEL, NO_THINK, SCHEMAS, TIME_TOOL, USER, WEATHER_SCHEMA,  # noqa: E402
                          WEATHER_TOOL, Person, Weather, demo_server, valid)

SERVER = None


def setUpModule():
    global SERVER
    SERVER = demo_server()


def tearDownModule():
    assert SERVER.stop() == 0


def client():
    return openai.OpenAI(base_url=SERVER.url + "/v1", api_key=KEY, max_retries=0, timeout=120)


class Chat(unittest.TestCase):
    def test_whole_and_streamed_text(self):
        kw = dict(model=MODEL, messages=[{"role": "user", "content": "Say hello."}],
                  max_tokens=32, seed=7, temperature=0.7, extra_body=NO_THINK)
        whole = client().chat.completions.create(**kw).choices[0]
        self.assertTrue(whole.message.content, whole)
        text, finish = "", None
        for chunk in client().chat.completions.create(stream=True, **kw):
            for c in chunk.choices:
                text += c.delta.content or ""
                finish = c.finish_reason or finish
        self.assertTrue(text)
        self.assertEqual(text, whole.message.content)  # one seed: the same tokens
        self.assertEqual(finish, whole.finish_reason)

    def test_forced_tool_calls_validate(self):
        """Named and `required` tool choices, thinking on (the server's --reasoning-budget ends
        it): the arguments validate against the tool's schema."""
        for tool_choice, names in [({"type": "function", "function": {"name": "get_weather"}},
                                    ["get_weather"]),
                                   ("required", ["get_weather", "get_time"])]:
            for seed in (1, 2, 3):
                r = client().chat.completions.create(
                    model=MODEL, messages=USER, tools=[WEATHER_TOOL, TIME_TOOL],
                    tool_choice=tool_choice, parallel_tool_calls=False, max_tokens=256,
                    seed=seed, temperature=1.0)
                c = r.choices[0]
                self.assertEqual(c.finish_reason, "tool_calls", c)
                self.assertEqual(len(c.message.tool_calls), 1, c)
                call = c.message.tool_calls[0]
                self.assertIn(call.function.name, names)
                ok, why = valid(SCHEMAS[call.function.name], json.loads(call.function.arguments))
                self.assertTrue(ok, (tool_choice, call.function.arguments, why))
                if call.function.name == "get_weather":
                    Weather.model_validate_json(call.function.arguments)


class Parse(unittest.TestCase):
    def check_person(self, completion):
        c = completion.choices[0]
        self.assertEqual(c.finish_reason, "stop", c)
        self.assertIsNone(c.message.refusal)
        self.assertIsInstance(c.message.parsed, Person)
        self.assertEqual(Person.model_validate_json(c.message.content), c.message.parsed)

    def test_parse_pydantic_response_format(self):
        messages = [{"role": "user", "content": "Describe a user called Ada, aged 36."}]
        for parse in (client().chat.completions.parse, client().beta.chat.completions.parse):
            for seed in (1, 2):
                self.check_person(parse(model=MODEL, messages=messages, response_format=Person,
                                        max_tokens=200, seed=seed, temperature=1.0,
                                        extra_body=NO_THINK))

    def test_parse_with_reasoning_effort(self):
        """Thinking on with `reasoning_effort: low`: the JSON still comes whole after it."""
        r = client().chat.completions.parse(
            model=MODEL, messages=[{"role": "user", "content": "A user called Bob."}],
            response_format=Person, max_tokens=256, seed=4, temperature=1.0,
            reasoning_effort="low")
        self.check_person(r)

    def test_pydantic_function_tool_parsed_arguments(self):
        tool = openai.pydantic_function_tool(Weather, name="get_weather")
        self.assertTrue(tool["function"]["strict"])
        for seed in (1, 2):
            r = client().chat.completions.parse(
                model=MODEL, messages=USER, tools=[tool],
                tool_choice={"type": "function", "function": {"name": "get_weather"}},
                max_tokens=200, seed=seed, temperature=1.0, extra_body=NO_THINK)
            c = r.choices[0]
            self.assertEqual(c.finish_reason, "tool_calls", c)
            call = c.message.tool_calls[0]
            self.assertIsInstance(call.function.parsed_arguments, Weather)
            ok, why = valid(WEATHER_SCHEMA, json.loads(call.function.arguments))
            self.assertTrue(ok, why)

    def test_stream_helper_parsed(self):
        deltas = []
        with client().chat.completions.stream(
                model=MODEL, messages=[{"role": "user", "content": "A user called Eve."}],
                response_format=Person, max_tokens=200, seed=5, temperature=1.0,
                extra_body=NO_THINK) as stream:
            for event in stream:
                if event.type == "content.delta":
                    deltas.append(event.delta)
            final = stream.get_final_completion()
        self.check_person(final)
        self.assertEqual("".join(deltas), final.choices[0].message.content)


class Responses(unittest.TestCase):
    def test_create_whole_and_streamed_text(self):
        kw = dict(model=MODEL, input="Say hello.", instructions="Be brief.",
                  max_output_tokens=32, temperature=0.7, extra_body={"seed": 3, **NO_THINK})
        whole = client().responses.create(**kw)
        self.assertTrue(whole.output_text, whole)
        events = list(client().responses.create(stream=True, **kw))
        text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
        self.assertTrue(text)
        self.assertEqual(text, whole.output_text)
        self.assertIn(events[-1].type, ("response.completed", "response.incomplete"))
        self.assertEqual(events[-1].response.output_text, text)

    def test_parse_text_format(self):
        for seed in (1, 2):
            r = client().responses.parse(model=MODEL, input="A user called Ada, aged 36.",
                                         text_format=Person, max_output_tokens=200,
                                         temperature=1.0, extra_body={"seed": seed, **NO_THINK})
            self.assertEqual(r.status, "completed", r)
            self.assertIsInstance(r.output_parsed, Person)
            self.assertEqual(Person.model_validate_json(r.output_text), r.output_parsed)

    def test_stream_text_format(self):
        with client().responses.stream(model=MODEL, input="A user called Eve.",
                                       text_format=Person, max_output_tokens=200,
                                       temperature=1.0, extra_body={"seed": 6, **NO_THINK}) as s:
            text = "".join(e.delta for e in s if e.type == "response.output_text.delta")
            final = s.get_final_response()
        self.assertIsInstance(final.output_parsed, Person)
        self.assertEqual(text, final.output_text)

    def test_forced_function_call_whole_and_streamed(self):
        tool = {"type": "function", "name": "get_weather", "description": "Weather of a city",
                "parameters": WEATHER_SCHEMA, "strict": True}
        kw = dict(model=MODEL, input=USER[0]["content"], tools=[tool],
                  tool_choice={"type": "function", "name": "get_weather"},
                  parallel_tool_calls=False,  # exactly one call, whatever the model would add
                  max_output_tokens=256, temperature=1.0, reasoning={"effort": "low"},
                  extra_body={"seed": 8})
        whole = client().responses.create(**kw)
        events = list(client().responses.create(stream=True, **kw))
        final = events[-1].response
        for r in (whole, final):
            calls = [item for item in r.output if item.type == "function_call"]
            self.assertEqual(len(calls), 1, r.output)
            self.assertEqual(calls[0].name, "get_weather")
            ok, why = valid(WEATHER_SCHEMA, json.loads(calls[0].arguments))
            self.assertTrue(ok, (calls[0].arguments, why))
        self.assertEqual(final.output[-1].arguments, whole.output[-1].arguments)


if __name__ == "__main__":
    unittest.main()
