#!/usr/bin/env python3
"""A bounded load test of `ninfer serve`: 16 concurrent clients (threads, one keep-alive
connection each) send 40 requests apiece, a mix of chat completions, completions and Anthropic
messages, streamed and whole, each one of a fixed set of greedy or seeded requests. Checks that
nothing is lost or corrupted under concurrency: every request gets a complete, well-formed
response (the streams' event grammar included); each gives exactly the output (text, finish
reason, token counts) the same request gave when run alone on the idle server; and /metrics
counts exactly the requests, generations and tokens sent. Prints throughput and latencies."""
import http.client
import json
import os
import random
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from server_util import KEY, Server  # noqa: E402

CLIENTS, PER_CLIENT = 16, 40
GAUGES = ("ninfer_requests_in_flight", "ninfer_queue_depth", "ninfer_sequences_running")
CHAT, COMPLETIONS, MESSAGES = "/v1/chat/completions", "/v1/completions", "/v1/messages"
HEADERS = {"Content-Type": "application/json", "Authorization": "Bearer " + KEY}


def probes():
    """The distinct requests the clients send: (path, body), greedy or seeded."""
    out = []
    for i in range(18):
        path = [CHAT, COMPLETIONS, MESSAGES][i % 3]
        stream = (i // 3) % 2 == 1
        sampling = {"temperature": 0} if i % 4 < 2 else {
            "temperature": 0.9, "top_p": 0.95, "seed": 1000 + i}
        tokens = 8 + 8 * (i % 7)  # 8 to 56
        if path == CHAT:
            body = {"messages": [{"role": "user", "content": f"question {i}: the dog"}],
                    "max_tokens": tokens, **sampling}
            if stream:
                body["stream_options"] = {"include_usage": True}
        elif path == COMPLETIONS:
            body = {"prompt": f"story {i}: once upon a time", "max_tokens": tokens, **sampling}
            if stream:
                body["stream_options"] = {"include_usage": True}
        else:
            sampling.pop("top_p", None)
            body = {"messages": [{"role": "user", "content": f"message {i}: hello"}],
                    "max_tokens": tokens, **sampling}
        out.append((path, dict(body, stream=stream)))
    return out


def sse_frames(text):
    frames = []
    for block in text.split("\n\n"):
        event, data = None, []
        for line in block.split("\n"):
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                data.append(line[6:])
            elif line and not line.startswith(":"):
                raise AssertionError(f"not an SSE line: {line!r}")
        if data:
            frames.append((event, "\n".join(data)))
    return frames


def outcome(path, body, status, raw):
    """The response's result, checking its shape on the way: (text, finish, prompt tokens,
    completion tokens). Raises AssertionError on anything malformed."""
    assert status == 200, (status, raw[:300])
    text = raw.decode("utf-8")
    if not body["stream"]:
        r = json.loads(text)
        if path == MESSAGES:
            assert r["type"] == "message" and r["role"] == "assistant", r
            assert r["id"].startswith("msg_"), r
            blocks = "".join(b.get("text", "") + b.get("thinking", "") for b in r["content"])
            u = r["usage"]  # input_tokens: the prompt tokens not read from the prefix cache
            return blocks, r["stop_reason"], u["input_tokens"] + u["cache_read_input_tokens"], \
                u["output_tokens"]
        assert len(r["choices"]) == 1 and r["choices"][0]["index"] == 0, r
        c = r["choices"][0]
        if path == CHAT:
            assert r["object"] == "chat.completion", r
            m = c["message"]
            out = (m.get("reasoning_content") or "") + "|" + (m.get("content") or "")
        else:
            assert r["object"] == "text_completion", r
            out = c["text"]
        u = r["usage"]
        assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"], u
        return out, c["finish_reason"], u["prompt_tokens"], u["completion_tokens"]

    frames = sse_frames(text)
    if path == MESSAGES:
        events = [e for e, _ in frames if e != "ping"]
        datas = [json.loads(d) for e, d in frames if e != "ping"]
        for e, d in zip(events, datas):
            assert d["type"] == e, (e, d)
        assert events[0] == "message_start" and events[-2:] == ["message_delta", "message_stop"], \
            events
        start = datas[0]["message"]
        parts, open_block, finished = {}, None, []
        for e, d in zip(events[1:-2], datas[1:-2]):
            if e == "content_block_start":
                assert open_block is None, events
                open_block = d["index"]
                parts[open_block] = ""
            elif e == "content_block_delta":
                assert d["index"] == open_block, events
                delta = d["delta"]
                parts[open_block] += delta.get("text", "") + delta.get("thinking", "")
            elif e == "content_block_stop":
                assert d["index"] == open_block, events
                finished.append(open_block)
                open_block = None
            else:
                raise AssertionError(f"unexpected event {e}")
        assert open_block is None and finished == sorted(finished), events
        final = datas[-2]
        # message_start counts the whole prompt; message_delta splits off the cache reads
        prompt = final["usage"]["input_tokens"] + final["usage"]["cache_read_input_tokens"]
        assert start["usage"]["input_tokens"] == prompt, (start, final)
        return "".join(parts[i] for i in sorted(parts)), final["delta"]["stop_reason"], \
            prompt, final["usage"]["output_tokens"]

    assert frames[-1][1] == "[DONE]", frames[-3:]
    chunks = [json.loads(d) for _, d in frames[:-1]]
    ids = {c["id"] for c in chunks}
    assert len(ids) == 1, ids
    usage = chunks[-1]["usage"]
    assert usage and chunks[-1]["choices"] == [], chunks[-1]
    reasoning, content, finishes = "", "", []
    for c in chunks[:-1]:
        assert c["object"] == ("chat.completion.chunk" if path == CHAT else "text_completion"), c
        for ch in c["choices"]:
            assert ch["index"] == 0, c
            if ch.get("finish_reason"):
                finishes.append(ch["finish_reason"])
            if path == CHAT:
                reasoning += ch["delta"].get("reasoning_content") or ""
                content += ch["delta"].get("content") or ""
            else:
                content += ch["text"]
    assert len(finishes) == 1, finishes
    out = reasoning + "|" + content if path == CHAT else content
    return out, finishes[0], usage["prompt_tokens"], usage["completion_tokens"]


class Client:
    """One keep-alive connection."""

    def __init__(self, port):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)

    def send(self, path, body):
        self.conn.request("POST", path, json.dumps(body), HEADERS)
        resp = self.conn.getresponse()
        return resp.status, resp.read()

    def close(self):
        self.conn.close()


def counters(server):
    """Requests by endpoint and status, generations, prompt and generated tokens."""
    _, _, text = server.request("GET", "/metrics")
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, value = line.rsplit(" ", 1)
        if name.startswith(("ninfer_requests_total{", "ninfer_generations_finished_total",
                            "ninfer_prompt_tokens_total", "ninfer_generation_tokens_total",
                            "ninfer_requests_in_flight", "ninfer_queue_depth",
                            "ninfer_sequences_running")):
            out[name] = float(value)
    return out


class Load(unittest.TestCase):
    def test_no_request_lost_or_corrupted(self):
        server = Server("--max-sequences", "4", "--max-queue", "64",
                        "--keep-alive-timeout", "60", "--no-log-requests")
        try:
            self.run_load(server)
        finally:
            self.assertEqual(server.stop(), 0)

    def run_load(self, server):
        plan = probes()
        # each request alone on the idle server: the reference outputs
        alone = Client(server.port)
        reference = [outcome(p, b, *alone.send(p, b)) for p, b in plan]
        alone.close()
        self.assertGreater(sum(r[3] for r in reference), 10 * len(plan))  # real generations
        self.assertGreater(len({r[0] for r in reference}), len(plan) // 2)
        # every probe is seen at least once under load; the rest is a seeded shuffle
        rng = random.Random(7)
        jobs = [i % len(plan) for i in range(CLIENTS * PER_CLIENT)]
        rng.shuffle(jobs)
        # The baseline once the reference requests are all counted: the logger counts a request
        # after its response went out, so the last one can land after the client has read it
        # (a loaded 2-core host counted it into the load's delta).
        deadline = time.time() + 10
        while True:
            before = counters(server)
            posts = sum(before.get(f'ninfer_requests_total{{endpoint="{p}",status="200"}}', 0)
                        for p in (CHAT, COMPLETIONS, MESSAGES))
            if posts >= len(plan) or time.time() > deadline:
                break
            time.sleep(0.1)
        self.assertEqual(posts, len(plan), "the reference requests' counts never settled")
        results, failures = [], []
        lock = threading.Lock()
        barrier = threading.Barrier(CLIENTS)

        def worker(k):
            client = Client(server.port)
            try:
                barrier.wait(30)
                for j in jobs[k * PER_CLIENT:(k + 1) * PER_CLIENT]:
                    path, body = plan[j]
                    t0 = time.time()
                    try:
                        status, raw = client.send(path, body)
                        got = outcome(path, body, status, raw)
                    except Exception as e:  # noqa: BLE001
                        with lock:
                            failures.append((j, repr(e)[:500]))
                        client.close()
                        client = Client(server.port)
                        continue
                    with lock:
                        results.append((j, got, time.time() - t0))
            finally:
                client.close()

        start = time.time()
        threads = [threading.Thread(target=worker, args=(k,)) for k in range(CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(600)
        wall = time.time() - start
        self.assertEqual(failures, [])
        self.assertEqual(len(results), CLIENTS * PER_CLIENT)

        mismatches = [(j, got, reference[j]) for j, got, _ in results if got != reference[j]]
        self.assertEqual(mismatches[:5], [], f"{len(mismatches)} outputs differ under load")

        latencies = sorted(s for _, _, s in results)
        tokens = sum(got[3] for _, got, _ in results)
        print(f"load: {len(results)} requests from {CLIENTS} clients in {wall:.1f} s "
              f"({len(results) / wall:.1f} req/s, {tokens / wall:.0f} generated tokens/s); "
              f"latency p50 {latencies[len(latencies) // 2]:.2f} s, "
              f"p95 {latencies[int(len(latencies) * 0.95)]:.2f} s, "
              f"max {latencies[-1]:.2f} s", file=sys.stderr)

        # /metrics adds up to what was sent (the logger counts a request once it is answered), and
        # the gauges return to zero. Both settle just after the last response: a client can read
        # its final bytes before the engine's next stats update (seen on a loaded 2-core host).
        sent = {}
        for j, _, _ in results:
            sent[plan[j][0]] = sent.get(plan[j][0], 0) + 1
        prompt = sum(got[2] for _, got, _ in results)
        deadline = time.time() + 10
        while True:
            after = counters(server)
            delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
            finished_now = sum(v for k, v in delta.items()
                               if k.startswith("ninfer_generations_finished_total"))
            ok = (all(delta.get(f'ninfer_requests_total{{endpoint="{p}",status="200"}}', 0) == n
                      for p, n in sent.items()) and all(after.get(g, 0) == 0 for g in GAUGES)
                  and finished_now == len(results)
                  and delta.get("ninfer_prompt_tokens_total") == prompt
                  and delta.get("ninfer_generation_tokens_total") == tokens)
            if ok or time.time() > deadline:
                break
            time.sleep(0.1)
        for p, n in sent.items():
            self.assertEqual(delta.get(f'ninfer_requests_total{{endpoint="{p}",status="200"}}'),
                             n, p)
        errors = {k: v for k, v in delta.items()
                  if k.startswith("ninfer_requests_total") and 'status="200"' not in k and v}
        self.assertEqual(errors, {})
        finished = sum(v for k, v in delta.items()
                       if k.startswith("ninfer_generations_finished_total"))
        self.assertEqual(finished, len(results))
        for reason in ("cancelled", "error"):
            self.assertEqual(delta.get(f'ninfer_generations_finished_total{{reason="{reason}"}}',
                                       0), 0)
        self.assertEqual(delta["ninfer_prompt_tokens_total"], prompt)
        self.assertEqual(delta["ninfer_generation_tokens_total"], tokens)
        for gauge in GAUGES:
            self.assertEqual(after.get(gauge, 0), 0, gauge)


if __name__ == "__main__":
    unittest.main(verbosity=2)
