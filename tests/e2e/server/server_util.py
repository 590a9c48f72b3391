"""Starts a real `ninfer serve` on a free port with the tiny chat fixture (a random 4-layer
model with a real byte-level tokenizer, chat template and stop ids) and helpers shared by the
server test suites. Outputs of a random model are random: the suites check shapes and
invariants (stream == non-stream for one seed, stop strings cut where the unstopped text has
them, forced tool calls name the tool...), never literal outputs.

env: NINFER_BIN, NINFER_SOURCE_DIR
"""
import json
import os
import re
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request

ROOT = os.environ["NINFER_SOURCE_DIR"]
NINFER = os.environ["NINFER_BIN"]
MODEL = os.path.join(ROOT, "tests", "fixtures_text", "tiny_chat")
KEY = "test-key-123"
SPECIAL = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
           "<|image_pad|>", "<|video_pad|>"}


class Server:
    """A `ninfer serve` process; its stderr (the request log) is collected line by line."""

    def __init__(self, *extra, key=KEY, model=MODEL):
        """`model` None: no --model (e.g. with --random-weights)."""
        defaults = {"--threads": "1", "--max-sequences": "4", "--max-queue": "8",
                    "--keep-alive-timeout": "1"}
        args = [NINFER, "serve", *(["--model", model] if model else []), "--port", "0", *extra]
        for option, value in defaults.items():
            if option not in extra:
                args += [option, value]
        if key:
            args += ["--api-key", key]
        env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
        self.args = args
        self.proc = subprocess.Popen(args, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                     env=env, text=True, errors="replace")
        self.lines = []
        self.port = None
        ready = threading.Event()

        def reader():
            for line in self.proc.stderr:
                self.lines.append(line)
                m = re.search(r"serving '.*' on http://[\d.]+:(\d+)", line)
                if m:
                    self.port = int(m.group(1))
                    ready.set()
            ready.set()

        self.thread = threading.Thread(target=reader, daemon=True)
        self.thread.start()
        if not ready.wait(60) or self.port is None:
            self.stop()
            raise RuntimeError("ninfer serve did not start: " + "".join(self.lines))
        self.url = f"http://127.0.0.1:{self.port}"
        self.key = key

    def log_records(self):
        out = []
        for line in list(self.lines):
            line = line.strip()
            if line.startswith("{"):
                out.append(json.loads(line))
        return out

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.thread.join(5)
        self.proc.stderr.close()
        return self.proc.returncode

    def request(self, method, path, body=None, headers=None, raw=None, auth=True):
        """Raw HTTP: returns (status, headers, parsed JSON or text)."""
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        h = {"Content-Type": "application/json"}
        if auth and self.key:
            h["Authorization"] = "Bearer " + self.key
        h.update(headers or {})
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=h)
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                status, hdrs, text = r.status, dict(r.headers), r.read().decode()
        except urllib.error.HTTPError as e:
            status, hdrs, text = e.code, dict(e.headers), e.read().decode()
        try:
            return status, hdrs, json.loads(text)
        except ValueError:
            return status, hdrs, text

    def metric(self, name):
        status, _, text = self.request("GET", "/metrics")
        assert status == 200, text
        total = 0.0
        for line in text.splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def _wait_metric(self, name, settled, timeout):
        end = time.time() + timeout
        while time.time() < end:
            v = self.metric(name)
            if settled(v):
                return v
            time.sleep(0.05)
        return self.metric(name)

    def wait_metric_down(self, name, at_most, timeout=10):
        """A gauge once it is <= at_most (or its value at the timeout): gauges settle just after
        the responses that end the work, since a client can read its last bytes first."""
        return self._wait_metric(name, lambda v: v <= at_most, timeout)

    def wait_metric(self, name, at_least, timeout=10):
        return self._wait_metric(name, lambda v: v >= at_least, timeout)

    def warm_tokens(self):
        return self.metric("ninfer_prefix_cache_warm_tokens_total")

    def wait_warmed(self, warm_before, timeout=10):
        """Waits for the warm request of the last chat answer (next-turn warming): admitted
        (the warm-token counter moved past warm_before), then done (nothing running), as a
        client's next turn normally finds it."""
        self.wait_metric("ninfer_prefix_cache_warm_tokens_total", warm_before + 1, timeout)
        end = time.time() + timeout
        while time.time() < end:  # an earlier answer's warm may have moved the counter
            if (self.metric("ninfer_sequences_running") == 0
                    and self.metric("ninfer_queue_depth") == 0):
                return
            time.sleep(0.02)

    def wait_log_record(self, matches, timeout=10):
        """The first log record for which matches(record) holds, waiting for it to be written
        (the server logs a request after its metrics move); None at the timeout."""
        end = time.time() + timeout
        while True:
            found = next((r for r in self.log_records() if matches(r)), None)
            if found is not None or time.time() >= end:
                return found
            time.sleep(0.05)


def split_reasoning(raw, starts_in_reasoning):
    """The reasoning/content split the server must make of raw generated text."""
    if not starts_in_reasoning:
        return "", raw.strip()
    if raw.lstrip().startswith("<think>"):
        raw = raw.lstrip()[len("<think>"):]
    if "</think>" in raw:
        r, c = raw.split("</think>", 1)
        return r.strip(), c.strip()
    return raw.strip(), ""


def raw_text(logprob_tokens):
    """Generated text from chat logprobs entries (their bytes; special tokens make no text)."""
    data = b""
    for t in logprob_tokens:
        if t.token in SPECIAL:
            continue
        data += bytes(t.bytes)
    return data.decode("utf-8", errors="replace")
