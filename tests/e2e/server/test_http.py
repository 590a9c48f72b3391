#!/usr/bin/env python3
"""`ninfer serve` over raw HTTP: auth on every route but /health, error shapes and statuses
(400/401/404/413/422/429/503), limits, disconnect cancellation (seen in /metrics and the
request log), SSE keep-alives, metrics, the request log, tokenize/detokenize, /openapi.json,
graceful SIGTERM, serving random weights (--random-weights --config, --tokenizer)."""
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import unittest

import openai

sys.path.insert(0, os.path.dirname(__file__))
from server_util import KEY, MODEL, NINFER, ROOT, Server  # noqa: E402

SERVER = None
USER = [{"role": "user", "content": "hi"}]
LONG = {"messages": USER, "max_tokens": 3000, "ignore_eos": True, "temperature": 1.0}


def setUpModule():
    global SERVER
    SERVER = Server("--max-body-bytes", "100000", "--max-context", "2048")


def tearDownModule():
    assert SERVER.stop() == 0


def open_stream(server, body, path="/v1/chat/completions"):
    """Starts a streamed request on a raw connection; returns it after the first bytes."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.request("POST", path, json.dumps({**body, "stream": True}),
                 {"Content-Type": "application/json", "Authorization": "Bearer " + KEY})
    resp = conn.getresponse()
    assert resp.status == 200, resp.read()
    first = resp.readline()
    return conn, resp, first


class Auth(unittest.TestCase):
    def test_every_route_but_health_needs_the_key(self):
        for method, path, body in [("GET", "/v1/models", None), ("GET", "/metrics", None),
                                   ("GET", "/openapi.json", None),
                                   ("POST", "/v1/chat/completions", {"messages": USER}),
                                   ("POST", "/tokenize", {"prompt": "x"})]:
            status, _, err = SERVER.request(method, path, body, auth=False)
            self.assertEqual(status, 401, path)
            self.assertEqual(err["error"]["type"], "authentication_error")
        status, _, err = SERVER.request("POST", "/v1/messages", {"messages": USER}, auth=False)
        self.assertEqual((status, err["type"], err["error"]["type"]),
                         (401, "error", "authentication_error"))
        self.assertEqual(SERVER.request("GET", "/health", auth=False)[0], 200)
        self.assertEqual(SERVER.request("GET", "/v1/models", auth=False,
                                        headers={"x-api-key": KEY})[0], 200)
        with self.assertRaises(openai.AuthenticationError):
            openai.OpenAI(base_url=SERVER.url + "/v1", api_key="bad",
                          max_retries=0).models.list()


class Errors(unittest.TestCase):
    def check(self, body, status=400, param=None, path="/v1/chat/completions", raw=None):
        got, _, err = SERVER.request("POST", path, body, raw=raw)
        self.assertEqual(got, status, err)
        self.assertIn("message", err["error"])
        if param:
            self.assertEqual(err["error"]["param"], param)
        return err

    def test_bad_requests(self):
        self.check(None, raw=b"{not json")
        self.check(None, raw=b"[1, 2]")
        self.check(None, raw=b'{"messages": "\xff\xfe"}')
        self.check({"messages": []}, param="messages")
        self.check({"messages": USER, "temperature": 5}, param="temperature")
        self.check({"messages": USER, "temperature": "hot"}, param="temperature")
        self.check({"messages": USER, "n": 0}, param="n")
        self.check({"messages": USER, "max_tokens": -1}, param="max_tokens")
        self.check({"messages": USER, "top_logprobs": 3}, param="top_logprobs")
        self.check({"messages": USER, "audio": {"voice": "x"}}, param="audio")
        self.check({"messages": USER, "modalities": ["text", "audio"]}, param="modalities")
        self.check({"messages": USER, "logit_bias": {"5": 1000}}, param="logit_bias")
        self.check({"messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "http://x"}}]}]}, param="messages")
        self.check({"messages": USER, "tool_choice": "required"}, param="tool_choice")
        self.check({"messages": [{"role": "wizard", "content": "x"}]}, param="messages")
        self.check({"prompt": "x", "suffix": "y"}, path="/v1/completions", param="suffix")
        self.check({"prompt": [1, -2]}, path="/v1/completions", param="prompt")
        self.check({"messages": USER, "model": "gpt-4"}, status=404, param="model")
        # the template raises for a conversation without a user turn
        self.check({"messages": [{"role": "system", "content": "x"}]}, status=422)

    def test_limits(self):
        err = self.check(None, status=413, raw=json.dumps(
            {"messages": [{"role": "user", "content": "x" * 200000}]}).encode())
        self.assertEqual(err["error"]["type"], "invalid_request_error")
        err = self.check({"messages": [{"role": "user", "content": "the dog " * 1500}]},
                         param="messages")
        self.assertEqual(err["error"]["code"], "context_length_exceeded")
        # max_tokens beyond the context is capped, not refused
        status, _, r = SERVER.request("POST", "/v1/completions",
                                      {"prompt": "x", "max_tokens": 10 ** 6, "n": 1,
                                       "stop": ["a", "b", "c", "d", "e", "f", "g", "h", "i",
                                                "j", "k", "l", "m", "n", "o", "p", "q", "r",
                                                "s", "t", "u", "v", "w", "x", "y", "z", "0",
                                                "1", "2", "3", "4", "5"][:16]})
        self.assertEqual(status, 200, r)
        self.assertEqual(SERVER.request("GET", "/nope")[0], 404)

    def test_anthropic_shapes(self):
        status, _, err = SERVER.request("POST", "/v1/messages", {"messages": USER,
                                                                 "max_tokens": "many"})
        self.assertEqual((status, err["type"], err["error"]["type"]),
                         (400, "error", "invalid_request_error"))
        status, _, err = SERVER.request("POST", "/v1/messages", None, raw=b"x" * 200000)
        self.assertEqual((status, err["error"]["type"]), (413, "request_too_large"))


class Cancellation(unittest.TestCase):
    def test_stream_disconnect_cancels(self):
        before = SERVER.metric('ninfer_generations_finished_total{reason="cancelled"}')
        conn, resp, first = open_stream(SERVER, LONG)
        self.assertTrue(first.startswith(b"data: "))
        resp.readline()
        conn.sock.shutdown(socket.SHUT_RDWR)
        conn.close()
        after = SERVER.wait_metric('ninfer_generations_finished_total{reason="cancelled"}',
                                   before + 1)
        self.assertGreaterEqual(after, before + 1)
        self.assertLess(SERVER.wait_metric_down("ninfer_requests_in_flight", 0), 1)

    def test_plain_disconnect_cancels(self):
        before = SERVER.metric('ninfer_generations_finished_total{reason="cancelled"}')
        body = json.dumps({**LONG, "model": "tiny_chat"}).encode()
        sock = socket.create_connection(("127.0.0.1", SERVER.port))
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                     KEY.encode() + b"\r\nContent-Type: application/json\r\nContent-Length: " +
                     str(len(body)).encode() + b"\r\n\r\n" + body)
        time.sleep(0.2)
        sock.close()
        after = SERVER.wait_metric('ninfer_generations_finished_total{reason="cancelled"}',
                                   before + 1)
        self.assertGreaterEqual(after, before + 1)
        # The log line follows the metric: wait for it rather than read the log at once.
        self.assertIsNotNone(SERVER.wait_log_record(lambda r: r.get("finish_reason") == "cancelled"))

    def test_keepalive_while_queued(self):
        # one sequence at a time: the second stream waits in the engine's queue, where only
        # keep-alive comments flow, until the first one is cancelled by its disconnect
        s = Server("--max-sequences", "1", "--max-queue", "1", "--keepalive", "0.05")
        try:
            conn_a, resp_a, _ = open_stream(s, LONG)
            conn_b, resp_b, first = open_stream(s, {**LONG, "max_tokens": 5})
            time.sleep(0.3)
            conn_a.sock.shutdown(socket.SHUT_RDWR)
            conn_a.close()
            text = first + resp_b.read()
            conn_b.close()
            self.assertIn(b": keep-alive\n\n", text)
            self.assertTrue(text.rstrip().endswith(b"data: [DONE]"))
        finally:
            self.assertEqual(s.stop(), 0)


class Observability(unittest.TestCase):
    def test_metrics_and_log(self):
        SERVER.request("POST", "/v1/chat/completions", {"messages": USER, "max_tokens": 4})
        _, _, text = SERVER.request("GET", "/metrics")
        for name in ["ninfer_requests_total{", "ninfer_time_to_first_token_seconds_bucket",
                     "ninfer_inter_token_latency_seconds_count", "ninfer_queue_depth",
                     "ninfer_kv_cache_usage_ratio", "ninfer_state_slots_used",
                     "ninfer_prompt_tokens_total", "ninfer_generation_tokens_total",
                     'ninfer_memory_bytes{kind="weights"}', "ninfer_prompt_tokens_cached_total",
                     "ninfer_prefix_cache_hit_rate", "ninfer_prefix_cache_queries_tokens_total",
                     "ninfer_prefix_cache_hits_tokens_total", "ninfer_kv_blocks_cached",
                     'ninfer_prefix_snapshots{tier="device"}',
                     'ninfer_prefix_snapshots{tier="host"}',
                     "ninfer_prefix_snapshots_total_slots", "ninfer_preemptions_total"]:
            self.assertIn(name, text)
        rec = [r for r in SERVER.log_records() if r["endpoint"] == "/v1/chat/completions"
               and r["status"] == 200][-1]
        for key in ["id", "prompt_tokens", "cached_tokens", "completion_tokens", "ttft_s",
                    "duration_s", "finish_reason"]:
            self.assertIn(key, rec)
        self.assertNotIn("content", rec)  # no text without --log-content

    def test_tokenize_detokenize_openapi(self):
        _, _, t = SERVER.request("POST", "/tokenize", {"prompt": "the dog 東京"})
        self.assertEqual(t["count"], len(t["tokens"]))
        _, _, d = SERVER.request("POST", "/detokenize", {"tokens": t["tokens"]})
        self.assertEqual(d["prompt"], "the dog 東京")
        self.assertEqual(SERVER.request("POST", "/detokenize", {"tokens": [10 ** 6]})[0], 400)
        status, _, doc = SERVER.request("GET", "/openapi.json")
        self.assertEqual(status, 200)
        self.assertTrue(doc["openapi"].startswith("3."))
        for path in ["/v1/chat/completions", "/v1/completions", "/v1/messages", "/v1/models",
                     "/tokenize", "/detokenize", "/health", "/metrics"]:
            self.assertIn(path, doc["paths"])


class Lifecycle(unittest.TestCase):
    def test_queue_full_429_and_graceful_sigterm(self):
        s = Server("--max-sequences", "1", "--max-queue", "0", "--shutdown-timeout", "0.5",
                   "--log-content")
        try:
            conn, resp, _ = open_stream(s, LONG)
            status, _, err = s.request("POST", "/v1/chat/completions", {"messages": USER})
            self.assertEqual(status, 429)
            self.assertEqual(err["error"]["type"], "rate_limit_error")
            status, _, err = s.request("POST", "/v1/messages", {"messages": USER,
                                                                "max_tokens": 3})
            self.assertEqual((status, err["error"]["type"]), (429, "rate_limit_error"))
            s.proc.send_signal(signal.SIGTERM)
            time.sleep(0.1)
            status, _, _ = s.request("POST", "/v1/chat/completions", {"messages": USER})
            self.assertIn(status, (503, -1))
            rest = resp.read()  # the in-flight stream ends (cancelled after the grace period)
            conn.close()
            self.assertIn(b"data:", rest)
            self.assertEqual(s.proc.wait(30), 0)
            logged = [r for r in s.log_records() if r.get("content")]
            self.assertTrue(logged and "prompt" in logged[0]["content"])
        finally:
            s.stop()


class RandomWeights(unittest.TestCase):
    CONFIG = os.path.join(MODEL, "config.json")

    def test_config_with_a_tokenizer_dir(self):
        s = Server("--random-weights", "--config", self.CONFIG, "--tokenizer", MODEL,
                   "--seed", "3", "--max-context", "512", model=None)
        try:
            self.assertEqual([m["id"] for m in s.request("GET", "/v1/models")[2]["data"]],
                             ["config"])  # the config file's stem
            body = {"messages": USER, "max_tokens": 8, "temperature": 0, "logprobs": True}
            status, _, one = s.request("POST", "/v1/chat/completions", body)
            self.assertEqual(status, 200, one)
            self.assertEqual(s.request("POST", "/v1/chat/completions", body)[2]["choices"],
                             one["choices"])  # deterministic weights, greedy
            status, _, m = s.request("POST", "/v1/messages", {"messages": USER,
                                                              "max_tokens": 4})
            self.assertEqual((status, m["type"]), (200, "message"))
        finally:
            self.assertEqual(s.stop(), 0)

    def test_demo_tokenizer_by_default(self):
        # the demo model's own config: its 8,192-id tokenizer fits
        demo = os.path.join(ROOT, "models", "ninfer-demo")
        s = Server("--random-weights", "--config", os.path.join(demo, "config.json"),
                   "--max-context", "512", "--served-model-name", "rand", model=None)
        try:
            status, _, r = s.request("POST", "/v1/completions", {"prompt": "def f(x):",
                                                                 "max_tokens": 6})
            self.assertEqual(status, 200, r)
            self.assertIsInstance(r["choices"][0]["text"], str)
            self.assertEqual(s.request("GET", "/v1/models")[2]["data"][0]["id"], "rand")
        finally:
            self.assertEqual(s.stop(), 0)

    def test_bad_combinations_fail_clearly(self):
        for args, says in [
                # the demo tokenizer (8,192 ids) does not fit the fixture's 320-token vocabulary
                (["--random-weights", "--config", self.CONFIG], "--tokenizer"),
                (["--random-weights"], "--config"),
                (["--random-weights", "--config", self.CONFIG, "--model", MODEL], "--model"),
                (["--model", MODEL, "--config", self.CONFIG], "--random-weights"),
                (["--model", MODEL, "--gpu-memory-utilization", "0"], "gpu-memory-utilization"),
                (["--model", MODEL, "--gpu-memory-utilization", "1.5"],
                 "gpu-memory-utilization")]:
            run = subprocess.run([NINFER, "serve", "--port", "0", *args], capture_output=True,
                                 text=True, timeout=60)
            self.assertNotEqual(run.returncode, 0, args)
            self.assertIn(says, run.stderr, args)


if __name__ == "__main__":
    unittest.main(verbosity=2)
