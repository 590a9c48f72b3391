#!/usr/bin/env python3
"""The web chat page (`ninfer serve` at /, src/server/webui/index.html) in a real browser:
headless Chromium (Debian's `chromium` package) driven by Playwright (pinned in
tools/setup_python.sh) with `executable_path` set to the system browser, so nothing is
downloaded. The server runs the demo model (models/ninfer-demo).

Checked: the page and its headers (public with --api-key, the API still protected; --no-webui
makes / a 404); a message streams an answer whose text grows over time, with the request the
page sends (stream, include_usage, the settings) and tokens/s shown; Stop ends a long answer
mid-stream, keeps the partial text and cancels the generation on the server; conversations
survive a reload; the reasoning block; images attached by file picker, drop and paste go out as
image_url content parts and the demo's tower answers them; a bad image's 400 shows its `error.message`; with --api-key the page
asks for the key, keeps it and works; the Markdown renderer escapes everything (no HTML from
model output) and the copy button copies a code block.

Missing chromium or playwright is a failure, never a skip. NINFER_WEBUI_SCREENSHOT=PATH also
saves a screenshot there (docs/webui.png is made that way).

env: NINFER_BIN, NINFER_SOURCE_DIR; NINFER_CHROMIUM overrides the browser path.
"""
import base64
import json
import os
import shutil
import struct
import sys
import time
import unittest
import urllib.error
import urllib.request
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server"))
from server_util import ROOT, Server  # noqa: E402

CHROMIUM = os.environ.get("NINFER_CHROMIUM") or shutil.which("chromium") or shutil.which(
    "chromium-browser")
if not CHROMIUM or not os.access(CHROMIUM, os.X_OK):
    sys.exit("FAIL: chromium not found (install Debian's chromium package: tools/setup_debian.sh, "
             "or set NINFER_CHROMIUM); the web page test never skips")
try:
    from playwright.sync_api import expect, sync_playwright
except ImportError as e:
    sys.exit(f"FAIL: playwright is not installed in this Python ({e}): run tools/setup_python.sh")

DEMO = os.path.join(ROOT, "models", "ninfer-demo")
PAGE_FILE = os.path.join(ROOT, "src", "server", "webui", "index.html")
KEY = "webui-key-42"
LONG_PROMPT = "Write a very long story about a dragon."  # greedy, thinking on: loops to max_tokens
SHORT_PROMPT = "Write a Python function that reverses a string."
TIMEOUT_MS = 30_000

PW = BROWSER = SERVER = None


def setUpModule():
    global PW, BROWSER, SERVER
    SERVER = Server("--reasoning-budget", "48", model=DEMO, key=None)
    PW = sync_playwright().start()
    BROWSER = PW.chromium.launch(executable_path=CHROMIUM, headless=True,
                                 args=["--no-sandbox", "--disable-gpu"])


def tearDownModule():
    if BROWSER:
        BROWSER.close()
    if PW:
        PW.stop()
    if SERVER:
        assert SERVER.stop() == 0


def http(method, url, body=None, headers=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def png(width=8, height=8, rgb=(200, 40, 40)):
    """A small valid PNG."""
    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


class PageTest(unittest.TestCase):
    server = None

    def setUp(self):
        self.server = self.server or SERVER
        self.context = BROWSER.new_context(viewport={"width": 1280, "height": 800})
        self.context.grant_permissions(["clipboard-read", "clipboard-write"],
                                       origin=self.server.url)
        self.page = self.context.new_page()
        self.page.set_default_timeout(TIMEOUT_MS)
        self.errors = []
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.chat_bodies = []
        self.page.on("request", self._record)

    def tearDown(self):
        self.context.close()
        # a 401 or 400 the page asked for is logged by the browser as a failed resource load
        unexpected = [e for e in self.errors if "status of 4" not in e]
        self.assertEqual(unexpected, [], "JavaScript errors on the page")

    def _record(self, request):
        if request.url.endswith("/v1/chat/completions") and request.method == "POST":
            self.chat_bodies.append(json.loads(request.post_data))

    def open(self):
        self.page.goto(self.server.url + "/")
        expect(self.page.locator("#model")).to_have_text("model: ninfer-demo")

    def settings(self, temperature="", max_tokens="", thinking=True, system=""):
        self.page.click("#settings-button")
        self.page.fill("#set-temperature", str(temperature))
        self.page.fill("#set-max-tokens", str(max_tokens))
        self.page.fill("#set-system", system)
        self.page.set_checked("#set-thinking", thinking)
        self.page.click("#settings-save")
        expect(self.page.locator("#settings")).not_to_be_visible()

    def send(self, text):
        self.page.fill("#input", text)
        self.page.press("#input", "Enter")

    def wait_idle(self, timeout_ms=TIMEOUT_MS):
        self.page.wait_for_function("() => document.body.dataset.streaming === ''",
                                    timeout=timeout_ms)

    def last_answer(self):
        return self.page.locator(".msg.assistant").last

    def stored(self):
        return self.page.evaluate("JSON.parse(localStorage.getItem('ninfer.conversations'))")


class Serving(unittest.TestCase):
    def test_page_and_headers(self):
        status, headers, body = http("GET", SERVER.url + "/")
        self.assertEqual(status, 200)
        self.assertEqual(headers["Content-Type"], "text/html; charset=utf-8")
        with open(PAGE_FILE, "rb") as f:
            self.assertEqual(body, f.read())  # embedded byte for byte
        body.decode("ascii")  # the page is kept ASCII (the embed splits it into literals)
        self.assertIn("connect-src 'self'", headers["Content-Security-Policy"])
        self.assertIn("frame-ancestors 'none'", headers["Content-Security-Policy"])
        self.assertEqual(headers["X-Content-Type-Options"], "nosniff")
        self.assertEqual(http("HEAD", SERVER.url + "/")[0], 200)
        status, _, body = http("POST", SERVER.url + "/", {})
        self.assertEqual(status, 404)  # only GET and HEAD serve the page

    def test_public_page_protected_api_and_no_webui(self):
        keyed = Server(model=DEMO, key=KEY)
        off = Server("--no-webui", model=DEMO, key=None)
        try:
            self.assertEqual(http("GET", keyed.url + "/")[0], 200)
            self.assertEqual(http("GET", keyed.url + "/v1/models")[0], 401)
            self.assertEqual(http("GET", keyed.url + "/v1/models",
                                  headers={"Authorization": "Bearer " + KEY})[0], 200)
            status, headers, body = http("GET", off.url + "/")
            self.assertEqual(status, 404)
            self.assertIn("no route", json.loads(body)["error"]["message"])
            self.assertEqual(http("GET", off.url + "/health")[0], 200)
        finally:
            self.assertEqual(keyed.stop(), 0)
            self.assertEqual(off.stop(), 0)


class Chat(PageTest):
    def test_streams_an_answer_that_grows(self):
        self.open()
        self.settings(temperature=0, max_tokens=300, thinking=True)
        self.send(LONG_PROMPT)
        content = self.last_answer().locator(".content")
        lengths = []
        end = time.time() + 30
        while time.time() < end:
            lengths.append(len(content.inner_text()))
            if self.page.evaluate("document.body.dataset.streaming") == "" and lengths[-1] > 0:
                break
            time.sleep(0.02)
        self.wait_idle()
        final = content.inner_text()
        growth = sorted(set(n for n in lengths if 0 < n < len(final)))
        self.assertGreaterEqual(len(growth), 3, f"text did not grow while streaming: {lengths}")
        self.assertTrue(final.strip())
        body = self.chat_bodies[-1]
        self.assertIs(body["stream"], True)
        self.assertEqual(body["stream_options"], {"include_usage": True})
        self.assertEqual(body["model"], "ninfer-demo")
        self.assertEqual(body["temperature"], 0)
        self.assertEqual(body["max_tokens"], 300)
        self.assertEqual(body["chat_template_kwargs"], {"enable_thinking": True})
        self.assertEqual(body["messages"], [{"role": "user", "content": LONG_PROMPT}])
        stats = self.last_answer().locator(".stats").inner_text()
        self.assertRegex(stats, r"^\d+ tokens \u00b7 [\d.]+ tok/s \u00b7 first token [\d.]+ s")
        # the same request through the API gives the same text (greedy); the page's Markdown
        # is rendered, so compare its stored source
        answer = self.stored()[0]["messages"][1]
        status, _, raw = http("POST", SERVER.url + "/v1/chat/completions",
                              {k: v for k, v in body.items() if k not in ("stream", "stream_options")})
        self.assertEqual(status, 200)
        whole = json.loads(raw)
        self.assertEqual(answer["content"], whole["choices"][0]["message"]["content"])
        self.assertEqual(answer["stats"]["tokens"], whole["usage"]["completion_tokens"])
        # a second turn sends the history
        self.send("Thanks.")
        self.wait_idle()
        sent = self.chat_bodies[-1]["messages"]
        self.assertEqual([m["role"] for m in sent], ["user", "assistant", "user"])
        self.assertEqual(sent[1]["content"], answer["content"])

    def test_stop_keeps_the_partial_answer(self):
        self.open()
        self.settings(temperature=0, max_tokens=4000, thinking=True)
        before = len(SERVER.log_records())
        self.send(LONG_PROMPT)
        content = self.last_answer().locator(".content")
        self.page.wait_for_function(
            "() => document.querySelector('.msg.assistant:last-child .content').innerText.length > 150")
        self.assertEqual(self.page.evaluate("document.body.dataset.streaming"), "1",
                         "the answer must still be streaming when Stop is pressed")
        expect(self.page.locator("#stop")).to_be_visible()
        self.page.click("#stop")
        self.wait_idle(timeout_ms=3000)
        expect(self.page.locator("#send")).to_be_visible()
        partial = content.inner_text()
        self.assertGreater(len(partial), 150)
        time.sleep(1.0)
        self.assertEqual(content.inner_text(), partial, "text still grows after Stop")
        self.assertIn("stopped", self.last_answer().locator(".stats").inner_text())
        self.assertEqual(self.last_answer().locator(".error").inner_text(), "")
        stored = self.stored()[0]["messages"][1]
        self.assertTrue(stored["stopped"])
        self.assertTrue(stored["content"])
        # the server cancelled the generation long before max_tokens
        cancelled = []
        end = time.time() + 10
        while time.time() < end and not cancelled:
            cancelled = [r for r in SERVER.log_records()[before:]
                         if r.get("endpoint") == "/v1/chat/completions"
                         and r.get("finish_reason") == "cancelled"]
            time.sleep(0.1)
        self.assertEqual(len(cancelled), 1, SERVER.log_records()[before:])
        self.assertLess(cancelled[0]["completion_tokens"], 4000)
        # the partial answer goes back as history
        self.settings(temperature=0, max_tokens=8, thinking=False)
        self.send("Go on.")
        self.wait_idle()
        sent = self.chat_bodies[-1]["messages"]
        self.assertEqual(sent[1]["role"], "assistant")
        self.assertEqual(sent[1]["content"], stored["content"])

    def test_reasoning_block_and_history_after_reload(self):
        self.open()
        self.settings(temperature=0, max_tokens=300, thinking=True, system="Be brief.")
        self.send(SHORT_PROMPT)
        self.wait_idle()
        first = self.last_answer()
        reasoning = first.locator("details.reasoning")
        expect(reasoning).to_be_visible()
        self.assertIsNone(reasoning.get_attribute("open"))  # collapsed
        expect(reasoning.locator("summary")).to_have_text("Reasoning")
        reasoning.locator("summary").click()
        self.assertTrue(reasoning.locator(".reasoning-body").inner_text().strip())
        code = first.locator(".content pre code")
        expect(code.first).to_be_visible()  # the demo model answers with a fenced code block
        self.assertEqual(self.chat_bodies[-1]["messages"][0], {"role": "system", "content": "Be brief."})
        self.assertEqual(self.chat_bodies[-1]["chat_template_kwargs"], {"enable_thinking": True})
        answer = first.locator(".content").inner_text()

        self.page.click("#new-chat")
        self.settings(temperature=0, max_tokens=20, thinking=False)
        self.send("Hello there")
        self.wait_idle()
        expect(self.page.locator("#conversations li")).to_have_count(2)

        self.page.reload()
        expect(self.page.locator("#model")).to_have_text("model: ninfer-demo")
        items = self.page.locator("#conversations li")
        expect(items).to_have_count(2)
        self.assertEqual(items.nth(0).inner_text().split("\n")[0], "Hello there")
        self.assertEqual(items.nth(1).inner_text().split("\n")[0], SHORT_PROMPT)
        expect(self.page.locator(".msg.user .text")).to_have_text(["Hello there"])
        items.nth(1).click()
        expect(self.page.locator(".msg.user .text")).to_have_text([SHORT_PROMPT])
        self.assertEqual(self.last_answer().locator(".content").inner_text(), answer)
        expect(self.last_answer().locator("details.reasoning")).to_be_visible()
        self.assertRegex(self.last_answer().locator(".stats").inner_text(), r"tok/s")
        # settings survive too
        self.page.click("#settings-button")
        self.assertEqual(self.page.input_value("#set-max-tokens"), "20")
        self.assertFalse(self.page.is_checked("#set-thinking"))
        self.page.keyboard.press("Escape")
        # delete a conversation
        items.nth(1).locator(".delete").click()
        expect(items).to_have_count(1)
        self.assertEqual(len(self.stored()), 1)
        shot = os.environ.get("NINFER_WEBUI_SCREENSHOT")
        if shot:
            self.screenshot(shot)

    def screenshot(self, path):
        """A page with a real answer (reasoning collapsed, a code block) for docs/webui.png."""
        self.page.evaluate("localStorage.clear()")
        self.page.reload()
        expect(self.page.locator("#model")).to_have_text("model: ninfer-demo")
        self.settings(temperature=0, max_tokens=300, thinking=False)
        self.send("Sort a list of numbers in Python.")
        self.wait_idle()
        self.page.click("#new-chat")
        self.settings(temperature=0, max_tokens=300, thinking=True)
        self.send(SHORT_PROMPT)
        self.wait_idle()
        self.last_answer().locator("details.reasoning summary").click()
        self.page.locator("#input").fill("Now make it handle None.")
        self.page.screenshot(path=path)

    def test_images_are_sent_as_content_parts_and_errors_shown(self):
        self.open()
        self.settings(temperature=0, max_tokens=16, thinking=False)
        data = png()
        self.page.set_input_files("#file", files=[{"name": "red.png", "mimeType": "image/png",
                                                   "buffer": data}])
        expect(self.page.locator("#attachments img")).to_have_count(1)
        b64 = base64.b64encode(data).decode()
        # drop and paste (a DataTransfer with a file, as a browser makes it)
        for kind in ("drop", "paste"):
            self.page.evaluate("""([kind, b64]) => {
                const bytes = Uint8Array.from(atob(b64), c => c.charCodeAt(0));
                const dt = new DataTransfer();
                dt.items.add(new File([bytes], "x.png", {type: "image/png"}));
                if (kind === "drop")
                    document.getElementById("messages").dispatchEvent(
                        new DragEvent("drop", {dataTransfer: dt, bubbles: true, cancelable: true}));
                else
                    document.getElementById("input").dispatchEvent(
                        new ClipboardEvent("paste", {clipboardData: dt, bubbles: true, cancelable: true}));
            }""", [kind, b64])
        expect(self.page.locator("#attachments img")).to_have_count(3)
        self.page.locator("#attachments .att button").first.click()  # remove one
        expect(self.page.locator("#attachments img")).to_have_count(2)
        self.send("What is in this picture?")
        self.wait_idle()
        expect(self.page.locator("#attachments img")).to_have_count(0)
        expect(self.page.locator(".msg.user .images img")).to_have_count(2)
        body = self.chat_bodies[-1]
        parts = body["messages"][-1]["content"]
        self.assertEqual([p["type"] for p in parts], ["image_url", "image_url", "text"])
        self.assertEqual(parts[0]["image_url"]["url"], "data:image/png;base64," + b64)
        self.assertEqual(parts[2]["text"], "What is in this picture?")
        # The demo model has a vision tower: the page shows the answer the API gives.
        whole = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
        status, _, raw = http("POST", SERVER.url + "/v1/chat/completions", whole)
        self.assertEqual(status, 200, raw)
        answer = self.last_answer()
        self.assertEqual(answer.locator(".error").inner_text(), "")
        want = json.loads(raw)["choices"][0]["message"]["content"]
        self.assertEqual(answer.locator(".content").inner_text().strip(), want.strip())
        # A file that is no image: the server's 400 and its message show, and the page goes on.
        self.page.set_input_files("#file", files=[{"name": "bad.png", "mimeType": "image/png",
                                                   "buffer": b"not an image at all"}])
        self.send("And this one?")
        self.wait_idle()
        bad = self.chat_bodies[-1]
        bad = {k: v for k, v in bad.items() if k not in ("stream", "stream_options")}
        status, _, raw = http("POST", SERVER.url + "/v1/chat/completions", bad)
        self.assertEqual(status, 400, raw)
        message = json.loads(raw)["error"]["message"]
        answer = self.last_answer()
        expect(answer.locator(".error")).to_be_visible()
        self.assertEqual(answer.locator(".error").inner_text().replace("Retry", "").strip(),
                         "Error: " + message)
        self.page.click("#new-chat")
        self.send("Hello")
        self.wait_idle()
        self.assertEqual(self.chat_bodies[-1]["messages"], [{"role": "user", "content": "Hello"}])
        self.assertEqual(self.last_answer().locator(".error").inner_text(), "")

    def test_markdown_is_escaped_and_code_copies(self):
        self.open()
        allowed = {"P", "H1", "H2", "H3", "STRONG", "EM", "DEL", "CODE", "PRE", "UL", "OL", "LI",
                   "A", "BR", "HR", "BLOCKQUOTE", "TABLE", "THEAD", "TBODY", "TR", "TH", "TD",
                   "DIV", "SPAN", "BUTTON"}
        attacks = ["<img src=x onerror=alert(1)>", "<script>alert(1)</script>",
                   "[x](javascript:alert(1))", "[y](https://a.b/\" onclick=\"alert(1))",
                   "**<b>bold</b>**", "`<i>`", "```\n</code></pre><img src=x onerror=alert(1)>\n```",
                   "| <x> | b |\n|---|---|\n| <svg onload=alert(1)> | ok |",
                   "- <iframe src=x>\n  - [z](data:text/html,<script>alert(1)</script>)",
                   "> <a href=javascript:alert(1)>q</a>", "# <h1>t</h1>", "https://x.y/?q=<b>"]
        for text in attacks:
            with self.subTest(text=text):
                check = self.page.evaluate("""(text) => {
                    const t = document.createElement("template");
                    t.innerHTML = window.ninferRenderMarkdown(text);
                    const tags = [], bad = [];
                    for (const el of t.content.querySelectorAll("*")) {
                        tags.push(el.tagName);
                        for (const a of el.attributes)
                            if (!["href", "target", "rel", "class", "type", "title", "style", "start"].includes(a.name) ||
                                (a.name === "href" && !/^(https?:|mailto:)/.test(a.value)))
                                bad.push(el.tagName + " " + a.name + "=" + a.value);
                    }
                    return {tags, bad, text: t.content.textContent};
                }""", text)
                self.assertTrue(set(check["tags"]) <= allowed, check["tags"])
                self.assertEqual(check["bad"], [])
        html = self.page.evaluate("(t) => window.ninferRenderMarkdown(t)",
                                  "# T\n\n**b** *i* `c`\n\n- one\n- two\n\n1. x\n\n```py\nprint(1)\n```")
        for piece in ["<h1>T</h1>", "<strong>b</strong>", "<em>i</em>", "<code>c</code>",
                      "<ul><li>one</li><li>two</li></ul>", "<ol><li>x</li></ol>",
                      "<pre><code>print(1)</code></pre>"]:
            self.assertIn(piece, html)
        # a stored answer with a code block and hostile text renders safely; Copy copies it
        conv = {"id": "c1", "title": "stored", "created": 1, "updated": 1, "messages": [
            {"role": "user", "content": "<b>hi</b>"},
            {"role": "assistant", "content": "Here:\n\n```python\ndef f():\n    return '<x>'\n```\n\n<img src=x onerror=alert(1)>",
             "reasoning": "<script>alert(2)</script>", "stats": {"tokens": 5, "tps": 10.0, "ttft": 0.1}}]}
        self.page.evaluate("""(c) => { localStorage.setItem('ninfer.conversations', JSON.stringify([c]));
                                       localStorage.setItem('ninfer.current', JSON.stringify(c.id)); }""", conv)
        self.page.reload()
        expect(self.page.locator(".msg.user .text")).to_have_text("<b>hi</b>")
        self.assertEqual(self.page.locator(".msg img, .msg script, .msg b").count(), 0)
        self.page.click(".content button.copy")
        expect(self.page.locator(".content button.copy")).to_have_text("Copied")
        self.assertEqual(self.page.evaluate("navigator.clipboard.readText()"),
                         "def f():\n    return '<x>'")


class ApiKey(PageTest):
    @classmethod
    def setUpClass(cls):
        cls.server = Server(model=DEMO, key=KEY)

    @classmethod
    def tearDownClass(cls):
        assert cls.server.stop() == 0

    def test_asks_for_the_key_and_then_works(self):
        self.page.goto(self.server.url + "/")
        dialog = self.page.locator("#key-dialog")
        expect(dialog).to_be_visible()
        expect(self.page.locator("#key-message")).to_have_text("This server needs an API key.")
        self.page.fill("#key-input", "wrong-key")
        self.page.click("#key-ok")
        expect(self.page.locator("#key-message")).to_contain_text("The server refused the key")
        self.page.fill("#key-input", KEY)
        self.page.click("#key-ok")
        expect(dialog).not_to_be_visible()
        expect(self.page.locator("#model")).to_have_text("model: ninfer-demo")
        self.assertEqual(self.page.evaluate("JSON.parse(localStorage.getItem('ninfer.apiKey'))"), KEY)
        self.settings(temperature=0, max_tokens=40, thinking=False)
        self.send(SHORT_PROMPT)
        self.wait_idle()
        self.assertTrue(self.last_answer().locator(".content").inner_text().strip())
        self.assertEqual(self.last_answer().locator(".error").inner_text(), "")
        # the key is kept: a reload asks nothing
        self.page.reload()
        expect(self.page.locator("#model")).to_have_text("model: ninfer-demo")
        expect(dialog).not_to_be_visible()
        # a key that stops working mid-session is asked for again at the next message
        self.page.evaluate("localStorage.setItem('ninfer.apiKey', JSON.stringify('stale'))")
        self.page.reload()
        expect(dialog).to_be_visible()
        self.page.keyboard.press("Escape")  # cancelled: the page says why, and still works
        expect(self.page.locator("#model")).to_contain_text("invalid or missing API key")
        self.send("Hello")
        expect(dialog).to_be_visible()
        self.page.fill("#key-input", KEY)
        self.page.press("#key-input", "Enter")
        self.wait_idle()
        self.assertEqual(self.last_answer().locator(".error").inner_text(), "")
        self.assertTrue(self.last_answer().locator(".content").inner_text().strip())


if __name__ == "__main__":
    unittest.main(verbosity=2)
