#!/usr/bin/env python3
"""`ninfer serve` against bad input over raw HTTP: malformed JSON, wrong types for every major
field, huge bodies and headers, invalid UTF-8, unknown models, negative and absurd parameters,
deep nesting, empty messages and wrong roles, HTTP-level oddities (methods, pipelining, bodies on
GET, chunked bodies), slow clients (trickled bytes, silent connections) and many connections at
once. Every refusal must carry the API's own error JSON and the right status, and after every
test the process must be alive and answer /health at once."""
import http.client
import json
import os
import select
import socket
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from server_util import KEY, Server  # noqa: E402

SERVER = None
READ_TIMEOUT = 2     # --read-timeout: a whole request must arrive within it
IDLE_TIMEOUT = 1     # --keep-alive-timeout (server_util's default)
MAX_BODY = 100000    # --max-body-bytes
USER = [{"role": "user", "content": "hi"}]
CHAT, COMPLETIONS, MESSAGES = "/v1/chat/completions", "/v1/completions", "/v1/messages"
COUNT, TOKENIZE, DETOKENIZE = "/v1/messages/count_tokens", "/tokenize", "/detokenize"
BASE = {CHAT: {"messages": USER, "max_tokens": 2}, COMPLETIONS: {"prompt": "hi", "max_tokens": 2},
        MESSAGES: {"messages": USER, "max_tokens": 2}, COUNT: {"messages": USER},
        TOKENIZE: {"prompt": "hi"}, DETOKENIZE: {"tokens": [1, 2]}}
OPENAI_TYPES = {400: "invalid_request_error", 401: "authentication_error",
                404: "not_found_error", 405: "invalid_request_error",
                408: "invalid_request_error", 413: "invalid_request_error",
                422: "invalid_request_error", 429: "rate_limit_error",
                414: "invalid_request_error", 431: "invalid_request_error"}
FLOOD = 256 << 20    # bytes a flooding client gives up after (socket buffers hold a few MiB)
ANTHROPIC_TYPES = {**OPENAI_TYPES, 413: "request_too_large"}


def setUpModule():
    global SERVER
    SERVER = Server("--max-body-bytes", str(MAX_BODY), "--max-context", "2048",
                    "--default-max-tokens", "16", "--read-timeout", str(READ_TIMEOUT))


def tearDownModule():
    assert SERVER.stop() == 0


def rss_mib():
    with open(f"/proc/{SERVER.proc.pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def api_of(path):
    return "anthropic" if path.startswith(MESSAGES) else "openai"


def post(path, body=None, raw=None, headers=None, timeout=60):
    """POST on a fresh connection: (status, headers, body bytes)."""
    data = raw if raw is not None else json.dumps(body).encode()
    h = {"Content-Type": "application/json", "Authorization": "Bearer " + KEY}
    h.update(headers or {})
    conn = http.client.HTTPConnection("127.0.0.1", SERVER.port, timeout=timeout)
    try:
        conn.request("POST", path, data, h)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def get(path, timeout=5):
    conn = http.client.HTTPConnection("127.0.0.1", SERVER.port, timeout=timeout)
    try:
        conn.request("GET", path, headers={"Authorization": "Bearer " + KEY})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def read_responses(sock, count=1, timeout=10):
    """Reads `count` HTTP responses (Content-Length framed) or until the peer closes:
    [(status, headers, body)], plus whether the connection was closed."""
    sock.settimeout(timeout)
    buf, out, closed = b"", [], False
    while len(out) < count:
        while b"\r\n\r\n" not in buf:
            chunk = sock.recv(65536)
            if not chunk:
                return out, True
            buf += chunk
        head, buf = buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        length = int(headers.get("content-length", 0))
        if status == 100:
            continue
        while len(buf) < length:
            chunk = sock.recv(65536)
            if not chunk:
                closed = True
                break
            buf += chunk
        out.append((status, headers, buf[:length]))
        buf = buf[length:]
    if not closed:
        try:
            sock.settimeout(0.5)
            closed = sock.recv(1) == b""
        except (socket.timeout, ConnectionError):
            pass
    return out, closed


def exchange(data, count=1, timeout=10):
    """Sends raw bytes on a fresh connection and reads the responses."""
    with socket.create_connection(("127.0.0.1", SERVER.port)) as s:
        s.sendall(data)
        return read_responses(s, count, timeout)


def request_bytes(method, path, body=b"", headers=None, length=None):
    h = {"Host": "x", "Authorization": "Bearer " + KEY, "Content-Type": "application/json"}
    if body or length is not None:
        h["Content-Length"] = str(len(body) if length is None else length)
    h.update(headers or {})
    head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items())
    return head.encode() + b"\r\n" + body


def chunked(body, size):
    out = b""
    for i in range(0, len(body), size):
        part = body[i:i + size]
        out += b"%x\r\n" % len(part) + part + b"\r\n"
    return out + b"0\r\n\r\n"


class ServerTest(unittest.TestCase):
    def tearDown(self):
        self.assertIsNone(SERVER.proc.poll(), "the server process died")
        start = time.time()
        status, body = get("/health")
        self.assertEqual(status, 200, body)
        self.assertLess(time.time() - start, 2.0, "/health stalled")

    def assert_error(self, status, headers, body, want, api="openai", param=None):
        """The API's own error JSON with status `want`; OpenAI errors name `param` (or a
        parameter inside it, "param.inner") when given."""
        self.assertEqual(status, want, body[:300])
        self.assertTrue(headers.get("content-type", "").startswith("application/json"), headers)
        err = json.loads(body)
        if api == "anthropic":
            self.assertEqual(set(err), {"type", "error"}, err)
            self.assertEqual(err["type"], "error")
            self.assertEqual(err["error"]["type"], ANTHROPIC_TYPES[want], err)
        else:
            self.assertEqual(set(err), {"error"}, err)
            self.assertEqual(set(err["error"]), {"message", "type", "param", "code"}, err)
            self.assertEqual(err["error"]["type"], OPENAI_TYPES[want], err)
            if param is not None:
                named = err["error"]["param"] or ""
                self.assertTrue(named == param or named.startswith(param + "."), err)
        self.assertIsInstance(err["error"]["message"], str)
        self.assertTrue(err["error"]["message"])
        return err

    def refused(self, path, body=None, raw=None, want=400, param=None, headers=None):
        status, hdrs, data = post(path, body, raw=raw, headers=headers)
        return self.assert_error(status, hdrs, data, want, api_of(path), param)

    def accepted(self, path, body):
        status, hdrs, data = post(path, body)
        self.assertEqual(status, 200, data[:300])
        return json.loads(data)


class MalformedJson(ServerTest):
    BODIES = [b"", b" ", b"{", b"{not json", b"[1, 2]", b"null", b"42", b'"text"', b"true",
              b'{"messages": [}', b'{"a": 1}{"b": 2}', b'{"a": 1,}', b"{'a': 1}",
              b'{"a": NaN}', b'{"a": Infinity}', b'{"a": 1e400}', b'{"a": 01}',
              b'{"a": "unterminated}', b'{"a": "\\x"}', b'{"a": "\\u12"}', b"\x00{}",
              b"\xef\xbb\xbf{}", b"{" * 5 + b"}" * 5, b'{"a": "' + b"\x01" + b'"}']

    def test_every_endpoint(self):
        for path in BASE:
            for raw in self.BODIES:
                with self.subTest(path=path, raw=raw[:20]):
                    self.refused(path, raw=raw)

    def test_wrong_content_type_is_still_json(self):
        # the body decides, whatever Content-Type says
        status, _, data = post(TOKENIZE, {"prompt": "x"}, headers={"Content-Type": "text/plain"})
        self.assertEqual(status, 200, data)
        self.refused(TOKENIZE, raw=b"a=b", headers={
            "Content-Type": "application/x-www-form-urlencoded"})


class WrongTypes(ServerTest):
    NUM, INT = ["x", [], {}, True], ["x", [], {}, True, 1.5]
    BOOL, STR = ["yes", 1, [], {}], [5, [], {}, True]
    ARR, OBJ, STRS = [5, {}, True], ["x", 5, [], True], [5, {}, True, [1], ["a", 2]]
    CHAT_FIELDS = {
        "model": STR, "messages": ARR + ["hi"], "temperature": NUM, "top_p": NUM, "top_k": INT,
        "min_p": NUM, "presence_penalty": NUM, "frequency_penalty": NUM,
        "repetition_penalty": NUM, "seed": INT, "stop": STRS, "stop_token_ids": ARR + [["a"]],
        "n": INT, "max_tokens": INT, "max_completion_tokens": INT, "stream": BOOL,
        "stream_options": OBJ, "logprobs": BOOL, "top_logprobs": INT,
        "tools": ARR + [[5], [{"type": "function"}]], "tool_choice": ["sometimes", 5, [], True],
        "parallel_tool_calls": BOOL, "response_format": OBJ + [{"type": 5}],
        "chat_template_kwargs": OBJ, "reasoning_effort": STR, "continue_final_message": BOOL,
        "ignore_eos": BOOL, "modalities": [5, {}, [5]], "logit_bias": ["x", 5, True],
        "priority": INT}
    COMPLETION_FIELDS = {
        "model": STR, "prompt": [5, {}, True, [1.5], ["a", 2], [[1], "a"], [-1]],
        "temperature": NUM, "top_p": NUM, "top_k": INT, "seed": INT, "stop": STRS, "n": INT,
        "max_tokens": INT, "stream": BOOL, "logprobs": INT, "echo": BOOL, "best_of": INT,
        "suffix": [5, [], {}], "ignore_eos": BOOL, "presence_penalty": NUM, "priority": INT}
    MESSAGES_FIELDS = {
        "model": STR, "messages": ARR + ["hi"], "system": [5, {}, True, [5]],
        "max_tokens": INT, "temperature": NUM, "top_p": NUM, "top_k": INT, "seed": INT,
        "stop_sequences": STRS, "stream": BOOL, "tools": ARR + [[5]],
        "tool_choice": ["auto", 5, [], {"type": 5}], "thinking": OBJ + [{"type": 5}],
        "output_config": ["x", 5, True], "priority": INT}

    def sweep(self, path, fields, named):
        for name, values in fields.items():
            for value in values:
                body = dict(BASE[path], **{name: value})
                if name == "stream_options":
                    body["stream"] = True
                with self.subTest(field=name, value=value):
                    self.refused(path, body, param=name if named else None)

    def test_chat(self):
        self.sweep(CHAT, self.CHAT_FIELDS, True)

    def test_completions(self):
        self.sweep(COMPLETIONS, self.COMPLETION_FIELDS, True)

    def test_messages(self):
        self.sweep(MESSAGES, self.MESSAGES_FIELDS, False)
        self.sweep(COUNT, {k: v for k, v in self.MESSAGES_FIELDS.items()
                           if k not in ("max_tokens", "stream", "temperature", "top_p",
                                        "top_k", "seed", "stop_sequences", "priority")}, False)

    def test_message_parts(self):
        for msg in [{"role": "user", "content": 5}, {"role": "user", "content": {}},
                    {"role": "user", "content": [5]}, {"role": "user", "content": [{}]},
                    {"role": "user", "content": [{"type": "text", "text": 5}]},
                    {"role": "user", "content": [{"type": "image_url", "image_url": {}}]},
                    {"role": "assistant", "content": "x", "tool_calls": "x"},
                    {"role": "assistant", "content": "x", "tool_calls": [5]},
                    {"role": "assistant", "content": "x", "tool_calls": [{"function": 5}]},
                    {"role": "assistant", "content": "x",
                     "tool_calls": [{"function": {"name": "f", "arguments": "[1]"}}]},
                    {"role": "assistant", "content": "x",
                     "tool_calls": [{"function": {"name": "f", "arguments": "{bad"}}]},
                    {"role": "tool", "content": "x", "tool_call_id": 5}, 5, "user", None, []]:
            with self.subTest(msg=msg):
                self.refused(CHAT, {"messages": [{"role": "user", "content": "q"}, msg]},
                             param="messages")
        for block in [5, {}, {"type": "text"}, {"type": "text", "text": 5}, {"type": "image"},
                      {"type": "document"}, {"type": "tool_result", "content": 5},
                      {"type": "tool_result", "content": [{"type": "image"}]}]:
            with self.subTest(block=block):
                self.refused(MESSAGES, {"messages": [{"role": "user", "content": [block]}],
                                        "max_tokens": 2})
        for block in [{"type": "tool_use", "name": "f", "input": 5},
                      {"type": "tool_use", "input": {}}, {"type": "thinking", "thinking": 5}]:
            with self.subTest(block=block):
                self.refused(MESSAGES, {"messages": [{"role": "user", "content": "q"},
                                                     {"role": "assistant", "content": [block]}],
                                        "max_tokens": 2})

    def test_tokenize_detokenize(self):
        for body in [{}, {"prompt": 5}, {"prompt": ["a"]}, {"messages": "x"},
                     {"messages": USER, "add_generation_prompt": "yes"},
                     {"prompt": "x", "return_token_strs": 1}]:
            with self.subTest(body=body):
                self.refused(TOKENIZE, body)
        for tokens in ["x", 5, {}, [1.5], ["1"], [-1], [10 ** 9], [2 ** 63], [2 ** 64], [None]]:
            with self.subTest(tokens=tokens):
                self.refused(DETOKENIZE, {"tokens": tokens}, param="tokens")


class Sizes(ServerTest):
    def test_body_over_the_limit_413(self):
        big = json.dumps({"messages": [{"role": "user", "content": "x" * (MAX_BODY * 3)}]})
        for path in [CHAT, COMPLETIONS, MESSAGES, COUNT, TOKENIZE]:
            with self.subTest(path=path):
                self.refused(path, raw=big.encode(), want=413)
        # declared too large, sent whole: read and refused, the connection stays usable
        out, closed = exchange(request_bytes("POST", CHAT, b"x" * (MAX_BODY + 10)) +
                               request_bytes("GET", "/health"), count=2)
        self.assert_error(*out[0], 413)
        self.assertEqual(out[1][0], 200)

    def test_chunked_body_over_the_limit_413(self):
        # cpp-httplib does not apply its payload limit to chunked bodies; the server does
        body = json.dumps({"prompt": "x", "max_tokens": 1, "pad": "a" * (MAX_BODY + 100)})
        for size in (4096, 65536):
            out, _ = exchange(request_bytes("POST", COMPLETIONS, headers={
                "Transfer-Encoding": "chunked"}) + chunked(body.encode(), size))
            self.assert_error(*out[0], 413)
        # an endless chunked body is cut off, answered and closed; the server does not grow
        rss = rss_mib()
        with socket.create_connection(("127.0.0.1", SERVER.port)) as s:
            s.sendall(request_bytes("POST", CHAT, headers={"Transfer-Encoding": "chunked"}))
            sent = 0
            try:
                while sent < FLOOD and not select.select([s], [], [], 0)[0]:
                    s.sendall(b"10000\r\n" + b"a" * 65536 + b"\r\n")
                    sent += 65536
            except (BrokenPipeError, ConnectionResetError):
                pass
            self.assertLess(sent, FLOOD)
            out, closed = read_responses(s)
            self.assert_error(*out[0], 413)
            self.assertTrue(closed)
        self.assertLess(rss_mib() - rss, 64)
        # within the limit, chunked works
        small = json.dumps({"messages": USER, "max_tokens": 2}).encode()
        out, _ = exchange(request_bytes("POST", CHAT, headers={"Transfer-Encoding": "chunked"}) +
                          chunked(small, 7))
        self.assertEqual(out[0][0], 200, out)

    def test_huge_headers_431(self):
        pad = "".join(f"X-Pad-{i}: {'a' * 1000}\r\n" for i in range(80))  # 80 KB
        with socket.create_connection(("127.0.0.1", SERVER.port)) as s:
            try:
                s.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n" + pad.encode() + b"\r\n")
            except (BrokenPipeError, ConnectionResetError):
                pass
            out, closed = read_responses(s)
        self.assert_error(*out[0], 431)
        self.assertTrue(closed)
        # an endless header stream does not grow the server (cpp-httplib kept every line)
        rss = rss_mib()
        with socket.create_connection(("127.0.0.1", SERVER.port)) as s:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
            sent = 0
            try:
                while sent < FLOOD and not select.select([s], [], [], 0)[0]:
                    s.sendall((b"X-A: " + b"a" * 4000 + b"\r\n") * 16)
                    sent += 16 * 4007
            except (BrokenPipeError, ConnectionResetError):
                pass
            out, _ = read_responses(s)
        self.assertLess(sent, FLOOD)
        self.assert_error(*out[0], 431)
        self.assertLess(rss_mib() - rss, 64)
        # a request line longer than the URI limit
        out, _ = exchange(request_bytes("GET", "/v1/models/" + "m" * 9000))
        self.assert_error(*out[0], 414)

    def test_prompts_beyond_the_context(self):
        err = self.refused(CHAT, {"messages": [{"role": "user", "content": "the dog " * 1500}]},
                           param="messages")
        self.assertEqual(err["error"]["code"], "context_length_exceeded")
        many = [{"role": "user" if i % 2 == 0 else "assistant", "content": "a"}
                for i in range(2001)]
        self.refused(CHAT, {"messages": many}, param="messages")
        self.refused(MESSAGES, {"messages": many, "max_tokens": 2})
        err = self.refused(COMPLETIONS, {"prompt": list(range(1, 300)) * 8}, param="prompt")
        self.assertEqual(err["error"]["code"], "context_length_exceeded")
        # a long stop list entry and 16 stops are fine
        self.accepted(CHAT, {"messages": USER, "max_tokens": 2, "stop": ["x" * 5000] * 16})


class Utf8(ServerTest):
    BAD = [b"\xff", b"\xfe\xff", b"\xc0\xaf", b"\xe0\x80\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80",
           b"\xc3", b"\xe6\x9d", b"a\x80b"]

    def test_invalid_utf8_in_strings(self):
        for bad in self.BAD:
            for path, template in [
                    (CHAT, b'{"messages": [{"role": "user", "content": "%s"}]}'),
                    (CHAT, b'{"messages": [{"role": "user", "content": "hi"}], "stop": ["%s"]}'),
                    (CHAT, b'{"messages": [{"role": "user", "content": "hi"}], "model": "%s"}'),
                    (COMPLETIONS, b'{"prompt": "%s"}'),
                    (MESSAGES, b'{"messages": [{"role": "user", "content": "%s"}], '
                               b'"max_tokens": 2}'),
                    (MESSAGES, b'{"system": "%s", "messages": [{"role": "user", '
                               b'"content": "x"}], "max_tokens": 2}'),
                    (TOKENIZE, b'{"prompt": "%s"}'), (COUNT, b'{"messages": [{"role": "user", '
                                                            b'"content": "%s"}]}'),
                    (CHAT, b'{"messages": [{"role": "user", "content": "x"}], "%s": 1}')]:
                with self.subTest(path=path, bad=bad, where=template[:40]):
                    self.refused(path, raw=template.replace(b"%s", bad))

    def test_invalid_utf8_outside_strings_and_in_escapes(self):
        for raw in [b'\xff{"prompt": "x"}', b'{"prompt": "x"}\xff', b'{\xff"prompt": "x"}',
                    b'{"prompt": "\\ud800"}', b'{"prompt": "\\udc00x"}',
                    b'{"prompt": "\\ud800\\u0041"}']:
            with self.subTest(raw=raw):
                self.refused(COMPLETIONS, raw=raw)

    def test_invalid_utf8_elsewhere(self):
        out, _ = exchange(b"GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \xff\xfe"
                          b"\r\n\r\n")
        self.assert_error(*out[0], 401)
        for path in [b"/v1/models/\xff\xfe", b"/v1/models/%FF%FE", b"/v1/models/%C0%AF"]:
            out, _ = exchange(b"GET " + path + b" HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                              KEY.encode() + b"\r\n\r\n")
            err = self.assert_error(*out[0], 404, param="model")
            json.dumps(err)  # valid UTF-8 throughout

    def test_valid_unicode_round_trips(self):
        text = "東京 café 🙂 \u0000 \u2028"
        ids = self.accepted(TOKENIZE, {"prompt": text})["tokens"]
        self.assertEqual(self.accepted(DETOKENIZE, {"tokens": ids})["prompt"], text)
        # token ids that cut a multi-byte character in two still give valid JSON
        for i in range(1, len(ids)):
            json.dumps(self.accepted(DETOKENIZE, {"tokens": ids[:i]}))


class UnknownModel(ServerTest):
    def test_unknown_model_404(self):
        for path in BASE:
            for model in ["gpt-4", "nope", "tiny_chat ", "TINY_CHAT", "x" * 5000]:
                with self.subTest(path=path, model=model[:20]):
                    err = self.refused(path, dict(BASE[path], model=model), want=404)
                    if api_of(path) == "openai":
                        self.assertEqual(err["error"]["param"], "model")
                        self.assertEqual(err["error"]["code"], "model_not_found")
        for path in ["/v1/models/nope", "/v1/models/tiny_chat/extra", "/v1/models/%00"]:
            out, _ = exchange(request_bytes("GET", path))
            self.assert_error(*out[0], 404)
        self.accepted(CHAT, dict(BASE[CHAT], model="tiny_chat"))


class AbsurdParameters(ServerTest):
    CHAT_BAD = {
        "max_tokens": [-1, 0, 10 ** 12, 1e12, 2 ** 31, 2 ** 63, 2 ** 64, -2 ** 63, 1.5, 1e300],
        "max_completion_tokens": [-5, 0, 10 ** 12],
        "temperature": [-1, -1e-9, 2.0001, 1e9, 1e308, -1e308],
        "top_p": [1.5, 0, -0.1, 1e-300, 5e-324], "top_k": [-2, 2 ** 31, -2 ** 40],
        "min_p": [1.1, -0.5], "presence_penalty": [3, -2.5], "frequency_penalty": [1e6],
        "repetition_penalty": [0, -1, 101], "n": [0, -1, 17, 1000, 2 ** 40],
        "top_logprobs": [-1, 21, 100], "seed": [2 ** 64, 1e300],
        "stop": [["s"] * 17, ["s"] * 1000], "stop_token_ids": [[-1], [10 ** 9], [2 ** 31]],
        "logit_bias": [{"5": 101}, {"5": -1e300}, {"x": 1}, {"-5": 1}, {"4294967296": 1},
                       {"999999999": 1}], "priority": [10 ** 6 + 1, -10 ** 6 - 1, 2 ** 63, 1e300]}
    COMPLETION_BAD = {"max_tokens": [-1, 10 ** 12], "logprobs": [-1, 21, 100],
                      "priority": [10 ** 6 + 1, 2 ** 64],
                      "n": [0, 17], "best_of": [0, 3, 100], "suffix": ["tail"],
                      "prompt": [[], [[]], "", [-1], [10 ** 9], ["x"] * 65]}
    MESSAGES_BAD = {"max_tokens": [-1, 10 ** 12, 1e12, 1.5], "temperature": [-1, 1e9],
                    "top_p": [1.5, 0], "top_k": [-1, 2 ** 31], "stop_sequences": [["s"] * 1000],
                    "priority": [-10 ** 7, 1.5, "1"],
                    "thinking": [{"type": "enabled", "budget_tokens": 0},
                                 {"type": "enabled", "budget_tokens": -1},
                                 {"type": "enabled"}, {"type": "sometimes"}],
                    "tool_choice": [{"type": "any"}, {"type": "tool", "name": "f"},
                                    {"type": "maybe"}]}

    def sweep(self, path, table, named):
        for name, values in table.items():
            for value in values:
                with self.subTest(field=name, value=value):
                    self.refused(path, dict(BASE[path], **{name: value}),
                                 param=name if named else None)

    def test_chat(self):
        self.sweep(CHAT, self.CHAT_BAD, True)
        self.refused(CHAT, dict(BASE[CHAT], top_logprobs=5), param="top_logprobs")
        self.refused(CHAT, dict(BASE[CHAT], stream_options={"include_usage": True}),
                     param="stream_options")
        self.refused(CHAT, dict(BASE[CHAT], tool_choice="required"), param="tool_choice")
        self.refused(CHAT, dict(BASE[CHAT], n=16, stream=False,
                                response_format={"type": "json_schema", "json_schema": {
                                    "schema": {"type": "integer", "minimum": 5,
                                               "maximum": 1}}}), param="response_format")

    def test_completions(self):
        self.sweep(COMPLETIONS, self.COMPLETION_BAD, True)
        self.refused(COMPLETIONS, {"prompt": ["x"] * 8, "n": 16}, param="n")

    def test_messages(self):
        self.sweep(MESSAGES, self.MESSAGES_BAD, False)

    def test_edges_that_are_accepted(self):
        # capped or clamped rather than refused, and answered in full
        for extra in [{"max_tokens": 2 ** 31 - 1, "stop_token_ids": [0, 1, 2]},
                      {"temperature": 0}, {"temperature": -0.0}, {"temperature": 2},
                      {"top_p": 1}, {"top_k": -1}, {"top_k": 2 ** 30}, {"min_p": 1},
                      {"seed": -2 ** 63}, {"seed": 2 ** 63 - 1}, {"n": 16, "stream": True},
                      {"n": 16, "logprobs": True, "top_logprobs": 20},
                      {"stop": ["", "a"]}, {"presence_penalty": 2, "frequency_penalty": -2,
                                             "repetition_penalty": 100},
                      {"priority": 10 ** 6}, {"priority": -10 ** 6}, {"priority": 3.0}]:
            with self.subTest(extra=extra):
                status, _, data = post(CHAT, dict(BASE[CHAT], **extra))
                self.assertEqual(status, 200, data[:300])
        r = self.accepted(COMPLETIONS, {"prompt": "x", "max_tokens": 0, "echo": True,
                                        "logprobs": 5})
        self.assertEqual(r["choices"][0]["finish_reason"], "length")
        r = self.accepted(MESSAGES, {"messages": USER, "max_tokens": 0})
        self.assertEqual(r["stop_reason"], "max_tokens")


class Nesting(ServerTest):
    def test_deep_nesting_is_refused(self):
        deep = "[" * 100000 + "]" * 100000
        self.refused(CHAT, raw=deep.encode()[:MAX_BODY - 10])
        nested = '{"a": ' * 2000 + "1" + "}" * 2000
        for path, raw in [
                (CHAT, '{"messages": [{"role": "user", "content": "x"}], "x": %s}' % nested),
                (CHAT, '{"messages": [{"role": "user", "content": "x"}], '
                       '"chat_template_kwargs": {"x": %s}}' % nested),
                (CHAT, '{"messages": [{"role": "user", "content": "x"}], "tools": [{"type": '
                       '"function", "function": {"name": "f", "parameters": %s}}]}' % nested),
                (CHAT, '{"messages": [{"role": "user", "content": "x"}], "response_format": '
                       '{"type": "json_schema", "json_schema": {"schema": %s}}}' % nested),
                (CHAT, '{"messages": [{"role": "user", "content": "x"}, {"role": "assistant", '
                       '"content": "", "tool_calls": [{"function": {"name": "f", '
                       '"arguments": %s}}]}]}' % json.dumps(nested)),
                (MESSAGES, '{"messages": [{"role": "user", "content": "x"}, {"role": '
                           '"assistant", "content": [{"type": "tool_use", "id": "t", "name": '
                           '"f", "input": %s}]}], "max_tokens": 2}' % nested),
                (MESSAGES, '{"messages": [{"role": "user", "content": "x"}], "max_tokens": 2, '
                           '"output_config": {"format": {"type": "json_schema", "schema": %s}}}'
                 % nested),
                (TOKENIZE, '{"prompt": "x", "y": %s}' % nested)]:
            with self.subTest(path=path, raw=raw[:70]):
                self.refused(path, raw=raw.encode())

    def test_moderate_nesting_works(self):
        nested = {"a": 1}
        for _ in range(28):  # 56 levels of arrays and objects, within the 64 allowed
            nested = {"type": "object", "properties": {"a": nested}}
        self.accepted(CHAT, dict(BASE[CHAT], chat_template_kwargs={"x": nested}))
        schema = {"type": "string"}
        for _ in range(6):
            schema = {"type": "object", "properties": {"a": schema}}
        tool = {"type": "function", "function": {"name": "f", "parameters": schema}}
        self.accepted(CHAT, dict(BASE[CHAT], tools=[tool]))


class Messages(ServerTest):
    def test_empty_or_missing_messages(self):
        for body in [{}, {"messages": None}, {"messages": []}, {"messages": {}},
                     {"messages": [{}]}, {"messages": [{"content": "x"}]},
                     {"messages": [{"role": None, "content": "x"}]}]:
            with self.subTest(body=body):
                self.refused(CHAT, dict(body, max_tokens=2), param="messages")
                self.refused(MESSAGES, dict(body, max_tokens=2))
                self.refused(COUNT, body)
        # Anthropic content that holds nothing (was a crash: no message left to continue)
        for content in [[], [{"type": "text", "text": ""}]]:
            with self.subTest(content=content):
                self.refused(MESSAGES, {"messages": [{"role": "user", "content": content}],
                                        "max_tokens": 2})
                self.refused(COUNT, {"messages": [{"role": "user", "content": content}]})
        # empty text is a message
        self.accepted(CHAT, {"messages": [{"role": "user", "content": ""}], "max_tokens": 2})
        self.accepted(CHAT, {"messages": [{"role": "user"}], "max_tokens": 2})

    def test_wrong_roles(self):
        for role in ["wizard", "", "USER", "function", "model", 5, ["user"]]:
            with self.subTest(role=role):
                self.refused(CHAT, {"messages": [{"role": role, "content": "x"}]},
                             param="messages")
        for role in ["system", "tool", "developer", "wizard", "", 5]:
            with self.subTest(role=role):
                self.refused(MESSAGES, {"messages": [{"role": role, "content": "x"}],
                                        "max_tokens": 2})
        # roles the API knows in an order the chat template refuses: 422, the API's shape
        for path, body in [(CHAT, {"messages": [{"role": "assistant", "content": "x"}]}),
                           (CHAT, {"messages": [{"role": "system", "content": "x"}]}),
                           (CHAT, {"messages": [{"role": "tool", "content": "x"}]}),
                           (MESSAGES, {"messages": [{"role": "assistant", "content": "x"}],
                                       "max_tokens": 2}),
                           (COUNT, {"messages": [{"role": "assistant", "content": "x"}]}),
                           (TOKENIZE, {"messages": [{"role": "system", "content": "x"}]})]:
            with self.subTest(path=path, body=body):
                self.refused(path, body, want=422)


class Http(ServerTest):
    def test_methods_and_routes(self):
        for method, path, allow in [("GET", CHAT, "POST"), ("PUT", CHAT, "POST"),
                                    ("DELETE", "/v1/models", "GET, HEAD"),
                                    ("OPTIONS", MESSAGES, "POST"), ("TRACE", TOKENIZE, "POST"),
                                    ("PATCH", "/health", "GET, HEAD"),
                                    ("QUERY", DETOKENIZE, "POST"),
                                    ("POST", "/v1/models/tiny_chat", "GET, HEAD")]:
            with self.subTest(method=method, path=path):
                out, closed = exchange(request_bytes(method, path, b"{}"))
                self.assert_error(*out[0], 405, api_of(path))
                self.assertEqual(out[0][1]["allow"], allow)
        for path in ["/", "/v2/chat/completions", "/v1/chat", "/v1/messages/x", "/metrics/x"]:
            with self.subTest(path=path):
                out, _ = exchange(request_bytes("POST", path, b"{}"))
                self.assert_error(*out[0], 404, api_of(path))
        conn = http.client.HTTPConnection("127.0.0.1", SERVER.port, timeout=5)
        conn.request("HEAD", "/health")
        self.assertEqual(conn.getresponse().status, 200)
        conn.close()

    def test_malformed_requests_are_answered_and_closed(self):
        for data in [b"\x00\xff\xfe garbage\r\n\r\n", b"GET /health HTTP/2.0\r\n\r\n",
                     b"GET /health\r\n\r\n", b"BREW /pot HTTP/1.1\r\nHost: x\r\n\r\n",
                     b"GET /health HTTP/1.1\nHost: x\n\n",
                     request_bytes("POST", CHAT, headers={"Transfer-Encoding": "chunked"}) +
                     b"zz\r\nabc\r\n0\r\n\r\n",
                     request_bytes("POST", CHAT, headers={"Transfer-Encoding": "chunked"}) +
                     b"ffffffffffffffffffff\r\nabc\r\n0\r\n\r\n"]:
            with self.subTest(data=data[:40]):
                start = time.time()
                out, closed = exchange(data + request_bytes("GET", "/health"), count=2)
                self.assert_error(*out[0], 400)
                self.assertTrue(closed)
                self.assertEqual(len(out), 1)  # nothing after it on the connection is served
                self.assertLess(time.time() - start, 1.5)

    def test_keep_alive_stays_in_step(self):
        body = json.dumps(BASE[TOKENIZE]).encode()
        # bodies the server does not read (GET, unknown methods, refused routes) are skipped
        data = (request_bytes("GET", "/health", b'{"x": "' + b"y" * 3000 + b'"}') +
                request_bytes("POST", TOKENIZE, body) +
                request_bytes("TRACE", "/v1/models", b"trace body") +
                request_bytes("POST", TOKENIZE, body) +
                request_bytes("POST", "/nope", body) +
                request_bytes("POST", DETOKENIZE, b'{"tokens": [1]}'))
        out, _ = exchange(data, count=6)
        self.assertEqual([r[0] for r in out], [200, 200, 405, 200, 404, 200], out)
        # pipelined requests are answered in order
        out, _ = exchange(request_bytes("POST", TOKENIZE, body) * 3, count=3)
        self.assertEqual([r[0] for r in out], [200] * 3)
        self.assertEqual(len({r[2] for r in out}), 1)

    def test_expect_continue_and_http10(self):
        body = json.dumps(BASE[CHAT]).encode()
        out, _ = exchange(request_bytes("POST", CHAT, body, {"Expect": "100-continue"}))
        self.assertEqual(out[0][0], 200)
        out, closed = exchange(b"POST " + CHAT.encode() + b" HTTP/1.0\r\nContent-Length: " +
                               str(len(body)).encode() + b"\r\nAuthorization: Bearer " +
                               KEY.encode() + b"\r\n\r\n" + body)
        self.assertEqual(out[0][0], 200)
        self.assertTrue(closed)

    def test_body_shorter_than_declared_408(self):
        body = json.dumps(BASE[CHAT]).encode()
        start = time.time()
        out, closed = exchange(request_bytes("POST", CHAT, body, length=len(body) + 10))
        self.assert_error(*out[0], 408)
        self.assertTrue(closed)
        self.assertLess(time.time() - start, READ_TIMEOUT + 2)


class SlowClients(ServerTest):
    def others_are_served(self):
        """While slow clients hold connections, others get answers promptly."""
        start = time.time()
        self.assertEqual(get("/health")[0], 200)
        self.accepted(CHAT, {"messages": USER, "max_tokens": 2})
        self.accepted(MESSAGES, {"messages": USER, "max_tokens": 2})
        self.assertLess(time.time() - start, 5)

    def trickle(self, head, data, gap, result):
        """Sends `head`, then `data` a byte at a time every `gap` s; stops when the server
        answers or closes. result: (responses, closed, seconds)."""
        start = time.time()
        with socket.create_connection(("127.0.0.1", SERVER.port)) as s:
            try:
                s.sendall(head)
                for b in data:
                    if select.select([s], [], [], 0)[0]:
                        break
                    s.sendall(bytes([b]))
                    time.sleep(gap)
            except (BrokenPipeError, ConnectionResetError):
                pass
            try:
                out, closed = read_responses(s, timeout=READ_TIMEOUT + 5)
            except ConnectionResetError:
                out, closed = [], True
        result.extend([out, closed, time.time() - start])

    def test_trickled_requests(self):
        body = json.dumps({"messages": USER, "max_tokens": 2}).encode()
        head = request_bytes("POST", CHAT, headers={"Content-Length": str(len(body))})
        fast, slow_body, slow_head, silent_after = [], [], [], []
        threads = [
            # a byte every 5 ms: the whole request arrives within the timeout and is answered
            threading.Thread(target=self.trickle, args=(b"", head + body, 0.005, fast)),
            # the body a byte every 100 ms: longer than --read-timeout, 408 and closed
            threading.Thread(target=self.trickle, args=(head, body, 0.1, slow_body)),
            # the request line and headers a byte every 100 ms, endlessly
            threading.Thread(target=self.trickle, args=(b"", head * 3, 0.1, slow_head)),
            # the headers and part of the body, then nothing
            threading.Thread(target=self.trickle, args=(head + body[:10], b"", 0, silent_after))]
        for t in threads:
            t.start()
        time.sleep(0.3)
        self.others_are_served()
        for t in threads:
            t.join(READ_TIMEOUT + 15)
        self.assertEqual(fast[0][0][0], 200, fast)
        for result in (slow_body, slow_head, silent_after):
            out, closed, seconds = result
            self.assertTrue(closed, result)
            self.assertLess(seconds, READ_TIMEOUT + 3, result)
            if out:  # answered before the close (the request line arrived whole)
                self.assert_error(*out[0], 408)
        self.assert_error(*silent_after[0][0], 408)
        self.assert_error(*slow_body[0][0], 408)

    def test_silent_connections(self):
        socks = [socket.create_connection(("127.0.0.1", SERVER.port)) for _ in range(24)]
        partial = socket.create_connection(("127.0.0.1", SERVER.port))
        partial.sendall(b"POS")  # a request line that never ends
        try:
            time.sleep(0.2)
            self.others_are_served()
            start = time.time()
            for s in socks:  # closed by the server after --keep-alive-timeout
                s.settimeout(IDLE_TIMEOUT + 5)
                self.assertEqual(s.recv(1), b"")
            self.assertLess(time.time() - start, IDLE_TIMEOUT + 3)
            partial.settimeout(READ_TIMEOUT + 5)
            try:
                rest = partial.recv(1000)  # no response (or a 408) and closed
                if rest:
                    self.assertIn(b" 408 ", rest.split(b"\r\n")[0])
            except ConnectionResetError:
                pass
        finally:
            for s in socks + [partial]:
                s.close()


class Concurrency(ServerTest):
    def test_many_connections_at_once(self):
        body = json.dumps({"messages": USER, "max_tokens": 3}).encode()
        results, errors = [], []
        barrier = threading.Barrier(48)

        def client(i):
            try:
                barrier.wait(10)
                kind = i % 4
                if kind == 0:
                    status, _, data = post(CHAT, raw=body)
                    results.append(("chat", status, data))
                elif kind == 1:
                    status, _, data = post(MESSAGES, {"messages": USER, "max_tokens": 3,
                                                      "stream": i % 8 == 1})
                    results.append(("messages", status, data))
                elif kind == 2:
                    status, _, data = post(TOKENIZE, {"prompt": "x" * i})
                    results.append(("tokenize", status, data))
                else:
                    out, _ = exchange(b"\x00garbage\r\n\r\n")
                    results.append(("garbage", out[0][0], out[0][2]))
            except Exception as e:  # noqa: BLE001
                errors.append(repr(e))

        threads = [threading.Thread(target=client, args=(i,)) for i in range(48)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        self.assertEqual(errors, [])
        self.assertEqual(len(results), 48)
        for kind, status, data in results:
            if kind == "garbage":
                self.assertEqual(status, 400)
            elif status == 429:  # more sequences than --max-sequences + --max-queue
                self.assertEqual(json.loads(data)["error"]["type"], "rate_limit_error")
            else:
                self.assertEqual(status, 200, data[:200])
                if kind != "messages" or not data.startswith(b"event:"):
                    json.loads(data)
        self.assertEqual(SERVER.wait_metric_down("ninfer_requests_in_flight", 0), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
