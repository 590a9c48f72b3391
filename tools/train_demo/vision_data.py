"""The demo model's vision task, shared by train_vision.py and eval_vision.py: the tiny vision
tower's config, the image processor's settings, seeded synthetic pictures (one coloured shape on a
plain background) and their chat prompts.

A picture is W x H pixels, W and H drawn from [64, 128], with one shape (circle, square or
triangle; 45-85% of the short side, random place, squares and triangles randomly rotated) in one
of COLOURS (each channel jittered by up to +-20) on a near-grey background (dark or light, tinted
by up to +-12). The question is the user turn [image, "What is in the picture?"] rendered with the
model's own chat template (thinking off by default: the prompt ends with
`<think>\\n\\n</think>\\n\\n`); the answer is "A red circle." (or "An ..." before a vowel)
followed by <|im_end|>.

Images go through HF's Qwen2VLImageProcessor (torchvision backend; patch 16, temporal patch 2,
merge 2, mean = std = 0.5, bicubic smart_resize to multiples of 32 with 64*64 <= H*W <= 256*256
pixels) inside Qwen3VLProcessor, which expands <|image_pad|> to (H/32)*(W/32) tokens (4 to 16
for these pictures, at most 64) and gives mm_token_type_ids for get_rope_index.
"""
import math
import random

from common import block_kernel_imports

block_kernel_imports()

import torch  # noqa: E402
from PIL import Image, ImageDraw  # noqa: E402

COLOURS = {
    "red": (220, 35, 35),
    "green": (40, 170, 50),
    "blue": (40, 70, 225),
    "yellow": (235, 210, 40),
    "purple": (145, 50, 185),
}
SHAPES = ("circle", "square", "triangle")
QUESTION = "What is in the picture?"
MIN_SIDE, MAX_SIDE = 64, 128

# The tower (HF Qwen3_5MoeVisionConfig): about 1.2M parameters, 2.4 MB in bf16.
VISION_CONFIG = dict(depth=3, hidden_size=128, num_heads=4, intermediate_size=512, in_channels=3,
                     patch_size=16, temporal_patch_size=2, spatial_merge_size=2,
                     num_position_embeddings=256, out_hidden_size=256,
                     hidden_act="gelu_pytorch_tanh", initializer_range=0.02)
# The tokenizer's vision specials (tools/text/make_qwen_tokenizer.py order).
SPECIAL_IDS = dict(image_token_id=8171, video_token_id=8172, vision_start_token_id=8168,
                   vision_end_token_id=8169)
PROCESSOR = dict(patch_size=16, temporal_patch_size=2, merge_size=2,
                 image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5],
                 size={"shortest_edge": 64 * 64, "longest_edge": 256 * 256})


def answer_text(colour, shape):
    return f"{'An' if colour[0] in 'aeiou' else 'A'} {colour} {shape}."


def parse_answer(text):
    """(colour, shape) named in a generated answer (None where none or several are)."""
    words = [w.strip(".,!?;:").lower() for w in text.split()]
    colours = [c for c in COLOURS if c in words]
    shapes = [s for s in SHAPES if s in words]
    return (colours[0] if len(set(colours)) == 1 else None,
            shapes[0] if len(set(shapes)) == 1 else None)


def _jitter(rgb, rng, amount):
    return tuple(max(0, min(255, c + rng.randint(-amount, amount))) for c in rgb)


def _polygon(cx, cy, radius, sides, angle):
    return [(cx + radius * math.cos(angle + 2 * math.pi * k / sides),
             cy + radius * math.sin(angle + 2 * math.pi * k / sides)) for k in range(sides)]


def make_picture(rng, size=None, colour=None, shape=None):
    """A PIL RGB picture from random.Random rng: (image, colour, shape)."""
    w, h = size or (rng.randint(MIN_SIDE, MAX_SIDE), rng.randint(MIN_SIDE, MAX_SIDE))
    colour = colour or rng.choice(sorted(COLOURS))
    shape = shape or rng.choice(SHAPES)
    grey = rng.randint(15, 80) if rng.random() < 0.5 else rng.randint(170, 240)
    background = _jitter((grey, grey, grey), rng, 12)
    fill = _jitter(COLOURS[colour], rng, 20)
    img = Image.new("RGB", (w, h), background)
    draw = ImageDraw.Draw(img)
    short = min(w, h)
    extent = rng.uniform(0.45, 0.85) * short          # the shape's width
    r = extent / 2
    cx = rng.uniform(r + 1, w - r - 1)
    cy = rng.uniform(r + 1, h - r - 1)
    if shape == "circle":
        draw.ellipse([cx - r, cy - r, cx + r, cy + r], fill=fill)
    elif shape == "square":
        # A square of side `extent` rotated by up to 30 degrees (circumradius side / sqrt 2,
        # shrunk so that the rotated square stays inside).
        angle = math.radians(rng.uniform(-30, 30)) + math.pi / 4
        draw.polygon(_polygon(cx, cy, r * 0.98, 4, angle), fill=fill)
    else:
        angle = rng.uniform(0, 2 * math.pi)
        draw.polygon(_polygon(cx, cy, r, 3, angle), fill=fill)
    return img, colour, shape


def build_processor(tokenizer):
    """Qwen3VLProcessor with the demo's image processor (and the video processor it requires)."""
    from transformers import Qwen2VLImageProcessor, Qwen3VLProcessor
    from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor
    image = Qwen2VLImageProcessor(**PROCESSOR)
    # Videos are not trained; the processor needs one. At most 16 frames of 256 x 256 in all.
    video = Qwen3VLVideoProcessor(patch_size=16, temporal_patch_size=2, merge_size=2,
                                  image_mean=[0.5] * 3, image_std=[0.5] * 3, max_frames=16,
                                  size={"shortest_edge": 2 * 64 * 64,
                                        "longest_edge": 16 * 256 * 256})
    return Qwen3VLProcessor(image_processor=image, tokenizer=tokenizer, video_processor=video,
                            chat_template=tokenizer.chat_template)


def messages():
    return [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": QUESTION}]}]


def prompt_text(processor):
    """The generation prompt, rendered with the tokenizer's chat template (tokenizer_config.json;
    AutoProcessor.from_pretrained does not give the processor one for this model)."""
    return processor.tokenizer.apply_chat_template(messages(), add_generation_prompt=True,
                                                   tokenize=False)


def encode(processor, image, answer=None):
    """Processor output for one picture: the prompt (plus answer and <|im_end|> when given),
    with the image pads expanded. Returns a dict of input_ids and mm_token_type_ids (lists),
    pixel_values [patches, 1536] and image_grid_thw [1, 3] (tensors) and n_answer (the number of
    trailing ids that are the answer)."""
    text = prompt_text(processor)
    n_answer = 0
    if answer is not None:
        ids = processor.tokenizer.encode(answer + "<|im_end|>", add_special_tokens=False)
        n_answer = len(ids)
        text += answer + "<|im_end|>"
    out = processor(text=[text], images=[image], return_tensors="pt")
    ids = out["input_ids"][0].tolist()
    if answer is not None:
        assert processor.tokenizer.encode(answer + "<|im_end|>", add_special_tokens=False) == \
            ids[len(ids) - n_answer:], "the answer tokenizes differently after the prompt"
    return dict(input_ids=ids, mm_token_type_ids=out["mm_token_type_ids"][0].tolist(),
                pixel_values=out["pixel_values"], image_grid_thw=out["image_grid_thw"],
                n_answer=n_answer)


class BatchEncoder:
    """encode() for a batch of pictures with answers, faster: the image processor runs once on
    the whole list, and the ids come from caches of the prompt (per image-pad count) and of the
    answers, each checked against encode() (the whole processor) the first time it is used."""

    def __init__(self, processor):
        self.processor, self.prompts, self.answers = processor, {}, {}

    def __call__(self, images, answers):
        px = self.processor.image_processor(images=images, return_tensors="pt")
        grids = px["image_grid_thw"]
        merge = self.processor.image_processor.merge_size ** 2
        sizes = (grids.prod(-1)).tolist()
        pixel_rows = torch.split(px["pixel_values"], sizes)
        out = []
        for image, answer, grid, rows in zip(images, answers, grids, pixel_rows):
            pads = int(grid.prod()) // merge
            if pads not in self.prompts or answer not in self.answers:
                ref = encode(self.processor, image, answer)
                assert ref["pixel_values"].equal(rows) and ref["image_grid_thw"][0].equal(grid)
                n = len(ref["input_ids"]) - ref["n_answer"]
                self.prompts[pads] = (ref["input_ids"][:n], ref["mm_token_type_ids"][:n])
                self.answers[answer] = ref["input_ids"][n:]
            ids, types = self.prompts[pads]
            ans = self.answers[answer]
            out.append(dict(input_ids=ids + ans, mm_token_type_ids=types + [0] * len(ans),
                            pixel_values=rows, image_grid_thw=grid[None], n_answer=len(ans)))
        return out


def sample_rng(split, seed, index):
    """The random.Random of picture `index` of a split ("train" or "eval")."""
    return random.Random(f"ninfer-demo-vision/{split}/{seed}/{index}")
