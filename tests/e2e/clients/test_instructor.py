#!/usr/bin/env python3
"""Client matrix: `instructor` (instructor.from_openai over the official SDK) against `ninfer
serve` on the demo model, in its TOOLS, JSON_SCHEMA and JSON modes, with max_retries=0 (one
request, counted by a hook: a failure is not retried away).

- TOOLS sends the model as a function with tool_choice naming it, JSON_SCHEMA as
  response_format json_schema (strict): the server constrains both, so `response_model` comes
  back validated even from the weak demo model.
- JSON sends response_format json_object and puts the schema in a system message (instructor's
  v2/providers/openai/handlers.py, OpenAIJSONHandler). JSON mode guarantees valid JSON, not
  the schema ("JSON mode will not guarantee the output matches any specific schema, only that
  it is valid and parses without errors": https://platform.openai.com/docs/guides/
  structured-outputs#json-mode); the schema is only a prompt, which the demo model does not
  follow. So the JSON-mode tests check what the server guarantees: with a model that any JSON
  object satisfies, instructor returns the object the server sent; with a constrained model,
  either a valid object or a *schema* validation error (the content always parses as JSON,
  never `json_invalid`). See https://python.useinstructor.com/modes-comparison/ for the modes."""
import json
import os
import sys
import unittest

import instructor
import openai
import pydantic
from instructor.core.exceptions import InstructorRetryException
from pydantic import BaseModel, ConfigDict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clients_util import KEY, MODEL, NO_THINK, Person, Weather, demo_server  # noqa: E402

SERVER = None
ASK = [{"role": "user", "content": "Describe a user called Ada, aged 36."}]


class AnyObject(BaseModel):
    """Any JSON object validates: its keys become the fields."""
    model_config = ConfigDict(extra="allow")


def setUpModule():
    global SERVER
    SERVER = demo_server()


def tearDownModule():
    assert SERVER.stop() == 0


def patched(mode):
    """An instructor client and the list of requests it sends (a completion:kwargs hook)."""
    client = instructor.from_openai(
        openai.OpenAI(base_url=SERVER.url + "/v1", api_key=KEY, max_retries=0, timeout=120),
        mode=mode)
    sent = []
    client.on("completion:kwargs", lambda *args, **kwargs: sent.append(kwargs))
    return client, sent


class Modes(unittest.TestCase):
    def create(self, mode, response_model, seed, **kw):
        client, sent = patched(mode)
        kw.setdefault("extra_body", NO_THINK)
        try:
            return client.chat.completions.create_with_completion(
                model=MODEL, messages=kw.pop("messages", ASK), response_model=response_model,
                max_tokens=kw.pop("max_tokens", 200), seed=seed, temperature=1.0,
                max_retries=0, **kw)
        finally:
            self.assertEqual(len(sent), 1, sent)  # one request, no hidden retry
            self.last_sent = sent[0]

    def test_tools(self):
        for seed in (1, 2, 3):
            person, completion = self.create(instructor.Mode.TOOLS, Person, seed)
            self.assertIsInstance(person, Person)
            self.assertEqual(self.last_sent["tool_choice"]["function"]["name"], "Person")
            c = completion.choices[0]
            self.assertEqual(c.finish_reason, "tool_calls", c)
            args = c.message.tool_calls[0].function.arguments
            self.assertEqual(Person.model_validate_json(args).model_dump(), person.model_dump())

    def test_tools_with_thinking(self):
        """Thinking on (the server's --reasoning-budget ends it): the call still comes whole."""
        weather, completion = self.create(
            instructor.Mode.TOOLS, Weather, 4, extra_body=None, max_tokens=256,
            messages=[{"role": "user", "content": "Weather in Paris for 3 days, in celsius?"}])
        self.assertIsInstance(weather, Weather)

    def test_json_schema(self):
        for seed in (1, 2, 3):
            person, completion = self.create(instructor.Mode.JSON_SCHEMA, Person, seed)
            self.assertIsInstance(person, Person)
            self.assertEqual(self.last_sent["response_format"]["type"], "json_schema")
            c = completion.choices[0]
            self.assertEqual(c.finish_reason, "stop", c)
            self.assertEqual(Person.model_validate_json(c.message.content).model_dump(),
                             person.model_dump())

    def test_json_returns_the_servers_object(self):
        for seed in (1, 2, 3):
            obj, completion = self.create(instructor.Mode.JSON, AnyObject, seed)
            self.assertEqual(self.last_sent["response_format"], {"type": "json_object"})
            self.assertEqual(completion.choices[0].finish_reason, "stop")
            self.assertIsInstance(obj, AnyObject)
            self.assertEqual(obj.model_dump(), json.loads(completion.choices[0].message.content))

    def test_json_constrained_model_parses_as_json(self):
        """json_object does not carry the schema: a weak model may miss it, but the content is
        always JSON, so a failure is a schema error, never unparsable output."""
        for seed in (1, 2, 3):
            try:
                person, _ = self.create(instructor.Mode.JSON, Person, seed)
                self.assertIsInstance(person, Person)
            except InstructorRetryException as e:
                cause = e.__cause__
                while cause is not None and not isinstance(cause, pydantic.ValidationError):
                    cause = cause.__cause__
                self.assertIsInstance(cause, pydantic.ValidationError, repr(e))
                self.assertNotIn("json_invalid", [err["type"] for err in cause.errors()])
                content = e.last_completion.choices[0].message.content
                self.assertIsInstance(json.loads(content), dict)
                self.assertEqual(e.last_completion.choices[0].finish_reason, "stop")


if __name__ == "__main__":
    unittest.main()
