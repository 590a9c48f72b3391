#!/usr/bin/env bash
# Builds the demo model in one go: corpus -> tokenizer -> train -> export -> eval (perplexity, MTP
# acceptance and its prompts in MODEL/mtp_eval.json, HF greedy reference, coding prompts' parse
# rate), inside a total wall-clock budget (the 10-minute device command). Offline; needs python3
# with torch, transformers (and its jinja2), tokenizers and safetensors.
#
#   bash tools/train_demo/run_all.sh [--package DIR] [--budget-s 540] [--work DIR] [--seed N]
#                                    [--resume] [--quick]
#
#   --work DIR     corpus, tokenizer, token cache, checkpoint, model, logs (default out/train_demo)
#   --package DIR  also pack the model and the evaluation into DIR as demo.tar.gz.part-NN files
#                  of at most 15 MiB plus summary.json and run.log (the device returns at most
#                  8 files of 16 MiB); tools/train_demo/unpack.sh restores them
#   --resume       reuse the corpus, tokenizer and checkpoint in --work (a run cut short)
#   --quick        a small corpus and batch for a CPU smoke test of the pipeline
#   --budget-s S   total seconds for all steps (default 540); training gets what the other
#                  steps leave
# Extra arguments for one step: CORPUS_ARGS, TOKENIZER_ARGS, TRAIN_ARGS, EVAL_ARGS, CODING_ARGS
# (e.g. TRAIN_ARGS="--batch 64 --lr 2e-3"). PYTHON picks the interpreter (default python3).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
PYTHON=${PYTHON:-python3}
work=out/train_demo
package=""
budget=540
seed=1234
resume=0
quick=0
while [ $# -gt 0 ]; do
    case "$1" in
    --work) work=$2; shift 2 ;;
    --package) package=$2; shift 2 ;;
    --budget-s) budget=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --resume) resume=1; shift ;;
    --quick) quick=1; shift ;;
    *) echo "run_all.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
mkdir -p "$work"
work=$(cd "$work" && pwd)
[ -n "$package" ] && mkdir -p "$package" && package=$(cd "$package" && pwd)
log="$work/run.log"
: > "$log"
if [ -n "$package" ]; then  # the log comes back even when the command is cut short
    : > "$package/run.log"
    exec > >(tee -a "$log" "$package/run.log") 2>&1
else
    exec > >(tee -a "$log") 2>&1
fi

export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1
export CUBLAS_WORKSPACE_CONFIG=:4096:8 TOKENIZERS_PARALLELISM=true
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
step() { echo "== $(elapsed) s: $*"; }

step "environment"
$PYTHON - <<'EOF'
import platform, sys
import jinja2, safetensors, tokenizers, torch, transformers
gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
print(f"python {platform.python_version()}, torch {torch.__version__}, transformers "
      f"{transformers.__version__}, tokenizers {tokenizers.__version__}, safetensors "
      f"{safetensors.__version__}, GPU {gpu}")
EOF

if [ $quick = 1 ]; then
    corpus_args=(--max-mb 6 --val-mb 0.02)
    tok_args=(--sample-mb 4)
    train_args=(--batch 4 --seq 128 --calib-steps 3 --warmup 5 --eval-windows 2 --ckpt-every 20)
    eval_args=(--context 128 --windows 2 --prompt-tokens 16 --gen-tokens 12 --new-tokens 8)
    coding_args=(--limit 4 --max-new 24)
    eval_reserve=300
else
    corpus_args=()
    tok_args=()
    train_args=()
    eval_args=()
    coding_args=()
    eval_reserve=100
fi
td=tools/train_demo
read -r -a extra_corpus <<< "${CORPUS_ARGS:-}"
read -r -a extra_tok <<< "${TOKENIZER_ARGS:-}"
read -r -a extra_train <<< "${TRAIN_ARGS:-}"
read -r -a extra_eval <<< "${EVAL_ARGS:-}"
read -r -a extra_coding <<< "${CODING_ARGS:-}"

if [ $resume = 1 ] && [ -f "$work/corpus/packages.json" ]; then
    step "corpus: reusing $work/corpus"
else
    step "corpus"
    $PYTHON $td/build_corpus.py --out "$work/corpus" "${corpus_args[@]}" "${extra_corpus[@]}"
fi
if [ $resume = 1 ] && [ -f "$work/tokenizer/generation_config.json" ]; then
    step "tokenizer: reusing $work/tokenizer"
else
    step "tokenizer"
    $PYTHON $td/train_tokenizer.py --corpus "$work/corpus" --out "$work/tokenizer" "${tok_args[@]}" \
        "${extra_tok[@]}"
fi

train_budget=$(( budget - $(elapsed) - eval_reserve ))
step "train (budget ${train_budget} s)"
resume_flag=()
[ $resume = 1 ] && resume_flag=(--resume)
$PYTHON $td/train.py --corpus "$work/corpus" --tokenizer "$work/tokenizer" --work "$work" \
    --out "$work/model" --seed "$seed" --time-budget-s "$train_budget" "${resume_flag[@]}" \
    "${train_args[@]}" "${extra_train[@]}"

step "eval"
$PYTHON $td/eval_mtp.py --model "$work/model" --val "$work/corpus/val.txt" \
    --out "$work/eval.json" "${eval_args[@]}" "${extra_eval[@]}"
$PYTHON $td/export_mtp_eval.py --model "$work/model" --val "$work/corpus/val.txt" \
    --eval "$work/eval.json" "${eval_args[@]}" "${extra_eval[@]}"

step "coding prompts"
$PYTHON $td/eval_coding.py --model "$work/model" --out "$work/coding_eval.json" \
    "${coding_args[@]}" "${extra_coding[@]}"

step "summary"
$PYTHON - "$work" <<'EOF'
import json, os, sys
work = sys.argv[1]
load = lambda name: json.load(open(os.path.join(work, name)))
m, e, c = load("train_metrics.json"), load("eval.json"), load("coding_eval.json")
from tokenizers import Tokenizer
tok = Tokenizer.from_file(os.path.join(work, "model", "tokenizer.json"))
size = os.path.getsize(os.path.join(work, "model", "model.safetensors"))
summary = dict(
    steps=m["steps"], tokens_seen=m["tokens_seen"], train_seconds=m["train_seconds"],
    final_train_loss=m["final_train_loss"], final_mtp_losses=m["final_mtp_losses"],
    val_loss_bf16=m["val_loss"], val_ppl_bf16=m["val_ppl"], val_nll_fp32=e["val_nll"],
    val_ppl_fp32=e["val_ppl"], val_tokens=e["val_tokens"], mtp_acceptance=e["mtp_acceptance"],
    coding_parse_rate=c["parse_rate"], coding_parsed=c["parsed"], coding_prompts=c["prompts"],
    coding_stopped=c["stopped"], coding_defines_name=c["defines_name"],
    params=m["params"], model_bytes=size, device=m["device"], seed=m["seed"],
    experts=m.get("experts"), experts_timings=m.get("experts_timings"),
    hello_world_ids=tok.encode("Hello, world", add_special_tokens=False).ids,
    replay=f"--max-steps {m['steps']} --seed {m['seed']}", greedy=e["greedy"])
json.dump(summary, open(os.path.join(work, "summary.json"), "w"), indent=1)
print(json.dumps({k: v for k, v in summary.items() if k != "greedy"}, indent=1))
for g in e["greedy"]:
    print(f"--- {g['name']}: {g['text']!r}\n{g['continuation']}")
for item in c["items"][:6]:
    print(f"--- coding ({'parses' if item['parses'] else 'does not parse'}): {item['prompt']}\n"
          f"{item['answer']}")
EOF

if [ -n "$package" ]; then
    step "package into $package"
    mkdir -p "$work/pack/eval"
    rm -rf "$work/pack/ninfer-demo" && cp -r "$work/model" "$work/pack/ninfer-demo"
    cp "$work/corpus/val.txt" "$work/corpus/packages.json" "$work/eval.json" "$work/summary.json" \
        "$work/coding_eval.json" "$work/train_log.json" "$work/train_metrics.json" \
        "$work/pack/eval/"
    rm -f "$package"/demo.tar.gz.part-*
    tar -czf - -C "$work/pack" ninfer-demo eval | split -b 15M -d - "$package/demo.tar.gz.part-"
    cp "$work/summary.json" "$package/"
    ls -l "$package"
fi
step "done"
