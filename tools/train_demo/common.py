"""Shared pieces of the demo-model pipeline (tools/train_demo/): paths, the Qwen special tokens,
the ChatML rendering of training conversations, small JSON helpers.

The special tokens, their order and `special` flags and the split regex come from
tools/text/make_qwen_tokenizer.py (the real Qwen3.5/3.6 tokenizer, MODEL_QWEN3_5.md section 5);
the chat template is tests/text/templates/qwen3_6.jinja.
"""
import hashlib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools", "text"))
sys.path.insert(0, os.path.join(ROOT, "tools", "reference"))

from make_qwen_tokenizer import ADDED, NOT_SPECIAL, QWEN3_5_PATTERN  # noqa: E402,F401

CHAT_TEMPLATE_FILE = os.path.join(ROOT, "tests", "text", "templates", "qwen3_6.jinja")
DEFAULT_MODEL_NAME = "ninfer-demo"  # models/<name>/ (apps/ninfer/default_model.cpp)

EOS = "<|endoftext|>"
IM_START, IM_END = "<|im_start|>", "<|im_end|>"


def chatml_pair(user, answer, thinking=""):
    """One single-turn conversation as the Qwen3.6 template renders it with the answer as the
    final assistant turn and `thinking` as its reasoning_content: the template writes the closed
    think block `<think>\n{thinking}\n</think>\n\n` after the last user query (empty thinking
    gives `<think>\n\n</think>\n\n`, what the no-thinking generation prompt ends with). Content
    and reasoning are trimmed, as the template does. train_tokenizer.py checks this string against
    transformers' apply_chat_template."""
    return (f"{IM_START}user\n{user.strip()}{IM_END}\n"
            f"{IM_START}assistant\n<think>\n{thinking.strip()}\n</think>\n\n{answer.strip()}"
            f"{IM_END}\n")


# The demo model's template answers without reasoning unless enable_thinking is true (issues 13
# and 14: a tiny model does not close <think> on its own). Only the generation prompt changes.
THINKING_ON_BY_DEFAULT = """\
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\\n\\n</think>\\n\\n' }}
    {%- else %}
        {{- '<think>\\n' }}
    {%- endif %}"""
THINKING_OFF_BY_DEFAULT = """\
    {%- if enable_thinking is defined and enable_thinking is true %}
        {{- '<think>\\n' }}
    {%- else %}
        {{- '<think>\\n\\n</think>\\n\\n' }}
    {%- endif %}"""


def demo_chat_template():
    """tests/text/templates/qwen3_6.jinja with thinking off by default (enable_thinking=true
    turns it on); everything else as Qwen3.6."""
    with open(CHAT_TEMPLATE_FILE, encoding="utf-8") as f:
        template = f.read()
    assert template.count(THINKING_ON_BY_DEFAULT) == 1, "qwen3_6.jinja changed: update common.py"
    template = template.replace(THINKING_ON_BY_DEFAULT, THINKING_OFF_BY_DEFAULT)
    return template.replace("plus preserve_thinking (keep every turn's reasoning).",
                            "plus preserve_thinking (keep every turn's reasoning).\n"
                            "    ninfer-demo: no thinking unless enable_thinking is true.", 1)


def stable_hash(text):
    """A deterministic 64-bit hash (Python's hash() is salted per process)."""
    return int.from_bytes(hashlib.sha1(text.encode("utf-8")).digest()[:8], "big")


def write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=1, ensure_ascii=False)
        f.write("\n")
    os.replace(tmp, path)


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def block_kernel_imports():
    """HF's exact torch fallbacks instead of the Triton kernels of fla / causal_conv1d
    (MODEL_QWEN3_5.md section 6, gotcha 1): the same code runs on the CPU here and on the GPU."""
    sys.modules["fla"] = None
    sys.modules["causal_conv1d"] = None
