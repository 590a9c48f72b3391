#!/usr/bin/env python3
"""Trains the demo model's tokenizer: a byte-level BPE with HF `tokenizers` on the corpus of
build_corpus.py, with Qwen3.5's pipeline (NFC, the Qwen split regex then ByteLevel, ByteLevel
decoder; MODEL_QWEN3_5.md section 5) and Qwen's 33 added tokens after the learned vocabulary, in
Qwen's order and with Qwen's `special` flags (tools/text/make_qwen_tokenizer.py).

Writes to OUT: tokenizer.json, tokenizer_config.json (with the Qwen3.6 chat template of
tests/text/templates/qwen3_6.jinja, thinking off unless enable_thinking is true:
common.demo_chat_template) and generation_config.json (stop ids <|im_end|>,
<|endoftext|>). Then checks with transformers that the files load, encode as `tokenizers` does,
and that the template renders training conversations exactly as common.chatml_pair (with and
without reasoning) and generation prompts without thinking by default.

usage: train_tokenizer.py --corpus DIR --out DIR [--vocab 8192] [--sample-mb 32]
"""
import argparse
import json
import os

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers
from tokenizers import pre_tokenizers, processors, trainers

from common import ADDED, NOT_SPECIAL, QWEN3_5_PATTERN, chatml_pair, demo_chat_template, write_json

MODEL_MAX_LENGTH = 8192


def sample_texts(corpus, sample_bytes):
    """Documents from the start of train.jsonl (already in a fixed shuffled order), with the
    special token strings removed: they become added tokens, not merges."""
    used = 0
    with open(os.path.join(corpus, "train.jsonl"), encoding="utf-8") as f:
        for line in f:
            text = json.loads(line)["text"]
            for tok in ADDED:
                text = text.replace(tok, "\n")
            yield text
            used += len(text)
            if used >= sample_bytes:
                return


def build(corpus, vocab, sample_bytes):
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN3_5_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False,
                                              use_regex=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab - len(ADDED), min_frequency=2,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=[], show_progress=False)
    tok.train_from_iterator(sample_texts(corpus, sample_bytes), trainer)
    base = tok.get_vocab_size()
    for i, content in enumerate(ADDED):
        added = AddedToken(content, single_word=False, lstrip=False, rstrip=False,
                           normalized=False, special=content not in NOT_SPECIAL)
        (tok.add_tokens if content in NOT_SPECIAL else tok.add_special_tokens)([added])
        assert tok.token_to_id(content) == base + i, content
    return tok


def write_configs(tok, out):
    template = demo_chat_template()
    spec = json.loads(tok.to_str())
    added = {str(a["id"]): {k: v for k, v in a.items() if k != "id"} for a in spec["added_tokens"]}
    write_json(os.path.join(out, "tokenizer_config.json"), {
        "add_bos_token": False, "add_prefix_space": False, "bos_token": None,
        "clean_up_tokenization_spaces": False, "eos_token": "<|im_end|>", "errors": "replace",
        "model_max_length": MODEL_MAX_LENGTH, "pad_token": "<|endoftext|>",
        "split_special_tokens": False, "tokenizer_class": "TokenizersBackend",
        "added_tokens_decoder": added, "chat_template": template})
    eot, im_end = tok.token_to_id("<|endoftext|>"), tok.token_to_id("<|im_end|>")
    write_json(os.path.join(out, "generation_config.json"), {
        "bos_token_id": eot, "eos_token_id": [im_end, eot], "pad_token_id": eot,
        "do_sample": True, "temperature": 0.6, "top_k": 20, "top_p": 0.95})


def self_check(out, corpus):
    """transformers loads the files, encodes as `tokenizers` does, and the chat template renders
    the training format."""
    from transformers import AutoTokenizer
    hf = AutoTokenizer.from_pretrained(out)
    raw = Tokenizer.from_file(os.path.join(out, "tokenizer.json"))
    with open(os.path.join(corpus, "val.txt"), encoding="utf-8") as f:
        val = f.read()
    probe = val[:20000] + "\ncafe\u0301 na\u00efve \u4e2d\u6587 \U0001F600 <think>x</think>"
    assert hf(probe, add_special_tokens=False)["input_ids"] == raw.encode(probe).ids
    user = "Write a function `f` that adds one."
    answer = "```python\ndef f(x):\n    return x + 1\n```"
    rendered = hf.apply_chat_template([{"role": "user", "content": user},
                                       {"role": "assistant", "content": answer}], tokenize=False)
    assert rendered == chatml_pair(user, answer), rendered
    thought = "A one-line helper."
    rendered = hf.apply_chat_template([{"role": "user", "content": user},
                                       {"role": "assistant", "content": answer,
                                        "reasoning_content": thought}], tokenize=False)
    assert rendered == chatml_pair(user, answer, thought), rendered
    turn = [{"role": "user", "content": user}]
    prompt = chatml_pair(user, "").split("<think>")[0]
    for kwargs, tail in (({}, "<think>\n\n</think>\n\n"),  # the demo default: no thinking
                         ({"enable_thinking": False}, "<think>\n\n</think>\n\n"),
                         ({"enable_thinking": True}, "<think>\n")):
        rendered = hf.apply_chat_template(turn, tokenize=False, add_generation_prompt=True,
                                          **kwargs)
        assert rendered == prompt + tail, (kwargs, rendered)
    ids = raw.encode(val).ids
    return len(val.encode("utf-8")) / max(1, len(ids))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--vocab", type=int, default=8192, help="total ids, added tokens included")
    ap.add_argument("--sample-mb", type=float, default=32.0, help="text the BPE is learned on")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    tok = build(args.corpus, args.vocab, int(args.sample_mb * 2**20))
    tok.save(os.path.join(args.out, "tokenizer.json"))
    write_configs(tok, args.out)
    bytes_per_token = self_check(args.out, args.corpus)
    print(f"tokenizer: {tok.get_vocab_size()} ids ({tok.get_vocab_size() - len(ADDED)} learned + "
          f"{len(ADDED)} added), {bytes_per_token:.2f} bytes/token on val", flush=True)


if __name__ == "__main__":
    main()
