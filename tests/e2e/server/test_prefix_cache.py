#!/usr/bin/env python3
"""The prefix cache and request priority through `ninfer serve` (the acceptance test of the
engine's prefix cache): usage reports the prompt tokens served from the cache (OpenAI
`prompt_tokens_details.cached_tokens`, whole and in the streamed usage chunk; Anthropic
`cache_read_input_tokens`, with `input_tokens` the rest of the prompt); a conversation's second
turn and a repeated request hit the cache and a repeated greedy request gives the same text;
`--no-prefix-cache` reports 0; /metrics and the request log account for every cached token;
the admission capacity follows the engine's slots; `priority` is accepted on every generation
endpoint, orders the queue (lower first), and bad values are 400s naming it.

The conversations start with a long system message (over two 512-token snapshot strides of
the byte-level fixture tokenizer), distinct per test from its first characters on, so each test
has its own cache entries whatever ran before."""
import os
import sys
import threading
import time
import unittest

import anthropic
import openai

sys.path.insert(0, os.path.dirname(__file__))
from server_util import KEY, Server  # noqa: E402

SERVER = None
NO_THINK = {"chat_template_kwargs": {"enable_thinking": False}}
GREEDY = {"temperature": 0, "max_tokens": 16}


def setUpModule():
    global SERVER
    SERVER = Server("--max-context", "4096")


def tearDownModule():
    assert SERVER.stop() == 0


def system(case):
    rules = " ".join(f"Rule {i}: answer item {i} in one short, plain sentence." for i in range(24))
    return f"[{case}] You are a careful assistant. {rules}"


def conversation(case):
    return [{"role": "system", "content": system(case)},
            {"role": "user", "content": "Name a colour."}]


def oai(server=None):
    return openai.OpenAI(base_url=(server or SERVER).url + "/v1", api_key=KEY, max_retries=0,
                         timeout=120)


def claude(server=None):
    return anthropic.Anthropic(base_url=(server or SERVER).url, api_key=KEY, max_retries=0,
                               timeout=120)


def cached(usage):
    return usage.prompt_tokens_details.cached_tokens


def chat(server=None, extra=None, **kw):
    return oai(server).chat.completions.create(model="tiny_chat",
                                               extra_body={**NO_THINK, **(extra or {})}, **kw)


def stream_chat(server=None, extra=None, **kw):
    """(text, usage) of a streamed chat completion with the usage chunk."""
    text, usage = "", None
    for chunk in oai(server).chat.completions.create(
            model="tiny_chat", stream=True, stream_options={"include_usage": True},
            extra_body={**NO_THINK, **(extra or {})}, **kw):
        if chunk.usage is not None:
            usage = chunk.usage
        for ch in chunk.choices:
            text += ch.delta.content or ""
    return text, usage


def second_turn(first, answer):
    return first + [{"role": "assistant", "content": answer},
                    {"role": "user", "content": "And another one?"}]


def anthropic_args(messages):
    return dict(model="tiny_chat", max_tokens=16, system=messages[0]["content"],
                messages=messages[1:], extra_body={"temperature": 0})


class Usage(unittest.TestCase):
    def test_chat_second_turn_reads_the_first_from_the_cache(self):
        for streamed in (False, True):
            first = conversation(f"chat-second-turn-{streamed}")
            one = chat(messages=first, **GREEDY)
            self.assertLessEqual(cached(one.usage), one.usage.prompt_tokens)
            messages = second_turn(first, one.choices[0].message.content)
            if streamed:
                _, usage = stream_chat(messages=messages, **GREEDY)
            else:
                usage = chat(messages=messages, **GREEDY).usage
            self.assertGreater(usage.prompt_tokens, one.usage.prompt_tokens)
            self.assertGreater(cached(usage), 0, f"streamed={streamed}: {usage}")
            self.assertLessEqual(cached(usage), usage.prompt_tokens)

    def test_same_greedy_request_twice(self):
        kw = dict(messages=conversation("same-twice"), temperature=0, max_tokens=24,
                  extra={"ignore_eos": True})
        one, two = chat(**kw), chat(**kw)
        self.assertEqual(two.choices[0].message.content, one.choices[0].message.content)
        self.assertEqual(two.usage.completion_tokens, 24)
        self.assertEqual(two.usage.prompt_tokens, one.usage.prompt_tokens)
        self.assertGreater(cached(two.usage), 0, two.usage)
        # the same again streamed: the same text, from the cache
        text, usage = stream_chat(**kw)
        self.assertEqual(text, one.choices[0].message.content)
        self.assertGreater(cached(usage), 0, usage)

    def test_completions_twice(self):
        kw = dict(model="tiny_chat", prompt=system("completions-twice"), temperature=0,
                  max_tokens=12, extra_body={"ignore_eos": True})
        one = oai().completions.create(**kw)
        two = oai().completions.create(**kw)
        self.assertEqual(two.choices[0].text, one.choices[0].text)
        self.assertGreater(cached(two.usage), 0, two.usage)
        chunks = list(oai().completions.create(stream=True,
                                               stream_options={"include_usage": True}, **kw))
        self.assertEqual("".join(c.choices[0].text for c in chunks if c.choices),
                         one.choices[0].text)
        self.assertGreater(cached(chunks[-1].usage), 0, chunks[-1].usage)
        # n > 1: counted once per prompt, as prompt_tokens is
        three = oai().completions.create(n=3, **{**kw, "temperature": 1.0, "seed": 5})
        self.assertEqual(three.usage.prompt_tokens, one.usage.prompt_tokens)
        self.assertGreater(cached(three.usage), 0, three.usage)
        self.assertLessEqual(cached(three.usage), three.usage.prompt_tokens)

    def test_anthropic_second_turn_whole_and_streamed(self):
        for streamed in (False, True):
            first = conversation(f"anthropic-second-turn-{streamed}")
            one = claude().messages.create(**anthropic_args(first))
            self.assertEqual(one.usage.cache_creation_input_tokens, 0)
            total_one = claude().messages.count_tokens(
                model="tiny_chat", system=first[0]["content"], messages=first[1:]).input_tokens
            self.assertEqual(one.usage.input_tokens + one.usage.cache_read_input_tokens,
                             total_one)
            messages = second_turn(first, one.content[0].text)
            args = anthropic_args(messages)
            total = claude().messages.count_tokens(
                model="tiny_chat", system=args["system"], messages=args["messages"]).input_tokens
            if streamed:
                with claude().messages.stream(**args) as stream:
                    events = list(stream)
                    m = stream.get_final_message()
                start = next(e for e in events if e.type == "message_start")
                self.assertEqual(start.message.usage.input_tokens, total)  # not looked up yet
                delta = next(e for e in events if e.type == "message_delta")
                self.assertEqual(delta.usage.cache_read_input_tokens,
                                 m.usage.cache_read_input_tokens)
            else:
                m = claude().messages.create(**args)
            self.assertGreater(m.usage.cache_read_input_tokens, 0, m.usage)
            # input_tokens: the prompt tokens not read from the cache
            self.assertEqual(m.usage.input_tokens + m.usage.cache_read_input_tokens, total)
            self.assertEqual(m.usage.cache_creation_input_tokens, 0)

    def test_log_and_metrics_account_for_every_cached_token(self):
        messages = conversation("accounting")
        chat(messages=messages, **GREEDY)
        two = chat(messages=messages, **GREEDY)
        self.assertGreater(cached(two.usage), 0)
        end = time.time() + 10
        while True:  # the log line follows the response
            records = [r for r in SERVER.log_records() if "cached_tokens" in r]
            logged = sum(r["cached_tokens"] for r in records)
            total = SERVER.metric("ninfer_prompt_tokens_cached_total")
            if logged == total or time.time() > end:
                break
            time.sleep(0.05)
        self.assertEqual(logged, total)
        rec = next(r for r in records if r["id"] == two.id)
        self.assertEqual(rec["cached_tokens"], cached(two.usage))
        self.assertGreater(total, 0)
        queries = SERVER.metric("ninfer_prefix_cache_queries_tokens_total")
        hits = SERVER.metric("ninfer_prefix_cache_hits_tokens_total")
        self.assertGreaterEqual(hits, total)  # per engine request >= per prompt
        self.assertGreaterEqual(queries, hits)
        self.assertAlmostEqual(SERVER.metric("ninfer_prefix_cache_hit_rate"), hits / queries)
        _, _, text = SERVER.request("GET", "/metrics")
        for name in ["ninfer_kv_blocks_cached ", 'ninfer_prefix_snapshots{tier="device"} ',
                     'ninfer_prefix_snapshots{tier="host"} ', "ninfer_preemptions_total ",
                     "ninfer_prefix_snapshots_total_slots ",
                     "# TYPE ninfer_prefix_cache_hits_tokens_total counter"]:
            self.assertIn(name, text)
        self.assertGreater(SERVER.metric("ninfer_prefix_snapshots_total_slots"), 0)
        self.assertGreater(SERVER.metric('ninfer_prefix_snapshots{tier="device"}'), 0)


THINK = {"chat_template_kwargs": {"enable_thinking": True}}
WARM = "ninfer_prefix_cache_warm_tokens_total"


def openai_turns(server, case, streamed):
    """(tokens of the first answer, prompt tokens of the second turn not read from the cache,
    the second answer) of a two-turn chat with thinking on."""
    first = conversation(case)
    warm_before = server.metric(WARM)
    if streamed:
        text, one = stream_chat(server, extra=THINK, messages=first, temperature=0,
                                max_tokens=48)
    else:
        reply = chat(server, extra=THINK, messages=first, temperature=0, max_tokens=48)
        text, one = reply.choices[0].message.content, reply.usage
    settle(server, warm_before)
    two = chat(server, extra=THINK, messages=second_turn(first, text), **GREEDY)
    return (one.completion_tokens, two.usage.prompt_tokens - cached(two.usage),
            two.choices[0].message.content)


def anthropic_turns(server, case):
    first = conversation(case)
    thinking = {"temperature": 0, "thinking": {"type": "enabled", "budget_tokens": 8}}
    warm_before = server.metric(WARM)
    one = claude(server).messages.create(**{**anthropic_args(first), "max_tokens": 32,
                                            "extra_body": thinking})
    settle(server, warm_before)
    text = "".join(b.text for b in one.content if b.type == "text")
    two = claude(server).messages.create(**{**anthropic_args(second_turn(first, text)),
                                            "extra_body": thinking})
    blocks = [b.text if b.type == "text" else b.thinking for b in two.content]
    return one.usage.output_tokens, two.usage.input_tokens, "|".join(blocks)


def settle(server, warm_before):
    """On a warming server, waits for the last answer's warm request (server_util)."""
    if "--no-warm-next-turn" not in server.args:
        server.wait_warmed(warm_before)


class NextTurnWarming(unittest.TestCase):
    """With thinking on, Qwen3.6's template drops the answer's think block from the history, so
    a second turn's prompt leaves the generated tokens where the answer starts. The server
    prefills the next turn as the client will send it once the answer is out (next-turn
    warming, on by default): the second turn is then read from the cache up to its new user
    message, where without warming (--no-warm-next-turn) the answer is computed again. The
    greedy answers are the same either way (exact caching)."""

    def test_second_turn_is_cached_up_to_its_new_message(self):
        cold = Server("--max-context", "4096", "--no-warm-next-turn")
        try:
            runs = [("openai", lambda srv, c: openai_turns(srv, c, False)),
                    ("openai streamed", lambda srv, c: openai_turns(srv, c, True)),
                    ("anthropic", anthropic_turns)]
            for name, run in runs:
                answer, fresh, text = run(SERVER, f"warming-{name}")
                answer_off, fresh_off, text_off = run(cold, f"warming-{name}")
                self.assertEqual(text, text_off, name)
                self.assertEqual(answer, answer_off, name)
                # the new turn: "And another one?" (16 bytes of the byte-level tokenizer) and
                # the template's markers; without warming the first answer is computed again
                self.assertLessEqual(fresh, 40, name)
                self.assertGreater(fresh_off, fresh, name)
            # warming is counted apart: the hit-rate counters count client prompts only
            self.assertGreater(SERVER.metric(WARM), 0)
            self.assertEqual(cold.metric(WARM), 0)
        finally:
            self.assertEqual(cold.stop(), 0)


class Engine(unittest.TestCase):
    def test_startup_line_and_capacity(self):
        line = next(x for x in SERVER.lines if x.startswith("ninfer: engine:"))
        self.assertIn("4 sequence slots", line)
        self.assertIn("prefix cache on", line)
        kv = int(line.split("KV capacity ")[1].split()[0])
        self.assertGreater(kv, 0, line)
        self.assertEqual(SERVER.metric("ninfer_requests_capacity"), 4 + 8)

    def test_slots_from_memory_set_the_capacity(self):
        s = Server("--max-sequences", "0", "--max-context", "1024")
        try:
            slots = s.metric("ninfer_state_slots_total")
            self.assertGreaterEqual(slots, 1)
            self.assertEqual(s.metric("ninfer_requests_capacity"), slots + 8)
            self.assertIn(f"{int(slots)} sequence slots",
                          next(x for x in s.lines if x.startswith("ninfer: engine:")))
        finally:
            self.assertEqual(s.stop(), 0)

    def test_no_prefix_cache_reports_zero(self):
        s = Server("--no-prefix-cache", "--max-context", "4096")
        try:
            self.assertIn("prefix cache off",
                          next(x for x in s.lines if x.startswith("ninfer: engine:")))
            kw = dict(messages=conversation("no-cache"), **GREEDY)
            one, two = chat(s, **kw), chat(s, **kw)
            self.assertEqual(two.choices[0].message.content, one.choices[0].message.content)
            self.assertEqual((cached(one.usage), cached(two.usage)), (0, 0))
            _, usage = stream_chat(s, **kw)
            self.assertEqual(cached(usage), 0)
            args = anthropic_args(conversation("no-cache"))
            m = claude(s).messages.create(**args)
            self.assertEqual(m.usage.cache_read_input_tokens, 0)
            self.assertEqual(m.usage.input_tokens, claude(s).messages.count_tokens(
                model="tiny_chat", system=args["system"], messages=args["messages"]).input_tokens)
            for name in ["ninfer_prompt_tokens_cached_total",
                         "ninfer_prefix_cache_hits_tokens_total", "ninfer_prefix_cache_hit_rate"]:
                self.assertEqual(s.metric(name), 0, name)
        finally:
            self.assertEqual(s.stop(), 0)


BAD_PRIORITIES = ["1", 1.5, True, [1], {"p": 1}, 1000001, -2000000]


class Priority(unittest.TestCase):
    def test_accepted_everywhere(self):
        for priority in (-1000000, -3, 0, 7, 1000000):
            r = chat(messages=conversation("priority"), max_tokens=2,
                     extra={"priority": priority})
            self.assertIn(r.choices[0].finish_reason, ("stop", "length"))
            _, usage = stream_chat(messages=conversation("priority"), max_tokens=2,
                                   extra={"priority": priority})
            self.assertIsNotNone(usage)
            c = oai().completions.create(model="tiny_chat", prompt="x", max_tokens=2,
                                         extra_body={"priority": priority})
            self.assertEqual(len(c.choices), 1)
            m = claude().messages.create(model="tiny_chat", max_tokens=2, messages=[
                {"role": "user", "content": "hi"}], extra_body={"priority": priority})
            self.assertEqual(m.type, "message")

    def test_bad_values_are_400_naming_it(self):
        user = [{"role": "user", "content": "hi"}]
        for bad in BAD_PRIORITIES:
            for path, body in [("/v1/chat/completions", {"messages": user}),
                               ("/v1/completions", {"prompt": "x"}),
                               ("/v1/chat/completions", {"messages": user, "stream": True})]:
                status, _, err = SERVER.request("POST", path, {**body, "priority": bad})
                self.assertEqual(status, 400, (path, bad, err))
                self.assertEqual(err["error"]["param"], "priority", (path, bad))
            status, _, err = SERVER.request("POST", "/v1/messages", {
                "messages": user, "max_tokens": 2, "priority": bad})
            self.assertEqual(status, 400, (bad, err))
            self.assertEqual(err["type"], "error")
            self.assertIn("priority", err["error"]["message"])
        self.assertEqual(SERVER.request("GET", "/health")[2], {"status": "ok"})

    def test_lower_priority_value_runs_first(self):
        # One sequence slot, held by a long stream; then B (priority 10) and C (priority -10)
        # queue in that order. Once the slot frees, C must run (and finish) before B starts.
        s = Server("--max-sequences", "1", "--max-context", "4096")
        try:
            hold = oai(s).chat.completions.create(
                model="tiny_chat", messages=[{"role": "user", "content": "hi"}], stream=True,
                max_tokens=4000, extra_body={**NO_THINK, "ignore_eos": True, "priority": 0})
            next(iter(hold))
            done = {}

            def run(name, priority, tokens):
                chat(s, messages=[{"role": "user", "content": name}], max_tokens=tokens,
                     extra={"ignore_eos": True, "priority": priority})
                done[name] = time.monotonic()

            threads = []
            # B and C differ in max_tokens, so the request log tells them apart.
            for name, priority, tokens in (("B", 10, 4), ("C", -10, 5)):
                threads.append(threading.Thread(target=run, args=(name, priority, tokens)))
                threads[-1].start()
                s.wait_metric("ninfer_queue_depth", len(threads))  # queued in this order
            hold.close()  # frees the slot (the disconnect cancels the stream)
            for t in threads:
                t.join(60)
            self.assertEqual(sorted(done), ["B", "C"])
            # Server-side times (the clients' own clocks race when both end within a step):
            # B, queued first, waits for C's whole generation before its first token.
            # The server logs a request just after its response ends: wait for both lines.
            def logged(r):
                return (r.get("endpoint") == "/v1/chat/completions" and r.get("status") == 200
                        and r.get("completion_tokens") in (4, 5))
            self.assertIsNotNone(s.wait_log_record(
                lambda r: logged(r) and r["completion_tokens"] == 4))
            self.assertIsNotNone(s.wait_log_record(
                lambda r: logged(r) and r["completion_tokens"] == 5))
            ttft = {r["completion_tokens"]: r["ttft_s"] for r in s.log_records() if logged(r)}
            self.assertLess(ttft[5], ttft[4], "C (priority -10) must start before B")
        finally:
            self.assertEqual(s.stop(), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
