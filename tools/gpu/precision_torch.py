"""The torch arm of precision_probe.py (--torch): the same question asked of HF transformers, on
the same weights as ninfer. A text-only checkpoint of the config's first layers is initialised by
HF (seeded; its weights rounded to bf16, so both dtypes run the same values) and saved; HF runs
it in float32 (TF32 off: the reference) and in bfloat16, and ninfer loads it (`--model DIR`) in
f32 and in the dtype under test. Each arm's error is the largest |logprob difference| over the
reference's top-5 ids, as for the route arms."""
import json
import os

import torch
import transformers


def text_config(config_path, layers):
    """The config's text part with its first `layers` layers, as a text-only HF config."""
    c = json.load(open(config_path))
    t = dict(c.get("text_config", c))
    t["num_hidden_layers"] = layers
    if "layer_types" in t:
        t["layer_types"] = t["layer_types"][:layers]
    t.pop("mtp_num_hidden_layers", None)  # no MTP tensors: the probe reads the main head only
    t["model_type"] = t.get("model_type", "qwen3_5_text").replace("_text", "") + "_text"
    return t


def build_checkpoint(config_path, layers, out_dir, seed, device):
    """Saves the seeded HF model (bf16 values) to out_dir; returns the model in float32."""
    t = text_config(config_path, layers)
    cfg = transformers.AutoConfig.for_model(**t)
    cls = (transformers.Qwen3_5MoeForCausalLM if "moe" in t["model_type"]
           else transformers.Qwen3_5ForCausalLM)
    torch.manual_seed(seed)
    with torch.device(device):
        model = cls(cfg).to(torch.bfloat16)
    model.save_pretrained(out_dir, safe_serialization=True)
    return model.float().eval()


@torch.no_grad()
def logprobs(model, prompt):
    """log-softmax of the next-token logits after `prompt`, in float64, {id: logprob}."""
    device = next(model.parameters()).device
    logits = model(input_ids=torch.tensor([prompt], device=device), use_cache=False).logits[0, -1]
    logits = logits.double()
    return torch.log_softmax(logits, -1).cpu()


def top5_error(ref, got):
    """ref: float64 log-probs (the reference); got: {id: logprob} or a tensor like ref."""
    top5 = [int(i) for i in torch.topk(ref, 5).indices]
    if isinstance(got, dict):
        diffs = [abs(got[i] - float(ref[i])) for i in top5 if i in got]
        greedy = max(got, key=got.get) if got else None
    else:
        diffs = [abs(float(got[i] - ref[i])) for i in top5]
        greedy = int(torch.argmax(got))
    return (max(diffs) if diffs else None), len(top5) - len(diffs), greedy == top5[0]


def run(a, prompts, first_token, workdir):
    """One JSON line per (length, arm): torch_bf16, ninfer_f32, ninfer_<test dtype>."""
    device = "cuda" if a.device == "cuda" else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    model_dir = os.path.join(workdir, "model")
    model = build_checkpoint(a.config, a.layers, model_dir, a.seed, device)
    refs = {n: logprobs(model, p) for n, p in prompts.items()}
    model = model.to(torch.bfloat16)
    tbf16 = {n: logprobs(model, p) for n, p in prompts.items()}
    del model
    worst = {}
    for n, p in prompts.items():
        arms = [("torch_bf16", tbf16[n])]
        for dtype in dict.fromkeys(("f32", a.test_dtype)):  # f32 once when it is under test
            arms.append((f"ninfer_{dtype}",
                         first_token(["--model", model_dir], dtype, p, None, a.device)[1]))
        for name, got in arms:
            err, missing, same = top5_error(refs[n], got)
            print(json.dumps({"length": n, "arm": name, "same_greedy": same,
                              "max_top5_abs": err, "missing_top5": missing,
                              "f32_top1_logprob": float(refs[n].max())}), flush=True)
            if err is not None:
                worst[name] = max(worst.get(name, 0.0), err)
    print(json.dumps({"worst": worst, "reference": "torch f32"}), flush=True)
