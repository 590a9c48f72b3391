#!/usr/bin/env python3
"""Builds tiny random Qwen3.5/3.6 checkpoints with HF transformers and writes reference outputs.

Each fixture is a directory holding an HF checkpoint (config.json + safetensors, written by
save_pretrained) and reference.json: for prompts of 13 and 150 tokens, 24 greedy continuation ids
with the natural-log probability of each chosen id and the top-5 log probabilities, all from HF's
torch fallback kernels on CPU in float64 (MODEL_QWEN3_5.md section 6).

    python3 tools/reference/make_fixtures.py --out tests/fixtures            # the committed set
    python3 tools/reference/make_fixtures.py --out /tmp/unseen --random 6 --seed 99

--random N builds N checkpoints with randomly drawn shapes and layouts instead (tools/reference/
check_unseen.py uses it to test ninfer on checkpoints it has never seen).
"""
import argparse
import copy
import json
import os
import random
import shutil
import sys

# Block the Triton kernels so HF uses its exact torch fallbacks (gotcha 1 of MODEL_QWEN3_5.md §6).
sys.modules["fla"] = None
sys.modules["causal_conv1d"] = None

import torch  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402
import transformers  # noqa: E402
from transformers import (  # noqa: E402
    Qwen3_5Config, Qwen3_5ForCausalLM, Qwen3_5ForConditionalGeneration, Qwen3_5TextConfig,
    Qwen3_5MoeConfig, Qwen3_5MoeForCausalLM, Qwen3_5MoeForConditionalGeneration,
    Qwen3_5MoeTextConfig)

PROMPT_LENGTHS = (13, 150)  # 150 > 64 and not a multiple of 64: several GDN chunks plus padding
NEW_TOKENS = 24
TOP_K = 5
LOGIT_GAP = 1e-4      # greedy top-1/top-2 logit gap below which a prompt is redrawn
ROUTER_GAP = 1e-4     # router k-th/(k+1)-th probability gap below which a prompt is redrawn
# A prompt is also redrawn when HF's own float32 run differs from its float64 run by more than
# this (in any reported logprob): the case is then too sensitive to rounding for any
# implementation to be held to the reference (random tiny models can be badly conditioned).
CONDITION_LIMIT = 2e-5

# The committed fixtures: together they cover DESIGN.md §3.
FIXTURES = [
    dict(name="moe_text_fused", kind="moe", layout="text", experts="fused", dtype="float32",
         layers="LLLF", hk=2, hv=4, rotary=0.25, tie=False, seed=1),
    dict(name="moe_vlm_per_expert", kind="moe", layout="vlm", experts="per_expert",
         dtype="bfloat16", layers="FLLF", hk=1, hv=4, rotary=0.5, tie=False, seed=2, mtp=True),
    dict(name="dense_text_sharded", kind="dense", layout="text", dtype="float16", layers="LLFL",
         hk=2, hv=2, rotary=1.0, tie=True, seed=3, shards=True),
    dict(name="dense_vlm_mtp", kind="dense", layout="vlm", dtype="bfloat16", layers="LFLLF",
         hk=2, hv=6, rotary=0.25, tie=False, seed=4, mtp=True),
    # YaRN (Qwen's recipe past 262k tokens), stretched 4x from 64 positions: the 150-token
    # prompt reaches into the interpolated range, and attention scales by 0.1 ln 4 + 1.
    dict(name="dense_text_yarn", kind="dense", layout="text", dtype="float32", layers="LFLF",
         hk=2, hv=4, rotary=0.5, tie=False, seed=5,
         rope=dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=64)),
]


def text_kwargs(spec):
    layer_types = ["full_attention" if c == "F" else "linear_attention" for c in spec["layers"]]
    kw = dict(
        vocab_size=spec.get("vocab", 256), hidden_size=spec.get("hidden", 64),
        num_hidden_layers=len(layer_types), layer_types=layer_types,
        num_attention_heads=spec.get("heads", 4), num_key_value_heads=spec.get("kv_heads", 2),
        head_dim=spec.get("head_dim", 32),
        linear_num_key_heads=spec["hk"], linear_num_value_heads=spec["hv"],
        linear_key_head_dim=spec.get("dk", 16), linear_value_head_dim=spec.get("dv", 16),
        linear_conv_kernel_dim=4, rms_norm_eps=1e-6, max_position_embeddings=4096,
        hidden_act="silu", tie_word_embeddings=spec["tie"],
        rope_parameters=dict(dict(rope_type="default", rope_theta=1e7,
                                  partial_rotary_factor=spec["rotary"],
                                  mrope_section=[3, 3, 2], mrope_interleaved=True),
                             **spec.get("rope", {})),
        attn_implementation="eager",
    )
    if spec["kind"] == "moe":
        kw.update(num_experts=spec.get("experts_n", 8), num_experts_per_tok=spec.get("topk", 2),
                  moe_intermediate_size=spec.get("moe_inter", 32),
                  shared_expert_intermediate_size=spec.get("shared_inter", 48))
    else:
        kw.update(intermediate_size=spec.get("inter", 96))
    return kw


def build_model(spec):
    kw = text_kwargs(spec)
    moe = spec["kind"] == "moe"
    if spec["layout"] == "text":
        cfg = (Qwen3_5MoeTextConfig if moe else Qwen3_5TextConfig)(**kw)
        cls = Qwen3_5MoeForCausalLM if moe else Qwen3_5ForCausalLM
    else:
        attn = kw.pop("attn_implementation")
        tie = kw.pop("tie_word_embeddings")
        vision = dict(depth=1, hidden_size=32, num_heads=2, intermediate_size=64,
                      out_hidden_size=kw["hidden_size"])
        cfg = (Qwen3_5MoeConfig if moe else Qwen3_5Config)(
            text_config=kw, vision_config=vision, tie_word_embeddings=tie,
            attn_implementation=attn)
        cls = Qwen3_5MoeForConditionalGeneration if moe else Qwen3_5ForConditionalGeneration
    torch.manual_seed(spec["seed"])
    model = cls(cfg)
    model.eval()
    return model


def is_zero_centred_norm(module):
    return type(module).__name__ in ("Qwen3_5MoeRMSNorm", "Qwen3_5RMSNorm")


def is_gated_norm(module):
    return type(module).__name__ in ("Qwen3_5MoeRMSNormGated", "Qwen3_5RMSNormGated")


@torch.no_grad()
def rerandomise(model, seed):
    """Every parameter gets seeded random values (HF's init would hide (1+w) vs w bugs)."""
    gen = torch.Generator().manual_seed(seed)
    for mod_name, module in model.named_modules():
        for p_name, p in module.named_parameters(recurse=False):
            full = f"{mod_name}.{p_name}"
            if is_zero_centred_norm(module):
                p.copy_(torch.randn(p.shape, generator=gen) * 0.2)
            elif is_gated_norm(module):
                p.copy_(1.0 + torch.randn(p.shape, generator=gen) * 0.2)
            elif full.endswith("conv1d.weight") and "visual" not in full:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
            elif full.endswith("A_log"):
                p.copy_(torch.log(torch.rand(p.shape, generator=gen) * 15.0 + 1.0))
            elif full.endswith("dt_bias"):
                p.copy_(torch.randn(p.shape, generator=gen))
            elif "embed_tokens" in full or "lm_head" in full:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
            else:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.1)


def text_prefix(state):
    return "model.language_model." if any(k.startswith("model.language_model.") for k in state) \
        else "model."


def add_mtp_tensors(state, spec, seed):
    """Random mtp.* tensors with the real structure (MODEL_QWEN3_5.md §1.3)."""
    gen = torch.Generator().manual_seed(seed + 1000)
    prefix = text_prefix(state)
    full_layer = spec["layers"].index("F")
    src = f"{prefix}layers.{full_layer}."
    hidden = spec.get("hidden", 64)
    dtype = next(iter(state.values())).dtype
    rnd = lambda shape, scale: (torch.randn(shape, generator=gen) * scale).to(dtype)  # noqa: E731
    out = {
        "mtp.fc.weight": rnd((hidden, 2 * hidden), 0.1),
        "mtp.pre_fc_norm_embedding.weight": rnd((hidden,), 0.2),
        "mtp.pre_fc_norm_hidden.weight": rnd((hidden,), 0.2),
        "mtp.norm.weight": rnd((hidden,), 0.2),
    }
    for name, tensor in state.items():
        if name.startswith(src):
            out["mtp.layers.0." + name[len(src):]] = rnd(tuple(tensor.shape), 0.1)
    state.update(out)


def fuse_experts(state):
    """Per-expert 2-D tensors (what save_pretrained writes) -> the fused 3-D layout of the real
    checkpoints: gate_up_proj [E, 2I, H] (rows [0, I) gate, [I, 2I) up) and down_proj [E, H, I]."""
    bases = sorted({n.split("mlp.experts.")[0] + "mlp.experts." for n in state
                    if "mlp.experts." in n and n.endswith(".gate_proj.weight")})
    for base in bases:
        count = 1 + max(int(n[len(base):].split(".")[0]) for n in state if n.startswith(base))
        gate_up, down = [], []
        for e in range(count):
            gate = state.pop(f"{base}{e}.gate_proj.weight")
            up = state.pop(f"{base}{e}.up_proj.weight")
            gate_up.append(torch.cat([gate, up], dim=0))
            down.append(state.pop(f"{base}{e}.down_proj.weight"))
        state[base + "gate_up_proj"] = torch.stack(gate_up).contiguous()
        state[base + "down_proj"] = torch.stack(down).contiguous()


def rewrite_checkpoint(out_dir, spec):
    """Applies the expert layout and the MTP tensors to what save_pretrained wrote."""
    index_path = os.path.join(out_dir, "model.safetensors.index.json")
    if os.path.exists(index_path):
        with open(index_path) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    state = {}
    owner = {}
    for fname in files:
        part = load_file(os.path.join(out_dir, fname))
        state.update(part)
        owner.update({k: fname for k in part})
    if spec.get("experts") == "fused":
        fuse_experts(state)
    if spec.get("mtp"):
        add_mtp_tensors(state, spec, spec["seed"])
    # New tensors go to the last shard; shards are rewritten whole.
    by_file = {fname: {} for fname in files}
    for name, tensor in state.items():
        fname = owner.get(name, files[-1])
        if fname not in by_file:
            fname = files[-1]
        if name not in owner and "experts." in name:
            # Per-expert tensors stay beside the layer they came from.
            layer_key = name.split("mlp.experts.")[0]
            fname = next((owner[k] for k in owner if k.startswith(layer_key)), files[-1])
        by_file[fname][name] = tensor
    for fname, part in by_file.items():
        save_file(part, os.path.join(out_dir, fname), metadata={"format": "pt"})
    if os.path.exists(index_path):
        weight_map = {n: f for f, part in by_file.items() for n in part}
        with open(index_path) as f:
            index = json.load(f)
        index["weight_map"] = dict(sorted(weight_map.items()))
        with open(index_path, "w") as f:
            json.dump(index, f, indent=2)


class RouterRecorder:
    def __init__(self, model):
        self.logits = []
        self.handles = [m.register_forward_hook(self.hook) for n, m in model.named_modules()
                        if type(m).__name__.endswith("TopKRouter")]

    def hook(self, module, inputs, output):
        self.logits.append((output[0].detach(), module.top_k))

    def min_gap(self):
        gap = float("inf")
        for logits, k in self.logits:
            probs = torch.softmax(logits.double(), dim=-1).sort(dim=-1, descending=True).values
            gap = min(gap, float((probs[:, k - 1] - probs[:, k]).min()))
        self.logits.clear()
        return gap


@torch.no_grad()
def greedy_reference(model, prompt, recorder):
    """Greedy continuation by full forwards; returns None when a near-tie makes it fragile."""
    ids = list(prompt)
    steps = []
    for _ in range(NEW_TOKENS):
        logits = model(input_ids=torch.tensor([ids])).logits[0, -1].double()
        logprobs = torch.log_softmax(logits, dim=-1)
        top = torch.topk(logprobs, TOP_K + 1)
        if float(top.values[0] - top.values[1]) < LOGIT_GAP:
            return None
        if recorder.min_gap() < ROUTER_GAP:
            return None
        choice = int(top.indices[0])
        steps.append(dict(id=choice, logprob=float(logprobs[choice]),
                          top=[[int(i), float(v)] for i, v in
                               zip(top.indices[:TOP_K], top.values[:TOP_K])]))
        ids.append(choice)
    return dict(prompt=prompt, greedy=[s["id"] for s in steps], steps=steps)


@torch.no_grad()
def well_conditioned(model, model32, case):
    """HF in float32 reproduces HF in float64 on this case (see CONDITION_LIMIT)."""
    ids = case["prompt"] + case["greedy"][:-1]
    n = len(case["prompt"])
    lp64 = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0, n - 1:].double(), -1)
    lp32 = torch.log_softmax(model32(input_ids=torch.tensor([ids])).logits[0, n - 1:].double(), -1)
    worst = 0.0
    for i, step in enumerate(case["steps"]):
        for tid, _ in step["top"]:
            worst = max(worst, abs(float(lp64[i, tid] - lp32[i, tid])))
    return worst <= CONDITION_LIMIT


@torch.no_grad()
def set_parameter_dtype(model, dtype):
    for p in model.parameters():
        p.data = p.data.to(dtype)


@torch.no_grad()
def bf16_deviation(model, prompt):
    """max |logits_bf16 - logits_f64| / max |logits_f64| of HF itself over the prompt: how far
    bf16 weights and activations move this (random, tiny) model. bf16 backends are held to a
    multiple of it, since no bf16 implementation can do much better."""
    model16 = copy.deepcopy(model)
    set_parameter_dtype(model16, torch.bfloat16)
    ids = torch.tensor([prompt])
    ref = model(input_ids=ids).logits[0].double()
    got = model16(input_ids=ids).logits[0].double()
    return float((got - ref).abs().max() / ref.abs().max())


class IllConditioned(RuntimeError):
    pass


def make_fixture(spec, out_root, attempts=50):
    out_dir = os.path.join(out_root, spec["name"])
    os.makedirs(out_dir, exist_ok=True)
    model = build_model(spec)
    rerandomise(model, spec["seed"])
    # Only parameters change dtype: a whole-model .to() would also round the rotary inv_freq
    # buffer, which HF keeps in float32 when it loads a bf16/f16 checkpoint.
    set_parameter_dtype(model, getattr(torch, spec["dtype"]))
    shard = "20KB" if spec.get("shards") else "100GB"
    model.save_pretrained(out_dir, safe_serialization=True, max_shard_size=shard)
    rewrite_checkpoint(out_dir, spec)
    # The reference runs in float64 from exactly the saved (rounded) values.
    set_parameter_dtype(model, torch.float64)
    model.set_experts_implementation("eager")  # grouped_mm rejects float64
    model32 = copy.deepcopy(model)
    set_parameter_dtype(model32, torch.float32)
    recorder = RouterRecorder(model)
    vocab = model.config.get_text_config().vocab_size
    rng = random.Random(spec["seed"])
    cases = []
    for length in PROMPT_LENGTHS:
        for _attempt in range(attempts):
            prompt = [rng.randrange(vocab) for _ in range(length)]
            case = greedy_reference(model, prompt, recorder)
            if case is not None and well_conditioned(model, model32, case):
                cases.append(case)
                break
        else:
            shutil.rmtree(out_dir)
            raise IllConditioned(f"{spec['name']}: no prompt of length {length} without "
                                 f"near-ties or rounding sensitivity in {attempts} draws")
    reference = dict(fixture=spec, transformers=transformers.__version__,
                     torch=torch.__version__, new_tokens=NEW_TOKENS, top_k=TOP_K, cases=cases,
                     hf_bf16_logits_rel=bf16_deviation(model, cases[-1]["prompt"]))
    with open(os.path.join(out_dir, "reference.json"), "w") as f:
        json.dump(reference, f, indent=1)
    print(f"{spec['name']}: {out_dir}", flush=True)


def random_spec(i, rng):
    kind = rng.choice(["moe", "dense"])
    n_layers = rng.randint(2, 6)
    layers = "".join(rng.choice("LLF") for _ in range(n_layers))
    if "F" not in layers:
        layers = layers[:-1] + "F"
    hk = rng.choice([1, 2, 3])
    heads_kv = rng.choice([1, 2])
    spec = dict(name=f"unseen_{i}_{kind}", kind=kind, layout=rng.choice(["text", "vlm"]),
                experts=rng.choice(["fused", "per_expert"]),
                dtype=rng.choice(["float32", "bfloat16", "float16"]), layers=layers, hk=hk,
                hv=hk * rng.choice([1, 2, 4]), rotary=rng.choice([0.25, 0.5, 1.0]),
                tie=rng.random() < 0.3, seed=rng.randint(1, 10**6), mtp=rng.random() < 0.5,
                shards=rng.random() < 0.3, hidden=rng.choice([32, 48, 64, 96]),
                vocab=rng.choice([200, 256, 300, 384]), heads=heads_kv * rng.choice([1, 2, 3]),
                kv_heads=heads_kv, head_dim=rng.choice([16, 32, 64]), dk=rng.choice([8, 16, 32]),
                dv=rng.choice([8, 16, 32]), experts_n=rng.choice([4, 6, 8, 12]),
                topk=rng.choice([1, 2, 3]), moe_inter=rng.choice([16, 32]),
                shared_inter=rng.choice([24, 40]), inter=rng.choice([64, 80]))
    # Scaled RoPE on a quarter of them (drawn last: the other draws of a seed stay as they were);
    # 64 original positions, so the 150-token prompt runs past them.
    scaling = rng.choice([None, None, None, "yarn", "linear"])
    if scaling == "yarn":
        spec["rope"] = dict(rope_type="yarn", factor=rng.choice([2.0, 4.0]),
                            original_max_position_embeddings=64)
    elif scaling == "linear":
        spec["rope"] = dict(rope_type="linear", factor=rng.choice([2.0, 3.0]))
    return spec


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--only", help="build only the fixture with this name")
    parser.add_argument("--random", type=int, default=0, help="build N random unseen checkpoints")
    parser.add_argument("--seed", type=int, default=12345, help="seed for --random")
    args = parser.parse_args()
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    if not args.random:
        for spec in FIXTURES:
            if args.only in (None, spec["name"]):
                make_fixture(spec, args.out)
        return
    # Random checkpoints: one that yields no well-conditioned prompt in a few draws is replaced
    # by a fresh draw (its weights, not ninfer, make the comparison meaningless).
    rng = random.Random(args.seed)
    built = 0
    while built < args.random:
        spec = random_spec(built, rng)
        try:
            make_fixture(spec, args.out, attempts=6)
            built += 1
        except IllConditioned as e:
            print(f"redrawn: {e}", flush=True)


if __name__ == "__main__":
    main()
