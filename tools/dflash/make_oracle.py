"""Logit-level oracle cases for ninfer's DFlash / DFlash2 drafter forward (model/dflash.h), from
the PyTorch reference (reference.py): a random drafter in z-lab's layout (f32 safetensors), random
context features, the target's embedding and head, and the reference's mask-row logits of one
proposal round [anchor, MASK x K] after a context of F positions. tests/model/
test_dflash_oracle.cpp runs ninfer's drafter on the same files and compares the logits.

    python tools/dflash/make_oracle.py --config configs/dflash/qwen3.6-35b-a3b-dflash.json \
        --vocab 4096 --target-layers 40 --context 40 --K 15 --out /tmp/oracle_35b

--small writes the committed CI case (tests/fixtures_dflash/): a fixture-sized drafter of the
config's kind (2 layers, H 64). --vocab shrinks the vocabulary (the target head and DFlash2's
codebooks; a real drafter's layers keep their shapes). The drafter is conditioned on its context:
the weights are scaled so that activations stay near unit size at any width.

Files in --out: config.json, model.safetensors (the drafter, f32, as a downloaded drafter), and
in oracle/: oracle.safetensors (features [F, n H], embed [V, H], lm_head [V, H], logits [K, V],
hidden [K, H]; DFlash2: walk [K] I32, the selector's greedy path) and oracle.json (anchor, K,
context, target_layers, seed).
"""
import argparse
import json
import math
import os

import torch
from safetensors.torch import save_file

import reference


def small_config(cfg, vocab):
    """A fixture-sized drafter of cfg's kind: 2 layers (sliding, then full), H 64."""
    out = dict(cfg)
    out.update(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=2, head_dim=16, sliding_window=24,
               layer_types=["sliding_attention", "full_attention"])
    d = dict(cfg["dflash_config"])
    d["target_layer_ids"] = [1, 2]
    if "selector_rank" in d:
        d.update(conv_kernel_size=2, conv_group_size=16, selector_rank=8, selector_top_k=4)
    out["dflash_config"] = d
    return out


def init_(model, seed):
    """Norm weights near 1, conv base kernels and codebooks small, matrices N(0, 1/fan_in)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            r = torch.randn(p.shape, generator=g)
            if name.endswith("norm.weight") or "layernorm" in name:
                p.copy_(1.0 + 0.1 * r)
            elif "base_kernel" in name:
                p.copy_(0.3 * r)
            elif "codebook" in name:
                p.copy_(r / math.sqrt(p.shape[-1]))
            else:  # nn.Linear [out, in]
                p.copy_(r / math.sqrt(p.shape[-1]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--target-layers", type=int, default=4)
    ap.add_argument("--context", type=int, default=30)
    ap.add_argument("--K", type=int, default=7)
    ap.add_argument("--seed", type=int, default=11)
    a = ap.parse_args()
    with open(a.config) as f:
        cfg = json.load(f)
    if a.small:
        cfg = small_config(cfg, a.vocab)
    cfg["vocab_size"] = a.vocab
    d = cfg["dflash_config"]
    d["mask_token_id"] = a.vocab - 3
    d["target_layer_ids"] = [t for t in d["target_layer_ids"] if t < a.target_layers] or [1]
    cfg["num_target_layers"] = a.target_layers
    torch.manual_seed(a.seed)
    drafter = reference.Drafter(cfg).float().eval()
    init_(drafter, a.seed)
    H, n = cfg["hidden_size"], len(d["target_layer_ids"])
    g = torch.Generator().manual_seed(a.seed + 1)
    features = torch.randn(a.context, n * H, generator=g)
    embed = torch.randn(a.vocab, H, generator=g)
    lm_head = torch.randn(a.vocab, H, generator=g) / math.sqrt(H)
    anchor = int(torch.randint(0, a.vocab - 3, (1,), generator=g))
    E = torch.nn.Embedding(a.vocab, H)
    E.weight.data.copy_(embed)
    L = torch.nn.Linear(H, a.vocab, bias=False)
    L.weight.data.copy_(lm_head)
    with torch.no_grad():
        F = features.shape[0]
        ids = torch.tensor([anchor] + [drafter.mask_token_id] * a.K)
        q_pos = torch.arange(F, F + a.K + 1)
        hidden = drafter.forward_blocks(features[None], torch.arange(F)[None], E(ids)[None, None],
                                        q_pos[None], torch.tensor([[F]]))[0, 0, 1:]
        logits = drafter.logits(hidden, L)
        # DFlash2: the selector's greedy conditional walk over the rows' top-k candidates.
        walk = drafter.candidate_selector.walk(hidden, logits, anchor) if drafter.v2 else []
    reference.save(drafter, a.out, dtype=torch.float32)
    os.makedirs(os.path.join(a.out, "oracle"), exist_ok=True)
    save_file({"features": features.contiguous(), "embed": embed.contiguous(),
               "lm_head": lm_head.contiguous(), "logits": logits.contiguous(),
               "hidden": hidden.contiguous(),
               **({"walk": torch.tensor(walk, dtype=torch.int32)} if walk else {})},
              os.path.join(a.out, "oracle", "oracle.safetensors"))
    with open(os.path.join(a.out, "oracle", "oracle.json"), "w") as f:
        json.dump({"anchor": anchor, "K": a.K, "context": a.context,
                   "target_layers": a.target_layers, "seed": a.seed,
                   "config": os.path.basename(a.config), "small": a.small}, f, indent=1)
    top = logits.argmax(-1).tolist()
    print(f"{a.out}: K={a.K} F={a.context} V={a.vocab} H={H} argmax {top[:8]} "
          f"|logits| max {logits.abs().max():.3f}")


if __name__ == "__main__":
    main()
