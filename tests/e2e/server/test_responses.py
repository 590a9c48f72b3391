#!/usr/bin/env python3
"""`ninfer serve`'s Responses API (POST /v1/responses) through the official `openai` SDK's
`client.responses.create`, whole and streamed: text and item input, instructions, function tools
with their calls and outputs, forced tool choice, reasoning effort, text.format JSON schemas,
usage, stored responses (previous_response_id, retrieve, delete, input_items; a server started
with --responses-store 0 is stateless) and the 400s. The tiny fixture's outputs are random, so
the checks are shapes and invariants (streamed equals whole for one seed, a continued response
equals the same conversation sent whole)."""
import json
import os
import sys
import unittest

import openai

sys.path.insert(0, os.path.dirname(__file__))
from server_util import KEY, Server  # noqa: E402

SERVER = None
WEATHER = {"type": "function", "name": "get_weather", "description": "Weather of a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                          "required": ["city"]}}
NO_THINK = {"chat_template_kwargs": {"enable_thinking": False}}


def setUpModule():
    global SERVER
    SERVER = Server()


def tearDownModule():
    assert SERVER.stop() == 0


def client():
    return openai.OpenAI(base_url=SERVER.url + "/v1", api_key=KEY, max_retries=0, timeout=120)


def stream(**kw):
    """The events of a streamed response and the final Response."""
    events = list(client().responses.create(stream=True, **kw))
    return events, events[-1].response


class StoredResponses(unittest.TestCase):
    def test_previous_response_id_continues_the_conversation(self):
        c = client()
        kw = dict(model="tiny_chat", temperature=0, max_output_tokens=6, extra_body=NO_THINK)
        r1 = c.responses.create(input="Hello there", **kw)
        self.assertTrue(r1.store)
        r2 = c.responses.create(input="And then?", previous_response_id=r1.id, **kw)
        self.assertEqual(r2.previous_response_id, r1.id)
        # The same conversation sent whole (and not stored) gives the same greedy answer.
        whole = [{"role": "user", "content": "Hello there"},
                 *[o.model_dump(exclude_none=True) for o in r1.output],
                 {"role": "user", "content": "And then?"}]
        r2_whole = c.responses.create(input=whole, store=False, **kw)
        self.assertFalse(r2_whole.store)
        self.assertEqual(r2.output_text, r2_whole.output_text)
        self.assertEqual(r2.usage.input_tokens, r2_whole.usage.input_tokens)
        got = c.responses.retrieve(r2.id)
        self.assertEqual((got.id, got.output_text), (r2.id, r2.output_text))
        # input_items: the conversation before r2's output, newest first by default.
        status, _, items = SERVER.request("GET", f"/v1/responses/{r2.id}/input_items")
        self.assertEqual(status, 200, items)
        self.assertEqual([i["role"] for i in items["data"]], ["user", "assistant", "user"])
        self.assertEqual(items["data"][0]["content"], "And then?")
        self.assertFalse(items["has_more"])
        first = c.responses.input_items.list(r2.id, order="asc", limit=1)
        self.assertTrue(first.has_more)
        second = c.responses.input_items.list(r2.id, order="asc", limit=1, after=first.data[0].id)
        self.assertEqual(second.data[0].role, "assistant")
        # Streamed and continued: stored once the stream ends.
        _, final = stream(input="Once more", previous_response_id=r2.id, **kw)
        self.assertEqual(final.previous_response_id, r2.id)
        self.assertEqual(c.responses.retrieve(final.id).output_text, final.output_text)
        # An item_reference stands for the stored item it names.
        ref = c.responses.create(input=[{"role": "user", "content": "Hello there"},
                                        {"type": "item_reference", "id": r1.output[-1].id},
                                        {"role": "user", "content": "And then?"}],
                                 store=False, **kw)
        self.assertEqual(ref.output_text, r2.output_text)
        # Not stored, or deleted: gone.
        with self.assertRaises(openai.NotFoundError):
            c.responses.retrieve(r2_whole.id)
        c.responses.delete(r1.id)
        with self.assertRaises(openai.NotFoundError):
            c.responses.retrieve(r1.id)
        with self.assertRaises(openai.BadRequestError) as e:
            c.responses.create(input="x", previous_response_id=r1.id, **kw)
        self.assertIn(r1.id, str(e.exception))
        status, _, _ = SERVER.request("DELETE", "/v1/responses/" + r1.id)
        self.assertEqual(status, 404)
        status, _, reply = SERVER.request("GET", f"/v1/responses/{r2.id}/input_items?order=up")
        self.assertEqual((status, reply["error"]["param"]), (400, "order"))

    def test_stateless_server(self):
        stateless = Server("--responses-store", "0")
        try:
            status, _, reply = stateless.request("POST", "/v1/responses", {
                "model": "tiny_chat", "input": "x", "max_output_tokens": 2})
            self.assertEqual(status, 200, reply)
            self.assertFalse(reply["store"])
            status, _, reply = stateless.request("POST", "/v1/responses", {
                "model": "tiny_chat", "input": "x", "previous_response_id": reply["id"]})
            self.assertEqual((status, reply["error"]["param"]), (400, "previous_response_id"))
            self.assertIn("stateless", reply["error"]["message"])
            status, _, _ = stateless.request("GET", "/v1/responses/resp_x")
            self.assertEqual(status, 404)
        finally:
            self.assertEqual(stateless.stop(), 0)


class ResponsesApi(unittest.TestCase):
    def test_text_input_whole(self):
        r = client().responses.create(model="tiny_chat", input="Hello there", max_output_tokens=12,
                                      temperature=0, extra_body=NO_THINK)
        self.assertEqual(r.object, "response")
        self.assertTrue(r.id.startswith("resp_"))
        self.assertIn(r.status, ("completed", "incomplete"))
        self.assertEqual(r.output[-1].type, "message")
        self.assertEqual(r.output[-1].role, "assistant")
        self.assertEqual(r.output_text, r.output[-1].content[0].text)
        self.assertGreater(r.usage.input_tokens, 0)
        self.assertEqual(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens)
        self.assertLessEqual(r.usage.output_tokens, 12)
        if r.status == "incomplete":
            self.assertEqual(r.incomplete_details.reason, "max_output_tokens")

    def test_streamed_equals_whole(self):
        kw = dict(model="tiny_chat", input="Tell me a story", instructions="Be brief.",
                  max_output_tokens=16, temperature=0.8, extra_body={"seed": 11, **NO_THINK})
        whole = client().responses.create(**kw)
        events, final = stream(**kw)
        types = [e.type for e in events]
        self.assertEqual(types[:2], ["response.created", "response.in_progress"])
        self.assertIn(types[-1], ("response.completed", "response.incomplete"))
        self.assertEqual([e.sequence_number for e in events], list(range(len(events))))
        deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
        self.assertEqual(deltas, whole.output_text)
        self.assertEqual(final.output_text, whole.output_text)
        done = [e for e in events if e.type == "response.output_text.done"]
        self.assertEqual(len(done), 1)
        self.assertEqual(done[0].text, whole.output_text)
        added = [e.item.id for e in events if e.type == "response.output_item.added"]
        self.assertEqual(added, [item.id for item in final.output])
        self.assertEqual(final.usage.output_tokens, whole.usage.output_tokens)

    def test_reasoning_items(self):
        _, final = stream(model="tiny_chat", input="Think first", max_output_tokens=24,
                          temperature=0, reasoning={"effort": "high"})
        whole = client().responses.create(model="tiny_chat", input="Think first",
                                          max_output_tokens=24, temperature=0,
                                          reasoning={"effort": "high"})
        kinds = [item.type for item in whole.output]
        self.assertEqual(kinds, [item.type for item in final.output])
        if "reasoning" in kinds:  # the prompt opens <think>: the reasoning comes first
            self.assertEqual(kinds[0], "reasoning")
            self.assertGreater(whole.usage.output_tokens_details.reasoning_tokens, 0)
        self.assertEqual(whole.reasoning.effort, "high")

    def test_forced_function_call_and_follow_up(self):
        for streamed in (False, True):
            kw = dict(model="tiny_chat", input="Weather in Paris?", tools=[WEATHER],
                      tool_choice={"type": "function", "name": "get_weather"},
                      max_output_tokens=64, temperature=0, extra_body=NO_THINK)
            r = stream(**kw)[1] if streamed else client().responses.create(**kw)
            calls = [item for item in r.output if item.type == "function_call"]
            self.assertGreaterEqual(len(calls), 1, r.output)
            self.assertEqual(calls[0].name, "get_weather")
            self.assertTrue(calls[0].call_id)
            self.assertIsInstance(json.loads(calls[0].arguments), dict)
        # The call and its output go back as input items.
        follow = client().responses.create(
            model="tiny_chat", tools=[WEATHER], max_output_tokens=8, temperature=0,
            extra_body=NO_THINK,
            input=[{"role": "user", "content": "Weather in Paris?"},
                   {"type": "function_call", "call_id": calls[0].call_id, "name": "get_weather",
                    "arguments": calls[0].arguments},
                   {"type": "function_call_output", "call_id": calls[0].call_id,
                    "output": "sunny, 21 C"}])
        self.assertIn(follow.status, ("completed", "incomplete"))

    def test_streamed_function_call_events(self):
        events, final = stream(model="tiny_chat", input="Weather?", tools=[WEATHER],
                               tool_choice="required", max_output_tokens=64, temperature=0,
                               extra_body=NO_THINK)
        calls = [item for item in final.output if item.type == "function_call"]
        self.assertGreaterEqual(len(calls), 1)
        args = "".join(e.delta for e in events
                       if e.type == "response.function_call_arguments.delta"
                       and e.item_id == calls[0].id)
        self.assertEqual(args, calls[0].arguments)
        done = [e for e in events if e.type == "response.function_call_arguments.done"]
        self.assertEqual(done[0].arguments, calls[0].arguments)

    def test_json_schema_format(self):
        schema = {"type": "object", "properties": {"name": {"type": "string"}},
                  "required": ["name"], "additionalProperties": False}
        r = client().responses.create(
            model="tiny_chat", input="A name, as JSON", max_output_tokens=64, temperature=0,
            text={"format": {"type": "json_schema", "name": "person", "schema": schema}},
            extra_body=NO_THINK)
        if r.status == "completed":
            value = json.loads(r.output_text)
            self.assertIsInstance(value["name"], str)
        self.assertEqual(r.text.format.type, "json_schema")

    def test_message_items_and_roles(self):
        r = client().responses.create(
            model="tiny_chat", max_output_tokens=4, temperature=0, extra_body=NO_THINK,
            input=[{"role": "developer", "content": "Answer in French."},
                   {"type": "message", "role": "user",
                    "content": [{"type": "input_text", "text": "Hi"}]},
                   {"role": "assistant", "content": [{"type": "output_text", "text": "Salut"}]},
                   {"role": "user", "content": "Again"}])
        self.assertIn(r.status, ("completed", "incomplete"))

    def test_stateless_and_bad_input(self):
        cases = [({"input": "x", "previous_response_id": "resp_1"}, "previous_response_id"),
                 ({"input": "x", "conversation": "conv_1"}, "conversation"),
                 ({}, "input"),
                 ({"input": []}, "input"),
                 ({"input": [{"type": "item_reference", "id": "x"}]}, "input"),
                 ({"input": [{"role": "user", "content": [{"type": "input_image"}]}]}, "input"),
                 ({"input": "x", "tools": [{"type": "web_search"}]}, "tools"),
                 ({"input": "x", "max_output_tokens": -3}, "max_output_tokens"),
                 ({"input": "x", "text": {"format": {"type": "xml"}}}, "text.format"),
                 ({"input": [{"type": 7}]}, "input.type"),
                 ({"input": "x", "background": True}, "background")]
        for body, param in cases:
            status, _, reply = SERVER.request("POST", "/v1/responses", {"model": "tiny_chat", **body})
            self.assertEqual(status, 400, (body, reply))
            self.assertEqual(reply["error"]["param"], param, (body, reply))


if __name__ == "__main__":
    unittest.main()
