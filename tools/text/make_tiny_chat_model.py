#!/usr/bin/env python3
"""Writes tests/fixtures_text/tiny_chat: a tiny random Qwen3.5 checkpoint with a real byte-level
BPE tokenizer, a chat template and stop ids, for end-to-end tests of `ninfer run --prompt` and
`ninfer chat` (the model outputs noise; the tests check the plumbing). Stdlib only, deterministic.

The weights are those of tests/fixtures/dense_text_sharded (an HF-written random checkpoint)
with the tied embedding grown from 256 to 320 rows. The tokenizer: 256 byte tokens (id = byte),
40 merges learned from a fixed paragraph, then 13 added tokens (ids 296..308).

usage: make_tiny_chat_model.py [OUT_DIR]
"""
import collections
import json
import os
import random
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SRC = os.path.join(ROOT, "tests", "fixtures", "dense_text_sharded")
VOCAB = 320
PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}|"
           r" ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
ADDED = [("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True),
         ("<think>", False), ("</think>", False), ("<tool_call>", False), ("</tool_call>", False),
         ("<tool_response>", False), ("</tool_response>", False), ("<|vision_start|>", True),
         ("<|vision_end|>", True), ("<|image_pad|>", True), ("<|video_pad|>", True)]
TEXT = ("the quick brown fox jumps over the lazy dog and then the dog sleeps in the sun while "
        "the fox runs into the forest there is nothing else to say about the weather today")


def byte_chars():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def learn_merges(n):
    words = collections.Counter(" " + w for w in TEXT.split())
    enc = byte_chars()
    seqs = {w: [enc[b] for b in w.encode()] for w in words}
    merges = []
    for _ in range(n):
        pairs = collections.Counter()
        for w, c in words.items():
            s = seqs[w]
            for a, b in zip(s, s[1:]):
                pairs[(a, b)] += c
        (a, b), _ = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))
        merges.append((a, b))
        for w in seqs:
            s, out, i = seqs[w], [], 0
            while i < len(s):
                if i + 1 < len(s) and s[i] == a and s[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(s[i])
                    i += 1
            seqs[w] = out
    return merges


def tokenizer_files(out):
    enc = byte_chars()
    vocab = {enc[b]: b for b in range(256)}
    merges = learn_merges(40)
    for a, b in merges:
        vocab[a + b] = len(vocab)
    added = [{"id": len(vocab) + i, "content": c, "single_word": False, "lstrip": False,
              "rstrip": False, "normalized": False, "special": s} for i, (c, s) in enumerate(ADDED)]
    tok = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
           "normalizer": {"type": "NFC"},
           "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
               {"type": "Split", "pattern": {"Regex": PATTERN}, "behavior": "Isolated",
                "invert": False},
               {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                "use_regex": False}]},
           "post_processor": None,
           "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                       "use_regex": False},
           "model": {"type": "BPE", "dropout": None, "unk_token": None,
                     "continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": False,
                     "byte_fallback": False, "ignore_merges": False, "vocab": vocab,
                     "merges": [[a, b] for a, b in merges]}}
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False, indent=1)
    with open(os.path.join(ROOT, "tests", "text", "templates", "qwen3_6.jinja"),
              encoding="utf-8") as f:
        template = f.read()
    config = {"add_bos_token": False, "bos_token": None, "eos_token": "<|im_end|>",
              "pad_token": "<|endoftext|>", "chat_template": template,
              "added_tokens_decoder": {str(a["id"]): {k: v for k, v in a.items() if k != "id"}
                                       for a in added}}
    with open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False, indent=1)
    ids = {c: a["id"] for (c, _), a in zip(ADDED, added)}
    gen = {"bos_token_id": ids["<|endoftext|>"], "eos_token_id": [ids["<|im_end|>"],
                                                                   ids["<|endoftext|>"]],
           "pad_token_id": ids["<|endoftext|>"], "do_sample": True, "temperature": 1.0,
           "top_k": 20, "top_p": 0.95}
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump(gen, f, indent=1)


def read_tensors():
    index = json.load(open(os.path.join(SRC, "model.safetensors.index.json")))
    tensors = {}
    for name in sorted(set(index["weight_map"].values())):
        data = open(os.path.join(SRC, name), "rb").read()
        n = struct.unpack("<Q", data[:8])[0]
        header = json.loads(data[8:8 + n])
        for key, meta in header.items():
            if key == "__metadata__":
                continue
            b, e = meta["data_offsets"]
            tensors[key] = (meta["dtype"], meta["shape"], data[8 + n + b:8 + n + e])
    return tensors


def write_weights(out):
    tensors = read_tensors()
    dtype, shape, raw = tensors["model.embed_tokens.weight"]
    assert dtype == "F16" and shape[0] == 256
    rng = random.Random(1234)
    extra = struct.pack("<%de" % ((VOCAB - 256) * shape[1]),
                        *[rng.gauss(0.0, 0.05) for _ in range((VOCAB - 256) * shape[1])])
    tensors["model.embed_tokens.weight"] = (dtype, [VOCAB, shape[1]], raw + extra)
    header, blobs, offset = {}, [], 0
    for key in sorted(tensors):
        dt, sh, data = tensors[key]
        header[key] = {"dtype": dt, "shape": sh, "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    config = json.load(open(os.path.join(SRC, "config.json")))
    config["vocab_size"] = VOCAB
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests", "fixtures_text",
                                                             "tiny_chat")
    os.makedirs(out, exist_ok=True)
    tokenizer_files(out)
    write_weights(out)


if __name__ == "__main__":
    main()
