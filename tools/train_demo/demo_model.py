"""The demo model: HF transformers' Qwen3_5MoeForCausalLM for the main model (HF stays the oracle)
plus the MTP module of MODEL_QWEN3_5.md section 3 in PyTorch, with the real mtp.* tensor names;
export to and load from the real checkpoint layout (nested qwen3_5_moe config with
mtp_num_hidden_layers = 1; model.language_model.*, lm_head.weight, mtp.*; fused experts; bf16).
Used by train.py, eval_mtp.py and check_ninfer.py.
"""
import copy
import json
import os
import shutil

from common import block_kernel_imports, write_json

block_kernel_imports()

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from safetensors import safe_open  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoModelForCausalLM, Qwen3_5MoeForCausalLM  # noqa: E402
from transformers import Qwen3_5MoeTextConfig  # noqa: E402
from transformers.models.qwen3_5_moe import modeling_qwen3_5_moe as hf  # noqa: E402

from make_fixtures import text_kwargs  # noqa: E402  (tools/reference, the fixtures' config recipe)

# About 14.7M parameters (29 MB in bf16): 8 layers GDN:attention 3:1, 16 experts top-4 with a
# shared expert, partial rotary 0.25 (16 of 64 dims), one MTP layer. rope_theta is 1e4, not the
# real 1e7: 8 rotary frequencies must resolve positions within a few thousand tokens.
DEFAULT_SHAPE = dict(hidden=256, layers="LLLFLLLF", heads=4, kv_heads=2, head_dim=64, hk=2, hv=4,
                     dk=64, dv=64, experts_n=16, topk=4, moe_inter=64, shared_inter=128,
                     rotary=0.25, tie=False)
ROPE_THETA = 1e4
MAX_POSITIONS = 8192
TEXT_PREFIX = "model.language_model."


def make_config(vocab, eos_id, shape=None, attn="sdpa", experts="eager", aux_coef=0.01):
    spec = dict(kind="moe", vocab=vocab, **(shape or DEFAULT_SHAPE))
    kw = text_kwargs(spec)
    kw["rope_parameters"]["rope_theta"] = ROPE_THETA
    kw.update(max_position_embeddings=MAX_POSITIONS, attn_implementation=attn,
              bos_token_id=eos_id, eos_token_id=eos_id, pad_token_id=None,
              router_aux_loss_coef=aux_coef, initializer_range=0.02)
    cfg = Qwen3_5MoeTextConfig(**kw)
    cfg._experts_implementation = experts
    return cfg


class MTP(nn.Module):
    """MODEL_QWEN3_5.md section 3: fc(concat(norm_e(embed(x_{t+1})), norm_h(h_t))) -> one
    full-attention decoder layer (HF's own class) -> mtp.norm -> the shared lm_head predicts
    x_{t+2}. Chained step s >= 2 feeds (embed(token_s), d_{s-1}) at position t + s - 1 and attends
    to the step-1 rows 0..t and to its own chain at t (what the MTP KV cache holds when drafting
    from position t). state_dict keys are the checkpoint's mtp.* names without the prefix."""

    def __init__(self, config):
        super().__init__()
        cfg1 = copy.deepcopy(config)
        cfg1.layer_types, cfg1.num_hidden_layers = ["full_attention"], 1
        cfg1._attn_implementation = config._attn_implementation
        cfg1._experts_implementation = config._experts_implementation
        H, eps = config.hidden_size, config.rms_norm_eps
        self.fc = nn.Linear(2 * H, H, bias=False)
        self.pre_fc_norm_embedding = hf.Qwen3_5MoeRMSNorm(H, eps=eps)
        self.pre_fc_norm_hidden = hf.Qwen3_5MoeRMSNorm(H, eps=eps)
        self.norm = hf.Qwen3_5MoeRMSNorm(H, eps=eps)
        self.layers = nn.ModuleList([hf.Qwen3_5MoeDecoderLayer(cfg1, 0)])
        self.attn_impl = config._attn_implementation

    @torch.no_grad()
    def init_weights(self, std):
        for name, p in self.named_parameters():
            if name.endswith("norm.weight"):  # zero-centred norms (q_norm, k_norm too): 1 + 0
                p.zero_()
            else:
                p.normal_(0.0, std)

    def inputs(self, embed, tokens, hidden):
        e = self.pre_fc_norm_embedding(embed(tokens))
        return self.fc(torch.cat([e, self.pre_fc_norm_hidden(hidden)], dim=-1))

    def chain(self, embed, lm_head, rotary, hidden, step_tokens, next_tokens=None):
        """Runs len(step_tokens) chained steps over all positions at once. hidden: [B, T, H], the
        target's final-normed states h_0..h_{T-1}; step_tokens[0]: [B, T], x_1..x_T. With
        next_tokens None, step s >= 2 is fed step_tokens[s-1] (teacher forcing, for training);
        else next_tokens(logits) picks the token of the next step (greedy drafting). Returns the
        logits of every step, [B, T, V] each; step s at row t predicts x_{t+s+1}."""
        B, T, _ = hidden.shape
        steps = len(step_tokens) if next_tokens is None else next_tokens.steps
        xs, logits, tokens, d = [], [], step_tokens[0], hidden
        for s in range(steps):
            xs.append(self.inputs(embed, tokens, d))             # step 0 reads h, later d_{s-1}
            x = torch.cat(xs, dim=1)                              # [B, (s+1)T, H]
            pos = torch.cat([torch.arange(T, device=x.device) + k for k in range(s + 1)])
            cos_sin = rotary(x, pos.view(1, 1, -1).expand(3, B, -1))
            mask = chain_mask(T, s + 1, x.device)
            if self.attn_impl == "eager":  # additive mask; sdpa takes the bool one
                mask = torch.zeros(mask.shape, dtype=torch.float32, device=x.device).masked_fill(
                    ~mask, torch.finfo(torch.float32).min)
            u = self.layers[0](x, position_embeddings=cos_sin,
                               attention_mask=mask[None, None])[:, s * T:]
            d = self.norm(u)
            logits.append(lm_head(d))
            if s + 1 < steps:
                tokens = step_tokens[s + 1] if next_tokens is None else next_tokens(logits[-1])
        return logits


def chain_mask(T, steps, device):
    """[steps*T, steps*T] bool, True = may attend. Row (s, t) sees the step-0 rows j <= t and the
    rows (s', t) of its own chain for 1 <= s' <= s."""
    idx = torch.arange(steps * T, device=device)
    s, t = idx // T, idx % T
    first = (s[None, :] == 0) & (t[None, :] <= t[:, None])
    chain = (s[None, :] >= 1) & (s[None, :] <= s[:, None]) & (t[None, :] == t[:, None])
    return first | chain


class DemoModel(nn.Module):
    """The HF main model and the MTP module, as one module for the optimizer and checkpoints."""

    def __init__(self, config):
        super().__init__()
        self.lm = Qwen3_5MoeForCausalLM(config)
        self.mtp = MTP(self.lm.config)

    def hidden(self, ids):
        return self.lm.model(input_ids=ids).last_hidden_state  # final-normed

    def mtp_logits(self, hidden, step_tokens, next_tokens=None):
        m = self.lm.model
        return self.mtp.chain(m.embed_tokens, self.lm.lm_head, m.rotary_emb, hidden, step_tokens,
                              next_tokens)


class GreedyNext:
    """next_tokens for MTP.chain: greedy drafting for `steps` chained steps."""

    def __init__(self, steps):
        self.steps = steps

    def __call__(self, logits):
        return logits.argmax(-1)


def param_counts(model):
    main = sum(p.numel() for p in model.lm.parameters())
    mtp = sum(p.numel() for p in model.mtp.parameters())
    return dict(main=main, mtp=mtp, total=main + mtp)


def checkpoint_tensors(model):
    """Tensors under their checkpoint names, bf16, experts fused (HF keeps them fused in memory:
    gate_up_proj [E, 2I, H] with rows [0, I) gate, down_proj [E, H, I])."""
    out = {}
    for name, t in model.lm.state_dict().items():
        key = name if name.startswith("lm_head.") else TEXT_PREFIX + name[len("model."):]
        out[key] = t
    for name, t in model.mtp.state_dict().items():
        out["mtp." + name] = t
    return {k: v.detach().to(torch.bfloat16).contiguous().cpu() for k, v in out.items()}


def checkpoint_config(config):
    """The nested qwen3_5_moe config.json of the real checkpoints, without a vision tower."""
    text = config.to_diff_dict()
    for key in ("architectures", "dtype", "torch_dtype", "transformers_version",
                "tie_word_embeddings"):
        text.pop(key, None)
    text.update(model_type="qwen3_5_moe_text", mtp_num_hidden_layers=1,
                mtp_use_dedicated_embeddings=False)
    return {"architectures": ["Qwen3_5MoeForCausalLM"], "model_type": "qwen3_5_moe",
            "text_config": text, "tie_word_embeddings": config.tie_word_embeddings,
            "dtype": "bfloat16", "transformers_version": transformers.__version__}


def export(model, out_dir, tokenizer_dir, extra=None):
    os.makedirs(out_dir, exist_ok=True)
    save_file(checkpoint_tensors(model), os.path.join(out_dir, "model.safetensors"),
              metadata={"format": "pt"})
    write_json(os.path.join(out_dir, "config.json"), checkpoint_config(model.lm.config))
    for name in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        shutil.copy(os.path.join(tokenizer_dir, name), os.path.join(out_dir, name))
    if extra:
        write_json(os.path.join(out_dir, "training.json"), extra)


def fp32_device(name):
    """The evaluation device ("auto": cuda when there is one), with TF32 off so that float32
    matmuls are float32: the evaluations are oracles."""
    device = torch.device(("cuda" if torch.cuda.is_available() else "cpu")
                          if name == "auto" else name)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return device


def load_exported(model_dir, device="cpu", dtype=torch.float32, attn="eager"):
    """The exported checkpoint as HF loads it (AutoModelForCausalLM: mtp.* is ignored) plus the
    MTP module from the mtp.* tensors. float32 with eager attention and experts: the oracle."""
    lm = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype, attn_implementation=attn,
                                              experts_implementation="eager")
    lm.to(device).eval()
    model = DemoModel.__new__(DemoModel)
    nn.Module.__init__(model)
    model.lm = lm
    model.mtp = MTP(lm.config)
    state = {}
    with safe_open(os.path.join(model_dir, "model.safetensors"), "pt") as f:
        for key in f.keys():
            if key.startswith("mtp."):
                state[key[4:]] = f.get_tensor(key).to(dtype)
    model.mtp.load_state_dict(state, strict=True)
    model.mtp.to(device).eval()
    return model


def read_config(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        return json.load(f)


def sequence_nll(model, ids, context, device, autocast=False, batch=8):
    """Sum of the next-token NLLs and their count over non-overlapping windows of `context`
    tokens of the 1-D id list `ids`; each window starts from a fresh state and scores its
    tokens 1..n-1 (what `ninfer perplexity` does)."""
    windows = [ids[i:i + context] for i in range(0, len(ids), context)]
    windows = [w for w in windows if len(w) >= 2]
    total, count = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(windows), batch):
            group = windows[i:i + batch]
            for length in sorted({len(w) for w in group}):  # full windows batch together
                rows = [w for w in group if len(w) == length]
                x = torch.tensor(rows, device=device)
                with torch.autocast(device_type=device.type, dtype=torch.bfloat16,
                                    enabled=autocast):
                    logits = model.lm(input_ids=x).logits
                nll = F.cross_entropy(logits[:, :-1].float().reshape(-1, logits.size(-1)),
                                      x[:, 1:].reshape(-1), reduction="sum")
                total += float(nll)
                count += x[:, 1:].numel()
    return total, count
