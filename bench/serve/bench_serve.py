#!/usr/bin/env python3
"""A seeded serving benchmark for `ninfer serve` (or any OpenAI-compatible server) over HTTP.

Workloads (--workload):
  random     random token-id prompts (--input-len 1024) to /v1/completions, --output-len 128
  decode     decode-heavy: --input-len 128, --output-len 1024
  multiturn  chat: --num-conversations conversations of --turns turns to /v1/chat/completions;
             each turn appends the streamed answer as an assistant message and a new random user
             message of --input-len words; the turns of one conversation are sequential (with
             --think-time seconds between them: a user reading and typing), the conversations
             run concurrently

Every request is streamed (`stream_options.include_usage`), greedy (`temperature: 0`) and
`ignore_eos: true`, so each one generates exactly max_tokens. --concurrency 1,8,32 runs the
workload once per value with at most C requests (multiturn: conversations) in flight, each
worker thread on its own keep-alive connection. Each run draws its own requests from
(--seed, workload, C): the same arguments always send the same requests, and a later run of a
sweep does not find an earlier run's prompts in the prefix cache.

Metrics per run: request, output and total (prompt + output) token throughput; TTFT (send to
the first streamed chunk with content), ITL (the gaps between a request's later content chunks:
one gap per chunk, not divided among the tokens of a chunk that carries several), TPOT
((latency - TTFT) / (output tokens - 1) per request), end-to-end latency; mean, median, std,
p50, p90, p99 and max of each in ms; output tokens from `usage.completion_tokens`; the prefix
cache hit rate (sum of `usage.prompt_tokens_details.cached_tokens` / sum of prompt tokens),
overall and over the turns after the first (null for single-turn workloads).

Standard library only. Writes JSON (stdout unless --quiet; -o FILE) and a vLLM-style table per
run on stderr. Failed requests (non-200, broken streams, timeouts) are counted, never fatal.
"""
import argparse
import base64
import http.client
import json
import math
import random
import struct
import sys
import threading
import time
import urllib.parse
import zlib

SCHEMA_VERSION = 1

DEFAULTS = {  # workload: (input_len, output_len, num_prompts)
    "random": (1024, 128, 1000),
    "decode": (128, 1024, 256),
    "multiturn": (128, 128, None),
}

# The multiturn user messages are random words from this fixed list (words, not tokens:
# --input-len counts words there).
WORDS = """the of and to in is was for on that with as by at from his her an are be this
which or had it not but were all they their one have has been its more she can there
time who new would other after first also two into year when some may only over many
city such most world these most could three than then where state part people made
between during under while known each both well used like long days water river house
system number group game family school music light name work place small world story
power point field order early life large later since high major part body market small
around river common south north east west line city court march color garden window
paper stone silver forest engine island bridge valley winter summer autumn spring morning
evening question answer simple careful quiet bright heavy gentle rapid ancient modern
central final local public private natural social royal military golden frozen hidden
broken silent distant narrow wooden purple yellow orange basket candle ladder pocket
rocket saddle tunnel violin wallet anchor banner cactus dragon falcon harbor jungle kettle
lantern meadow needle oyster pepper quartz ribbon shadow thunder velvet walnut zephyr
""".split()
WORDS = list(dict.fromkeys(WORDS))  # unique, in order


# ---------------------------------------------------------------------------------------------
# One streamed request on a keep-alive connection


class Result:
    __slots__ = ("ok", "error", "status", "prompt_tokens", "completion_tokens", "cached_tokens",
                 "ttft", "itl", "latency", "chunks", "content", "turn", "finish_reason",
                 "reusable_tokens")

    def __init__(self, turn=0):
        self.ok = False
        self.error = None
        self.status = None
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.cached_tokens = 0
        self.ttft = None
        self.itl = []
        self.latency = None
        self.chunks = 0
        self.content = ""
        self.turn = turn
        self.finish_reason = None
        # Multi-turn: the tokens this turn's prompt can reuse at most, the previous turn's prompt
        # and answer less its last token (sampled, so never run through the model).
        self.reusable_tokens = 0


class Client:
    """One worker's keep-alive connection to the server."""

    def __init__(self, base_url, api_key, timeout):
        u = urllib.parse.urlsplit(base_url)
        if u.scheme not in ("http", "https"):
            raise ValueError(f"--base-url must be http(s)://HOST:PORT, not {base_url!r}")
        self.https = u.scheme == "https"
        self.host = u.hostname or "127.0.0.1"
        self.port = u.port or (443 if self.https else 80)
        self.prefix = u.path.rstrip("/")
        if self.prefix.endswith("/v1"):
            self.prefix = self.prefix[:-3]
        self.timeout = timeout
        self.headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if api_key:
            self.headers["Authorization"] = "Bearer " + api_key
        self.conn = None
        self.used = False  # the connection has carried a request (may have been closed idle)

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None
        self.used = False

    def _open(self):
        if self.conn is None:
            cls = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
            self.conn = cls(self.host, self.port, timeout=self.timeout)
            self.used = False

    def get_json(self, path):
        self._open()
        try:
            self.conn.request("GET", self.prefix + path, headers=self.headers)
            resp = self.conn.getresponse()
            data = resp.read()
        except (OSError, http.client.HTTPException):
            self.close()
            raise
        if resp.will_close:
            self.close()
        if resp.status != 200:
            raise RuntimeError(f"GET {path}: HTTP {resp.status}: {data[:300]!r}")
        return json.loads(data)

    def _send(self, path, data):
        """Sends the request and reads the status line: (response, send time). A connection
        the server closed while it was idle is reopened once."""
        for attempt in (0, 1):
            self._open()
            reused = self.used
            t0 = time.perf_counter()
            try:
                self.conn.request("POST", self.prefix + path, body=data, headers=self.headers)
                self.used = True
                return self.conn.getresponse(), t0
            except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError,
                    http.client.RemoteDisconnected, http.client.BadStatusLine):
                self.close()
                if not reused or attempt == 1:
                    raise
        raise AssertionError("unreachable")

    def stream(self, path, body, chat, turn=0):
        """Runs one streamed request; returns its Result (never raises for request errors)."""
        r = Result(turn)
        data = json.dumps(body).encode()
        t0 = None
        try:
            resp, t0 = self._send(path, data)
            r.status = resp.status
            if resp.status != 200:
                text = resp.read()
                if resp.will_close:
                    self.close()
                r.error = f"HTTP {resp.status}: {error_message(text)}"
                r.latency = time.perf_counter() - t0
                return r
            done, usage, last = False, None, None
            pieces = []
            data_lines = []
            while True:
                line = resp.readline()
                if not line:
                    break
                now = time.perf_counter()
                line = line.rstrip(b"\r\n")
                if line.startswith(b"data:"):
                    data_lines.append(line[5:].lstrip(b" "))
                    continue
                if line or not data_lines:
                    continue  # a comment (keep-alive), an event: line or an empty line
                payload = b"\n".join(data_lines)
                data_lines = []
                if payload == b"[DONE]":
                    done = True
                    continue
                try:
                    ev = json.loads(payload)
                except ValueError:
                    raise ProtocolError(f"bad SSE data: {payload[:200]!r}")
                if not isinstance(ev, dict):
                    raise ProtocolError(f"bad SSE data: {payload[:200]!r}")
                if ev.get("error"):
                    raise ProtocolError("error event: " + json.dumps(ev["error"])[:300])
                if ev.get("usage"):
                    usage = ev["usage"]
                got = False
                for c in ev.get("choices") or ():
                    if chat:
                        delta = c.get("delta") or {}
                        piece = delta.get("content") or ""
                        got = got or bool(piece or delta.get("reasoning_content")
                                          or delta.get("tool_calls"))
                    else:
                        piece = c.get("text") or ""
                        got = got or bool(piece)
                    if piece:
                        pieces.append(piece)
                    if c.get("finish_reason"):
                        r.finish_reason = c["finish_reason"]
                if got:
                    if r.ttft is None:
                        r.ttft = now - t0
                    else:
                        r.itl.append(now - last)
                    last = now
                    r.chunks += 1
            r.latency = time.perf_counter() - t0
            if resp.will_close:
                self.close()
            r.content = "".join(pieces)
            if not done:
                raise ProtocolError("the stream ended before data: [DONE]")
            if not usage:
                raise ProtocolError("the stream carried no usage chunk")
            r.prompt_tokens = int(usage.get("prompt_tokens") or 0)
            r.completion_tokens = int(usage.get("completion_tokens") or 0)
            details = usage.get("prompt_tokens_details") or {}
            r.cached_tokens = int(details.get("cached_tokens") or 0)
            r.ok = True
        except (OSError, http.client.HTTPException, ProtocolError, ValueError) as e:
            self.close()
            r.ok = False
            r.error = f"{type(e).__name__}: {e}"[:400]
            if t0 is not None and r.latency is None:
                r.latency = time.perf_counter() - t0
        return r


class ProtocolError(Exception):
    pass


def error_message(raw):
    try:
        err = json.loads(raw)
        e = err.get("error", err)
        if isinstance(e, dict):
            return str(e.get("message", e))[:300]
        return str(e)[:300]
    except ValueError:
        return repr(raw[:300])


# ---------------------------------------------------------------------------------------------
# Workloads


def completion_body(args, model, prompt):
    body = {"prompt": prompt, "max_tokens": args.output_len, "ignore_eos": True,
            "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}
    if model:
        body["model"] = model
    return body


def chat_body(args, model, messages):
    body = {"messages": messages, "max_tokens": args.output_len, "ignore_eos": True,
            "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}
    if model:
        body["model"] = model
    if args.chat_template_kwargs:
        body["chat_template_kwargs"] = args.chat_template_kwargs
    return body


def random_prompts(args, rng, n):
    return [[rng.randrange(args.vocab_low, args.vocab_limit) for _ in range(args.input_len)]
            for _ in range(n)]


def noise_png_url(rng, width, height):
    """A base64 PNG data URL of seeded RGB noise (every request's image distinct, so the
    encoder and prefix caches never serve one request another's image)."""
    raw = bytes(rng.getrandbits(8) for _ in range(width * height * 3))
    rows = b"".join(b"\x00" + raw[y * width * 3:(y + 1) * width * 3] for y in range(height))

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    png = (b"\x89PNG\r\n\x1a\n" +
           chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)) +
           chunk(b"IDAT", zlib.compress(rows, 1)) + chunk(b"IEND", b""))
    return "data:image/png;base64," + base64.b64encode(png).decode()


def random_words(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


def run_single_turn(args, model, clients, prompts, stop):
    """Sends the prompts with at most len(clients) in flight; returns the results in order."""
    results = [None] * len(prompts)

    def send(client, i):
        results[i] = client.stream("/v1/completions", completion_body(args, model, prompts[i]),
                                   chat=False)

    run_queue(clients, len(prompts), stop, send)
    return [r for r in results if r is not None]


def run_multiturn(args, model, clients, conversations, stop):
    """conversations: per conversation, its list of user messages (one per turn), plus the
    shared system prompt. Returns (results, turns not sent after a failed turn)."""
    system, users, images = conversations
    results = [[] for _ in users]
    skipped = [0]
    lock = threading.Lock()

    def converse(client, i):
        messages = [{"role": "system", "content": system}] if system else []
        for turn, text in enumerate(users[i]):
            if stop.is_set():
                return
            if turn == 0 and images:  # --image-size: the first message carries the image
                messages.append({"role": "user", "content": [
                    {"type": "image_url", "image_url": {"url": images[i]}},
                    {"type": "text", "text": text}]})
            else:
                messages.append({"role": "user", "content": text})
            r = client.stream("/v1/chat/completions", chat_body(args, model, messages),
                              chat=True, turn=turn)
            if results[i]:
                prev = results[i][-1]
                r.reusable_tokens = prev.prompt_tokens + prev.completion_tokens - 1
            results[i].append(r)
            if not r.ok:
                with lock:
                    skipped[0] += len(users[i]) - turn - 1
                break
            messages.append({"role": "assistant", "content": r.content})
            if args.think_time > 0 and turn + 1 < len(users[i]):
                stop.wait(args.think_time)  # the user reads the answer and types the next turn

    run_queue(clients, len(users), stop, converse)
    return [r for conv in results for r in conv], skipped[0]


def run_queue(clients, count, stop, work):
    """work(client, i) for i in range(count): each client takes the next index when it is done,
    so at most len(clients) run at once; stops early once `stop` is set."""
    lock = threading.Lock()
    next_index = [0]

    def worker(client):
        while not stop.is_set():
            with lock:
                i = next_index[0]
                next_index[0] += 1
            if i >= count:
                return
            work(client, i)

    threads = [threading.Thread(target=worker, args=(c,), daemon=True) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        while t.is_alive():
            t.join(0.5)


def make_workload(args, rng, count=None, warmup=False):
    """The requests of one run: token-id prompts (random/decode) or conversations."""
    if args.workload != "multiturn":
        return random_prompts(args, rng, count if count is not None else args.num_prompts)
    system = random_words(rng, args.system_prompt_words) if args.system_prompt_words else ""
    n = count if count is not None else args.num_conversations
    turns = 1 if warmup else args.turns
    users = [[random_words(rng, args.input_len) for _ in range(turns)] for _ in range(n)]
    images = []
    if args.image_size:
        w, h = (int(v) for v in args.image_size.lower().split("x"))
        images = [noise_png_url(rng, w, h) for _ in range(n)]
    return system, users, images


# ---------------------------------------------------------------------------------------------
# Statistics and reports


def percentile(sorted_xs, p):
    """Linear interpolation between closest ranks (numpy's default)."""
    if not sorted_xs:
        return None
    k = (len(sorted_xs) - 1) * p / 100.0
    f = math.floor(k)
    c = min(f + 1, len(sorted_xs) - 1)
    return sorted_xs[f] + (sorted_xs[c] - sorted_xs[f]) * (k - f)


def summary_ms(prefix, xs, out):
    s = sorted(x * 1000.0 for x in xs)
    n = len(s)
    mean = sum(s) / n if n else None
    out[f"mean_{prefix}_ms"] = mean
    out[f"median_{prefix}_ms"] = percentile(s, 50)
    out[f"std_{prefix}_ms"] = (math.sqrt(sum((x - mean) ** 2 for x in s) / n) if n else None)
    for p in (50, 90, 99):
        out[f"p{p}_{prefix}_ms"] = percentile(s, p)
    out[f"max_{prefix}_ms"] = s[-1] if n else None
    out[f"num_{prefix}_samples"] = n


def ratio(a, b):
    return a / b if b else None


def run_report(args, concurrency, results, skipped, duration, cpu_s, planned):
    ok = [r for r in results if r.ok]
    failed = [r for r in results if not r.ok]
    prompt = sum(r.prompt_tokens for r in ok)
    output = sum(r.completion_tokens for r in ok)
    cached = sum(r.cached_tokens for r in ok)
    later = [r for r in ok if r.turn > 0]
    later_prompt = sum(r.prompt_tokens for r in later)
    later_cached = sum(r.cached_tokens for r in later)
    later_reusable = sum(r.reusable_tokens for r in later)
    errors = {}
    for r in failed:
        key = r.error.split(":", 1)[0] if r.error else "unknown"
        if r.status and r.status != 200:
            key = f"HTTP {r.status}"
        errors[key] = errors.get(key, 0) + 1
    rep = {
        "concurrency": concurrency,
        "num_requests": planned,
        "completed": len(ok),
        "failed": len(failed),
        "skipped": skipped,
        "duration": duration,
        "total_input_tokens": prompt,
        "total_output_tokens": output,
        "request_throughput": ratio(len(ok), duration),
        "output_throughput": ratio(output, duration),
        "total_token_throughput": ratio(prompt + output, duration),
    }
    summary_ms("ttft", [r.ttft for r in ok if r.ttft is not None], rep)
    summary_ms("tpot", [(r.latency - r.ttft) / (r.completion_tokens - 1) for r in ok
                        if r.ttft is not None and r.completion_tokens > 1], rep)
    summary_ms("itl", [g for r in ok for g in r.itl], rep)
    summary_ms("e2el", [r.latency for r in ok], rep)
    rep.update({
        "cached_tokens": cached,
        "prefix_cache_hit_rate": ratio(cached, prompt) if ok else None,
        "prompt_tokens_after_first_turn": later_prompt,
        "cached_tokens_after_first_turn": later_cached,
        "prefix_cache_hit_rate_after_first_turn": ratio(later_cached, later_prompt)
        if later else None,
        # The ceiling of that rate (what a perfect cache would serve) and the share of it served.
        "reusable_tokens_after_first_turn": later_reusable,
        "reusable_share_of_prompt_after_first_turn": ratio(later_reusable, later_prompt)
        if later else None,
        "prefix_cache_hit_rate_of_reusable": ratio(later_cached, later_reusable)
        if later_reusable else None,
        "requests_without_content": sum(1 for r in ok if r.ttft is None),
        "output_len_mismatches": sum(1 for r in ok if r.completion_tokens != args.output_len),
        "mean_content_chunks_per_request": ratio(sum(r.chunks for r in ok), len(ok)),
        "errors": errors,
        "error_examples": [r.error for r in failed[:5]],
        "client_cpu_s": cpu_s,
    })
    return rep


def fmt(v, digits=2):
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def print_table(workload, rep, file=sys.stderr):
    def line(label, value, digits=2):
        print("{:<40} {:<10}".format(label, fmt(value, digits)), file=file)

    def head(title, c="-"):
        print("{s:{c}^{n}}".format(s=title, n=50, c=c), file=file)

    head(" Serving Benchmark Result ", "=")
    line("Workload:", workload)
    line("Maximum request concurrency:", rep["concurrency"])
    line("Successful requests:", rep["completed"])
    line("Failed requests:", rep["failed"])
    if rep["skipped"]:
        line("Skipped turns (after a failure):", rep["skipped"])
    line("Benchmark duration (s):", rep["duration"])
    line("Total input tokens:", rep["total_input_tokens"])
    line("Total generated tokens:", rep["total_output_tokens"])
    line("Request throughput (req/s):", rep["request_throughput"])
    line("Output token throughput (tok/s):", rep["output_throughput"])
    line("Total Token throughput (tok/s):", rep["total_token_throughput"])
    for key, title, name in (("ttft", "Time to First Token", "TTFT"),
                             ("tpot", "Time per Output Token (excl. 1st token)", "TPOT"),
                             ("itl", "Inter-token Latency", "ITL"),
                             ("e2el", "End-to-end Latency", "E2EL")):
        head(title)
        line(f"Mean {name} (ms):", rep[f"mean_{key}_ms"])
        line(f"Median {name} (ms):", rep[f"median_{key}_ms"])
        line(f"P99 {name} (ms):", rep[f"p99_{key}_ms"])
    head("Prefix Cache")
    line("Prefix cache hit rate:", rep["prefix_cache_hit_rate"], 4)
    line("Hit rate after the first turn:", rep["prefix_cache_hit_rate_after_first_turn"], 4)
    line("  of the reusable tokens:", rep.get("prefix_cache_hit_rate_of_reusable"), 4)
    line("  ceiling (reusable share):", rep.get("reusable_share_of_prompt_after_first_turn"), 4)
    if rep["errors"]:
        head("Errors")
        for k, v in sorted(rep["errors"].items()):
            line(f"{k}:", v)
    print("=" * 50, file=file, flush=True)


# ---------------------------------------------------------------------------------------------
# Driver


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Seeded serving benchmark for ninfer serve (OpenAI-compatible HTTP).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--base-url", default="http://127.0.0.1:8000",
                   help="server address (a trailing /v1 is accepted)")
    p.add_argument("--api-key", default=None, help="sent as Authorization: Bearer KEY")
    p.add_argument("--model", default=None, help="model name (default: the first of /v1/models)")
    p.add_argument("--workload", choices=sorted(DEFAULTS), default="random")
    p.add_argument("--input-len", type=int, default=None,
                   help="prompt tokens (random/decode; default 1024/128) or words per user "
                        "message (multiturn; default 128)")
    p.add_argument("--output-len", type=int, default=None,
                   help="max_tokens of each request (default 128, decode 1024)")
    p.add_argument("--num-prompts", type=int, default=None,
                   help="requests per run for random/decode (default 1000/256)")
    p.add_argument("--num-conversations", type=int, default=64,
                   help="multiturn: conversations per run")
    p.add_argument("--turns", type=int, default=8, help="multiturn: turns per conversation")
    p.add_argument("--think-time", type=float, default=0.0,
                   help="multiturn: seconds between an answer and the conversation's next turn "
                        "(a user reading and typing; 0: at once)")
    p.add_argument("--system-prompt-words", type=int, default=0,
                   help="multiturn: a system prompt of N random words shared by every "
                        "conversation of a run (0: none)")
    p.add_argument("--image-size", default=None,
                   help="multiturn: WxH; each conversation's first message carries a distinct "
                        "noise image of that size (compare with the same run without it)")
    p.add_argument("--chat-template-kwargs", type=json.loads, default=None,
                   help="multiturn: JSON sent as chat_template_kwargs, e.g. "
                        "'{\"enable_thinking\": false}'")
    p.add_argument("--vocab-low", type=int, default=0, help="smallest random token id")
    p.add_argument("--vocab-limit", type=int, default=8000,
                   help="random token ids are < this (below the model's special tokens)")
    p.add_argument("--concurrency", default="1",
                   help="comma-separated maximum in-flight requests (multiturn: "
                        "conversations); one run per value")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--warmup", type=int, default=0,
                   help="requests sent (and not measured) before the first run")
    p.add_argument("--request-timeout", type=float, default=600.0,
                   help="socket timeout of each request, seconds")
    p.add_argument("--wait-for-server", type=float, default=0.0,
                   help="poll GET /health for up to this many seconds first")
    p.add_argument("-o", "--output", default=None, help="write the JSON here (after every run)")
    p.add_argument("--quiet", action="store_true", help="do not print the JSON on stdout")
    args = p.parse_args(argv)
    in_len, out_len, n = DEFAULTS[args.workload]
    if args.input_len is None:
        args.input_len = in_len
    if args.output_len is None:
        args.output_len = out_len
    if args.num_prompts is None:
        args.num_prompts = n
    try:
        args.concurrency = [int(c) for c in str(args.concurrency).split(",") if c.strip()]
    except ValueError:
        p.error("--concurrency takes comma-separated integers")
    if not args.concurrency or min(args.concurrency) < 1:
        p.error("--concurrency values must be >= 1")
    if args.input_len < 1 or args.output_len < 1:
        p.error("--input-len and --output-len must be >= 1")
    if args.workload != "multiturn" and args.num_prompts < 1:
        p.error("--num-prompts must be >= 1")
    if args.workload == "multiturn" and (args.num_conversations < 1 or args.turns < 1):
        p.error("--num-conversations and --turns must be >= 1")
    if not 0 <= args.vocab_low < args.vocab_limit:
        p.error("need 0 <= --vocab-low < --vocab-limit")
    if args.chat_template_kwargs is not None and not isinstance(args.chat_template_kwargs, dict):
        p.error("--chat-template-kwargs must be a JSON object")
    return args


def wait_for_server(args):
    c = Client(args.base_url, args.api_key, 5)
    end = time.time() + args.wait_for_server
    while True:
        try:
            c.get_json("/health")
            return
        except (OSError, http.client.HTTPException, RuntimeError, ValueError):
            if time.time() >= end:
                return
            time.sleep(0.5)
        finally:
            c.close()


def measure(args, model, concurrency, workload, stop):
    """One run: returns its report."""
    if args.workload == "multiturn":
        n_units = len(workload[1])
    else:
        n_units = len(workload)
    clients = [Client(args.base_url, args.api_key, args.request_timeout)
               for _ in range(max(1, min(concurrency, n_units)))]
    cpu0, t0 = time.process_time(), time.perf_counter()
    if args.workload == "multiturn":
        results, skipped = run_multiturn(args, model, clients, workload, stop)
        planned = sum(len(u) for u in workload[1])
    else:
        results, skipped = run_single_turn(args, model, clients, workload, stop), 0
        planned = len(workload)
    duration = time.perf_counter() - t0
    cpu_s = time.process_time() - cpu0
    for c in clients:
        c.close()
    return run_report(args, concurrency, results, skipped, duration, cpu_s, planned)


def main(argv=None):
    args = parse_args(argv)
    if args.wait_for_server > 0:
        wait_for_server(args)
    model = args.model
    server = {"base_url": args.base_url, "model": model}
    probe = Client(args.base_url, args.api_key, 30)
    try:
        models = probe.get_json("/v1/models")
        ids = [m.get("id") for m in models.get("data", [])]
        server["models"] = ids
        if model is None and ids:
            model = server["model"] = ids[0]
    except (OSError, http.client.HTTPException, RuntimeError, ValueError, AttributeError) as e:
        if model is None:
            print(f"bench_serve: cannot list the server's models at {args.base_url}: {e}",
                  file=sys.stderr)
            return 2
        server["models_error"] = str(e)
    finally:
        probe.close()

    config = dict(vars(args))
    if config["api_key"]:
        config["api_key"] = "(set)"  # never written to result files
    doc = {"schema_version": SCHEMA_VERSION, "tool": "bench_serve", "workload": args.workload,
           "config": config, "server": server, "runs": []}
    stop = threading.Event()

    def write():
        if args.output:
            with open(args.output, "w") as f:
                json.dump(doc, f, indent=2)
                f.write("\n")

    try:
        if args.warmup > 0:
            rng = random.Random(f"{args.seed}/{args.workload}/warmup")
            wl = make_workload(args, rng, count=args.warmup, warmup=True)
            rep = measure(args, model, min(args.warmup, args.concurrency[0]), wl, stop)
            doc["warmup"] = {"requests": rep["num_requests"], "completed": rep["completed"],
                             "failed": rep["failed"], "duration": rep["duration"],
                             "errors": rep["errors"]}
            print(f"bench_serve: warmup {rep['completed']}/{rep['num_requests']} requests ok "
                  f"in {rep['duration']:.2f} s", file=sys.stderr, flush=True)
        for c in args.concurrency:
            rng = random.Random(f"{args.seed}/{args.workload}/c{c}")
            wl = make_workload(args, rng)
            rep = measure(args, model, c, wl, stop)
            doc["runs"].append(rep)
            print_table(args.workload, rep)
            write()
    except KeyboardInterrupt:
        stop.set()
        doc["interrupted"] = True
        print("bench_serve: interrupted; reporting the finished runs", file=sys.stderr)
    write()
    if not args.quiet:
        json.dump(doc, sys.stdout, indent=2)
        sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
