#!/usr/bin/env python3
"""Starts `ninfer serve` and runs the OpenAI and Anthropic SDK quickstart calls against it,
unchanged apart from base_url and api_key, streamed and not. Prints each answer and a summary
line; exits non-zero when a call fails or an answer comes back empty.

usage: serve_quickstart.py --ninfer BIN --model DIR [--device cuda] [--max-tokens N]
"""
import argparse
import re
import subprocess
import sys
import threading
import time


def start_server(ninfer, model, device):
    proc = subprocess.Popen([ninfer, "serve", "--model", model, "--device", device, "--port", "0",
                             "--api-key", "quickstart-key"],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    found = {}
    ready = threading.Event()

    def read():
        for line in proc.stderr:
            sys.stderr.write("[serve] " + line)
            m = re.search(r"on http://[\d.]+:(\d+)", line)
            if m and "port" not in found:
                found["port"] = int(m.group(1))
                ready.set()
        ready.set()

    threading.Thread(target=read, daemon=True).start()
    if not ready.wait(300) or "port" not in found:
        proc.kill()
        raise SystemExit("ninfer serve did not start")
    return proc, f"http://127.0.0.1:{found['port']}"


def openai_quickstart(url, model, max_tokens):
    from openai import OpenAI
    client = OpenAI(base_url=url + "/v1", api_key="quickstart-key")
    completion = client.chat.completions.create(
        model=model, max_tokens=max_tokens,
        messages=[{"role": "developer", "content": "Talk like a pirate."},
                  {"role": "user", "content": "How do I check if a Python object is an instance of a class?"}])
    msg = completion.choices[0].message
    # A model that thinks first may spend all max_tokens on reasoning_content (an extra field).
    whole = (msg.content or "") + ((msg.model_extra or {}).get("reasoning_content") or "")
    print("openai:", repr(whole[:300]), completion.usage)
    stream = client.chat.completions.create(
        model=model, max_tokens=max_tokens, stream=True,
        messages=[{"role": "user", "content": "Say 'double bubble bath' ten times fast."}])
    streamed = ""
    for chunk in stream:
        if chunk.choices:
            delta = chunk.choices[0].delta
            streamed += (delta.content or "") + ((delta.model_extra or {}).get("reasoning_content") or "")
    print("openai stream:", repr(streamed[:300]))
    return bool(whole) and bool(streamed)


def anthropic_quickstart(url, model, max_tokens):
    import anthropic
    client = anthropic.Anthropic(base_url=url, api_key="quickstart-key")
    message = client.messages.create(
        model=model, max_tokens=max_tokens,
        messages=[{"role": "user", "content": "What should I search for to find the latest developments in renewable energy?"}])
    whole = "".join(b.text if b.type == "text" else getattr(b, "thinking", "")
                    for b in message.content)
    print("anthropic:", repr(whole[:300]), message.stop_reason, message.usage)
    streamed = ""
    with client.messages.stream(model=model, max_tokens=max_tokens,
                                messages=[{"role": "user", "content": "Hello"}]) as stream:
        for event in stream:
            if event.type == "content_block_delta":
                streamed += getattr(event.delta, "text", "") or getattr(event.delta, "thinking", "")
    print("anthropic stream:", repr(streamed[:300]))
    return bool(whole) and bool(streamed)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ninfer", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--max-tokens", type=int, default=64)
    args = ap.parse_args()
    proc, url = start_server(args.ninfer, args.model, args.device)
    try:
        import urllib.request
        import json
        with urllib.request.urlopen(urllib.request.Request(
                url + "/v1/models", headers={"Authorization": "Bearer quickstart-key"})) as r:
            model = json.load(r)["data"][0]["id"]
        t0 = time.time()
        ok = openai_quickstart(url, model, args.max_tokens)
        ok = anthropic_quickstart(url, model, args.max_tokens) and ok
        print(f"quickstart on {args.device}: {'ok' if ok else 'FAILED'} in {time.time() - t0:.1f} s")
    finally:
        proc.terminate()
        code = proc.wait(60)
        print("serve exit code", code)
    sys.exit(0 if ok and code == 0 else 1)


if __name__ == "__main__":
    main()
