#!/usr/bin/env python3
"""`ninfer serve` driven by the official `anthropic` SDK: messages streamed and not (the
event sequence), thinking blocks, tool_use (tool_choice tool/any/auto/none, input_json_delta),
stop_sequences, prefill continuation, count_tokens, errors in Anthropic's shape."""
import os
import sys
import unittest

import anthropic

sys.path.insert(0, os.path.dirname(__file__))
from server_util import KEY, Server  # noqa: E402

SERVER = None
WEATHER = {"name": "get_weather", "description": "Weather of a city",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                            "required": ["city"]}}
USER = [{"role": "user", "content": "What is the weather in Paris?"}]


def setUpModule():
    global SERVER
    SERVER = Server()


def tearDownModule():
    assert SERVER.stop() == 0


def client(key=KEY):
    return anthropic.Anthropic(base_url=SERVER.url, api_key=key, max_retries=0, timeout=120)


class Messages(unittest.TestCase):
    def test_whole_and_streamed_agree(self):
        kw = dict(model="tiny_chat", max_tokens=20, messages=USER, system="Be brief.",
                  extra_body={"temperature": 0.8, "top_p": 0.9, "top_k": 30, "seed": 4})
        m = client().messages.create(**kw)
        self.assertEqual(m.type, "message")
        self.assertEqual(m.role, "assistant")
        self.assertTrue(m.id.startswith("msg_"))
        self.assertIn(m.stop_reason, ("end_turn", "max_tokens"))
        self.assertLessEqual(m.usage.output_tokens, 20)
        self.assertEqual([b.type for b in m.content], ["text"])  # thinking is off by default
        events = []
        with client().messages.stream(**kw) as stream:
            for ev in stream:
                events.append(ev.type)
            final = stream.get_final_message()
        self.assertEqual(events[0], "message_start")
        self.assertEqual(events[-1], "message_stop")
        self.assertEqual(events[-2], "message_delta")
        self.assertIn("content_block_start", events)
        self.assertEqual(events.count("content_block_start"), events.count("content_block_stop"))
        # input_tokens excludes the prompt tokens read from the prefix cache (the second
        # request may read more of them): the prompt is the sum
        prompt = m.usage.input_tokens + m.usage.cache_read_input_tokens
        self.assertEqual(final.usage.input_tokens + final.usage.cache_read_input_tokens, prompt)
        self.assertEqual([b.text for b in final.content], [b.text for b in m.content])
        self.assertEqual(final.stop_reason, m.stop_reason)
        count = client().messages.count_tokens(model="tiny_chat", messages=USER,
                                               system="Be brief.")
        self.assertEqual(count.input_tokens, prompt)

    def test_thinking_blocks(self):
        kw = dict(model="tiny_chat", max_tokens=30, messages=USER,
                  thinking={"type": "enabled", "budget_tokens": 8})
        m = client().messages.create(**kw)
        types = [b.type for b in m.content]
        self.assertEqual(types[0], "thinking")
        # the budget closes the reasoning after 8 tokens
        self.assertIn(m.stop_reason, ("end_turn", "max_tokens"))
        with client().messages.stream(**kw) as stream:
            deltas = [ev.delta.type for ev in stream if ev.type == "content_block_delta"]
            final = stream.get_final_message()
        self.assertIn("thinking_delta", deltas)
        self.assertEqual(final.content[0].type, "thinking")
        self.assertTrue(final.content[0].thinking)

    def test_tool_use_forced_streamed_and_whole(self):
        for choice in [{"type": "tool", "name": "get_weather"}, {"type": "any"}]:
            kw = dict(model="tiny_chat", max_tokens=60, messages=USER, tools=[WEATHER],
                      tool_choice=choice)
            m = client().messages.create(**kw)
            uses = [b for b in m.content if b.type == "tool_use"]
            self.assertTrue(uses, m)
            self.assertEqual(uses[0].name, "get_weather")
            self.assertTrue(uses[0].id.startswith("toolu_"))
            self.assertIsInstance(uses[0].input, dict)
            self.assertIn(m.stop_reason, ("tool_use", "max_tokens"))
            with client().messages.stream(**kw) as stream:
                kinds = [ev.delta.type for ev in stream if ev.type == "content_block_delta"]
                final = stream.get_final_message()
            streamed = [b for b in final.content if b.type == "tool_use"]
            self.assertEqual(streamed[0].name, "get_weather")
            self.assertIsInstance(streamed[0].input, dict)
            if streamed[0].input:
                self.assertIn("input_json_delta", kinds)

    def test_tool_history_and_none(self):
        history = USER + [
            {"role": "assistant", "content": [
                {"type": "text", "text": "Let me check."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                 "input": {"city": "Paris"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}]}]
        m = client().messages.create(model="tiny_chat", max_tokens=20, messages=history,
                                     tools=[WEATHER], tool_choice={"type": "none"})
        self.assertFalse([b for b in m.content if b.type == "tool_use"])

    def test_stop_sequences_and_prefill(self):
        prefill = client().messages.create(model="tiny_chat", max_tokens=5, messages=USER + [
            {"role": "assistant", "content": "The answer is"}])
        self.assertEqual(prefill.content[0].type, "text")
        for seed in range(30, 50):  # "seed" and "temperature" are ninfer extensions here
            base = dict(model="tiny_chat", max_tokens=40, messages=USER,
                        extra_body={"temperature": 2.0, "seed": seed})
            text = client().messages.create(**base).content[0].text
            stop = next((text[i] for i in range(2, len(text)) if text[i].strip() and
                         text[i] != "\ufffd" and text.find(text[i]) == i), None)
            if stop:
                break
        else:
            self.skipTest("no usable stop sequence in the random outputs")
        s = client().messages.create(stop_sequences=[stop], **base)
        self.assertEqual(s.stop_reason, "stop_sequence")
        self.assertEqual(s.stop_sequence, stop)
        self.assertEqual(s.content[0].text, text[:text.find(stop)].rstrip())

    def test_errors(self):
        with self.assertRaises(anthropic.AuthenticationError):
            client("wrong").messages.create(model="tiny_chat", max_tokens=5, messages=USER)
        with self.assertRaises(anthropic.NotFoundError):
            client().messages.create(model="claude-nope", max_tokens=5, messages=USER)
        with self.assertRaises(anthropic.BadRequestError) as e:
            client().messages.create(model="tiny_chat", max_tokens=5, messages=[
                {"role": "user", "content": [{"type": "image", "source": {
                    "type": "base64", "media_type": "image/png", "data": "AAAA"}}]}])
        self.assertEqual(e.exception.body["type"], "error")
        self.assertEqual(e.exception.body["error"]["type"], "invalid_request_error")
        status, _, body = SERVER.request("POST", "/v1/messages", {"model": "tiny_chat",
                                                                  "messages": USER})
        self.assertEqual(status, 400)
        self.assertIn("max_tokens", body["error"]["message"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
