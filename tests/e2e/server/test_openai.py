#!/usr/bin/env python3
"""`ninfer serve` driven by the official `openai` SDK: chat and completions, streamed and not,
reasoning split, logprobs, stop strings, n > 1, seeds, tools (auto/none/required/named,
streamed and whole), response_format, concurrent clients."""
import json
import os
import sys
import threading
import types
import unittest

import openai

sys.path.insert(0, os.path.dirname(__file__))
from server_util import KEY, Server, raw_text, split_reasoning  # noqa: E402

SERVER = None
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                    "days": {"type": "integer"}},
                   "required": ["city"]}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "parameters": {"type": "object", "properties": {}}}}
USER = [{"role": "user", "content": "What is the weather in Paris?"}]
NO_THINK = {"chat_template_kwargs": {"enable_thinking": False}}


def setUpModule():
    global SERVER
    SERVER = Server()


def tearDownModule():
    assert SERVER.stop() == 0


def client():
    return openai.OpenAI(base_url=SERVER.url + "/v1", api_key=KEY, max_retries=0, timeout=120)


def stream_chat(**kw):
    """Accumulates a streamed chat completion per choice."""
    out = {}
    usage = None
    for chunk in client().chat.completions.create(stream=True, **kw):
        if chunk.usage is not None:
            usage = chunk.usage
        for ch in chunk.choices:
            acc = out.setdefault(ch.index, {"content": "", "reasoning": "", "calls": {},
                                            "finish": None, "role": None, "logprobs": []})
            d = ch.delta
            acc["role"] = acc["role"] or d.role
            acc["content"] += d.content or ""
            acc["reasoning"] += getattr(d, "reasoning_content", None) or ""
            for tc in d.tool_calls or []:
                call = acc["calls"].setdefault(tc.index, {"id": None, "name": "", "args": ""})
                call["id"] = call["id"] or tc.id
                call["name"] += (tc.function.name or "") if tc.function else ""
                call["args"] += (tc.function.arguments or "") if tc.function else ""
            if ch.logprobs and ch.logprobs.content:
                acc["logprobs"] += ch.logprobs.content
            if ch.finish_reason:
                acc["finish"] = ch.finish_reason
    return out, usage


def usable_stop(text):
    """A one-character stop string first found after the start of `text` (not whitespace)."""
    for i in range(2, len(text)):
        ch = text[i]
        if ch.strip() and ch != "\ufffd" and text.find(ch) == i:
            return ch
    return None


class Models(unittest.TestCase):
    def test_list_and_retrieve(self):
        models = client().models.list()
        self.assertEqual([m.id for m in models.data], ["tiny_chat"])
        self.assertEqual(client().models.retrieve("tiny_chat").id, "tiny_chat")
        with self.assertRaises(openai.NotFoundError):
            client().models.retrieve("nope")


class Chat(unittest.TestCase):
    def test_shape_usage_and_reasoning_split(self):
        for kwargs, thinking in [({}, True), (NO_THINK, False)]:
            r = client().chat.completions.create(model="tiny_chat", messages=USER, max_tokens=24,
                                                 seed=3, logprobs=True, extra_body=kwargs)
            self.assertTrue(r.id.startswith("chatcmpl-"))
            self.assertEqual(r.object, "chat.completion")
            self.assertEqual(len(r.choices), 1)
            c = r.choices[0]
            self.assertEqual(c.message.role, "assistant")
            self.assertIn(c.finish_reason, ("stop", "length"))
            self.assertLessEqual(r.usage.completion_tokens, 24)
            self.assertEqual(r.usage.total_tokens,
                             r.usage.prompt_tokens + r.usage.completion_tokens)
            cached = r.usage.prompt_tokens_details.cached_tokens  # from the prefix cache
            self.assertTrue(0 <= cached <= r.usage.prompt_tokens, r.usage)
            reasoning, content = split_reasoning(raw_text(c.logprobs.content), thinking)
            self.assertEqual((getattr(c.message, "reasoning_content", None) or "").strip(),
                             reasoning)
            self.assertEqual((c.message.content or "").strip(), content)
            status, _, tok = SERVER.request("POST", "/tokenize", {"messages": USER, **kwargs})
            self.assertEqual(status, 200)
            self.assertEqual(tok["count"], r.usage.prompt_tokens)

    def test_stream_equals_whole_for_one_seed(self):
        kw = dict(model="tiny_chat", messages=USER, max_tokens=20, seed=11, temperature=0.9,
                  top_p=0.95, extra_body={"top_k": 40, "min_p": 0.01, "repetition_penalty": 1.1},
                  presence_penalty=0.5, frequency_penalty=0.3)
        whole = client().chat.completions.create(**kw)
        streamed, usage = stream_chat(stream_options={"include_usage": True}, **kw)
        acc = streamed[0]
        self.assertEqual(acc["role"], "assistant")
        self.assertEqual(acc["content"], whole.choices[0].message.content or "")
        self.assertEqual(acc["reasoning"],
                         getattr(whole.choices[0].message, "reasoning_content", None) or "")
        self.assertEqual(acc["finish"], whole.choices[0].finish_reason)
        self.assertEqual(usage.completion_tokens, whole.usage.completion_tokens)
        self.assertEqual(usage.prompt_tokens, whole.usage.prompt_tokens)

    def test_seed_reproducible_and_n_choices(self):
        kw = dict(model="tiny_chat", messages=USER, max_tokens=12, logprobs=True)
        a = client().chat.completions.create(seed=5, **kw)
        b = client().chat.completions.create(seed=5, **kw)
        self.assertEqual([t.token for t in a.choices[0].logprobs.content],
                         [t.token for t in b.choices[0].logprobs.content])
        many = client().chat.completions.create(seed=5, n=3, **kw)
        self.assertEqual([c.index for c in many.choices], [0, 1, 2])
        # choice i samples with seed + i
        for i in range(3):
            one = client().chat.completions.create(seed=5 + i, **kw)
            self.assertEqual([t.token for t in many.choices[i].logprobs.content],
                             [t.token for t in one.choices[0].logprobs.content])
        outs = {tuple(t.token for t in c.logprobs.content) for c in many.choices}
        self.assertGreater(len(outs), 1)

    def test_greedy_logprobs(self):
        r = client().chat.completions.create(model="tiny_chat", messages=USER, max_tokens=8,
                                             temperature=0, logprobs=True, top_logprobs=4)
        for entry in r.choices[0].logprobs.content:
            self.assertLessEqual(entry.logprob, 0.0)
            self.assertEqual(len(entry.top_logprobs), 4)
            lps = [t.logprob for t in entry.top_logprobs]
            self.assertEqual(lps, sorted(lps, reverse=True))
            self.assertAlmostEqual(entry.logprob, lps[0], places=5)  # greedy picks the top one
            self.assertEqual(bytes(entry.bytes).decode("utf-8", "replace"), entry.token)

    def test_stop_string(self):
        for seed in range(21, 41):
            kw = dict(model="tiny_chat", messages=USER, max_tokens=40, seed=seed,
                      temperature=2.0, extra_body=NO_THINK)
            full = client().chat.completions.create(**kw).choices[0].message.content
            stop = usable_stop(full)
            if stop:
                break
        else:
            self.skipTest("the random outputs have no usable stop string")
        cut = client().chat.completions.create(stop=[stop, "unused-stop"], **kw).choices[0]
        self.assertEqual(cut.finish_reason, "stop")
        self.assertEqual(cut.message.content, full[:full.find(stop)].rstrip())
        streamed, _ = stream_chat(stop=stop, **kw)
        self.assertEqual(streamed[0]["content"], cut.message.content)


class Completions(unittest.TestCase):
    def test_text_prompts_echo_and_logprobs(self):
        r = client().completions.create(model="tiny_chat", prompt="the dog sleeps", seed=1,
                                        max_tokens=10, logprobs=2, echo=True)
        self.assertEqual(r.object, "text_completion")
        c = r.choices[0]
        self.assertTrue(c.text.startswith("the dog sleeps"))
        self.assertEqual(len(c.logprobs.tokens), len(c.logprobs.token_logprobs))
        self.assertTrue(all(len(t) <= 2 for t in c.logprobs.top_logprobs))
        self.assertEqual(c.logprobs.text_offset[0], len("the dog sleeps"))
        default = client().completions.create(model="tiny_chat", prompt="x",
                                              extra_body={"ignore_eos": True})
        self.assertEqual(default.usage.completion_tokens, 16)  # OpenAI's default max_tokens

    def test_logit_bias(self):
        """+100 forces a token, -100 bans one, both endpoints; a bad map is a 400 naming it."""
        status, _, tok = SERVER.request("POST", "/tokenize", {"prompt": " dog",
                                                              "return_token_strs": True})
        self.assertEqual(status, 200, tok)
        dog, dog_text = tok["tokens"][-1], tok["token_strs"][-1]
        kw = dict(model="tiny_chat", prompt="the cat", max_tokens=4, temperature=0,
                  extra_body={"ignore_eos": True})
        forced = client().completions.create(logit_bias={str(dog): 100}, **kw)
        self.assertEqual(forced.choices[0].text, dog_text * 4)
        plain = client().chat.completions.create(model="tiny_chat", messages=USER, max_tokens=3,
                                                 temperature=0, logprobs=True,
                                                 extra_body=NO_THINK)
        first = plain.choices[0].logprobs.content[0].token
        status, _, first_ids = SERVER.request("POST", "/tokenize", {"prompt": first})
        banned = client().chat.completions.create(
            model="tiny_chat", messages=USER, max_tokens=3, temperature=0, logprobs=True,
            logit_bias={str(first_ids["tokens"][0]): -100}, extra_body=NO_THINK)
        self.assertNotEqual(banned.choices[0].logprobs.content[0].token, first)
        for bad in ({"dog": 1}, {"1": 101}, {"999999999": 1}, [1]):
            with self.assertRaises(openai.BadRequestError) as e:
                client().completions.create(logit_bias=bad, **kw)
            self.assertEqual(e.exception.body.get("param"), "logit_bias", bad)

    def test_allowed_token_ids_and_truncate_prompt_tokens(self):
        """vLLM's allowed_token_ids (only those ids are drawn) and truncate_prompt_tokens (the
        prompt's last N tokens run; echo shows them; -1: the context's room; 0 is a 400)."""
        status, _, tok = SERVER.request("POST", "/tokenize", {"prompt": " dog",
                                                              "return_token_strs": True})
        dog, dog_text = tok["tokens"][-1], tok["token_strs"][-1]
        r = client().completions.create(model="tiny_chat", prompt="the cat", max_tokens=3,
                                        seed=1, extra_body={"allowed_token_ids": [dog],
                                                            "ignore_eos": True})
        self.assertEqual(r.choices[0].text, dog_text * 3)
        ids = list(range(20, 60))
        kw = dict(model="tiny_chat", prompt=ids, max_tokens=2, echo=True, temperature=0)
        cut = client().completions.create(extra_body={"truncate_prompt_tokens": 10}, **kw)
        self.assertEqual(cut.usage.prompt_tokens, 10)
        short = client().completions.create(**{**kw, "prompt": ids[-10:]})
        self.assertEqual(cut.choices[0].text, short.choices[0].text)  # the same run, echo included
        whole = client().completions.create(extra_body={"truncate_prompt_tokens": -1}, **kw)
        self.assertEqual(whole.usage.prompt_tokens, len(ids))
        for extra, param in (({"truncate_prompt_tokens": 0}, "truncate_prompt_tokens"),
                             ({"allowed_token_ids": []}, "allowed_token_ids"),
                             ({"allowed_token_ids": [10 ** 9]}, "allowed_token_ids")):
            with self.assertRaises(openai.BadRequestError) as e:
                client().completions.create(extra_body=extra, **kw)
            self.assertEqual(e.exception.body.get("param"), param, extra)

    def test_min_tokens(self):
        """vLLM's min_tokens: a stop id that would end the answer at once is held back until
        that many tokens; more than max_tokens is a 400 naming min_tokens."""
        kw = dict(model="tiny_chat", prompt="the cat", max_tokens=12, temperature=0)
        plain = client().completions.create(logprobs=0, **kw).choices[0]
        status, _, tok = SERVER.request("POST", "/tokenize", {"prompt": plain.logprobs.tokens[0]})
        self.assertEqual(status, 200, tok)
        self.assertEqual(len(tok["tokens"]), 1, tok)
        stop = {"stop_token_ids": tok["tokens"], "ignore_eos": True}
        cut = client().completions.create(extra_body=stop, **kw)
        self.assertEqual(cut.usage.completion_tokens, 1)
        self.assertEqual(cut.choices[0].finish_reason, "stop")
        held = client().completions.create(extra_body={**stop, "min_tokens": 6}, **kw)
        self.assertGreaterEqual(held.usage.completion_tokens, 6)
        with self.assertRaises(openai.BadRequestError) as e:
            client().completions.create(extra_body={"min_tokens": 13}, **kw)
        self.assertEqual(e.exception.body.get("param"), "min_tokens")

    def test_batch_ids_stream_and_stop(self):
        r = client().completions.create(model="tiny_chat", prompt=["a b", "c d"], n=2,
                                        max_tokens=5, seed=2)
        self.assertEqual(sorted(c.index for c in r.choices), [0, 1, 2, 3])
        ids = client().completions.create(model="tiny_chat", prompt=[297, 84, 101], max_tokens=3)
        self.assertEqual(ids.usage.prompt_tokens, 3)
        kw = dict(model="tiny_chat", prompt="the fox", max_tokens=30, seed=4, temperature=2.0,
                  extra_body={"ignore_eos": True})
        full = client().completions.create(**kw).choices[0].text
        text = "".join(c.choices[0].text for c in client().completions.create(stream=True, **kw)
                       if c.choices)
        self.assertEqual(text, full)
        stop = usable_stop(full)
        if stop:
            cut = client().completions.create(stop=stop, **kw).choices[0]
            self.assertEqual(cut.text, full[:full.find(stop)])
            self.assertEqual(cut.finish_reason, "stop")


class Tools(unittest.TestCase):
    def check_call(self, name, args_text):
        self.assertEqual(name, "get_weather")
        self.assertIsInstance(json.loads(args_text), dict)

    def test_named_and_required_whole_and_streamed(self):
        for choice in [{"type": "function", "function": {"name": "get_weather"}}, "required"]:
            kw = dict(model="tiny_chat", messages=USER, tools=[WEATHER, TIME], tool_choice=choice,
                      max_tokens=60, seed=8, extra_body=NO_THINK)
            r = client().chat.completions.create(**kw).choices[0]
            self.assertTrue(r.message.tool_calls, r)
            call = r.message.tool_calls[0]
            self.assertTrue(call.id.startswith("call_"))
            self.assertEqual(call.type, "function")
            if choice == "required":
                self.assertIn(call.function.name, ("get_weather", "get_time"))
            else:
                self.check_call(call.function.name, call.function.arguments)
            self.assertIn(r.finish_reason, ("tool_calls", "length"))
            streamed, _ = stream_chat(**kw)
            calls = streamed[0]["calls"]
            self.assertEqual([c["name"] for c in calls.values()],
                             [c.function.name for c in r.message.tool_calls])
            self.assertEqual([c["args"] for c in calls.values()],
                             [c.function.arguments for c in r.message.tool_calls])
            self.assertEqual(streamed[0]["finish"], r.finish_reason)

    def test_auto_none_and_history(self):
        history = USER + [
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]
        for choice in ["auto", "none"]:
            r = client().chat.completions.create(model="tiny_chat", messages=history,
                                                 tools=[WEATHER], tool_choice=choice,
                                                 max_tokens=30, seed=1)
            c = r.choices[0]
            if choice == "none":
                self.assertFalse(c.message.tool_calls)
            for call in c.message.tool_calls or []:
                self.assertIsInstance(json.loads(call.function.arguments), dict)
            self.assertEqual(c.finish_reason == "tool_calls", bool(c.message.tool_calls)
                             and c.finish_reason != "length")


class ResponseFormat(unittest.TestCase):
    def test_json_schema_output_validates(self):
        schema = {"type": "object", "properties": {"ok": {"type": "boolean"},
                                                   "color": {"enum": ["red", "green"]}},
                  "required": ["ok", "color"], "additionalProperties": False}
        try:
            r = client().chat.completions.create(
                model="tiny_chat", messages=USER, max_tokens=200, seed=2, extra_body=NO_THINK,
                response_format={"type": "json_schema",
                                 "json_schema": {"name": "answer", "schema": schema}})
        except openai.BadRequestError as e:
            if "not available in this build" in str(e):
                self.skipTest("built without the JSON grammar")
            raise
        # The grammar closes the object well within 200 tokens (about 30 on the fixture) and
        # then allows only the end of the turn: the finish must be "stop", and the output is
        # validated whatever it is, so a truncated or broken object fails here.
        c = r.choices[0]
        self.assertEqual(c.finish_reason, "stop", c)
        self.assertLess(r.usage.completion_tokens, 200)
        value = json.loads(c.message.content)
        self.assertEqual(set(value), {"ok", "color"})
        self.assertIsInstance(value["ok"], bool)
        self.assertIn(value["color"], ("red", "green"))
        r = client().chat.completions.create(model="tiny_chat", messages=USER, max_tokens=200,
                                             seed=3, extra_body=NO_THINK,
                                             response_format={"type": "json_object"})
        self.assertEqual(r.choices[0].finish_reason, "stop", r.choices[0])
        self.assertLess(r.usage.completion_tokens, 200)
        self.assertIsInstance(json.loads(r.choices[0].message.content), dict)

    def test_guided_choice(self):
        """vLLM's guided_choice and structured_outputs.choice: the answer is exactly one of the
        strings, then the turn ends (finish "stop"), at any seed."""
        choices = ["Paris", "London", "a city I do not know"]
        for seed in range(4):
            for extra in ({"guided_choice": choices}, {"structured_outputs": {"choice": choices}}):
                r = client().chat.completions.create(
                    model="tiny_chat", messages=USER, max_tokens=40, seed=seed, temperature=1.5,
                    extra_body={**NO_THINK, **extra})
                c = r.choices[0]
                self.assertIn(c.message.content, choices, (seed, extra))
                self.assertEqual(c.finish_reason, "stop", (seed, extra))

    def test_vllm_spellings(self):
        """vLLM's guided_json (a schema or its JSON text) and structured_outputs.json constrain
        exactly as response_format json_schema: the same seeded output; the kinds not built
        (regex, choice, grammar) and two constraints at once are 400s naming the field."""
        schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
        kw = dict(model="tiny_chat", messages=USER, max_tokens=100, seed=5)
        try:
            want = client().chat.completions.create(
                response_format={"type": "json_schema", "json_schema": {"name": "n", "schema": schema}},
                extra_body=NO_THINK, **kw).choices[0].message.content
        except openai.BadRequestError as e:
            if "not available in this build" in str(e):
                self.skipTest("built without the JSON grammar")
            raise
        self.assertIsInstance(json.loads(want)["n"], int)
        for extra in ({"guided_json": schema}, {"guided_json": json.dumps(schema)},
                      {"structured_outputs": {"json": schema, "disable_any_whitespace": True}}):
            got = client().chat.completions.create(extra_body={**NO_THINK, **extra}, **kw)
            self.assertEqual(got.choices[0].message.content, want, extra)
        for extra, param in (({"guided_regex": "a+"}, "guided_regex"),
                             ({"structured_outputs": {"regex": "a+"}}, "structured_outputs"),
                             ({"guided_json": "{not json"}, "guided_json"),
                             ({"guided_json": schema, "response_format": {"type": "json_object"}},
                              "guided_json")):
            with self.assertRaises(openai.BadRequestError) as e:
                client().chat.completions.create(extra_body=extra, **kw)
            self.assertEqual(e.exception.body.get("param"), param, extra)


class TemplateDefaults(unittest.TestCase):
    """serve --chat-template-kwargs: the variables every request starts from; a request's own
    chat_template_kwargs override them."""

    def test_server_default_and_request_override(self):
        other = Server("--chat-template-kwargs", '{"enable_thinking": false}')
        try:
            def prompt_tokens(server, body):
                status, _, tok = server.request("POST", "/tokenize", {"messages": USER, **body})
                self.assertEqual(status, 200)
                return tok["count"]

            self.assertEqual(prompt_tokens(other, {}), prompt_tokens(SERVER, NO_THINK))
            on = {"chat_template_kwargs": {"enable_thinking": True}}
            self.assertEqual(prompt_tokens(other, on), prompt_tokens(SERVER, {}))
            self.assertNotEqual(prompt_tokens(SERVER, {}), prompt_tokens(SERVER, NO_THINK))
            status, _, r = other.request("POST", "/v1/chat/completions", {
                "model": "tiny_chat", "messages": USER, "max_tokens": 16, "seed": 3,
                "logprobs": True})
            self.assertEqual(status, 200)
            raw = raw_text([types.SimpleNamespace(**t)
                            for t in r["choices"][0]["logprobs"]["content"]])
            _, content = split_reasoning(raw, False)  # the prompt closed the reasoning
            self.assertEqual((r["choices"][0]["message"]["content"] or "").strip(), content)
        finally:
            self.assertEqual(other.stop(), 0)


class ChatTemplateFile(unittest.TestCase):
    """serve --chat-template FILE: requests render with the file's template."""

    def test_file_replaces_the_models_template(self):
        root = os.path.join(os.path.dirname(__file__), "..", "..", "..")
        tpl = os.path.join(root, "tests", "text", "templates", "qwen3_8.jinja")
        other = Server("--chat-template", tpl)
        try:
            def count(server, effort):
                status, _, tok = server.request("POST", "/tokenize", {
                    "messages": USER, "chat_template_kwargs": {"reasoning_effort": effort}})
                self.assertEqual(status, 200)
                return tok["count"]

            # Qwen3.8's template (the file) reads reasoning_effort; the model's own does not.
            self.assertNotEqual(count(other, "low"), count(other, "medium"))
            self.assertEqual(count(SERVER, "low"), count(SERVER, "medium"))
        finally:
            self.assertEqual(other.stop(), 0)


class Concurrency(unittest.TestCase):
    def test_concurrent_clients_match_sequential(self):
        kw = dict(model="tiny_chat", messages=USER, max_tokens=16, logprobs=True)
        seeds = list(range(100, 108))
        want = {s: [t.token for t in client().chat.completions.create(seed=s, **kw)
                    .choices[0].logprobs.content] for s in seeds[:3]}
        got, errors = {}, []

        def run(s):
            try:
                r = client().chat.completions.create(seed=s, **kw)
                got[s] = [t.token for t in r.choices[0].logprobs.content]
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=run, args=(s,)) for s in seeds]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(sorted(got), seeds)
        for s in want:
            self.assertEqual(got[s], want[s])


if __name__ == "__main__":
    unittest.main(verbosity=2)
