#!/usr/bin/env python3
"""Writes the media fixtures of tests/media/ (src/media: decoding and vision preprocessing).

    /tmp/trainvenv/bin/python tools/reference/make_vision_preprocess_fixture.py \
        [--out tests/fixtures_vision] [--regen-video]

Needs torch, torchvision, transformers 5.17.0, pillow, numpy, safetensors, and ffmpeg/ffprobe on
PATH (Debian's, the same libav* that src/media links).

preprocess/ holds
- small images of odd sizes and every PNG/JPEG/WebP layout the decoder converts (grey, grey+alpha,
  RGBA, palette with tRNS, 1/2/4/16-bit, Adam7, CMYK JPEG, progressive, lossless/lossy WebP),
  one larger than the test max_pixels (downscaled), one smaller than min_pixels (upscaled), an
  aspect ratio of 150;
- tiny.mp4 / tiny.webm: 16 frames of 64x48 at 8 fps (x264 with B-frames, VP9), made once by ffmpeg
  (kept unless --regen-video);
- reference.safetensors: per case `<case>.rgb` (PIL's Image.open(f).convert("RGB"), [H, W, 3] U8),
  `<case>.<backend>.pixel_values` (F32) and `.grid_thw` (I64) from AutoImageProcessor with the
  case's size (backend "torchvision", the 5.17 default, and "pil" for some); for the videos the
  frames ffmpeg decodes (rgb24, -sws_flags bilinear) and Qwen3VLVideoProcessor's
  pixel_values_videos / video_grid_thw on them with the container's metadata;
- manifest.json: the cases, their processor configs, the sampled frame indices and timestamps,
  and a table of smart_resize results (images and videos, errors included).
bad/ holds inputs every decoder must refuse with a clear error, and bad/expected.json the
substring each error message must contain.
"""
import argparse
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

import numpy as np
import torch
from PIL import Image
from safetensors.numpy import save_file

import transformers
from transformers import AutoImageProcessor, AutoVideoProcessor
from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize as image_smart_resize
from transformers.models.qwen3_vl.processing_qwen3_vl import Qwen3VLProcessor
from transformers.video_utils import VideoMetadata

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The test processor: Qwen3.5's preprocessor_config.json with small pixel budgets, so that the
# committed outputs stay small. Cases may override min/max pixels.
QWEN35_IMAGE = {
    "image_processor_type": "Qwen2VLImageProcessorFast",
    "processor_class": "Qwen3VLProcessor",
    "patch_size": 16, "temporal_patch_size": 2, "merge_size": 2,
    "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
    "size": {"shortest_edge": 1024, "longest_edge": 1024},
}
QWEN35_VIDEO = {
    "video_processor_type": "Qwen3VLVideoProcessor",
    "processor_class": "Qwen3VLProcessor",
    "patch_size": 16, "temporal_patch_size": 2, "merge_size": 2,
    "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
    "size": {"shortest_edge": 1024, "longest_edge": 8192},
    "fps": 2, "min_frames": 4, "max_frames": 768, "do_sample_frames": True,
}
CLIP = {"image_mean": [0.48145466, 0.4578275, 0.40821073],
        "image_std": [0.26862954, 0.26130258, 0.27577711]}


# ----------------------------------------------------------------------------------------------
# Inputs

def pattern(h, w, seed, channels=3):
    """Smooth gradients plus noise: resampling errors show, JPEG stays small."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    out = []
    for c in range(channels):
        base = 127.5 + 100 * np.sin((x * (c + 1) * 0.37 + y * 0.23 * (3 - c)) / 3.0)
        base += rng.normal(0, 30, size=(h, w))
        out.append(np.clip(np.round(base), 0, 255))
    return np.stack(out, -1).astype(np.uint8)


def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def write_png(w, h, depth, ctype, rows, plte=None, trns=None, interlace=0, ihdr=None):
    """A PNG from raw filtered-free scanlines (bytes per row, already packed)."""
    out = b"\x89PNG\r\n\x1a\n"
    out += png_chunk(b"IHDR", ihdr if ihdr is not None else
                     struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, interlace))
    if plte is not None:
        out += png_chunk(b"PLTE", plte)
    if trns is not None:
        out += png_chunk(b"tRNS", trns)
    raw = b"".join(b"\x00" + r for r in rows)
    out += png_chunk(b"IDAT", zlib.compress(raw, 9))
    out += png_chunk(b"IEND", b"")
    return out


def pack_bits(values, depth):
    """Packs a row of small ints MSB-first at `depth` bits each."""
    per = 8 // depth
    out = bytearray()
    for i in range(0, len(values), per):
        b = 0
        chunk = list(values[i:i + per]) + [0] * (per - len(values[i:i + per]))
        for v in chunk:
            b = (b << depth) | int(v)
        out.append(b)
    return bytes(out)


def pil_bytes(img, fmt, **kw):
    buf = io.BytesIO()
    img.save(buf, fmt, **kw)
    return buf.getvalue()


def make_images():
    """name -> encoded bytes."""
    rng = np.random.default_rng(7)
    files = {}
    files["rgb_37x53.png"] = pil_bytes(Image.fromarray(pattern(53, 37, 1)), "PNG")
    files["rgb_200x90.jpg"] = pil_bytes(Image.fromarray(pattern(90, 200, 2)), "JPEG", quality=90)
    files["rgb_61x47_444.jpg"] = pil_bytes(Image.fromarray(pattern(47, 61, 3)), "JPEG",
                                           quality=95, subsampling=0)
    files["rgb_58x41_422.jpg"] = pil_bytes(Image.fromarray(pattern(41, 58, 4)), "JPEG",
                                           quality=85, subsampling=1)
    files["progressive_83x59.jpg"] = pil_bytes(Image.fromarray(pattern(59, 83, 5)), "JPEG",
                                               quality=80, progressive=True)
    files["grey_64x40.jpg"] = pil_bytes(Image.fromarray(pattern(40, 64, 6, 1)[..., 0]), "JPEG",
                                        quality=90)
    cmyk = Image.fromarray(pattern(32, 48, 7, 4), "CMYK")
    files["cmyk_48x32.jpg"] = pil_bytes(cmyk, "JPEG", quality=90)
    files["grey_45x31.png"] = pil_bytes(Image.fromarray(pattern(31, 45, 8, 1)[..., 0]), "PNG")
    la = pattern(30, 20, 9, 2)
    files["grey_alpha_20x30.png"] = pil_bytes(Image.fromarray(la, "LA"), "PNG")
    rgba = pattern(30, 50, 10, 4)
    rgba[::3, ::4, 3] = 0  # fully transparent pixels keep their colour in the file
    files["rgba_50x30.png"] = pil_bytes(Image.fromarray(rgba, "RGBA"), "PNG")
    # Palette, 8-bit with tRNS; 4-bit; 1/2-bit grey; 16-bit grey / grey+alpha / RGB / RGBA; Adam7.
    pal = rng.integers(0, 256, size=(256, 3), dtype=np.uint8)
    idx = rng.integers(0, 256, size=(25, 40), dtype=np.uint8)
    files["palette_40x25.png"] = write_png(40, 25, 8, 3, [r.tobytes() for r in idx], plte=pal.tobytes(),
                                           trns=bytes(range(0, 256, 4)))
    idx4 = rng.integers(0, 12, size=(13, 21))
    files["palette4_21x13.png"] = write_png(21, 13, 4, 3, [pack_bits(r, 4) for r in idx4],
                                            plte=pal[:12].tobytes())
    g1 = rng.integers(0, 2, size=(9, 19))
    files["grey1_19x9.png"] = write_png(19, 9, 1, 0, [pack_bits(r, 1) for r in g1])
    g2 = rng.integers(0, 4, size=(17, 33))
    files["grey2_33x17.png"] = write_png(33, 17, 2, 0, [pack_bits(r, 2) for r in g2])
    g16 = rng.integers(0, 700, size=(20, 30)).astype(">u2")  # PIL's I;16 saturates above 255
    files["grey16_30x20.png"] = write_png(30, 20, 16, 0, [r.tobytes() for r in g16])
    la16 = rng.integers(0, 65536, size=(12, 14, 2)).astype(">u2")
    files["grey_alpha16_14x12.png"] = write_png(14, 12, 16, 4, [r.tobytes() for r in la16])
    rgb16 = rng.integers(0, 65536, size=(18, 24, 3)).astype(">u2")
    files["rgb16_24x18.png"] = write_png(24, 18, 16, 2, [r.tobytes() for r in rgb16])
    rgba16 = rng.integers(0, 65536, size=(11, 16, 4)).astype(">u2")
    files["rgba16_16x11.png"] = write_png(16, 11, 16, 6, [r.tobytes() for r in rgba16])
    files["interlaced_41x29.png"] = interlace_png(pattern(29, 41, 11))
    files["lossless_60x40.webp"] = pil_bytes(Image.fromarray(pattern(40, 60, 12)), "WEBP",
                                             lossless=True)
    files["lossy_60x40.webp"] = pil_bytes(Image.fromarray(pattern(40, 60, 13)), "WEBP", quality=80)
    wa = pattern(50, 50, 14, 4)
    files["lossy_alpha_50x50.webp"] = pil_bytes(Image.fromarray(wa, "RGBA"), "WEBP", quality=70)
    files["lossless_alpha_33x21.webp"] = pil_bytes(Image.fromarray(pattern(21, 33, 15, 4), "RGBA"),
                                                   "WEBP", lossless=True, exact=True)
    files["tiny_20x15.png"] = pil_bytes(Image.fromarray(pattern(15, 20, 16)), "PNG")  # upscaled
    files["extreme_150x1.png"] = pil_bytes(Image.fromarray(pattern(1, 150, 17)), "PNG")
    files["blocks_70x66.jpg"] = pil_bytes(Image.fromarray(pattern(66, 70, 18)), "JPEG", quality=92)
    return files


def interlace_png(rgb):
    """An Adam7-interlaced RGB8 PNG (PIL does not write interlaced PNGs)."""
    h, w, _ = rgb.shape
    passes = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
              (0, 1, 1, 2)]
    raw = b""
    for x0, y0, dx, dy in passes:
        sub = rgb[y0::dy, x0::dx]
        if sub.size == 0:
            continue
        raw += b"".join(b"\x00" + r.tobytes() for r in sub)
    out = b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 1))
    out += png_chunk(b"IDAT", zlib.compress(raw, 9)) + png_chunk(b"IEND", b"")
    return out


# ----------------------------------------------------------------------------------------------
# Image cases

# name, file, overrides of the processor config, backends
def image_cases(files):
    cases = []
    for f in sorted(files):
        cases.append({"name": os.path.splitext(f)[0], "file": f, "config": {},
                      "backends": ["torchvision"]})
    wider = {"size": {"shortest_edge": 1024, "longest_edge": 2048}}
    overrides = {
        # 37x53 -> 32x64 (mild), 200x90 -> 64x32 (downscaled), 20x15 -> 64x32 (upscaled)
        "rgb_37x53": wider, "rgb_200x90": wider, "tiny_20x15": wider,
        # two merge blocks both ways (64x64): the patch order across blocks
        "blocks_70x66": {"size": {"shortest_edge": 1024, "longest_edge": 4096}},
        # aspect ratio 150 -> 32x128
        "extreme_150x1": {"size": {"shortest_edge": 64, "longest_edge": 1024}},
    }
    for c in cases:
        c["config"] = overrides.get(c["name"], {})
    extra = [
        # CLIP statistics and a legacy min_pixels/max_pixels override of size
        {"name": "rgb_37x53_clip", "file": "rgb_37x53.png",
         "config": dict(CLIP, min_pixels=1024, max_pixels=1024), "backends": ["torchvision", "pil"]},
        # rescale only, normalise only
        {"name": "rgb_37x53_rescale_only", "file": "rgb_37x53.png",
         "config": {"do_normalize": False}, "backends": ["torchvision", "pil"]},
        {"name": "rgb_37x53_normalize_only", "file": "rgb_37x53.png",
         "config": {"do_rescale": False}, "backends": ["torchvision", "pil"]},
    ]
    for name in ["rgb_37x53", "rgb_200x90", "tiny_20x15", "blocks_70x66"]:
        for c in cases:
            if c["name"] == name:
                c["backends"] = ["torchvision", "pil"]
    return cases + extra


def processor(config, backend, tmp):
    d = tempfile.mkdtemp(dir=tmp)
    cfg = dict(QWEN35_IMAGE)
    cfg.update(config)
    with open(os.path.join(d, "preprocessor_config.json"), "w") as f:
        json.dump(cfg, f)
    p = AutoImageProcessor.from_pretrained(d, backend=backend)
    want = "Qwen2VLImageProcessor" + ("" if backend == "torchvision" else "Pil")
    assert type(p).__name__ == want, type(p).__name__
    return p, cfg


# ----------------------------------------------------------------------------------------------
# smart_resize table

def smart_resize_table(tmp):
    rows = []
    sizes = [(1, 1), (15, 20), (32, 32), (48, 80), (80, 48), (53, 37), (90, 200), (1, 150),
             (1, 200), (1, 201), (3, 601), (1000, 5), (4000, 3000), (1080, 1920), (2160, 3840),
             (7, 7000), (250, 250), (16, 48), (47, 61), (33, 31)]
    budgets = [(1024, 2048), (65536, 16777216), (3136, 1003520), (4096, 4096)]
    for (h, w) in sizes:
        for mn, mx in budgets:
            try:
                hh, ww = image_smart_resize(h, w, factor=32, min_pixels=mn, max_pixels=mx)
                rows.append({"kind": "image", "h": h, "w": w, "min": mn, "max": mx,
                             "out": [hh, ww]})
            except ValueError as e:
                rows.append({"kind": "image", "h": h, "w": w, "min": mn, "max": mx,
                             "error": str(e)})
    # Videos through the processor's own resize (the per-frame cap included).
    vcases = [(4, 48, 64), (5, 48, 64), (1, 48, 64), (8, 20, 30), (16, 720, 1280), (3, 10, 900),
              (2, 31, 33), (768, 64, 64), (7, 5, 1100)]
    for cap in (False, True):
        for mn, mx in [(1024, 8192), (4096, 25165824), (131072, 786432)]:
            vp = AutoVideoProcessor.from_pretrained(video_dir(tmp, {"size": {
                "shortest_edge": mn, "longest_edge": mx}}))
            from transformers.image_utils import SizeDict
            for t, h, w in vcases:
                entry = {"kind": "video", "t": t, "h": h, "w": w, "min": mn, "max": mx, "cap": cap}
                try:
                    out = vp.resize(torch.zeros((1, t, 3, h, w), dtype=torch.uint8),
                                    size=SizeDict(shortest_edge=mn, longest_edge=mx),
                                    resample=vp.resample, factor=32, temporal_factor=2,
                                    cap_pixels_per_frame=cap)
                    entry["out"] = list(out.shape[-2:])
                except ValueError as e:
                    entry["error"] = str(e)
                rows.append(entry)
    return rows


def video_dir(tmp, overrides):
    d = tempfile.mkdtemp(dir=tmp)
    cfg = dict(QWEN35_VIDEO)
    cfg.update(overrides)
    with open(os.path.join(d, "video_preprocessor_config.json"), "w") as f:
        json.dump(cfg, f)
    with open(os.path.join(d, "preprocessor_config.json"), "w") as f:
        json.dump(QWEN35_IMAGE, f)
    return d


# ----------------------------------------------------------------------------------------------
# Videos

def make_videos(out, regen):
    specs = {"tiny.mp4": ["-c:v", "libx264", "-preset", "medium", "-crf", "30", "-bf", "2",
                          "-g", "8", "-pix_fmt", "yuv420p", "-movflags", "+faststart"],
             "tiny.webm": ["-c:v", "libvpx-vp9", "-b:v", "0", "-crf", "40", "-g", "8",
                           "-pix_fmt", "yuv420p"]}
    for name, args in specs.items():
        path = os.path.join(out, name)
        if os.path.exists(path) and not regen:
            continue
        subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                        "testsrc2=size=64x48:rate=8", "-frames:v", "16", "-an", *args,
                        "-fflags", "+bitexact", "-flags:v", "+bitexact", path], check=True)


def ffmpeg_frames(path):
    probe = json.loads(subprocess.run(
        ["ffprobe", "-v", "error", "-select_streams", "v:0", "-count_packets", "-show_entries",
         "stream=width,height,avg_frame_rate,r_frame_rate,nb_read_packets", "-of", "json", path],
        check=True, capture_output=True).stdout)["streams"][0]
    w, h = probe["width"], probe["height"]
    raw = subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-i", path, "-f",
                          "rawvideo", "-pix_fmt", "rgb24", "-sws_flags", "bilinear", "-"],
                         check=True, capture_output=True).stdout
    frames = np.frombuffer(raw, np.uint8).reshape(-1, h, w, 3)
    num, den = (int(x) for x in probe["avg_frame_rate"].split("/"))
    return frames, num / den, int(probe["nb_read_packets"])


# ----------------------------------------------------------------------------------------------
# Bad inputs

def make_bad(out, files):
    jpg = files["grey_64x40.jpg"]
    png = files["rgb_37x53.png"]
    webp = files["lossy_60x40.webp"]
    bad = {}
    bad["truncated.jpg"] = (jpg[:len(jpg) // 2], "truncated JPEG data")
    bad["truncated_header.jpg"] = (jpg[:40], "truncated JPEG data")
    bad["truncated.png"] = (png[:len(png) // 2], "truncated PNG data")
    bad["truncated_header.png"] = (png[:20], "truncated PNG data")
    bomb = write_png(100000, 100000, 8, 2, [], ihdr=struct.pack(">IIBBBBB", 100000, 100000, 8, 2, 0, 0, 0))
    bad["bomb_100000x100000.png"] = (bomb, "exceeds the 50 MP limit")
    # A JPEG whose SOF0 claims 65000x65000 (the dimensions are patched in a real file).
    j = bytearray(jpg)
    sof = j.index(b"\xff\xc0")
    struct.pack_into(">HH", j, sof + 5, 65000, 65000)
    bad["bomb_65000x65000.jpg"] = (bytes(j), "exceeds the 50 MP limit")
    # A lossless WebP header of 16384x16384.
    vp8l = bytearray(b"\x2f") + struct.pack("<I", (16383) | (16383 << 14))
    body = b"VP8L" + struct.pack("<I", len(vp8l) + 16) + bytes(vp8l) + b"\x00" * 16
    bad["bomb_16384x16384.webp"] = (b"RIFF" + struct.pack("<I", 4 + len(body)) + b"WEBP" + body,
                                    "exceeds the 50 MP limit")
    bad["truncated.webp"] = (webp[:len(webp) // 2], "truncated WebP data")
    bad["bad_crc.png"] = (png[:29] + bytes([png[29] ^ 0xFF]) + png[30:],
                          "invalid PNG data (IHDR: CRC error)")
    idat = png.index(b"IDAT")
    corrupt = bytearray(png)
    for k in range(idat + 8, idat + 40):
        corrupt[k] ^= 0x5A
    # keep the CRC right so that the zlib stream is what fails
    length = struct.unpack(">I", png[idat - 4:idat])[0]
    crc = zlib.crc32(bytes(corrupt[idat:idat + 4 + length]))
    struct.pack_into(">I", corrupt, idat + 4 + length, crc)
    bad["corrupt_idat.png"] = (bytes(corrupt), "invalid PNG data (IDAT: ")
    rng = np.random.default_rng(3)
    bad["random.bin"] = (rng.integers(0, 256, 4096, dtype=np.uint8).tobytes(), "unsupported format")
    bad["empty.png"] = (b"", "empty input")
    bad["text.png"] = (b"this is not an image, it is a text file named .png\n", "unsupported format")
    bad["image.gif"] = (pil_bytes(Image.fromarray(pattern(8, 8, 1)), "GIF"), "GIF is not supported")
    bad["image.bmp"] = (pil_bytes(Image.fromarray(pattern(8, 8, 1)), "BMP"), "BMP is not supported")
    bad["image.tiff"] = (pil_bytes(Image.fromarray(pattern(8, 8, 1)), "TIFF"), "TIFF is not supported")
    frames = [Image.fromarray(pattern(16, 16, s)) for s in range(3)]
    buf = io.BytesIO()
    frames[0].save(buf, "WEBP", save_all=True, append_images=frames[1:], duration=100)
    bad["animated.webp"] = (buf.getvalue(), "animated WebP is not supported")
    bad["jpeg_magic_only.jpg"] = (b"\xff\xd8\xff", "truncated JPEG data")
    bad["png_signature_only.png"] = (b"\x89PNG\r\n\x1a\n", "truncated PNG data")
    bad["zero_width.png"] = (write_png(0, 10, 8, 2, []), "invalid PNG data (Invalid IHDR data)")
    # A frame whose quantisation table is never defined: libjpeg's own error.
    sof0 = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, 10, 10, 1) + b"\x01\x11\x00"
    sos = b"\xff\xda" + struct.pack(">HB", 8, 1) + b"\x01\x00" + b"\x00\x3f\x00"
    bad["no_quant_table.jpg"] = (b"\xff\xd8" + sof0 + sos + b"\x12\x34" * 20 + b"\xff\xd9",
                                 "invalid JPEG data (Quantization table 0x00 was not defined)")
    # A 12-bit JPEG (SOF1 with precision 12): libjpeg-turbo's 8-bit decoder refuses it; so does PIL.
    j12 = bytearray(jpg)
    j12[sof + 1] = 0xC1
    j12[sof + 4] = 12
    bad["precision12.jpg"] = (bytes(j12), "invalid JPEG data")
    os.makedirs(out, exist_ok=True)
    expected = {}
    for name, (data, msg) in sorted(bad.items()):
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
        expected[name] = msg
        # PIL must refuse (or, for the bombs, flag) every one of them too.
        if name.startswith("bomb"):
            continue
        try:
            im = Image.open(io.BytesIO(data))
            im.load()
            if not name.startswith(("image.", "animated")):
                print(f"note: PIL decodes {name} ({im.size})")
        except Exception:
            pass
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")
    # Bad videos: handled by tests/media/test_video.cpp from these.
    return expected


# ----------------------------------------------------------------------------------------------

def compact_json(manifest):
    """One line per list entry: small and still diffable."""
    lines = ["{"]
    keys = list(manifest)
    for i, k in enumerate(keys):
        v = manifest[k]
        end = "," if i + 1 < len(keys) else ""
        if isinstance(v, list):
            lines.append(f" {json.dumps(k)}: [")
            for j, e in enumerate(v):
                lines.append("  " + json.dumps(e, separators=(",", ":")) + ("," if j + 1 < len(v) else ""))
            lines.append(" ]" + end)
        else:
            lines.append(f" {json.dumps(k)}: {json.dumps(v, separators=(',', ':'))}{end}")
    return "\n".join(lines) + "\n}\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures_vision"))
    ap.add_argument("--regen-video", action="store_true")
    args = ap.parse_args()
    assert transformers.__version__ == "5.17.0", transformers.__version__
    Image.MAX_IMAGE_PIXELS = None
    out = os.path.join(args.out, "preprocess")
    os.makedirs(out, exist_ok=True)
    tmp = tempfile.mkdtemp()
    tensors, manifest = {}, {"transformers": transformers.__version__,
                             "torch": torch.__version__,
                             "pillow": Image.__version__ if hasattr(Image, "__version__") else "",
                             "image_config": QWEN35_IMAGE, "video_config": QWEN35_VIDEO,
                             "images": [], "videos": []}
    import PIL
    manifest["pillow"] = PIL.__version__
    files = make_images()
    for name, data in files.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    for case in image_cases(files):
        im = Image.open(os.path.join(out, case["file"]))
        rgb = im.convert("RGB")
        arr = np.asarray(rgb)
        stem = os.path.splitext(case["file"])[0]
        if stem + ".rgb" not in tensors:
            tensors[stem + ".rgb"] = np.ascontiguousarray(arr)
        entry = {"name": case["name"], "file": case["file"], "mode": im.mode,
                 "config": case["config"], "backends": case["backends"],
                 "size": [rgb.height, rgb.width]}
        for backend in case["backends"]:
            p, cfg = processor(case["config"], backend, tmp)
            res = p(images=rgb, return_tensors="pt")
            pv = res["pixel_values"].numpy()
            grid = res["image_grid_thw"].numpy()
            assert pv.dtype == np.float32 and pv.shape[0] == grid.prod()
            tensors[f"{case['name']}.{backend}.pixel_values"] = np.ascontiguousarray(pv)
            tensors[f"{case['name']}.{backend}.grid_thw"] = grid.astype(np.int64)
            entry.setdefault("grid_thw", {})[backend] = grid[0].tolist()
        manifest["images"].append(entry)

    # Videos: the frames ffmpeg decodes, sampled and preprocessed by HF with the container's
    # metadata; and a case of 5 frames given directly (no sampling: padded to 6).
    make_videos(out, args.regen_video)
    for vname in ["tiny.mp4", "tiny.webm"]:
        frames, fps, packets = ffmpeg_frames(os.path.join(out, vname))
        assert packets == len(frames), (packets, len(frames))
        vp = AutoVideoProcessor.from_pretrained(video_dir(tmp, {}))
        assert type(vp).__name__ == "Qwen3VLVideoProcessor", type(vp).__name__
        meta = VideoMetadata(total_num_frames=len(frames), fps=fps, width=frames.shape[2],
                             height=frames.shape[1], duration=len(frames) / fps)
        res = vp(videos=[frames], video_metadata=[meta], return_metadata=True,
                 cap_pixels_per_frame=False, return_tensors="pt")
        indices = [int(i) for i in res["video_metadata"][0].frames_indices]
        stamps = Qwen3VLProcessor._calculate_timestamps(None, indices, fps, 2)
        key = vname.replace(".", "_")
        tensors[key + ".frames"] = np.ascontiguousarray(frames[sorted(set(indices))])
        if vname == "tiny.mp4":  # the webm's frames go through the same (tested) preprocessing
            tensors[key + ".pixel_values"] = np.ascontiguousarray(
                res["pixel_values_videos"].numpy())
            tensors[key + ".grid_thw"] = res["video_grid_thw"].numpy().astype(np.int64)
        manifest["videos"].append({"name": key, "file": vname, "total_frames": len(frames),
                                   "fps": fps, "indices": indices, "timestamps": stamps,
                                   "decoded_indices": sorted(set(indices)),
                                   "grid_thw": res["video_grid_thw"][0].tolist()})
    frames, fps, _ = ffmpeg_frames(os.path.join(out, "tiny.mp4"))
    five = frames[[1, 4, 7, 10, 13]]
    vp = AutoVideoProcessor.from_pretrained(video_dir(tmp, {"do_sample_frames": False}))
    res = vp(videos=[five], do_sample_frames=False, cap_pixels_per_frame=False, return_tensors="pt")
    tensors["five_frames.frames"] = np.ascontiguousarray(five)
    tensors["five_frames.pixel_values"] = np.ascontiguousarray(res["pixel_values_videos"].numpy())
    tensors["five_frames.grid_thw"] = res["video_grid_thw"].numpy().astype(np.int64)
    manifest["five_frames"] = {"grid_thw": res["video_grid_thw"][0].tolist(),
                               "config": {"do_sample_frames": False}}
    # Sampling table (Qwen3VLVideoProcessor.sample_frames) for other lengths and rates.
    vp = AutoVideoProcessor.from_pretrained(video_dir(tmp, {}))
    table = []
    for total, vfps in [(16, 8.0), (1, 30.0), (3, 30.0), (7, 2.0), (9, 2.0), (100, 29.97),
                        (1000, 30.0), (5000, 24.0), (100000, 60.0), (31, 0.5), (250, 25.0)]:
        idx = vp.sample_frames(VideoMetadata(total_num_frames=total, fps=vfps))
        table.append({"total": total, "fps": vfps, "indices": [int(i) for i in idx],
                      "timestamps": Qwen3VLProcessor._calculate_timestamps(None, list(idx), vfps, 2)})
    for total, n in [(16, 5), (10, 20)]:
        idx = vp.sample_frames(VideoMetadata(total_num_frames=total, fps=8.0), num_frames=n)
        table.append({"total": total, "fps": 8.0, "num_frames": n, "indices": [int(i) for i in idx]})
    manifest["sampling"] = table
    manifest["smart_resize"] = smart_resize_table(tmp)

    save_file(tensors, os.path.join(out, "reference.safetensors"))
    with open(os.path.join(out, "manifest.json"), "w") as f:
        f.write(compact_json(manifest))
    make_bad(os.path.join(args.out, "bad"), files)
    shutil.rmtree(tmp)
    total = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(out) for f in fs)
    total += sum(os.path.getsize(os.path.join(args.out, "bad", f))
                 for f in os.listdir(os.path.join(args.out, "bad")))
    print(f"wrote {len(manifest['images'])} image cases, {len(manifest['videos'])} videos; "
          f"{total / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
