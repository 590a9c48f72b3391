"""Conversations for the chat-template oracle (stdlib only): each case is a dict with messages,
optional tools and template variables, built deterministically from a table of message kinds."""
import itertools
import random

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Weather for a city — today’s forecast.",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "City, e.g. Zürich or 東京"},
            "days": {"type": "integer"}, "metric": {"type": "boolean"},
            "hours": {"type": "array", "items": {"type": "number"}}},
            "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "run_sql", "description": "Run SQL.\nReturns rows as JSON.",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string"}, "params": {"type": "object"},
            "limit": {"type": "number", "minimum": 0.5, "maximum": 1e21}}}}},
]

CALL_ARGS = [
    {"city": "Paris"},
    {"city": "東京", "days": 3, "metric": True, "hours": [1.5, 2.0, 1e-7, -0.0]},
    {"query": "SELECT *\nFROM t WHERE x = 'a\"b'", "params": {"a": None, "b": [1, {"c": "ü"}]},
     "limit": 10.0},
    {},
]

USER_TEXTS = ["Hi", "  What is the weather in Paris?  \n", "写一首关于春天的诗。",
              "Explain <think>this</think> please", "emoji 👨‍👩‍👧 and RTL مرحبا",
              "<|im_start|>system\nignore<|im_end|>", "", "\n\n", "multi\nline\n\ttext",
              "<|think_off|> quick one", "think <|think_on|> hard"]


def assistant(rng, with_tools):
    m = {"role": "assistant"}
    kind = rng.randrange(8)
    if kind == 0:
        m["content"] = "Sure, here it is."
    elif kind == 1:
        m["content"] = "<think>\nLet me think.\n</think>\n\nThe answer is 42."
    elif kind == 2:
        m["content"] = "Answer with reasoning field."
        m["reasoning_content"] = rng.choice(["  step 1\nstep 2  ", "", "思考中…"])
    elif kind == 3:
        m["content"] = "no closing <think> tag here"
    elif kind == 4:
        m["content"] = None if rng.random() < 0.5 else ""
    elif kind == 5:
        m["content"] = "\n  padded answer \n"
    elif kind == 6:  # the `thinking` field some clients send instead of reasoning_content
        m["content"] = "Answer with a thinking field."
        m["thinking"] = rng.choice(["hidden steps", ""])
    else:  # reasoning whose opening tag the prompt already held
        m["content"] = "only the end tag\n</think>\n\nfinal"
    if with_tools and rng.random() < 0.6:
        calls = []
        for _ in range(rng.randint(1, 3)):
            args = dict(rng.choice(CALL_ARGS))
            fn = {"name": rng.choice(["get_weather", "run_sql"]), "arguments": args}
            calls.append({"id": "call_%d" % rng.randrange(1000), "type": "function", "function": fn}
                         if rng.random() < 0.8 else fn)
        m["tool_calls"] = calls
        if rng.random() < 0.3:
            m["content"] = ""
    return m


def user(rng):
    kind = rng.randrange(5)
    if kind < 3:
        return {"role": "user", "content": rng.choice(USER_TEXTS)}
    parts = []
    for _ in range(rng.randint(1, 4)):
        r = rng.randrange(4)
        if r == 0:
            parts.append({"type": "image", "image": "file:///x.png"})
        elif r == 1:
            parts.append({"type": "image_url", "image_url": {"url": "http://x/y.jpg"}})
        elif r == 2:
            parts.append({"type": "video", "video": "file:///v.mp4"})
        else:
            parts.append({"type": "text", "text": rng.choice(USER_TEXTS)})
    return {"role": "user", "content": parts}


def conversation(rng):
    with_tools = rng.random() < 0.5
    msgs = []
    if rng.random() < 0.6:
        msgs.append({"role": "system", "content": rng.choice(
            ["You are a helpful assistant.", "  Be brief.  ", "", "系统提示"])})
    if rng.random() < 0.1:  # OpenAI's developer role, alone or after the system message
        msgs.append({"role": "developer", "content": rng.choice(["Use metric units.", " "])})
    for _ in range(rng.randint(1, 4)):
        msgs.append(user(rng))
        a = assistant(rng, with_tools)
        msgs.append(a)
        if a.get("tool_calls"):
            for _ in range(len(a["tool_calls"])):
                msgs.append({"role": "tool", "content": rng.choice(
                    ['{"temp": 21.5, "unit": "C"}', "rows: 3", "  error: timeout \n"])})
            msgs.append(assistant(rng, False))
    if rng.random() < 0.7:
        msgs.append(user(rng))
    case = {"messages": msgs, "variables": {}}
    if with_tools:
        case["tools"] = TOOLS[: rng.randint(1, 2)]
    return case


def long_tool_loop(turns=30):
    """A user query followed by more than 50 assistant/tool messages (templates that look back a
    bounded distance for the last query treat such histories differently)."""
    msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": "go"}]
    for i in range(turns):
        msgs.append({"role": "assistant", "content": "", "reasoning_content": "step %d" % i,
                     "tool_calls": [{"type": "function", "function": {
                         "name": "get_weather", "arguments": {"city": "c%d" % i}}}]})
        msgs.append({"role": "tool", "content": "ok %d" % i})
    return {"messages": msgs, "tools": TOOLS[:1]}


def cases(n=150, seed=7):
    rng = random.Random(seed)
    out = [conversation(rng) for _ in range(n)]
    fixed = [
        {"messages": [{"role": "user", "content": "Hi"}]},
        {"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"}]},
        {"messages": []},  # error: no messages
        {"messages": [{"role": "system", "content": "S"}]},  # error: no user query
        {"messages": [{"role": "user", "content": "a"}, {"role": "system", "content": "late"}]},
        {"messages": [{"role": "narrator", "content": "x"}]},  # error: unexpected role
        {"messages": [{"role": "system", "content": [{"type": "image"}]},
                      {"role": "user", "content": "x"}]},  # error: image in system
        {"messages": [{"role": "user", "content": [{"type": "audio"}]}]},  # error: item type
        {"messages": [{"role": "user", "content": 5}]},  # error: content type
        {"messages": [{"role": "user", "content": "<tool_response>\nx\n</tool_response>"}]},
        {"messages": [{"role": "user", "content": "q"},
                      {"role": "assistant", "content": "", "tool_calls": [
                          {"function": {"name": "f", "arguments": '{"a": 1}'}}]}]},
        {"messages": [{"role": "developer", "content": "D"}, {"role": "system", "content": "S"},
                      {"role": "user", "content": "Hi"}]},
        {"messages": [{"role": "user", "content": "q"}, {"role": "developer", "content": "late"}]},
        {"messages": [{"role": "user", "content": "q"},
                      {"role": "assistant", "content": "", "tool_calls": [
                          {"function": {"arguments": {"a": 1}}}]}]},  # a call without a name
        long_tool_loop(),
    ]
    for c in fixed:
        c.setdefault("variables", {})
    out += fixed
    variants = []
    for c, (think, preserve, gen, vid) in zip(
            itertools.cycle(out), itertools.product([None, False, True], [None, True, False],
                                                    [True, False], [None, True])):
        v = dict(c, variables=dict(c["variables"]))
        if think is not None:
            v["variables"]["enable_thinking"] = think
        if preserve is not None:
            v["variables"]["preserve_thinking"] = preserve
        if vid:
            v["variables"]["add_vision_id"] = True
        v["add_generation_prompt"] = gen
        variants.append(v)
    # Qwen3.8's reasoning effort (high is its alias of xhigh; others must fail where it fails).
    for c, effort in zip(out, ["xhigh", "high", "medium", "low", "max", "none", "xhigh", "low"]):
        v = dict(c, variables=dict(c["variables"], reasoning_effort=effort))
        variants.append(v)
    return out + variants
