"""PyTorch reference of the DFlash and DFlash2 drafters, written from the published algorithm
(arXiv 2602.06036 and the DFlash2 write-up; docs/SPECULATIVE.md restates both) and checked against
the semantics of z-lab's reference loop: the oracle for ninfer's drafter (model/dflash.h).

The drafter is a small non-causal transformer of Qwen3 blocks (plain RMSNorm, q/k head norms,
rotate-half RoPE over the whole head, GQA, SwiGLU) conditioned on the target by KV injection:
  context  c = hidden_norm(fc(features)), features = the target's residual stream after the tap
           layers (HF's hidden_states[l + 1]) of every committed position; each layer's context
           keys are rope(k_norm(k_proj(c))) at the context positions, its values v_proj(c);
  block    [anchor, MASK x K] at positions F .. F + K, embedded with the target's embedding; each
           row attends to the context positions < F and the block's rows, through the layer's
           mask: symmetric window |p - tau| < sliding_window on sliding layers, causal rows on
           causal layers (z-lab: is_causal when given, else the sliding layers);
  output   norm(x) of the mask rows; logits = target lm_head(h) * output_multiplier (soft-capped
           by final_logit_softcapping when set); DFlash drafts the argmax of each row.
DFlash2 adds grouped dynamic causal convolutions around attention and MLP (prepare before,
finish after, one kernel projection for both sides, no history before the block's first row)
and the top-k conditional selector: e_i[c] = u_i[c] + sum_r P[pred, r] g_i[r] S[cand_c, r],
walked left to right from the anchor (greedy: the first largest).

Checkpoints use z-lab's layout (config.json with dflash_config, safetensors names as below).
Everything here runs in float32 unless told otherwise.
"""
import json
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import load_file, save_file


class RMSNorm(nn.Module):
    """Qwen3RMSNorm: plain weight, the normalised value rounded to the input dtype first."""

    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * xf.to(dtype)


def rope(x, positions, theta):
    """Rotate-half RoPE over the whole head: x [..., T, heads, D], positions [T]."""
    D = x.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, D, 2, dtype=torch.float32, device=x.device) / D))
    ang = positions.float()[:, None] * inv[None, :]  # [T, D/2]
    cos = torch.cat([ang.cos(), ang.cos()], -1)[:, None, :]
    sin = torch.cat([ang.sin(), ang.sin()], -1)[:, None, :]
    half = D // 2
    rot = torch.cat([-x[..., half:], x[..., :half]], -1)
    return (x.float() * cos + rot.float() * sin).to(x.dtype)


class GroupedDynamicConv(nn.Module):
    """One GroupedDynamicCausalConv: base_kernel [2 sides, taps, H], kernel_projection
    [2 * taps * G, H] (rows: side, tap, group)."""

    def __init__(self, hidden, taps, group):
        super().__init__()
        self.taps, self.group = taps, group
        groups = hidden // group
        self.base_kernel = nn.Parameter(torch.zeros(2, taps, hidden))
        self.kernel_projection = nn.Linear(hidden, 2 * taps * groups, bias=False)

    def convolve(self, x, dynamic, side):
        """x [B, W, H] (blocks), dynamic [B, W, 2, taps, G] -> [B, W, H]."""
        x = x.contiguous()
        B, W, H = x.shape
        G = H // self.group
        xb = x.view(B, W, G, self.group)
        out = torch.zeros_like(xb, dtype=torch.float32)
        for o in range(self.taps):
            shifted = xb if o == 0 else F.pad(xb[:, :-o], (0, 0, 0, 0, o, 0))
            kern = self.base_kernel[side, o].view(1, 1, G, self.group).float()
            dyn = dynamic[:, :, side, o].float().unsqueeze(-1)  # [B, W, G, 1]
            out = out + (kern + dyn) * shifted.float()
        return out.view(B, W, H).to(x.dtype)

    def prepare(self, x):
        B, W, H = x.shape
        dynamic = self.kernel_projection(x).view(B, W, 2, self.taps, H // self.group)
        return self.convolve(x, dynamic, 0), dynamic

    def finish(self, x, dynamic):
        return self.convolve(x, dynamic, 1)


class Layer(nn.Module):
    def __init__(self, cfg, index):
        super().__init__()
        H, D = cfg["hidden_size"], cfg["head_dim"]
        nH, nKV, I = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["intermediate_size"]
        eps = cfg["rms_norm_eps"]
        self.nH, self.nKV, self.D = nH, nKV, D
        self.input_layernorm = RMSNorm(H, eps)
        self.post_attention_layernorm = RMSNorm(H, eps)
        self.q_proj = nn.Linear(H, nH * D, bias=False)
        self.k_proj = nn.Linear(H, nKV * D, bias=False)
        self.v_proj = nn.Linear(H, nKV * D, bias=False)
        self.o_proj = nn.Linear(nH * D, H, bias=False)
        self.q_norm = RMSNorm(D, eps)
        self.k_norm = RMSNorm(D, eps)
        self.gate_proj = nn.Linear(H, I, bias=False)
        self.up_proj = nn.Linear(H, I, bias=False)
        self.down_proj = nn.Linear(I, H, bias=False)
        types = cfg.get("layer_types") or ["full_attention"] * cfg["num_hidden_layers"]
        self.sliding = types[index] == "sliding_attention"
        causal = cfg.get("is_causal")
        self.causal = self.sliding if causal is None else bool(causal)
        self.window = cfg.get("sliding_window") if self.sliding else None
        d = cfg["dflash_config"]
        self.v2 = "selector_rank" in d
        if self.v2:
            self.attention_conv = GroupedDynamicConv(H, d["conv_kernel_size"], d["conv_group_size"])
            self.mlp_conv = GroupedDynamicConv(H, d["conv_kernel_size"], d["conv_group_size"])

    def context_kv(self, c, positions, theta):
        """c [N, S, H] at positions [N, S] -> keys [N, S, nKV, D] (normed, rotated) and values."""
        N, S, _ = c.shape
        k = self.k_norm(self.k_proj(c).view(N, S, self.nKV, self.D))
        k = rope(k.reshape(N * S, self.nKV, self.D), positions.reshape(-1), theta)
        return k.view(N, S, self.nKV, self.D), self.v_proj(c).view(N, S, self.nKV, self.D)

    def mask(self, q_pos, q_block, ctx_pos, anchors):
        """Visibility [N, Q, S + Q] of every window's block rows (q_pos, q_block [N, Q]): the
        context positions before the row's anchor (anchors [N, B]), its own block's rows."""
        anchor_of_q = anchors.gather(1, q_block)                        # [N, Q]
        vis_ctx = ctx_pos[:, None, :] < anchor_of_q[:, :, None]
        vis_blk = q_block[:, :, None] == q_block[:, None, :]
        if self.causal:
            vis_blk = vis_blk & (q_pos[:, None, :] <= q_pos[:, :, None])
        vis = torch.cat([vis_ctx, vis_blk], 2)
        if self.window:
            all_pos = torch.cat([ctx_pos, q_pos], 1)
            dist = q_pos[:, :, None] - all_pos[:, None, :]
            vis = vis & (dist < self.window) & (-dist < self.window)
        return vis

    def forward(self, x, q_pos, ctx_k, ctx_v, vis, theta):
        """x [N, B, W, H] blocks of N windows; q_pos [N, B W]; ctx_k/v [N, S, nKV, D];
        vis [N, B W, S + B W]."""
        N, B, W, H = x.shape
        Q = B * W
        residual = x
        h = self.input_layernorm(x).reshape(N * B, W, H)
        if self.v2:
            h, attn_dyn = self.attention_conv.prepare(h)
        h = h.reshape(N * Q, H)
        pos = q_pos.reshape(-1)
        q = rope(self.q_norm(self.q_proj(h).view(N * Q, self.nH, self.D)), pos, theta)
        k = rope(self.k_norm(self.k_proj(h).view(N * Q, self.nKV, self.D)), pos, theta)
        v = self.v_proj(h).view(N, Q, self.nKV, self.D)
        keys = torch.cat([ctx_k, k.view(N, Q, self.nKV, self.D)], 1).transpose(1, 2)
        values = torch.cat([ctx_v, v], 1).transpose(1, 2)            # [N, nKV, S + Q, D]
        rep = self.nH // self.nKV
        keys = keys.repeat_interleave(rep, 1)
        values = values.repeat_interleave(rep, 1)
        qh = q.view(N, Q, self.nH, self.D).transpose(1, 2)            # [N, nH, Q, D]
        scores = (qh.float() @ keys.float().transpose(2, 3)) / math.sqrt(self.D)
        scores = scores.masked_fill(~vis[:, None], float("-inf"))
        out = (torch.softmax(scores, -1) @ values.float()).to(x.dtype)  # [N, nH, Q, D]
        out = self.o_proj(out.transpose(1, 2).reshape(N * Q, self.nH * self.D))
        out = out.view(N * B, W, H)
        if self.v2:
            out = self.attention_conv.finish(out, attn_dyn)
        x = residual + out.view(N, B, W, H)
        residual = x
        h = self.post_attention_layernorm(x).reshape(N * B, W, H)
        if self.v2:
            h, mlp_dyn = self.mlp_conv.prepare(h)
        out = self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))
        if self.v2:
            out = self.mlp_conv.finish(out, mlp_dyn)
        return residual + out.view(N, B, W, H)


class Selector(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["dflash_config"]
        V, R = cfg["vocab_size"], d["selector_rank"]
        self.top_k = d["selector_top_k"]
        self.predecessor_codebook = nn.Parameter(torch.zeros(V, R))
        self.successor_codebook = nn.Parameter(torch.zeros(V, R))
        self.hidden_projection = nn.Linear(cfg["hidden_size"], R, bias=False)

    def scores(self, g, unary, cand, pred):
        """g [N, R], unary/cand [N, k], pred [N] -> edge scores [N, k]."""
        left = self.predecessor_codebook[pred] * g                   # [N, R]
        right = self.successor_codebook[cand]                         # [N, k, R]
        return unary + torch.einsum("nr,nkr->nk", left.float(), right.float())

    def walk(self, hidden, logits, anchor):
        """Greedy conditional walk over K rows: hidden [K, H], logits [K, V] -> ids [K]."""
        unary, cand = stable_top_k(logits, self.top_k)
        g = self.hidden_projection(hidden)
        pred = torch.tensor([anchor], device=hidden.device)
        path = []
        for i in range(hidden.shape[0]):
            e = self.scores(g[i:i + 1], unary[i:i + 1], cand[i:i + 1], pred)[0]
            j = int(torch.argmax(e))  # torch.argmax returns the first maximum
            pred = cand[i:i + 1, j]
            path.append(int(pred))
        return path


def stable_top_k(logits, k):
    """The k largest logits of each row, ties by lower id first (ninfer's logprobs_top_k)."""
    # A stable sort of the ids by descending logit: equal logits keep the lower id first.
    order = torch.sort(-logits.double(), dim=-1, stable=True).indices[..., :k]
    return logits.gather(-1, order), order


class Drafter(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        d = cfg["dflash_config"]
        H = cfg["hidden_size"]
        self.taps = list(d["target_layer_ids"])
        self.mask_token_id = d["mask_token_id"]
        self.theta = (cfg.get("rope_parameters") or {}).get("rope_theta", cfg.get("rope_theta", 1e6))
        self.fc = nn.Linear(len(self.taps) * H, H, bias=False)
        self.hidden_norm = RMSNorm(H, cfg["rms_norm_eps"])
        self.norm = RMSNorm(H, cfg["rms_norm_eps"])
        self.layers = nn.ModuleList([Layer(cfg, i) for i in range(cfg["num_hidden_layers"])])
        self.v2 = "selector_rank" in d
        self.output_multiplier = d.get("output_multiplier", 1.0)
        self.softcap = d.get("final_logit_softcapping") or 0.0
        if self.v2:
            self.candidate_selector = Selector(cfg)

    def logits(self, hidden, lm_head):
        x = lm_head(hidden).float() * self.output_multiplier
        if self.softcap > 0:
            x = torch.tanh(x / self.softcap) * self.softcap
        return x

    def forward_blocks(self, features, ctx_pos, embeds, q_pos, anchors):
        """N windows: features [N, S, n H] at ctx_pos [N, S]; embeds [N, B, W, H] blocks whose
        rows sit at q_pos [N, B W] (block b at anchors[:, b] .. + W - 1). Returns the
        final-normed [N, B, W, H]."""
        N, B, W, H = embeds.shape
        c = self.hidden_norm(self.fc(features))
        q_block = torch.arange(B, device=embeds.device).repeat_interleave(W)[None].expand(N, -1)
        x = embeds
        for layer in self.layers:
            vis = layer.mask(q_pos, q_block, ctx_pos, anchors)
            ctx_k, ctx_v = layer.context_kv(c, ctx_pos, self.theta)
            x = layer(x, q_pos, ctx_k, ctx_v, vis, self.theta)
        return self.norm(x)

    def propose(self, features, embed, lm_head, anchor_id, K):
        """One round for one sequence: features [F, n H] of positions 0 .. F-1, the anchor at
        position F. Returns (drafts [K], mask-row logits [K, V])."""
        dev = features.device
        Fpos = features.shape[0]
        ids = torch.tensor([anchor_id] + [self.mask_token_id] * K, device=dev)
        q_pos = torch.arange(Fpos, Fpos + K + 1, device=dev)
        h = self.forward_blocks(features[None], torch.arange(Fpos, device=dev)[None],
                                embed(ids)[None, None], q_pos[None],
                                torch.tensor([[Fpos]], device=dev))[0, 0, 1:]
        logits = self.logits(h, lm_head)
        if self.v2:
            return self.candidate_selector.walk(h, logits, anchor_id), logits
        return [int(i) for i in stable_top_k(logits, 1)[1][:, 0]], logits


# z-lab's safetensors names of each parameter.
def state_names(model):
    out = {}
    for name, p in model.state_dict().items():
        key = name
        for short, full in (("gate_proj", "mlp.gate_proj"), ("up_proj", "mlp.up_proj"),
                            ("down_proj", "mlp.down_proj")):
            key = key.replace("." + short + ".", "." + full + ".")
        for short in ("q_proj", "k_proj", "v_proj", "o_proj", "q_norm", "k_norm"):
            key = key.replace("." + short + ".", ".self_attn." + short + ".")
        out[key] = name
    return out


def save(model, out_dir, dtype=torch.bfloat16):
    os.makedirs(out_dir, exist_ok=True)
    names = state_names(model)
    state = model.state_dict()
    tensors = {key: state[name].detach().to(dtype).contiguous().cpu() for key, name in names.items()}
    save_file(tensors, os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(model.cfg, f, indent=1)


def load(model_dir, device="cpu", dtype=torch.float32):
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    model = Drafter(cfg)
    tensors = load_file(os.path.join(model_dir, "model.safetensors"))
    names = state_names(model)
    state = {names[k]: v.to(dtype) for k, v in tensors.items()}
    model.load_state_dict(state, strict=True)
    return model.to(device).eval()


@torch.no_grad()
def features_of(target, ids, taps):
    """The target's tap features [T, n H] of a 1-D id tensor and its greedy next ids [T]."""
    out = target(input_ids=ids[None], output_hidden_states=True)
    feats = torch.cat([out.hidden_states[t + 1][0] for t in taps], -1)
    return feats, out.logits[0].argmax(-1)


@torch.no_grad()
def generate(target, drafter, prompt, max_new, K, max_rounds=None):
    """Greedy speculative generation in z-lab's loop (dflash_generate) with full target
    forwards: returns (tokens, [(drafted, accepted)] per round). The target verifies [anchor, drafts]
    and commits the longest matching prefix plus its own next token. A round drafts
    k = min(K, max_new - generated - 1) tokens (ninfer's scheduler: the last accepted draft and
    the bonus stay within max_new); with k = 0 the step decodes plainly and is not a round.
    max_rounds: stop after that many rounds."""
    dev = next(drafter.parameters()).device
    embed = target.get_input_embeddings()
    lm_head = target.get_output_embeddings()
    ids = torch.tensor(prompt, device=dev)
    feats, greedy = features_of(target, ids, drafter.taps)
    tokens = [int(greedy[-1])]
    accepted = []
    while len(tokens) < max_new and (max_rounds is None or len(accepted) < max_rounds):
        k = min(K, max_new - len(tokens) - 1)
        seq = torch.cat([ids, torch.tensor(tokens, device=dev)])
        drafts = drafter.propose(feats[:seq.shape[0] - 1], embed, lm_head, tokens[-1], k)[0] \
            if k > 0 else []
        full = torch.cat([seq, torch.tensor(drafts, dtype=seq.dtype, device=dev)])
        f_all, g_all = features_of(target, full, drafter.taps)
        base = seq.shape[0] - 1  # the anchor's row
        a = 0
        while a < k and drafts[a] == int(g_all[base + a]):
            a += 1
        if k > 0:
            accepted.append((k, a))
        tokens += drafts[:a] + [int(g_all[base + a])]
        feats = f_all
    return tokens[:max_new], accepted


def first_round_accepted(target, drafter, prompt, K):
    """Drafts accepted in the first round after prefilling `prompt` (a fixed window: no generated
    text, so a precision change moves only the windows whose own argmaxes flip): generate's first
    round, with room for all K drafts (the anchor, K drafts and the bonus)."""
    return generate(target, drafter, prompt, K + 2, K, max_rounds=1)[1][0][1]
