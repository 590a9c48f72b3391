#!/usr/bin/env python3
"""Builds the demo model's training corpus from permissively licensed Python source on this
machine: the installed distributions whose license metadata (importlib.metadata) is MIT, BSD,
Apache-2.0 or PSF, plus the Python standard library (PSF-2.0). Deterministic for a given set of
installed packages.

Writes to OUT:
  train.jsonl    one document per line: {"text", "kind": "code"|"chat", "source"}
  val.txt        held-out source files (whole files, about 1%), joined by <|endoftext|>
  packages.json  every distribution considered: name, version, license and why it was taken or
                 left out; corpus sizes

Documents are whole .py files (prefixed with a "# path" line), and instruction pairs rendered
with the demo's chat template (common.chatml_pair), each with a short closed reasoning (one
sentence or empty: `<think>\n...\n</think>\n\n`):
  code pairs   a documented function's docstring summary (and signature) -> the function, fenced;
  qa pairs     question -> one-sentence answer: what a function, class or module of the train
               files does (its docstring's first sentence), which arguments a function takes,
               which stdlib module defines a function, and the value of small Python
               expressions (computed by evaluating them).
Pairs come from the train files only, one answer per question. Files are deduplicated by
content. When the
sources hold more than --max-mb, each source is cut to a common per-source quota (water filling,
files taken in a fixed hash order), so no single package dominates.

usage: build_corpus.py --out DIR [--max-mb 160] [--val-mb 0.5] [--pairs-fraction 0.25]
                       [--qa-share 0.3] [--expr-pairs 20000]
"""
import argparse
import ast
import hashlib
import importlib.metadata as md
import json
import os
import re
import sys
import sysconfig
import textwrap
from concurrent.futures import ProcessPoolExecutor

from common import EOS, chatml_pair, stable_hash, write_json

# SPDX ids (and the families of free-text names) accepted: MIT, BSD, Apache-2.0, PSF.
ALLOWED_SPDX = {"MIT", "MIT-0", "BSD-2-Clause", "BSD-3-Clause", "0BSD", "Apache-2.0",
                "PSF-2.0", "Python-2.0"}
FREE_TEXT = [  # (regex on a lower-cased short License field or classifier, SPDX family)
    (r"^(the )?mit( license)?$", "MIT"),
    (r"^(new |modified |simplified |revised )?bsd([- ][23][- ]clause)?( license)?$",
     "BSD-3-Clause"),
    (r"^bsd[- ]([23])[- ]clause( license)?$", "BSD-3-Clause"),
    (r"^apache( software)?( license)?,?( version)? ?2(\.0)?( license)?$", "Apache-2.0"),
    (r"^apache-2\.0$", "Apache-2.0"),
    (r"^apache software license$", "Apache-2.0"),
    (r"^(psf|psfl|python software foundation)( license)?(-2\.0)?$", "PSF-2.0"),
]
MAX_FILE_BYTES = 200_000  # larger .py files are mostly generated tables
MIN_FILE_BYTES = 200
MAX_LINE = 1000           # minified or generated code
# Vendored third-party code carries its own licenses (pip/_vendor holds MPL-2.0 certifi, say).
VENDORED = {"_vendor", "vendor", "_vendored", "vendored", "_extern", "extern", "third_party",
            "_bundled", "bundled"}
STDLIB_SKIP = {"test", "tests", "idlelib", "turtledemo", "lib2to3", "ensurepip", "site-packages",
               "dist-packages", "__pycache__", "tkinter", "venv"}


def spdx_ok(expr):
    """An SPDX expression is accepted when every AND term has an accepted alternative."""
    expr = expr.replace("(", " ").replace(")", " ")
    for term in re.split(r"\s+AND\s+", expr.strip()):
        options = [o.strip() for o in re.split(r"\s+OR\s+", term) if o.strip()]
        if not any(o.replace("-or-later", "").replace("-only", "") in ALLOWED_SPDX
                   for o in options):
            return False
    return True


def free_text_family(text):
    t = " ".join(text.lower().replace("license ::", "").split())
    for pattern, family in FREE_TEXT:
        if re.match(pattern, t):
            return family
    return None


def classify(meta):
    """(license, None) when accepted, (None, reason) when not."""
    expr = meta.get("License-Expression")
    if expr:
        return (expr, None) if spdx_ok(expr) else (None, f"License-Expression {expr}")
    found = []
    for c in meta.get_all("Classifier") or []:
        if not c.startswith("License ::"):
            continue
        name = c.split("::")[-1].strip()
        family = free_text_family(name)
        if family is None:
            return None, f"classifier {c}"
        found.append(family)
    text = (meta.get("License") or "").strip()
    if text:
        first = next((line.strip() for line in text.splitlines() if line.strip()), "")
        family = free_text_family(first)  # a long field is the license text: its title line
        if family is None and len(text) <= 100:
            return None, f"License {text!r}"
        if family:
            found.append(family)
    if not found:
        return None, "no license metadata"
    return " AND ".join(sorted(set(found))), None


def distribution_sources(excluded):
    """[(name, version, license, [(relpath, abspath, size)])] for the accepted distributions."""
    seen, out = set(), []
    dists = sorted(md.distributions(), key=lambda d: (d.metadata["Name"] or "").lower())
    for d in dists:
        name = d.metadata["Name"]
        key = re.sub(r"[-_.]+", "-", (name or "").lower())
        if not name or key in seen:
            continue  # the first on sys.path wins, as for imports
        seen.add(key)
        lic, reason = classify(d.metadata)
        if lic is None:
            excluded.append(dict(name=name, version=d.version, reason=reason))
            continue
        files = []
        for f in d.files or []:
            rel = str(f)
            parts = set(rel.replace("\\", "/").split("/"))
            if not rel.endswith(".py") or ".dist-info" in rel or rel.startswith("..") \
                    or parts & VENDORED:
                continue
            path = str(d.locate_file(f))
            if os.path.isfile(path):
                files.append((rel, path, os.path.getsize(path)))
        if not files:
            excluded.append(dict(name=name, version=d.version, reason="no .py files"))
            continue
        out.append((name, d.version, lic, files))
    return out


def stdlib_source():
    root = sysconfig.get_paths()["stdlib"]
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(x for x in dirnames if x not in STDLIB_SKIP)
        for fn in sorted(filenames):
            if fn.endswith(".py"):
                path = os.path.join(dirpath, fn)
                files.append((os.path.relpath(path, root), path, os.path.getsize(path)))
    version = ".".join(map(str, sys.version_info[:3]))
    return ("python-stdlib", version, "PSF-2.0", files)


def water_level(sizes, total):
    """The largest per-source quota q with sum(min(size, q)) <= total."""
    if sum(sizes) <= total:
        return max(sizes, default=0)
    lo, hi = 0, max(sizes)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if sum(min(s, mid) for s in sizes) <= total:
            lo = mid
        else:
            hi = mid - 1
    return lo


def read_source_file(path):
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
        if not MIN_FILE_BYTES <= len(raw) <= MAX_FILE_BYTES:
            return None
        text = raw.decode("utf-8").replace("\r\n", "\n")
    except (OSError, UnicodeDecodeError):
        return None
    if "\x00" in text or max(map(len, text.splitlines()), default=0) > MAX_LINE:
        return None
    return text


# Instruction pairs, rendered with the chat template (common.chatml_pair): the user turn, the
# answer, and a short closed reasoning (one sentence, or empty as the no-thinking prompt ends),
# so that the model learns to close </think> and to stop after its answer.
CODE_PROMPTS = [
    "Write a Python function `{name}` that does the following: {summary}",
    "{summary}\nWrite this as a Python function named `{name}`.",
    "Implement `{name}` in Python. {summary}",
    "Can you write `{name}`? {summary}",
    "Write a Python function {signature} that {lowered}",
    "Write a function `{signature}` in Python: {summary}",
    "Please implement {signature}. {summary}",
    "Write a Python function {name}({args}). {summary}",
]
CODE_THOUGHTS = [
    "", "", "",
    "The user wants a Python function `{name}`.",
    "I will write `{name}` as a short Python function.",
    "A single function `{name}` is enough.",
    "I need to implement {signature}.",
]
QA_THOUGHTS = ["", "", "A short answer is enough.", "This needs a one-line answer.",
               "The answer is short."]


def module_name(rel):
    """torch/nn/functional.py -> torch.nn.functional; json/__init__.py -> json."""
    name = rel.replace("\\", "/")[:-3]
    if name.endswith("/__init__"):
        name = name[:-len("/__init__")]
    return name.replace("/", ".")


def first_sentence(summary):
    m = re.match(r"(.+?[.!?])(\s|$)", summary)
    return (m.group(1) if m else summary).strip()


def lower_first(text):
    return text[:1].lower() + text[1:] if text[1:2].islower() or len(text) == 1 else text


def arg_names(node):
    a = node.args
    names = [x.arg for x in a.posonlyargs + a.args if x.arg not in ("self", "cls")]
    if a.vararg:
        names.append("*" + a.vararg.arg)
    names += [x.arg for x in a.kwonlyargs]
    if a.kwarg:
        names.append("**" + a.kwarg.arg)
    return names


def say_list(items):
    items = [f"`{x}`" for x in items]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def pick(options, key):
    return options[stable_hash(key) % len(options)]


def function_pairs(text, rel):
    """Instruction pairs from one source file: (user, answer, thinking, kind) with kind "code"
    (a documented function's docstring summary -> the function) or "qa" (a question about a
    function, class or module of the file -> a one-sentence answer taken from its docstring or
    signature); and the names of its public top-level functions."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return [], []
    module = module_name(rel)
    lines = text.splitlines(keepends=True)
    pairs, public = [], []
    mod_doc = ast.get_docstring(tree)
    if mod_doc and not module.split(".")[-1].startswith("_"):
        summary = first_sentence(" ".join(mod_doc.strip().split("\n\n")[0].split()))
        if 16 <= len(summary) <= 300:
            q = pick(["What is the Python module `{m}` for?", "What does the module `{m}` do?",
                      "Briefly, what is `{m}`?"], module).format(m=module)
            pairs.append((q, summary, pick(QA_THOUGHTS, q), "qa"))
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                and not node.name.startswith("_"):
            public.append(node.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            doc = ast.get_docstring(node)
            summary = first_sentence(" ".join((doc or "").strip().split("\n\n")[0].split()))
            if 16 <= len(summary) <= 300:
                q = pick(["What is `{c}` in `{m}`?", "What does the class `{m}.{c}` represent?",
                          "In Python's `{m}`, what is the `{c}` class?"],
                         module + node.name).format(c=node.name, m=module)
                pairs.append((q, summary, pick(QA_THOUGHTS, q), "qa"))
            continue
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        doc = ast.get_docstring(node)
        if not doc or node.name.startswith("__"):
            continue
        summary = " ".join(doc.strip().split("\n\n")[0].split())
        if not 24 <= len(summary) <= 400:
            continue
        args = arg_names(node)
        key = module + "." + node.name + summary
        sentence = first_sentence(summary)
        q = pick(["What does `{f}` in `{m}` do?", "What does the function `{m}.{f}` do?",
                  "Explain `{f}` from `{m}` in one sentence."], key).format(f=node.name, m=module)
        pairs.append((q, sentence, pick(QA_THOUGHTS, q), "qa"))
        q = pick(["What arguments does `{m}.{f}` take?", "Which parameters does `{f}` in `{m}` "
                  "have?"], "args" + key).format(f=node.name, m=module)
        a = (f"`{node.name}` takes {say_list(args)}." if args else
             f"`{node.name}` takes no arguments.")
        pairs.append((q, a, pick(QA_THOUGHTS, "args" + q), "qa"))
        start = min([node.lineno] + [d.lineno for d in node.decorator_list])
        code = textwrap.dedent("".join(lines[start - 1:node.end_lineno])).rstrip()
        if not 80 <= len(code) <= 1200:
            continue
        signature = f"{node.name}({', '.join(args)})"
        fields = dict(name=node.name, summary=summary, signature=signature, args=", ".join(args),
                      lowered=lower_first(summary))
        prompt = pick(CODE_PROMPTS, node.name + summary).format(**fields)
        thought = pick(CODE_THOUGHTS, "t" + node.name + summary).format(**fields)
        pairs.append((prompt, f"```python\n{code}\n```", thought, "code"))
    return pairs, public


WORDS = ["apple", "banana", "cherry", "delta", "echo", "python", "stack", "queue", "tree",
         "graph", "node", "list", "value", "river", "stone", "cloud", "light", "data", "code",
         "alpha", "omega", "green", "blue", "red", "seven", "hello", "world", "lemon", "mango"]


SAFE_BUILTINS = {f.__name__: f for f in (len, sorted, max, min, sum, list, range, abs, int, str,
                                          bool, type)}


def expression_pairs(count, seed=0):
    """Questions about small Python expressions, answered with the value Python computes
    (deterministic for a seed): arithmetic, strings, lists, ranges, builtins."""
    import random
    rng = random.Random(seed)
    out = []

    def ints(n, lo=0, hi=20):
        return [rng.randint(lo, hi) for _ in range(n)]

    makers = [
        lambda: f"{rng.randint(1, 50)} {rng.choice('+-*')} {rng.randint(1, 50)} "
                f"{rng.choice('+-*')} {rng.randint(1, 9)}",
        lambda: f"{rng.randint(10, 99)} // {rng.randint(2, 9)}",
        lambda: f"{rng.randint(10, 99)} % {rng.randint(2, 9)}",
        lambda: f"2 ** {rng.randint(0, 12)}",
        lambda: f"len({rng.choice(WORDS)!r})",
        lambda: f"{rng.choice(WORDS)!r}.upper()",
        lambda: f"{rng.choice(WORDS)!r}[::-1]",
        lambda: f"{rng.choice(WORDS)!r}[{rng.randint(0, 3)}]",
        lambda: f"sorted({ints(rng.randint(3, 6))})",
        lambda: f"max({ints(rng.randint(3, 6))})",
        lambda: f"min({ints(rng.randint(3, 6))})",
        lambda: f"sum({ints(rng.randint(2, 5))})",
        lambda: f"len({ints(rng.randint(0, 7))})",
        lambda: f"list(range({rng.randint(0, 4)}, {rng.randint(5, 9)}))",
        lambda: f"[x * x for x in range({rng.randint(1, 6)})]",
        lambda: f"{'-'.join(rng.sample(WORDS, 3))!r}.split('-')",
        lambda: f"' '.join({rng.sample(WORDS, 3)})",
        lambda: f"abs({rng.randint(-99, -1)})",
        lambda: f"int({str(rng.randint(0, 999))!r}) + {rng.randint(1, 9)}",
        lambda: f"str({rng.randint(0, 9)}) * {rng.randint(2, 4)}",
        lambda: f"bool({rng.choice(['0', '1', '[]', '[0]', repr(''), repr('a'), 'None'])})",
        lambda: f"{rng.randint(0, 20)} {rng.choice(['<', '>', '==', '!=', '<=', '>='])} "
                f"{rng.randint(0, 20)}",
        lambda: f"{ints(rng.randint(3, 6))}[{rng.choice(['0', '-1', '1:3', '::2'])}]",
        lambda: f"type({rng.choice(['1', '1.5', repr('x'), '[]', '{}', '()', 'None'])}).__name__",
        lambda: f"{rng.choice(WORDS)!r}.count({rng.choice('aeiou')!r})",
        lambda: f"{{k: len(k) for k in {rng.sample(WORDS, 2)}}}",
    ]
    questions = ["What is the value of `{e}` in Python?", "What does `{e}` evaluate to?",
                 "In Python, what is `{e}`?", "What does Python print for `print({e})`?"]
    seen = set()
    for _ in range(count * 3):
        if len(out) >= count:
            break
        expr = rng.choice(makers)()
        if expr in seen:
            continue
        seen.add(expr)
        try:
            value = eval(expr, {"__builtins__": SAFE_BUILTINS})  # our own expressions only
        except (IndexError, ValueError, ZeroDivisionError):
            continue
        q = rng.choice(questions).format(e=expr)
        shown = str(value) if q.startswith("What does Python print") else repr(value)
        a = rng.choice(["`{v}`", "It is `{v}`.", "`{v}`.", "The result is `{v}`."]).format(v=shown)
        out.append((q, a, rng.choice(QA_THOUGHTS), "qa"))
    return out


def stdlib_module_pairs(names_by_module):
    """"Which standard-library module provides `f`?" for the public top-level functions defined
    in exactly one public stdlib module."""
    owners = {}
    for module, names in names_by_module.items():
        if any(part.startswith("_") for part in module.split(".")):
            continue
        for n in set(names):
            owners.setdefault(n, []).append(module)
    out = []
    for name, modules in sorted(owners.items()):
        if len(modules) != 1 or len(name) < 4:
            continue
        q = pick(["Which Python standard library module provides `{f}`?",
                  "Where is `{f}` defined in the Python standard library?",
                  "Which module do I import `{f}` from?"], name).format(f=name)
        a = pick(["`{f}` is in the `{m}` module.", "The `{m}` module: `from {m} import {f}`.",
                  "It is defined in `{m}`."], "a" + name).format(f=name, m=modules[0])
        out.append((q, a, pick(QA_THOUGHTS, q), "qa"))
    return out


def load_file(item):
    """Worker: (source, relpath, path) -> (text, pairs, public names) or None."""
    _source, rel, path = item
    text = read_source_file(path)
    if text is None:
        return None
    pairs, public = function_pairs(text, rel)
    return text, pairs, public


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--max-mb", type=float, default=160.0, help="source text budget")
    ap.add_argument("--val-mb", type=float, default=0.5, help="held-out text budget")
    ap.add_argument("--val-permille", type=int, default=10, help="files held out, per mille")
    ap.add_argument("--pairs-fraction", type=float, default=0.25,
                    help="instruction pairs, as a fraction of the code bytes")
    ap.add_argument("--qa-share", type=float, default=0.3,
                    help="of the pair bytes, the share of question -> short answer pairs")
    ap.add_argument("--expr-pairs", type=int, default=20000,
                    help="questions about Python expressions (answered by evaluating them)")
    ap.add_argument("--no-stdlib", action="store_true")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    excluded = []
    sources = distribution_sources(excluded)
    if not args.no_stdlib:
        sources.append(stdlib_source())
    sources.sort(key=lambda s: s[0].lower())
    quota = water_level([sum(f[2] for f in s[3]) for s in sources], int(args.max_mb * 2**20))

    # Files of each source in a fixed pseudo-random order, up to the quota (by size on disk).
    items = []
    for name, _version, _lic, files in sources:
        used = 0
        for rel, path, size in sorted(files, key=lambda f: (stable_hash(name + "/" + f[0]), f[0])):
            if size > MAX_FILE_BYTES or used + size > quota:
                continue
            used += size
            items.append((name, rel, path))
    with ProcessPoolExecutor(max_workers=max(1, args.workers)) as pool:
        loaded = list(pool.map(load_file, items, chunksize=32))

    seen = set()
    per_source = {s[0]: dict(files=0, bytes=0, pairs=0) for s in sources}
    train, val_docs, pairs, stdlib_names = [], [], [], {}
    val_bytes, val_cap = 0, int(args.val_mb * 2**20)
    for (name, rel, _path), result in zip(items, loaded):
        if result is None:
            continue
        text, file_pairs, public = result
        digest = hashlib.sha1(text.encode("utf-8")).digest()
        if digest in seen:
            continue
        seen.add(digest)
        doc = f"# {rel}\n{text}"
        held_out = stable_hash("val:" + name + "/" + rel) % 1000 < args.val_permille
        if held_out and val_bytes + len(doc) <= val_cap:
            val_docs.append(doc)
            val_bytes += len(doc)
            continue
        if held_out:
            continue  # over the validation budget: dropped, so train never sees held-out files
        train.append(dict(text=doc, kind="code", source=name))
        per_source[name]["files"] += 1
        per_source[name]["bytes"] += len(doc)
        pairs.extend((stable_hash(u + a), name) + p for p in file_pairs
                     for u, a in [p[:2]])
        if name == "python-stdlib":
            stdlib_names[module_name(rel)] = public
    pairs.extend((stable_hash(p[0] + p[1]), "python-stdlib") + p
                 for p in stdlib_module_pairs(stdlib_names))
    pairs.extend((stable_hash(p[0] + p[1]), "generated") + p
                 for p in expression_pairs(args.expr_pairs))

    code_bytes = sum(len(d["text"]) for d in train)
    pair_budget = int(code_bytes * args.pairs_fraction)
    budgets = dict(qa=int(pair_budget * args.qa_share))
    budgets["code"] = pair_budget - budgets["qa"]
    used, counts, questions = dict(code=0, qa=0), dict(code=0, qa=0), set()
    per_source["generated"] = dict(files=0, bytes=0, pairs=0)
    for _h, name, user, answer, thinking, kind in sorted(pairs):
        if user in questions:
            continue  # one answer per question (overloads, copies of a function)
        text = chatml_pair(user, answer, thinking)
        if used[kind] + len(text) > budgets[kind]:
            continue
        questions.add(user)
        used[kind] += len(text)
        counts[kind] += 1
        train.append(dict(text=text, kind="chat", source=name))
        per_source[name]["pairs"] += 1
    # Documents in a fixed shuffled order (training samples windows of the concatenation).
    train.sort(key=lambda d: stable_hash(d["kind"] + d["text"][:4096]))

    with open(os.path.join(args.out, "train.jsonl"), "w", encoding="utf-8") as f:
        for d in train:
            f.write(json.dumps(d, ensure_ascii=False) + "\n")
    with open(os.path.join(args.out, "val.txt"), "w", encoding="utf-8") as f:
        f.write(EOS.join(val_docs))
    packages = [dict(name=n, version=v, license=lic, **per_source[n])
                for n, v, lic, _files in sources if per_source[n]["files"]]
    manifest = dict(
        python=sys.version.split()[0], accepted_licenses="MIT, BSD, Apache-2.0, PSF (SPDX: "
        + ", ".join(sorted(ALLOWED_SPDX)) + ")",
        quota_bytes_per_source=quota, train_docs=len(train), train_code_bytes=code_bytes,
        train_chat_docs=sum(d["kind"] == "chat" for d in train),
        train_chat_bytes=sum(used.values()), train_pairs=counts, train_pair_bytes=used,
        generated_pairs=per_source["generated"]["pairs"],
        val_docs=len(val_docs), val_bytes=val_bytes, packages=packages,
        excluded=sorted(excluded, key=lambda e: e["name"].lower()))
    write_json(os.path.join(args.out, "packages.json"), manifest)
    print(f"corpus: {len(packages)} sources, {len(train)} train docs "
          f"({code_bytes / 2**20:.1f} MiB code + {used['code'] / 2**20:.1f} MiB of "
          f"{counts['code']} code pairs + {used['qa'] / 2**20:.1f} MiB of {counts['qa']} "
          f"question pairs), "
          f"{len(val_docs)} val docs ({val_bytes / 2**20:.2f} MiB), "
          f"{len(excluded)} distributions left out", flush=True)


if __name__ == "__main__":
    main()
