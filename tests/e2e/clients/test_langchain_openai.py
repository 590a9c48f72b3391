#!/usr/bin/env python3
"""Client matrix: `langchain-openai`'s ChatOpenAI against `ninfer serve` on the demo model
(`base_url=.../v1`): invoke and stream, `bind_tools` with a forced and a `required` tool choice
(AIMessage.tool_calls with valid args), and `with_structured_output(Model)` in the
`function_calling` and `json_schema` methods, returning validated pydantic objects (with
`include_raw=True`: no parsing error)."""
import os
import sys
import unittest

from langchain_core.messages import AIMessageChunk
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langchain_openai import ChatOpenAI

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clients_util import (KEY, MODEL, NO_THINK, Person, Weather, demo_server,  # noqa: E402
                          valid)

SERVER = None


@tool(args_schema=Weather)
def get_weather(city: str, unit: str, days: int) -> str:
    """Weather of a city."""
    return f"{city}: sunny"


@tool
def get_time(zone: str) -> str:
    """Time in a zone."""
    return "12:00"


def setUpModule():
    global SERVER
    SERVER = demo_server()


def tearDownModule():
    assert SERVER.stop() == 0


def chat(seed, thinking=False, max_tokens=200, **kw):
    return ChatOpenAI(model=MODEL, base_url=SERVER.url + "/v1", api_key=KEY, max_retries=0,
                      timeout=120, temperature=1.0 if seed else 0.7, seed=seed,
                      max_completion_tokens=max_tokens,
                      extra_body=None if thinking else NO_THINK, **kw)


class ChatModel(unittest.TestCase):
    def test_invoke_and_stream(self):
        llm = chat(seed=7, max_tokens=40)
        prompt = "Write a Python function that adds two numbers."
        whole = llm.invoke(prompt)
        self.assertTrue(whole.content, whole)
        self.assertIn(whole.response_metadata["finish_reason"], ("stop", "length"))
        self.assertGreater(whole.usage_metadata["input_tokens"], 0)
        chunks = list(llm.stream(prompt))
        self.assertTrue(all(isinstance(c, AIMessageChunk) for c in chunks))
        text = "".join(c.content for c in chunks)
        self.assertTrue(text)
        self.assertEqual(text, whole.content)  # one seed: the same tokens

    def test_bind_tools_forced_and_required(self):
        for tool_choice, names in [("get_weather", ["get_weather"]),
                                   ("any", ["get_weather", "get_time"])]:
            for seed in (1, 2):
                llm = chat(seed=seed, thinking=True, max_tokens=256).bind_tools(
                    [get_weather, get_time], tool_choice=tool_choice,
                    parallel_tool_calls=False)
                msg = llm.invoke("What is the weather in Paris, in celsius, for 3 days?")
                self.assertEqual(msg.invalid_tool_calls, [])
                self.assertEqual(len(msg.tool_calls), 1, msg)
                call = msg.tool_calls[0]
                self.assertIn(call["name"], names)
                sent = {"get_weather": get_weather, "get_time": get_time}[call["name"]]
                schema = convert_to_openai_tool(sent)["function"]["parameters"]  # as sent
                ok, why = valid(schema, call["args"])
                self.assertTrue(ok, (call["args"], why))
                if call["name"] == "get_weather":
                    self.assertIsInstance(get_weather.invoke(call["args"]), str)

    def test_structured_output_function_calling(self):
        for seed in (1, 2):
            llm = chat(seed=seed).with_structured_output(Person, method="function_calling",
                                                         include_raw=True)
            out = llm.invoke("Describe a user called Ada, aged 36.")
            self.assertIsNone(out["parsing_error"])
            self.assertIsInstance(out["parsed"], Person)
            self.assertEqual(out["raw"].tool_calls[0]["name"], "Person")

    def test_structured_output_json_schema(self):
        for seed in (1, 2):
            llm = chat(seed=seed).with_structured_output(Person, method="json_schema",
                                                         include_raw=True)
            out = llm.invoke("Describe a user called Ada, aged 36.")
            self.assertIsNone(out["parsing_error"])
            self.assertIsInstance(out["parsed"], Person)
            self.assertEqual(Person.model_validate_json(out["raw"].content), out["parsed"])

    def test_structured_output_json_schema_with_thinking(self):
        """Thinking on: the server's --reasoning-budget ends it and the JSON follows."""
        out = chat(seed=3, thinking=True, max_tokens=256).with_structured_output(
            Weather, method="json_schema").invoke("Weather in Paris for 3 days, in celsius.")
        self.assertIsInstance(out, Weather)


if __name__ == "__main__":
    unittest.main()
