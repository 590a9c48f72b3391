#!/usr/bin/env python3
"""Writes a small seed corpus for every fuzzer in fuzz/ into OUT/<fuzzer>/ (stdlib only).

usage: fuzz/make_seeds.py OUT

Deterministic: the same files on every run, so nothing binary is committed. The seeds are
small valid inputs that reach deep into each target (a fuzzer mutates its way from them):
- fuzz_template: the model templates of tests/text/templates and the Jinja snippets of
  tests/text/template_snippets.py;
- fuzz_tokenizer: text of tests/text/corpus.py (sentences, code, special tokens) and 'J' + the
  tiny tokenizer.json;
- fuzz_tool_parser: model output with reasoning and qwen3_coder tool calls;
- fuzz_json_constraint: a schema, a NUL byte, then a document (and bare documents);
- fuzz_safetensors: safetensors images of every dtype, with odd header lengths (misaligned
  tensors), metadata, scalars and empty tensors;
- fuzz_request_parsers: a request body per endpoint, after its selector byte.
"""
import json
import pathlib
import struct
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "text"))
import corpus  # noqa: E402
import template_snippets  # noqa: E402


def safetensors(tensors, metadata=None, pad=0):
    """An image of {name: (dtype, shape, bytes)}; `pad` spaces make the header length odd."""
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header).encode() + b" " * pad
    return struct.pack("<Q", len(text)) + text + data


def safetensors_seeds():
    f32 = struct.pack("<4f", 1.0, -2.5, 3.25, float("inf"))
    bf16 = struct.pack("<4H", 0x3F80, 0xC020, 0x7FC0, 0x0001)
    f16 = struct.pack("<3H", 0x3C00, 0x8001, 0x7C00)
    f64 = struct.pack("<2d", 1e300, -0.0)
    return {
        "f32.safetensors": safetensors({"w": ("F32", [2, 2], f32)}),
        "bf16_odd.safetensors": safetensors({"a": ("BF16", [4], bf16)}, pad=1),
        "mixed.safetensors": safetensors(
            {"b": ("F16", [3], f16), "c": ("F64", [1, 2], f64), "i": ("I32", [2], b"\1\0\0\0\2\0\0\0"),
             "q": ("F8_E4M3", [2, 2], b"\x38\xb8\x7e\x7f"), "u": ("U8", [3], b"abc"),
             "x": ("I64", [1], b"\xff" * 8), "z": ("F32", [0, 4], b"")},
            metadata={"format": "pt"}, pad=3),
        "scalar_unknown.safetensors": safetensors(
            {"s": ("F32", [], struct.pack("<f", 0.5)), "v": ("C64", [1], b"\0" * 8)}, pad=2),
        "rank5.safetensors": safetensors({"r": ("BF16", [1, 1, 1, 2, 1], bf16[:4])}, pad=5),
    }


def request_seeds():
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
                                                "parameters": {"type": "object",
                                                               "properties": {"city": {"type": "string"}},
                                                               "required": ["city"]}}}]
    chat = {"model": "tiny-chat", "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"},
                                     {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]},
        {"role": "assistant", "content": None, "reasoning_content": "hmm", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"}],
        "tools": tools, "tool_choice": "auto", "temperature": 0.7, "top_p": 0.9, "top_k": 20, "n": 2,
        "stop": ["\n\n"], "max_tokens": 64, "stream": True, "stream_options": {"include_usage": True},
        "logprobs": True, "top_logprobs": 2, "seed": 7,
        "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}},
        "chat_template_kwargs": {"enable_thinking": False}, "reasoning_effort": "low"}
    chat_continue = {"messages": [{"role": "user", "content": "Hi"},
                                  {"role": "assistant", "content": "Hello, I"}],
                     "continue_final_message": True, "tool_choice": {"type": "function", "function": {"name": "f"}},
                     "tools": [{"type": "function", "function": {"name": "f"}}]}
    completion = {"model": "tiny-chat", "prompt": ["Once upon", "a time"], "max_tokens": 8, "echo": True,
                  "logprobs": 2, "best_of": 1, "stop_token_ids": [1, 2]}
    completion_ids = {"prompt": [[1, 2, 3], [4]], "n": 3}
    anthropic = {"model": "tiny-chat", "max_tokens": 100, "system": [{"type": "text", "text": "Be kind."}],
                 "messages": [
                     {"role": "user", "content": [{"type": "text", "text": "Look"},
                                                  {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}]},
                     {"role": "assistant", "content": [{"type": "thinking", "thinking": "ok"},
                                                       {"type": "tool_use", "id": "t1", "name": "calc", "input": {"x": 1}}]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "2"}]},
                     {"role": "assistant", "content": "The answer"}],
                 "tools": [{"name": "calc", "input_schema": {"type": "object"}}],
                 "tool_choice": {"type": "tool", "name": "calc", "disable_parallel_tool_use": True},
                 "thinking": {"type": "enabled", "budget_tokens": 64}, "stop_sequences": ["END"],
                 "output_config": {"format": {"type": "json_schema", "schema": {"type": "object"}}}}
    count = {"messages": [{"role": "user", "content": "count me"}], "tools": [{"name": "t", "input_schema": {}}]}
    responses = {"model": "tiny-chat", "instructions": "Be terse.", "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "Hi"},
                                     {"type": "input_image", "image_url": "data:image/png;base64,AAAA"}]},
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "think"}]},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{\"a\": 1}"},
        {"type": "function_call_output", "call_id": "c1", "output": "done"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}],
        "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
        "tool_choice": {"type": "function", "name": "f"}, "max_output_tokens": 32,
        "text": {"format": {"type": "json_schema", "name": "r", "schema": {"type": "object"}, "strict": True}},
        "reasoning": {"effort": "medium"}, "stream": True}
    bodies = {"C_chat": chat, "C_continue": chat_continue, "T_completion": completion,
              "T_ids": completion_ids, "A_messages": anthropic, "N_count": count, "R_responses": responses,
              "R_text": {"input": "hello", "top_logprobs": 0}}
    return {name + ".json": name[0].encode() + json.dumps(body).encode() for name, body in bodies.items()}


def main():
    out = pathlib.Path(sys.argv[1])
    seeds = {"fuzz_safetensors": safetensors_seeds(), "fuzz_request_parsers": request_seeds()}
    templates = {p.name: p.read_bytes() for p in sorted((ROOT / "tests/text/templates").glob("*.jinja"))}
    for i, (source, _) in enumerate(template_snippets.SNIPPETS):
        templates[f"snippet_{i:03d}.jinja"] = source.encode()
    seeds["fuzz_template"] = templates
    texts = corpus.SENTENCES + corpus.CODE + [" ".join(corpus.SPECIALS)]
    tokenizer = {f"text_{i:02d}.txt": t.encode() for i, t in enumerate(texts)}
    tokenizer["tiny_tokenizer.json"] = b"J" + (ROOT / "tests/fixtures_text/tiny_chat/tokenizer.json").read_bytes()
    seeds["fuzz_tokenizer"] = tokenizer
    seeds["fuzz_tool_parser"] = {
        "reasoning.txt": b"\x01hmm, let me think\n</think>\n\nThe answer is 4.",
        "tool_call.txt": b"\x00Sure.\n<tool_call>\n<function=f>\n<parameter=n>\n3\n</parameter>\n"
                         b"<parameter=s>\nhi there\n</parameter>\n<parameter=o>\n{\"k\": [1, 2]}\n"
                         b"</parameter>\n</function>\n</tool_call>",
        "stop.txt": b"\x00text then STOP and more<|im_end|>",
    }
    seeds["fuzz_json_constraint"] = {
        "object.bin": b'{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}\0{"a": 12}',
        "array.bin": b'{"type": "array", "items": {"enum": ["x", 1, null]}, "maxItems": 3}\0["x", 1]',
        "string.bin": b'{"type": "string", "pattern": "^[a-z]+$", "maxLength": 8}\0"abc"',
        "builtin.bin": b'\x02{"a": "xy", "c": 12, "d": [1.5]}',
    }
    for fuzzer, files in seeds.items():
        d = out / fuzzer
        d.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            (d / name).write_bytes(data)
    print(f"seeds for {len(seeds)} fuzzers in {out}")


if __name__ == "__main__":
    main()
