#!/usr/bin/env python3
"""Client matrix: the official `anthropic` SDK against `ninfer serve` on the demo model: messages
whole and streamed (`messages.stream().text_stream`), tools with `tool_choice` tool / any / auto,
whole and streamed (the SDK assembles input_json_delta), with thinking enabled under a budget,
and `messages.parse(output_format=Model)` (output_config.format JSON schema)."""
import os
import sys
import unittest
from typing import List, Literal

import anthropic
from pydantic import BaseModel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clients_util import (KEY, MODEL, SCHEMAS, TIME_SCHEMA, USER, WEATHER_SCHEMA,  # noqa: E402
                          Person, Weather, demo_server, valid)

SERVER = None


class Profile(BaseModel):
    """Person without the constraints the SDK's transform_schema() drops."""
    name: str
    age: int
    tags: List[str]
    role: Literal["admin", "user"]


TOOLS = [{"name": "get_weather", "description": "Weather of a city",
          "input_schema": WEATHER_SCHEMA},
         {"name": "get_time", "description": "Time in a zone", "input_schema": TIME_SCHEMA}]


def setUpModule():
    global SERVER
    SERVER = demo_server()


def tearDownModule():
    assert SERVER.stop() == 0


def client():
    return anthropic.Anthropic(base_url=SERVER.url, api_key=KEY, max_retries=0, timeout=120)


class Messages(unittest.TestCase):
    def test_whole_and_streamed_text(self):
        kw = dict(model=MODEL, max_tokens=32, system="Be brief.",
                  messages=[{"role": "user", "content": "Say hello."}],
                  extra_body={"seed": 5, "temperature": 0.7})
        m = client().messages.create(**kw)
        self.assertIn(m.stop_reason, ("end_turn", "max_tokens"))
        self.assertEqual([b.type for b in m.content], ["text"])  # thinking is off by default
        self.assertTrue(m.content[0].text)
        with client().messages.stream(**kw) as stream:
            text = "".join(stream.text_stream)
            final = stream.get_final_message()
        self.assertTrue(text)
        self.assertEqual(text, m.content[0].text)  # one seed: the same tokens
        self.assertEqual(final.content[0].text, text)

    def check_tool_use(self, m, names, one=True):
        self.assertEqual(m.stop_reason, "tool_use", m)
        uses = [b for b in m.content if b.type == "tool_use"]
        if one:
            self.assertEqual(len(uses), 1, m.content)
        for b in uses:
            self.assertIn(b.name, names)
            self.assertTrue(b.id.startswith("toolu_"), b.id)
            ok, why = valid(SCHEMAS[b.name], b.input)
            self.assertTrue(ok, (b.input, why))
            if b.name == "get_weather":
                Weather.model_validate(b.input)
        return uses

    def test_tool_choice_tool_and_any_with_thinking(self):
        for tool_choice, names in [({"type": "tool", "name": "get_weather"}, ["get_weather"]),
                                   ({"type": "any", "disable_parallel_tool_use": True},
                                    ["get_weather", "get_time"])]:
            for seed in (1, 2, 3):
                m = client().messages.create(
                    model=MODEL, max_tokens=256, messages=USER, tools=TOOLS,
                    tool_choice=tool_choice,
                    thinking={"type": "enabled", "budget_tokens": 1024},
                    extra_body={"seed": seed, "temperature": 1.0})
                kinds = [b.type for b in m.content]
                # a thinking block (omitted when the model closes </think> at once) comes first
                self.assertEqual(kinds, sorted(kinds, key=lambda k: k != "thinking"), kinds)
                # parallel calls unless disable_parallel_tool_use
                self.check_tool_use(m, names, one="disable_parallel_tool_use" in tool_choice)

    def test_tool_use_streamed_equals_whole(self):
        kw = dict(model=MODEL, max_tokens=200, messages=USER, tools=TOOLS,
                  tool_choice={"type": "tool", "name": "get_weather",
                               "disable_parallel_tool_use": True},
                  extra_body={"seed": 9, "temperature": 1.0})
        whole = self.check_tool_use(client().messages.create(**kw), ["get_weather"])
        with client().messages.stream(**kw) as stream:
            partial = "".join(e.delta.partial_json for e in stream
                              if e.type == "content_block_delta"
                              and e.delta.type == "input_json_delta")
            final = stream.get_final_message()
        streamed = self.check_tool_use(final, ["get_weather"])
        self.assertTrue(partial)
        self.assertEqual(streamed[0].input, whole[0].input)

    def test_tool_choice_auto_and_a_tool_result_turn(self):
        """`auto` is free: whatever it returns, a call validates; then the tool's result goes
        back as a tool_result block and the answer is text."""
        m = client().messages.create(model=MODEL, max_tokens=128, messages=USER, tools=TOOLS,
                                     tool_choice={"type": "auto"},
                                     extra_body={"seed": 2, "temperature": 1.0})
        self.assertIn(m.stop_reason, ("end_turn", "max_tokens", "tool_use"))
        if m.stop_reason == "tool_use":
            self.check_tool_use(m, ["get_weather", "get_time"], one=False)
        follow = client().messages.create(
            model=MODEL, max_tokens=32, tools=TOOLS, tool_choice={"type": "none"},
            messages=USER + [
                {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1",
                                                   "name": "get_weather",
                                                   "input": {"city": "Paris",
                                                             "unit": "celsius", "days": 3}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                              "content": "sunny, 21 C"}]}],
            extra_body={"seed": 2, "temperature": 0.7})
        self.assertNotEqual(follow.stop_reason, "tool_use")
        self.assertTrue(any(b.type == "text" and b.text for b in follow.content), follow)

    def test_parse_output_format(self):
        """`messages.parse(output_format=Model)` sends the SDK's transform_schema() of the model:
        constraints Anthropic's structured outputs do not support (minimum, maximum,
        minLength, maxLength, maxItems) are moved into the description (the SDK's
        anthropic/lib/_parse/_transform.py; https://docs.anthropic.com/en/docs/build-with-claude/
        structured-outputs, "JSON Schema limitations"), and the reply is validated against the
        original model. The server constrains to the schema it receives, so a model with such
        constraints could fail client-side validation against any Anthropic-compatible server:
        this parses an unconstrained model, and the raw output_config test below shows the
        constraints enforced when they are sent."""
        sent = anthropic.transform_schema(Person)
        self.assertNotIn("maximum", sent["properties"]["age"])  # the SDK dropped it
        for seed in (1, 2):
            m = client().messages.parse(
                model=MODEL, max_tokens=200, output_format=Profile,
                messages=[{"role": "user", "content": "Describe a user called Ada, aged 36."}],
                extra_body={"seed": seed, "temperature": 1.0})
            self.assertEqual(m.stop_reason, "end_turn", m)
            self.assertIsInstance(m.parsed_output, Profile)
            text = "".join(b.text for b in m.content if b.type == "text")
            self.assertEqual(Profile.model_validate_json(text), m.parsed_output)

    def test_output_config_schema_with_constraints(self):
        for seed in (1, 2):
            m = client().messages.create(
                model=MODEL, max_tokens=200, messages=USER,
                output_config={"format": {"type": "json_schema", "schema": WEATHER_SCHEMA}},
                extra_body={"seed": seed, "temperature": 1.0})
            self.assertEqual(m.stop_reason, "end_turn", m)
            Weather.model_validate_json(m.content[-1].text)


if __name__ == "__main__":
    unittest.main()
