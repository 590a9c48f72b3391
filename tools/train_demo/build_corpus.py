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

Documents are whole .py files (prefixed with a "# path" line), and instruction pairs built from
them: a function's docstring summary as the user turn, the function as the answer, rendered with
the Qwen3.6 ChatML template (common.chatml_pair). Files are deduplicated by content. When the
sources hold more than --max-mb, each source is cut to a common per-source quota (water filling,
files taken in a fixed hash order), so no single package dominates.

usage: build_corpus.py --out DIR [--max-mb 160] [--val-mb 0.5] [--pairs-fraction 0.15]
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


PROMPTS = [
    "Write a Python function `{name}` that does the following: {summary}",
    "{summary}\nWrite this as a Python function named `{name}`.",
    "Implement `{name}` in Python. {summary}",
    "Can you write `{name}`? {summary}",
]


def function_pairs(text):
    """(user, answer) pairs from the documented functions of one source file."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    lines = text.splitlines(keepends=True)
    pairs = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        doc = ast.get_docstring(node)
        if not doc or node.name.startswith("__"):
            continue
        summary = " ".join(doc.strip().split("\n\n")[0].split())
        if not 24 <= len(summary) <= 400:
            continue
        start = min([node.lineno] + [d.lineno for d in node.decorator_list])
        code = textwrap.dedent("".join(lines[start - 1:node.end_lineno])).rstrip()
        if not 80 <= len(code) <= 1500:
            continue
        prompt = PROMPTS[stable_hash(node.name + summary) % len(PROMPTS)]
        pairs.append((prompt.format(name=node.name, summary=summary),
                      f"```python\n{code}\n```"))
    return pairs


def load_file(item):
    """Worker: (source, relpath, path) -> (text, pairs) or None."""
    _source, _rel, path = item
    text = read_source_file(path)
    if text is None:
        return None
    return text, function_pairs(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--max-mb", type=float, default=160.0, help="source text budget")
    ap.add_argument("--val-mb", type=float, default=0.5, help="held-out text budget")
    ap.add_argument("--val-permille", type=int, default=10, help="files held out, per mille")
    ap.add_argument("--pairs-fraction", type=float, default=0.15,
                    help="instruction pairs, as a fraction of the code bytes")
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
    train, val_docs, pairs = [], [], []
    val_bytes, val_cap = 0, int(args.val_mb * 2**20)
    for (name, rel, _path), result in zip(items, loaded):
        if result is None:
            continue
        text, file_pairs = result
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
        pairs.extend((stable_hash(u), name, u, a) for u, a in file_pairs)

    code_bytes = sum(len(d["text"]) for d in train)
    pair_budget = int(code_bytes * args.pairs_fraction)
    used = 0
    for _h, name, user, answer in sorted(pairs):
        text = chatml_pair(user, answer)
        if used + len(text) > pair_budget:
            break
        used += len(text)
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
        train_chat_docs=sum(d["kind"] == "chat" for d in train), train_chat_bytes=used,
        val_docs=len(val_docs), val_bytes=val_bytes, packages=packages,
        excluded=sorted(excluded, key=lambda e: e["name"].lower()))
    write_json(os.path.join(args.out, "packages.json"), manifest)
    print(f"corpus: {len(packages)} sources, {len(train)} train docs "
          f"({code_bytes / 2**20:.1f} MiB code + {used / 2**20:.1f} MiB chat pairs), "
          f"{len(val_docs)} val docs ({val_bytes / 2**20:.2f} MiB), "
          f"{len(excluded)} distributions left out", flush=True)


if __name__ == "__main__":
    main()
