#!/usr/bin/env python3
"""Images and videos through `ninfer serve` on the demo model (models/ninfer-demo carries a tiny
trained vision tower): the official openai and anthropic SDKs send images as base64 data URLs,
whole and streamed, and the answers agree; usage counts the image tokens; a repeated image hits
the prefix cache and another image does not; http(s) URLs load only with --allow-image-urls and
file:// never; a corpus of bad images (truncated, bombs, wrong types) gets clear 400s and the
server stays up; a text-only model answers images with a 400.

env: NINFER_BIN, NINFER_SOURCE_DIR
"""
import base64
import functools
import glob
import http.server
import json
import os
import sys
import threading
import unittest

import anthropic
import openai

sys.path.insert(0, os.path.dirname(__file__))
from server_util import KEY, ROOT, Server  # noqa: E402

DEMO = os.path.join(ROOT, "models", "ninfer-demo")
IMAGES = os.path.join(ROOT, "tests", "fixtures_vision", "demo_images")
BAD = os.path.join(ROOT, "tests", "fixtures_vision", "bad")
VIDEO = os.path.join(ROOT, "tests", "fixtures_vision", "preprocess", "tiny.mp4")
SERVER = None
GREEDY = {"temperature": 0, "max_tokens": 12}


def setUpModule():
    global SERVER
    SERVER = Server("--max-context", "4096", "--served-model-name", "m", model=DEMO)


def tearDownModule():
    assert SERVER.stop() == 0


def png_files():
    files = sorted(glob.glob(os.path.join(IMAGES, "*.png")))
    assert len(files) >= 2, "tests/fixtures_vision/demo_images holds the demo's eval images"
    return files


def data_url(path, mime="image/png"):
    with open(path, "rb") as f:
        return f"data:{mime};base64," + base64.b64encode(f.read()).decode()


def image_message(url, text="What is in the picture?"):
    return [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}},
                                         {"type": "text", "text": text}]}]


def oai(server=None):
    s = server or SERVER
    return openai.OpenAI(base_url=s.url + "/v1", api_key=KEY, max_retries=0)


class OpenAIImages(unittest.TestCase):
    def test_whole_and_streamed_agree_and_usage_counts_image_tokens(self):
        url = data_url(png_files()[0])
        client = oai()
        whole = client.chat.completions.create(model="m", messages=image_message(url), **GREEDY)
        text = whole.choices[0].message.content
        self.assertTrue(text.strip(), "an answer about the image")
        streamed = ""
        usage = None
        for chunk in client.chat.completions.create(model="m", messages=image_message(url),
                                                    stream=True,
                                                    stream_options={"include_usage": True},
                                                    **GREEDY):
            if chunk.choices and chunk.choices[0].delta.content:
                streamed += chunk.choices[0].delta.content
            if chunk.usage:
                usage = chunk.usage
        self.assertEqual(streamed, text)
        self.assertEqual(usage.prompt_tokens, whole.usage.prompt_tokens)
        plain = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "What is in the picture?"}],
            **GREEDY)
        # The image adds <|vision_start|>, its merged patch tokens and <|vision_end|>.
        self.assertGreater(whole.usage.prompt_tokens, plain.usage.prompt_tokens + 4)

    def test_repeated_image_hits_the_cache_and_another_does_not(self):
        first, second = png_files()[:2]
        client = oai()
        text = "Describe the picture in a few words."
        a = client.chat.completions.create(model="m", messages=image_message(data_url(first), text),
                                           **GREEDY)
        again = client.chat.completions.create(
            model="m", messages=image_message(data_url(first), text), **GREEDY)
        self.assertEqual(again.choices[0].message.content, a.choices[0].message.content)
        cached = again.usage.prompt_tokens_details.cached_tokens
        self.assertGreater(cached, a.usage.prompt_tokens // 2, "the same image should hit")
        other = client.chat.completions.create(
            model="m", messages=image_message(data_url(second), text), **GREEDY)
        other_cached = other.usage.prompt_tokens_details.cached_tokens or 0
        self.assertLess(other_cached, 8, "another image must not reuse the first one's state")

    def test_two_images_in_one_message(self):
        a, b = png_files()[:2]
        msg = [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": data_url(a)}},
            {"type": "text", "text": "and"},
            {"type": "image_url", "image_url": {"url": data_url(b)}},
            {"type": "text", "text": "What is in the pictures?"}]}]
        r = oai().chat.completions.create(model="m", messages=msg, **GREEDY)
        self.assertEqual(r.choices[0].finish_reason in ("stop", "length"), True)

    def test_video(self):
        with open(VIDEO, "rb") as f:
            url = "data:video/mp4;base64," + base64.b64encode(f.read()).decode()
        msg = [{"role": "user", "content": [{"type": "video_url", "video_url": {"url": url}},
                                            {"type": "text", "text": "What happens?"}]}]
        r = oai().chat.completions.create(model="m", messages=msg, **GREEDY)
        self.assertGreater(r.usage.prompt_tokens, 20)


class DemoAnswersEqualHf(unittest.TestCase):
    def test_the_eval_images_get_hf_answers(self):
        """The whole path (PNG decode, preprocessing, placeholders, tower, text model) against
        HF float32 on the demo's eval pictures (models/ninfer-demo/vision_eval.json)."""
        with open(os.path.join(DEMO, "vision_eval.json")) as f:
            fixtures = json.load(f)["fixtures"]
        client = oai()
        for fx in fixtures:
            r = client.chat.completions.create(
                model="m", messages=image_message(data_url(os.path.join(IMAGES, fx["file"]))),
                temperature=0, max_tokens=16, logprobs=True)
            self.assertEqual(r.choices[0].message.content.strip(), fx["answer"], fx["file"])
            self.assertEqual(r.usage.prompt_tokens, len(fx["prompt"]), fx["file"])


class AnthropicImages(unittest.TestCase):
    def test_base64_image_whole_and_streamed(self):
        with open(png_files()[0], "rb") as f:
            b64 = base64.b64encode(f.read()).decode()
        client = anthropic.Anthropic(base_url=SERVER.url, api_key=KEY, max_retries=0)
        content = [{"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                "data": b64}},
                   {"type": "text", "text": "What is in the picture?"}]
        msg = client.messages.create(model="m", max_tokens=12, extra_body={"temperature": 0},
                                     messages=[{"role": "user", "content": content}])
        text = "".join(b.text for b in msg.content if b.type == "text")
        with client.messages.stream(model="m", max_tokens=12, extra_body={"temperature": 0},
                                    messages=[{"role": "user", "content": content}]) as s:
            streamed = "".join(s.text_stream)
        self.assertEqual(streamed, text)
        self.assertGreater(msg.usage.input_tokens + (msg.usage.cache_read_input_tokens or 0), 10)
        counted = client.messages.count_tokens(model="m",
                                               messages=[{"role": "user", "content": content}])
        self.assertEqual(counted.input_tokens,
                         msg.usage.input_tokens + (msg.usage.cache_read_input_tokens or 0))


def bad_request(server, content):
    return server.request("POST", "/v1/chat/completions", {
        "model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": content}]})


class BadImages(unittest.TestCase):
    def test_corpus_answers_400_and_the_server_stays_up(self):
        files = sorted(f for f in glob.glob(os.path.join(BAD, "*")) if not f.endswith(".json"))
        self.assertGreater(len(files), 10)
        for path in files:
            status, _, body = bad_request(SERVER, [
                {"type": "image_url", "image_url": {"url": data_url(path)}},
                {"type": "text", "text": "hi"}])
            self.assertEqual(status, 400, f"{os.path.basename(path)}: {body}")
            self.assertIn("image", body["error"]["message"], path)
        status, _, _ = SERVER.request("GET", "/health")
        self.assertEqual(status, 200)

    def test_bad_urls(self):
        for url, needle in [("file:///etc/passwd", "file://"),
                            ("http://127.0.0.1:1/x.png", "--allow-image-urls"),
                            ("data:image/png;base64,@@@@", "base64"),
                            ("data:image/png,rawbytes", "base64")]:
            status, _, body = bad_request(SERVER, [{"type": "image_url",
                                                    "image_url": {"url": url}}])
            self.assertEqual(status, 400, url)
            self.assertIn(needle, body["error"]["message"], url)

    def test_images_outside_user_messages(self):
        status, _, body = SERVER.request("POST", "/v1/chat/completions", {
            "model": "m", "max_tokens": 4, "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": [{"type": "image_url",
                                                   "image_url": {"url": data_url(png_files()[0])}}]}]})
        self.assertEqual(status, 400, body)


class ImageUrls(unittest.TestCase):
    def test_http_url_with_the_flag(self):
        handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=IMAGES)
        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        server = Server("--allow-image-urls", "--served-model-name", "m", model=DEMO)
        try:
            name = os.path.basename(png_files()[0])
            url = f"http://127.0.0.1:{httpd.server_address[1]}/{name}"
            by_url = oai(server).chat.completions.create(model="m", messages=image_message(url),
                                                         **GREEDY)
            by_data = oai(server).chat.completions.create(
                model="m", messages=image_message(data_url(png_files()[0])), **GREEDY)
            self.assertEqual(by_url.choices[0].message.content,
                             by_data.choices[0].message.content)
            missing = f"http://127.0.0.1:{httpd.server_address[1]}/missing.png"
            status, _, body = bad_request(server, [{"type": "image_url",
                                                    "image_url": {"url": missing}}])
            self.assertEqual(status, 400)
            self.assertIn("404", body["error"]["message"])
        finally:
            server.stop()
            httpd.shutdown()


class TextOnlyModel(unittest.TestCase):
    def test_images_to_a_text_model_are_400(self):
        server = Server("--served-model-name", "m")  # the tiny text fixture
        try:
            status, _, body = bad_request(server, [
                {"type": "image_url", "image_url": {"url": data_url(png_files()[0])}}])
            self.assertEqual(status, 400)
            self.assertIn("vision", body["error"]["message"])
        finally:
            server.stop()


if __name__ == "__main__":
    unittest.main(verbosity=2)
