#!/usr/bin/env python3
"""One line per result of a `ninfer bench -o json` file, for the GPU scripts' logs.

  python3 tools/gpu/bench_lines.py FILE [--label TEXT]

A header (weights, dtype of the KV cache and the GDN state, KV bytes, the copy ceiling), then each
test: prefill tok/s and TFLOP/s, decode tok/s with its roofline fraction and the bytes a step
reads. With --label, every line starts with it. A file that is not bench JSON prints why, and
the exit status stays 0 (the script's own bench step reports its failure).
"""
import argparse
import json


def lines(j):
    mem = j.get("memory_bytes", {})
    head = [str(j.get("weights")), f"kv {j.get('kv_dtype')}", f"state {j.get('gdn_state_dtype')}"]
    if "weights" in mem:
        head.append("weights %.1f GB" % (mem["weights"] / 1e9))
    if "kv_cache" in mem:
        head.append("kv cache %.2f GB" % (mem["kv_cache"] / 1e9))
    if "copy_bytes_per_s" in j.get("ceilings", {}):
        head.append("copy %.0f GB/s" % (j["ceilings"]["copy_bytes_per_s"] / 1e9))
    yield ", ".join(head)
    for r in j.get("results", []):
        s = r["test"] + (f" batch {r['batch']}" if r.get("batch", 1) > 1 else "")
        if "prefill_tok_s" in r:
            s += " prefill %.0f tok/s" % r["prefill_tok_s"]["mean"]
            if "prefill_tflops" in r:
                s += " (%.1f TFLOP/s" % r["prefill_tflops"]["mean"]
                if "prefill_gemm_fraction" in r:
                    s += ", %.1f%% of GEMM" % (100 * r["prefill_gemm_fraction"]["mean"])
                s += ")"
        if "decode_tok_s" in r:
            s += " decode %.1f tok/s (%.1f%% roofline" % (
                r["decode_tok_s"]["mean"], 100 * r["decode_roofline_fraction"]["mean"])
            if "decode_bytes_per_step" in r:
                s += ", %.2f GB/step" % (r["decode_bytes_per_step"] / 1e9)
            s += ")"
        yield "  " + s


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("file")
    ap.add_argument("--label", default="")
    a = ap.parse_args()
    try:
        j = json.load(open(a.file))
    except Exception as e:  # a failed bench leaves no or partial JSON
        print(f"{a.label + ' ' if a.label else ''}no json: {e}")
        return
    for line in lines(j):
        print(f"{a.label} {line}" if a.label else line)


if __name__ == "__main__":
    main()
