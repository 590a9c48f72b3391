#!/usr/bin/env bash
# On the device, with a pack of test_cuda_bundle, bench_prefill_ops and ninfer
# (NINFER_NCCL=ON NINFER_VIDEO=OFF bash tools/gpu/pack_binaries.sh ninfer test_cuda_bundle
# bench_prefill_ops; carry [".deps/gpu.tar.xz"]): cuDNN's fused attention as paged_attention's
# prefill route (src/ops/cuda/attention_cudnn.cpp), libcudnn from the image's torch.
#   tests: which cuDNN loads, then the prefill-attention suites on both kernels, the sabotage arm
#          and the route-table suite, stopping on a failure;
#   ops:   bench_prefill_ops attention (each kernel of attention_prefill.bf16 forced, one run);
#   pp:    the 35B's (and with MODELS="35b 27b" the 27B's) prefill at 2,048 and 8,192 rows with
#          the built-in table (flash) and with a table routing attention_prefill.bf16 to cudnn
#          from CUDNN_FROM rows (default 64), twice each, interleaved.
#   bash tools/gpu/cudnn_check.sh [tests|ops|pp|all]...      logs and JSON in $OUT
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-out}
mkdir -p "$out"
parts=${*:-all}
want() { [[ " $parts " == *" $1 "* || " $parts " == *" all "* ]]; }
source tools/gpu/unpack_binaries.sh .deps/gpu.tar.xz
source tools/gpu/gate.sh
rc=0
if want tests; then
    /tmp/g/ninfer info --device cuda --config configs/qwen3.6-35b-a3b.json | grep -E "route|cudnn"
    gate_test cudnn_tests 300 stdbuf -oL -eL /tmp/g/test_cuda_bundle \
        --gtest_filter='*CudaPrefillAttention*:*CudaRouteTable*:*CudaKvQuant*'
fi
if want ops; then
    timeout 180 /tmp/g/bench_prefill_ops attention 8192 5 | tee "$out/attention_ops.jsonl" || rc=1
fi
cudnn_table=/tmp/cudnn_table.json
python3 - "$cudnn_table" "${CUDNN_FROM:-64}" <<'PY'
import json, sys
path, first = sys.argv[1], int(sys.argv[2])
table = {"device": {"gpu": "any", "sm_count": 0, "cuda_version": 0}, "decisions": {
    "attention_prefill.bf16": {"bands": [{"kernel": "flash", "last": first - 1},
                                         {"kernel": "cudnn"}]}}}
json.dump(table, open(path, "w"))
PY
if want pp; then
    for model in ${MODELS:-35b}; do
        config=configs/qwen3.6-35b-a3b.json
        [ "$model" = 27b ] && config=configs/qwen3.6-27b.json
        for table in builtin "$cudnn_table" builtin "$cudnn_table"; do
            label=$([ "$table" = builtin ] && echo flash || echo cudnn)
            timeout 240 /tmp/g/ninfer bench --device cuda --config "$config" \
                --random-weights -p 2048,8192 -n 0 -r 3 --warmup 1 --prefill-chunk 8192 \
                --route-table "$table" -o json > "/tmp/pp_$label.json" 2> "/tmp/pp_$label.err" ||
                { rc=1; tail -3 "/tmp/pp_$label.err"; }
            grep -h "cuDNN" "/tmp/pp_$label.err" | sort -u | head -3
            python3 - "/tmp/pp_$label.json" "$model $label" "$out/pp.jsonl" <<'PY'
import json, sys
try:
    j = json.load(open(sys.argv[1]))
except Exception as e:
    print(sys.argv[2], "no json:", e); sys.exit(0)
open(sys.argv[3], "a").write(json.dumps({"label": sys.argv[2], "bench": j}) + "\n")
for r in j["results"]:
    print(sys.argv[2], r["test"], {k: v for k, v in r.items() if "tok_s" in k})
PY
        done
    done
fi
exit $rc
