#!/usr/bin/env python3
"""The layering of docs/ARCHITECTURE.md, checked: every `#include "dir/file.h"` in src/ and apps/
must name a layer its directory may depend on. Every target shares one include path (src/ and
include/), so the compiler alone would accept an include that points upwards; this check fails
the test suite instead (ctest `layering`). Exit 1 with one line per wrong include.

  python3 tools/check_layers.py [ROOT]
"""
import os
import re
import sys

# What each layer may include (its own directory always). "ninfer/x.h" is the public API in
# include/ninfer; the lower layers may see only the headers named here.
ALLOWED = {
    "src/core": {"core", "ninfer/error.h"},
    "src/io": {"io", "core", "ninfer/error.h"},
    "src/text": {"text", "core", "ninfer/error.h", "ninfer/token_constraint.h"},
    "src/media": {"media", "core", "ninfer/error.h"},
    "src/ops": {"ops", "core", "ninfer/error.h"},
    "src/model": {"model", "ops", "io", "core", "ninfer/error.h"},
    "src/runtime": {"runtime", "model", "ops", "io", "core", "ninfer"},
    "src/server": {"server", "text", "media", "core", "ninfer"},
    "apps/ninfer": {"core", "server", "text", "media", "ninfer"},
}
# The CLI's inspection commands reach lower, each for what ARCHITECTURE.md says.
APP_FILES = {
    "apps/ninfer/cmd_info.cpp": {"io", "model", "runtime/placement.h", "runtime/route_selection.h"},
    "apps/ninfer/cmd_tune.cpp": {"runtime/route_selection.h", "runtime/route_tuner.h"},
    "apps/ninfer/cmd_bench.cpp": {"io", "model", "ops/memory.h", "runtime/route_selection.h"},
    "apps/ninfer/cmd_convert.cpp": {"model/convert.h"},
    "apps/ninfer/cmd_serve.cpp": {"io"},
    "apps/ninfer/cmd_chat.cpp": {"ops/cpu/threads.h"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/([^"]+)"', re.M)
SOURCES = (".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh")


def allowed(rules, layer, header):
    return layer in rules or f"{layer}/{header}" in rules


def check(root):
    bad = []
    for base, rules in ALLOWED.items():
        for dirpath, _, files in os.walk(os.path.join(root, base)):
            for name in sorted(files):
                if not name.endswith(SOURCES):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                file_rules = rules | APP_FILES.get(rel, set())
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                for m in INCLUDE.finditer(text):
                    layer, header = m.group(1), m.group(2)
                    if not os.path.isdir(os.path.join(root, "src", layer)) and layer != "ninfer":
                        continue  # a sibling file's subdirectory ("jinja/x.h"), not a layer
                    if not allowed(file_rules, layer, header):
                        line = text.count("\n", 0, m.start()) + 1
                        bad.append(f"{rel}:{line}: includes {layer}/{header}, outside what "
                                   f"{base} may depend on ({', '.join(sorted(file_rules))})")
    return bad


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))
    bad = check(root)
    for line in bad:
        print(line)
    if bad:
        print(f"{len(bad)} include(s) break the layering of docs/ARCHITECTURE.md")
        return 1
    print("layering: every include points to a layer its directory may use")
    return 0


if __name__ == "__main__":
    sys.exit(main())
