#!/usr/bin/env python3
"""Self-test of demo_model.MTP.chain (no data needed, CPU, seconds): the block-masked parallel
chain equals drafting one position at a time the way an engine does it, i.e. a plain causal run
of the MTP layer over [step-1 rows 0..n, chain rows of steps 2..s] at positions 0..n+s-1
(MODEL_QWEN3_5.md section 3), with eager and sdpa attention, teacher-forced and greedy.

usage: check_mtp_chain.py
"""
import demo_model

import torch  # noqa: E402

SHAPE = dict(demo_model.DEFAULT_SHAPE, hidden=64, dk=16, dv=16, experts_n=8, topk=2, moe_inter=32,
             shared_inter=48, layers="LLLF")


def reference(model, hidden, tokens, n, steps, greedy):
    """Logits of steps 1..steps at position n, drafting sequentially."""
    m, mtp = model.lm.model, model.mtp
    rows = mtp.inputs(m.embed_tokens, tokens[0][:, :n + 1], hidden[:, :n + 1])
    out, d, tok = [], None, None
    for s in range(steps):
        if s > 0:
            rows = torch.cat([rows, mtp.inputs(m.embed_tokens, tok, d)], dim=1)
        L = rows.size(1)
        pos = torch.arange(L).view(1, 1, -1).expand(3, 1, -1)
        mask = torch.full((L, L), torch.finfo(torch.float32).min).triu(1)
        u = mtp.layers[0](rows, position_embeddings=m.rotary_emb(rows, pos),
                          attention_mask=mask[None, None])[:, -1:]
        d = mtp.norm(u)
        out.append(model.lm.lm_head(d)[0, 0])
        if s + 1 < steps:
            tok = out[-1].argmax().view(1, 1) if greedy else tokens[s + 1][:, n:n + 1]
    return out


def main():
    torch.manual_seed(0)
    worst = 0.0
    for attn in ("eager", "sdpa"):
        config = demo_model.make_config(96, 0, shape=SHAPE, attn=attn)
        torch.manual_seed(1)
        model = demo_model.DemoModel(config).eval()
        with torch.no_grad():
            for p in model.parameters():  # HF's init hides (1+w) vs w and other mix-ups
                p.normal_(0.0, 0.1)
            T, K = 40, 4
            ids = torch.randint(0, 96, (1, T + K + 1))
            hidden = model.hidden(ids[:, :T])
            tokens = [ids[:, 1 + s:T + 1 + s] for s in range(K)]
            for greedy in (False, True):
                nxt = demo_model.GreedyNext(K) if greedy else None
                par = model.mtp_logits(hidden, tokens, nxt)
                for n in (0, 7, T - 1):
                    ref = reference(model, hidden, tokens, n, K, greedy)
                    for s in range(K):
                        err = float((par[s][0, n] - ref[s]).abs().max())
                        worst = max(worst, err)
                        assert err < 1e-4, (attn, greedy, n, s, err)
    print(f"check_mtp_chain: ok (max |diff| {worst:.2e})")


if __name__ == "__main__":
    main()
