#!/usr/bin/env python3
"""Schemathesis (property-based API testing, PyPI) against `ninfer serve`'s own OpenAPI
description (GET /openapi.json, with the API key): for every operation it sends schema-derived
valid and invalid requests (coverage and fuzzing phases, a fixed seed, a bounded number of
examples) plus undeclared methods and requests without the key, and checks that no response is
a server error, that every status and content type is one the description declares, and that
every body (JSON, and each SSE event of the streams) conforms to the declared schema. Afterwards
the server must be alive, healthy, and have logged no 5xx.

positive_data_acceptance and negative_data_rejection are not run: the chat template's rules (a
user turn, role order) and the server's leniency (null reads as absent, unknown fields are
ignored) are not expressed in the description."""
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from server_util import KEY, Server  # noqa: E402

CHECKS = ["not_a_server_error", "status_code_conformance", "content_type_conformance",
          "response_headers_conformance", "response_schema_conformance", "unsupported_method",
          "missing_required_header", "ignored_auth"]
MAX_EXAMPLES = 30
SEED = 20261130


class Schemathesis(unittest.TestCase):
    def test_openapi_conformance(self):
        # a small context and default max_tokens keep each generated request cheap
        server = Server("--max-context", "128", "--default-max-tokens", "8")
        try:
            st = os.path.join(os.path.dirname(sys.executable), "st")
            with tempfile.TemporaryDirectory() as work:
                cmd = [st, "run", server.url + "/openapi.json",
                       "--header", "Authorization: Bearer " + KEY,
                       "--checks", ",".join(CHECKS), "--max-examples", str(MAX_EXAMPLES),
                       "--seed", str(SEED), "--generation-database", "none",
                       "--suppress-health-check", "all", "--workers", "1",
                       "--request-timeout", "60", "--no-color", "--output-truncate", "false"]
                start = time.time()
                run = subprocess.run(cmd, cwd=work, capture_output=True, text=True,
                                     timeout=600, env=dict(os.environ, NO_COLOR="1"))
                seconds = time.time() - start
            out = run.stdout + run.stderr
            summary = re.search(r"(\d+) generated, .*", out)
            print(f"schemathesis: {summary.group(0) if summary else '?'} "
                  f"({seconds:.0f} s)", file=sys.stderr)
            self.assertEqual(run.returncode, 0, out[-20000:])
            self.assertIn("Tested: 14", out)
            self.assertTrue(summary and int(summary.group(1)) >= 500, out[-3000:])

            self.assertIsNone(server.proc.poll(), "the server died")
            with urllib.request.urlopen(server.url + "/health", timeout=5) as r:
                self.assertEqual(json.loads(r.read()), {"status": "ok"})
            records = server.log_records()
            self.assertGreater(len(records), 500)
            errors = [r for r in records if r["status"] >= 500]
            self.assertEqual(errors, [])
            statuses = {}
            for r in records:
                statuses[r["status"]] = statuses.get(r["status"], 0) + 1
            print(f"server statuses: {dict(sorted(statuses.items()))}", file=sys.stderr)
            self.assertGreater(statuses.get(200, 0), 100)  # not all refused
        finally:
            self.assertEqual(server.stop(), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
