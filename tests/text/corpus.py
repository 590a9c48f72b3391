"""The tokenizer oracle corpus: deterministic, varied text (stdlib only).

Real code (the Python standard library's own sources, C-like and shell snippets), prose in many
scripts, CJK, emoji with ZWJ/skin-tone/flag sequences, RTL text and bidi marks, decomposed
combining marks (NFC matters), long digit and whitespace runs, CRLF, special-token strings inside
text, and random code points from many Unicode blocks. items(n_bytes) returns a list of strings.
"""
import os
import random
import sysconfig
import unicodedata

SPECIALS = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>",
            "</tool_call>", "<tool_response>", "<|vision_start|>", "<|image_pad|>",
            "<|fim_prefix|>", "<|im_start", "im_end|>", "<think", "</ think>", "<<|im_end|>>"]

SENTENCES = [
    "The quick brown fox jumps over the lazy dog. It's 3.14159 o'clock, isn't it? We'll see.",
    "我们今天去北京大学学习人工智能和机器学习，人力资源部门也参加了。",
    "日本語のテキストには、ひらがな、カタカナ、漢字が混在しています。東京は晴れ。",
    "한국어 문장은 띄어쓰기를 사용합니다. 서울에서 만나요!",
    "Привет, мир! Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "Ελληνικά: Ξεσκεπάζω την ψυχοφθόρα βδελυγμία.",
    "العربية: مرحبا بالعالم! كيف حالك اليوم؟ ١٢٣٤٥٦٧٨٩٠",
    "עברית: שלום עולם, מה שלומך? \u200fטקסט מימין לשמאל\u200e mixed LTR",
    "हिन्दी: नमस्ते दुनिया। यह एक परीक्षण वाक्य है।",
    "ไทย: สวัสดีชาวโลก ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ",
    "Tiếng Việt: Xin chào thế giới, đây là một câu thử nghiệm có dấu.",
    "Emoji: 👋🏽 👨‍👩‍👧‍👦 🏳️‍🌈 🇯🇵🇺🇸 ❤️‍🔥 🧑🏿‍💻 1️⃣ ©️ ™ ☕️",
    "Math: ∀x∈ℝ, ∑ᵢ xᵢ² ≥ 0; ∫₀^∞ e^{-x} dx = 1 ⇒ √2 ≈ 1.41421356",
    "Fullwidth: ＡＢＣ１２３　全角スペース　ｶﾀｶﾅ",
    "Apostrophes: I'M, YOU'RE, they'VE, she'LL, he'D, it'S, don'T, ſ'S ’s ’t",
]

CODE = [
    "#include <vector>\nint main() {\n\tstd::vector<int> v{1, 2, 3};\n\treturn v[0] + 0x1F;\n}\n",
    "fn main() { let s: &str = \"héllo\"; println!(\"{s:?} {}\", s.len()); }\r\n",
    "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%é%' ORDER BY id DESC;",
    "<div class=\"x\">&amp;&lt;tag&gt; <a href='https://example.com/?q=1&r=2'>link</a></div>",
    "const f = async (x) => { await fetch(`/api/${x}`); return x ?? null; };",
    "for i in $(seq 1 10); do echo \"$i\" | awk '{print $1*2}'; done 2>&1 >/dev/null",
    "func main() {\n    m := map[string]int{\"a\": 1}\n    fmt.Printf(\"%v\\n\", m)\n}",
    "    \n\n   \t\t  \n    def f(self):\n        return {'a': [1, 2.5e-3, None]}\n\n\n",
]

BLOCKS = [(0x20, 0x7E), (0xA0, 0x24F), (0x300, 0x36F), (0x370, 0x3FF), (0x400, 0x4FF),
          (0x590, 0x5FF), (0x600, 0x6FF), (0x900, 0x97F), (0xE00, 0xE7F), (0x1100, 0x11FF),
          (0x1E00, 0x1EFF), (0x2000, 0x206F), (0x2070, 0x209F), (0x20A0, 0x20CF),
          (0x2100, 0x214F), (0x2190, 0x22FF), (0x2500, 0x25FF), (0x3000, 0x30FF),
          (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0xFB00, 0xFB4F), (0xFE00, 0xFE0F),
          (0xFF00, 0xFFEF), (0x1F300, 0x1FAFF), (0x1D400, 0x1D7FF), (0x20000, 0x2A6DF),
          (0xE0000, 0xE007F), (0x10000, 0x1007F)]


def random_text(rng, n):
    out = []
    for _ in range(n):
        lo, hi = rng.choice(BLOCKS)
        cp = rng.randint(lo, hi)
        if 0xD800 <= cp <= 0xDFFF:
            continue
        out.append(chr(cp))
        if rng.random() < 0.15:
            out.append(rng.choice([" ", "  ", "\n", "\t", "\r\n", "\u3000", "\xa0", "\u200d"]))
    return "".join(out)


def mutated(rng, s):
    """Sentence variants: NFD, case changes, specials and runs spliced in."""
    kind = rng.randrange(7)
    if kind == 0:
        return unicodedata.normalize("NFD", s)
    if kind == 1:
        return s.upper()
    if kind == 2:
        i = rng.randrange(len(s) + 1)
        return s[:i] + rng.choice(SPECIALS) + s[i:]
    if kind == 3:
        return s + " " * rng.randint(1, 40) + "\n" * rng.randint(0, 5) + s
    if kind == 4:
        return "".join(str(rng.randint(0, 9)) for _ in range(rng.randint(1, 300))) + s
    if kind == 5:
        return s.replace(" ", rng.choice(["\t", "  ", "\u00a0", "\u2009", " \n "]))
    return s


def stdlib_code(limit):
    root = sysconfig.get_paths()["stdlib"]
    names = sorted(n for n in os.listdir(root) if n.endswith(".py"))
    out, total = [], 0
    for n in names:
        with open(os.path.join(root, n), encoding="utf-8", errors="replace") as f:
            text = f.read()
        for i in range(0, len(text), 4000):
            out.append(text[i:i + 4000])
            total += len(out[-1])
        if total >= limit:
            break
    return out


def items(n_bytes=2_000_000, seed=1234):
    rng = random.Random(seed)
    out = stdlib_code(n_bytes // 2)
    out += CODE + SENTENCES + SPECIALS
    out += ["", " ", "\n", "\r\n", " " * 1000, "\t" * 300, "\n" * 200, "0" * 5000,
            "a" * 3000, "!" * 2000, " \n" * 500, "<|im_start|>" * 50, "e\u0301" * 100,
            "\u200d" * 50, "👍🏻" * 100, "'s'S'" * 100]
    size = sum(len(s.encode()) for s in out)
    while size < n_bytes:
        r = rng.random()
        if r < 0.4:
            s = mutated(rng, rng.choice(SENTENCES + CODE))
        elif r < 0.7:
            s = random_text(rng, rng.randint(1, 400))
        else:
            s = " ".join(mutated(rng, rng.choice(SENTENCES)) for _ in range(rng.randint(2, 12)))
        out.append(s)
        size += len(s.encode())
    return out
