#!/usr/bin/env python3
"""`ninfer convert --to w8|q4` against an independent reading of the documented layout
(docs/QUANTIZATION.md, "Groupwise INT8 and 4-bit weights"), in plain Python:
  - the quantizer: every code and scale ninfer wrote equals this file's quantization of the
    source weight, byte for byte (the signed-max rule, half-to-even rounding, nibble order);
  - the loader: this file dequantizes the codes into an F32 checkpoint, and `ninfer run` on it
    gives exactly the ids and logprobs of `ninfer run` on the converted checkpoint;
  - the recipe is recorded in config.json, the rest is copied, and the errors are clear.
Fixture dims are 32, 48, 64 and 96 columns; groups of 24 and 40 leave partial last groups."""
import json
import math
import os
import shutil
import struct
import subprocess
import tempfile
import unittest

NINFER = os.environ["NINFER_BIN"]
ROOT = os.environ["NINFER_SOURCE_DIR"]
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
ELEM = {"F32": 4, "BF16": 2, "F16": 2, "I8": 1, "U8": 1}


def read_safetensors(path):
    """{name: (dtype, shape, bytes)} of one safetensors file."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        a, b = e["data_offsets"]
        out[name] = (e["dtype"], e["shape"], data[a:b])
    return out


def read_checkpoint(d):
    out = {}
    for f in sorted(os.listdir(d)):
        if f.endswith(".safetensors"):
            out.update(read_safetensors(os.path.join(d, f)))
    return out


def write_safetensors(path, tensors):
    header, blobs, at = {}, [], 0
    for name in sorted(tensors):
        dtype, shape, raw = tensors[name]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def to_floats(dtype, raw):
    if dtype == "F32":
        return list(struct.unpack(f"<{len(raw) // 4}f", raw))
    if dtype == "F16":
        return list(struct.unpack(f"<{len(raw) // 2}e", raw))
    assert dtype == "BF16", dtype
    halves = struct.unpack(f"<{len(raw) // 2}H", raw)
    return list(struct.unpack(f"<{len(halves)}f", struct.pack(f"<{len(halves)}I",
                                                               *[h << 16 for h in halves])))


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def round_scale(x, dtype):
    """x (an f32 value) rounded to the scale dtype, and its stored bytes."""
    if dtype == "F32":
        raw = struct.pack("<f", x)
    elif dtype == "F16":
        raw = struct.pack("<e", x)
    else:  # BF16: round to nearest even on the f32 bits
        bits = struct.unpack("<I", struct.pack("<f", x))[0]
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
        raw = struct.pack("<H", bits)
    return to_floats(dtype, raw)[0], raw


def quantize(values, rows, cols, bits, group, scale_dtype):
    """The documented recipe: per group the signed value of largest magnitude m (the first on
    ties), s = round(m / -2^(bits-1)), q = clamp(round_half_even(w / s)); codes, scales bytes."""
    qmin, qmax = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    codes, scales = bytearray(), bytearray()
    for i in range(rows):
        row = values[i * cols:(i + 1) * cols]
        q_row = []
        for g in range(0, cols, group):
            chunk = row[g:g + group]
            m = 0.0
            for v in chunk:
                if abs(v) > abs(m):
                    m = v
            s, raw = round_scale(f32(m / qmin), scale_dtype)
            scales += raw
            q_row += [0 if s == 0 else min(qmax, max(qmin, round(v / s))) for v in chunk]
        if bits == 8:
            codes += struct.pack(f"<{cols}b", *q_row)
        else:
            q_row += [0] * (cols % 2)
            codes += bytes((q_row[j] + 8) | ((q_row[j + 1] + 8) << 4)
                           for j in range(0, len(q_row), 2))
    return bytes(codes), bytes(scales)


def dequantize(codes, scale_dtype, scale_raw, rows, cols, bits, group):
    scales = to_floats(scale_dtype, scale_raw)
    groups = (cols + group - 1) // group
    out = []
    for i in range(rows):
        for j in range(cols):
            if bits == 8:
                q = struct.unpack_from("<b", codes, i * cols + j)[0]
            else:
                q = ((codes[i * ((cols + 1) // 2) + j // 2] >> (4 * (j % 2))) & 0xF) - 8
            out.append(f32(q * scales[i * groups + j // group]))
    return out


def ninfer(*args):
    return subprocess.run([NINFER, *args], capture_output=True, text=True)


def greedy(model, *flags):
    r = ninfer("run", "--model", model, "--prompt-ids", "1,2,3,4,5,6,7", "--max-new", "12",
               "--greedy", "--json", "--top-logprobs", "4", *flags)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["tokens"]


class Groupwise(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ninfer_groupwise_")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def convert(self, fixture, to, *flags):
        out = os.path.join(self.tmp, f"{fixture}_{to}_{'_'.join(flags)}")
        r = ninfer("convert", "--model", os.path.join(FIXTURES, fixture), "--to", to,
                   "--out", out, *flags)
        self.assertEqual(r.returncode, 0, r.stderr)
        return out

    def check(self, fixture, to, group, scale_dtype, *flags):
        bits = 8 if to == "w8" else 4
        out = self.convert(fixture, to, *flags)
        with open(os.path.join(out, "config.json")) as f:
            cfg = json.load(f)
        q = cfg["quantization_config"]
        self.assertEqual((q["quant_method"], q["bits"], q["group_size"]),
                         ("ninfer_groupwise", bits, group))
        src, got = read_checkpoint(os.path.join(FIXTURES, fixture)), read_checkpoint(out)
        dense = {}
        quantized = 0
        for name, (dtype, shape, raw) in got.items():
            if name.endswith("_scale"):
                continue
            if dtype not in ("I8", "U8"):
                self.assertEqual((dtype, shape, raw), src[name], name)
                dense[name] = (dtype, shape, raw)
                continue
            quantized += 1
            sdtype, sshape, sraw = src[name]
            self.assertEqual(len(sshape), 2, name)
            rows, cols = sshape
            self.assertEqual(dtype, "I8" if bits == 8 else "U8", name)
            self.assertEqual(shape, [rows, cols if bits == 8 else (cols + 1) // 2], name)
            scale = got[name + "_scale"]
            self.assertEqual(list(scale[:2]), [scale_dtype, [rows, (cols + group - 1) // group]], name)
            want_codes, want_scales = quantize(to_floats(sdtype, sraw), rows, cols, bits, group,
                                               scale_dtype)
            self.assertEqual(raw, want_codes, f"{name}: codes differ from the recipe")
            self.assertEqual(scale[2], want_scales, f"{name}: scales differ from the recipe")
            values = dequantize(raw, scale_dtype, scale[2], rows, cols, bits, group)
            dense[name] = ("F32", [rows, cols], struct.pack(f"<{len(values)}f", *values))
        self.assertGreater(quantized, 0)
        # The same model with this file's dequantized weights: ninfer's loader must agree exactly.
        ref = os.path.join(self.tmp, "dequantized")
        shutil.rmtree(ref, ignore_errors=True)
        os.makedirs(ref)
        write_safetensors(os.path.join(ref, "model.safetensors"), dense)
        del cfg["quantization_config"]
        with open(os.path.join(ref, "config.json"), "w") as f:
            json.dump(cfg, f)
        self.assertEqual(greedy(out), greedy(ref))
        # Resident codes and scales (each op dequantizes on the CPU): the same f32 weights. The
        # GDN input projection splits into qkv|z (groupwise) and b|a (dense) there, and a BLAS
        # may sum two narrower products in another order: compared on the FP64 reference ops.
        self.assertEqual(greedy(out, "--group-weights", "resident", "--reference"),
                         greedy(out, "--reference"))
        return out

    def test_w8_partial_groups_f16(self):
        self.check("moe_vlm_per_expert", "w8", 40, "F16", "--group", "40")

    def test_q4_default_group(self):
        self.check("moe_vlm_per_expert", "q4", 32, "F16")

    def test_q4_partial_groups_bf16_scales_sharded_source(self):
        self.check("dense_text_sharded", "q4", 24, "BF16", "--group", "24", "--scale-dtype",
                   "bf16")

    def test_w8_default_group_f32_scales(self):
        self.check("dense_vlm_mtp", "w8", 64, "F32", "--scale-dtype", "f32")

    def test_random_resident_weights_run(self):
        # --random-weights with a groupwise config and --group-weights resident: random codes
        # and scales for every quantized projection (experts too), e.g. for true-size benches.
        for fixture in ("dense_text_sharded", "moe_vlm_per_expert"):
            with open(os.path.join(FIXTURES, fixture, "config.json")) as f:
                cfg = json.load(f)
            cfg["quantization_config"] = {"quant_method": "ninfer_groupwise", "bits": 4,
                                          "group_size": 32}
            path = os.path.join(self.tmp, f"{fixture}_q4.json")
            with open(path, "w") as f:
                json.dump(cfg, f)
            r = ninfer("bench", "--random-weights", "--config", path, "--group-weights",
                       "resident", "-p", "8", "-n", "4", "-r", "1", "-o", "json")
            self.assertEqual(r.returncode, 0, r.stderr)
            out = json.loads(r.stdout)
            self.assertEqual(out["weights"], "groupwise 4-bit, groups of 32 (resident)")
            decode = [x for x in out["results"] if "decode_tok_s" in x]
            self.assertTrue(decode and decode[0]["decode_tok_s"]["mean"] > 0, out["results"])
            # The codes really stay: the same config dequantized holds more bytes of weights.
            r = ninfer("bench", "--random-weights", "--config", path, "-p", "8", "-n", "4",
                       "-r", "1", "-o", "json")
            self.assertEqual(r.returncode, 0, r.stderr)
            dense = json.loads(r.stdout)["memory_bytes"]["weights"]
            self.assertLess(out["memory_bytes"]["weights"], 0.6 * dense, fixture)

    def test_errors_are_clear(self):
        q4 = self.convert("moe_vlm_per_expert", "q4")
        again = ninfer("convert", "--model", q4, "--to", "w8", "--out",
                       os.path.join(self.tmp, "again"))
        self.assertNotEqual(again.returncode, 0)
        self.assertIn("already a groupwise (4-bit) checkpoint", again.stderr)
        # The config must agree with the codes: present, and with their width.
        cfg_path = os.path.join(q4, "config.json")
        with open(cfg_path) as f:
            cfg = json.load(f)
        for edit, text in [(lambda c: c.pop("quantization_config"),
                            "but config.json has no ninfer_groupwise quantization_config"),
                           (lambda c: c["quantization_config"].update(bits=8),
                            "expected I8")]:
            changed = json.loads(json.dumps(cfg))
            edit(changed)
            with open(cfg_path, "w") as f:
                json.dump(changed, f)
            bad = ninfer("run", "--model", q4, "--prompt-ids", "1,2", "--max-new", "1")
            self.assertNotEqual(bad.returncode, 0)
            self.assertIn(text, bad.stderr)
        with open(cfg_path, "w") as f:
            json.dump(cfg, f)
        # A scale of the wrong shape names the tensor.
        tensors = read_checkpoint(q4)
        name = next(n for n in tensors if n.endswith("_scale"))
        dtype, shape, raw = tensors[name]
        tensors[name] = (dtype, [shape[0], shape[1] + 1], raw + raw[:shape[0] * ELEM[dtype]])
        for f in os.listdir(q4):
            if f.endswith(".safetensors"):
                os.remove(os.path.join(q4, f))
        write_safetensors(os.path.join(q4, "model.safetensors"), tensors)
        bad = ninfer("run", "--model", q4, "--prompt-ids", "1,2", "--max-new", "1")
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn(f"groupwise scale '{name}' has shape", bad.stderr)
        # A missing scale, too.
        del tensors[name]
        write_safetensors(os.path.join(q4, "model.safetensors"), tensors)
        bad = ninfer("run", "--model", q4, "--prompt-ids", "1,2", "--max-new", "1")
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn(f"has no scale '{name}'", bad.stderr)
        flag = ninfer("convert", "--model", os.path.join(FIXTURES, "moe_vlm_per_expert"),
                      "--to", "fp8", "--group", "32", "--out", os.path.join(self.tmp, "x"))
        self.assertNotEqual(flag.returncode, 0)
        self.assertIn("--group sets the group of --to w8|q4", flag.stderr)


if __name__ == "__main__":
    unittest.main()
