#!/usr/bin/env python3
"""Chat-template oracle: `ninfer render` against Python jinja2 configured exactly as HF
transformers renders chat templates (sandboxed, trim_blocks, lstrip_blocks, loopcontrols, HF's
tojson, raise_exception, strftime_now). Every template in tests/text/templates (and in
$NINFER_EXTRA_TEMPLATES, a folder of *.jinja, when set) is rendered over every conversation of
conversations.py; outputs must be byte-identical, and a case that fails in jinja2 must fail in
ninfer. Also a table of small templates exercising the interpreter's features.

env: NINFER_BIN, NINFER_SOURCE_DIR
"""
import glob
import json
import os
import subprocess
import sys
import unittest

ROOT = os.environ["NINFER_SOURCE_DIR"]
sys.path.insert(0, os.path.join(ROOT, "tests", "text"))
import conversations  # noqa: E402
import template_snippets  # noqa: E402

NINFER = os.environ["NINFER_BIN"]


def hf_environment():
    import jinja2
    from jinja2 import nodes
    from jinja2.ext import Extension, loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Generation(Extension):  # HF's AssistantTracker, minus the index tracking
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

        def _render(self, caller):
            return caller()

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[Generation, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


def jinja2_render(env, source, case):
    try:
        tpl = env.from_string(source)
        return tpl.render(messages=case["messages"], tools=case.get("tools"),
                          add_generation_prompt=case.get("add_generation_prompt", True),
                          **case.get("variables", {}))
    except Exception as e:  # noqa: BLE001 - any jinja2 failure must be a ninfer error too
        return {"error": repr(e)}


def ninfer_render(template_file, cases):
    data = "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cases)
    out = subprocess.run([NINFER, "render", "--template", template_file, "--jsonl"],
                         input=data.encode(), capture_output=True)
    if out.returncode != 0:  # the template did not parse
        return [{"error": out.stderr.decode(errors="replace")}] * len(cases)
    return [json.loads(line) for line in out.stdout.decode().split("\n") if line]


def compare(test, env, source, template_file, cases):
    ours = ninfer_render(template_file, cases)
    test.assertEqual(len(ours), len(cases))
    n_ok = n_err = 0
    for i, (case, got) in enumerate(zip(cases, ours)):
        want = jinja2_render(env, source, case)
        with test.subTest(template=os.path.basename(template_file), case=i):
            if isinstance(want, dict):
                test.assertIsInstance(got, dict, f"jinja2 failed ({want['error']}) but ninfer rendered")
                n_err += 1
            else:
                test.assertEqual(got, want)
                n_ok += 1
    return n_ok, n_err


class QwenTemplates(unittest.TestCase):
    def test_templates_match_jinja2(self):
        env = hf_environment()
        files = sorted(glob.glob(os.path.join(ROOT, "tests", "text", "templates", "*.jinja")))
        extra = os.environ.get("NINFER_EXTRA_TEMPLATES")
        if extra:
            files += sorted(glob.glob(os.path.join(extra, "*.jinja")))
        self.assertGreaterEqual(len(files), 3)
        cases = conversations.cases()
        for f in files:
            with open(f, encoding="utf-8") as fh:
                source = fh.read()
            ok, err = compare(self, env, source, f, cases)
            print(f"{os.path.basename(f)}: {ok} identical renders, {err} matching errors",
                  file=sys.stderr)
            self.assertGreater(ok, 100)


class Snippets(unittest.TestCase):
    def test_snippets_match_jinja2(self):
        env = hf_environment()
        tmp = os.path.join(os.environ.get("NINFER_WORK_DIR", "/tmp"), "snippets")
        os.makedirs(tmp, exist_ok=True)
        for i, (source, variables) in enumerate(template_snippets.SNIPPETS):
            path = os.path.join(tmp, f"s{i}.jinja")
            with open(path, "w", encoding="utf-8") as f:
                f.write(source)
            case = {"messages": [], "variables": variables}
            compare(self, env, source, path, [case])


if __name__ == "__main__":
    unittest.main(verbosity=2)
