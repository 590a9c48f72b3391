// ninfer bench: llama-bench-like whole-engine measurements. Tests: pp N (prefill N tokens),
// tg N (decode N tokens after a one-token prompt), pg P,N (prefill P then decode N). Each runs
// --warmup times unmeasured and -r times measured; decode is reported against the memory
// roofline (bytes a step must read / copy bandwidth measured in the same run), prefill against
// the dense GEMM rate measured in the same run. --batch B runs B such requests at once (random
// prompts of their own) and reports their aggregate rates, decode against the roofline of a
// B-row step. `-o json` prints one object (schema_version 1).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "commands.h"
#include "core/error.h"
#include "default_model.h"
#include "engine_flags.h"
#include "io/hf_config.h"
#include "model/param_count.h"
#include "ninfer/engine.h"
#include "ops/memory.h"
#include "runtime/route_selection.h"

namespace ninfer::app {
namespace {

constexpr int kSchemaVersion = 1;

struct BenchOptions {
    EngineOptions engine;
    std::string prompts = "512";
    std::string gens = "128";
    std::vector<std::string> pg;
    int reps = 5;
    int warmup = 1;
    int batch = 1; // requests submitted at once
    std::string output = "table";
};

struct Test {
    std::string name;
    int prompt = 0, gen = 0;
};

std::vector<int> parse_list(const std::string& s, const char* flag) {
    std::vector<int> out;
    std::stringstream in(s);
    std::string item;
    while (std::getline(in, item, ',')) {
        if (item.empty()) continue;
        size_t used = 0;
        int v = 0;
        try {
            v = std::stoi(item, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        require(used == item.size() && v >= 0, flag, ": '", item, "' is not a count");
        out.push_back(v);
    }
    return out;
}

std::vector<Test> make_tests(const BenchOptions& o) {
    std::vector<Test> tests;
    for (int p : parse_list(o.prompts, "-p"))
        if (p > 0) tests.push_back({"pp" + std::to_string(p), p, 1});
    for (int n : parse_list(o.gens, "-n"))
        if (n > 0) tests.push_back({"tg" + std::to_string(n), 1, n});
    for (const auto& pg : o.pg) {
        auto v = parse_list(pg, "-pg");
        require(v.size() == 2 && v[0] > 0 && v[1] > 0, "-pg takes PROMPT,GEN");
        tests.push_back({"pg" + std::to_string(v[0]) + "," + std::to_string(v[1]), v[0], v[1]});
    }
    require(!tests.empty(), "nothing to run (-p, -n and -pg are all empty)");
    return tests;
}

struct Stat {
    double mean = 0, stddev = 0;
};
Stat stat_of(const std::vector<double>& v) {
    Stat s;
    if (v.empty()) return s;
    for (double x : v) s.mean += x;
    s.mean /= double(v.size());
    for (double x : v) s.stddev += (x - s.mean) * (x - s.mean);
    s.stddev = v.size() > 1 ? std::sqrt(s.stddev / double(v.size() - 1)) : 0.0;
    return s;
}
nlohmann::json stat_json(const Stat& s) {
    return {{"mean", s.mean}, {"std", s.stddev}};
}

// One request of test t: a random prompt (seeded), greedy, ignoring EOS.
GenerationRequest bench_request(const Engine& engine, const Test& t, uint64_t seed) {
    GenerationRequest r;
    std::mt19937_64 gen(seed);
    // Random ids, never a media placeholder (a prompt holding one needs its image): long prompts
    // (128k draws over ~248k ids) would hit the vision tokens.
    const ModelInfo& info = engine.model_info();
    const auto is_media = [&](int32_t id) {
        return id == info.image_token_id || id == info.video_token_id ||
               id == info.vision_start_token_id || id == info.vision_end_token_id;
    };
    while (int(r.prompt.size()) < t.prompt) {
        const auto id = int32_t(gen() % uint64_t(info.token_limit));
        if (!is_media(id)) r.prompt.push_back(id);
    }
    r.max_new_tokens = t.gen;
    r.ignore_eos = true;
    r.sampling.greedy = true;
    return r;
}

// `batch` requests of test t submitted at once (seeds seed * batch + i); their timings.
std::vector<RequestTimings> run_once(Engine& engine, const Test& t, int batch, uint64_t seed) {
    // One submit_all: the engine steps as soon as a request is queued, so one submit at a time
    // left some of a batch for a later step (64 prompts of 1,024 on the GPU: 63, then 1).
    std::vector<GenerationRequest> requests;
    for (int i = 0; i < batch; ++i)
        requests.push_back(bench_request(engine, t, seed * uint64_t(batch) + i));
    std::vector<RequestStream> streams = engine.submit_all(std::move(requests));
    std::vector<RequestTimings> timings;
    for (RequestStream& s : streams) {
        RequestUpdate u, last;
        while (s.next(u))
            if (u.finished) last = u;
        require(last.reason == FinishReason::Length, "bench request ended with ",
                finish_reason_name(last.reason), ": ", last.error);
        timings.push_back(last.timings);
    }
    return timings;
}

// The GPUs whose memory a step streams at once: a tensor-parallel run's distinct devices (each
// reads its rank's share concurrently, so the roofline's bandwidth is theirs together); else one.
// Ranks that share a GPU (--devices cuda:0,cuda:0) count once.
int bandwidth_devices(const EngineOptions& e, bool gpu) {
    if (!gpu || e.tensor_parallel <= 1) return 1;
    if (e.devices.empty()) return e.tensor_parallel;
    std::vector<Device> distinct;
    for (const Device& d : runtime::parse_device_list(e.devices))
        if (std::find(distinct.begin(), distinct.end(), d) == distinct.end()) distinct.push_back(d);
    return int(distinct.size());
}

// FLOPs of a prefill of P tokens: 2 per active matmul weight per token, plus causal attention
// (QK^T and PV over P^2 / 2 pairs per head) and the delta rule (~4 dk dv per value head).
double prefill_flops(const io::ModelConfig& c, const model::ParamCounts& p, double P) {
    const double matmul = 2.0 * double(p.active_per_token - c.hidden_size) * P;
    const double attn = double(c.count_layers(io::LayerKind::FullAttention)) * 2.0 *
                        double(c.num_heads * c.head_dim) * P * P;
    const double gdn =
        double(c.count_layers(io::LayerKind::LinearAttention)) * 4.0 *
        double(c.linear_num_value_heads * c.linear_key_head_dim * c.linear_value_head_dim) * P;
    return matmul + attn + gdn;
}

nlohmann::json run_test(Engine& engine, const Test& t, const BenchOptions& o,
                        const io::ModelConfig& c, const model::ParamCounts& p, int64_t elem,
                        int64_t weight_bytes, double expert_param_bytes, double copy_bw,
                        double gemm_flops) {
    const ops::KvDtype kv = ops::parse_kv_dtype(o.engine.kv_dtype);
    const DType act = elem == 4 ? DType::F32 : DType::BF16;
    const int B = o.batch;
    const double context = t.prompt + 0.5 * t.gen; // the mean context while decoding
    const int64_t state_elem = engine.stats().gdn_state_dtype == "bf16" ? 2 : 4;
    const double step_bytes =
        model::decode_step_bytes(c, weight_bytes, expert_param_bytes, B, context,
                                 model::kv_bytes_per_token(c, kv, act),
                                 model::gdn_state_bytes_per_sequence(c, elem, state_elem))
            .total();
    for (int w = 0; w < o.warmup; ++w) run_once(engine, t, B, 1000 + uint64_t(w));
    std::vector<double> prefill, ttft, decode, roofline, tflops, gemm_fraction;
    SpeculativeStats spec; // over the measured repetitions
    for (int r = 0; r < o.reps; ++r) {
        const std::vector<RequestTimings> tms = run_once(engine, t, B, uint64_t(r));
        // All submitted at once: the batch's prefill ends with its last first token; its decode
        // rate is the sum of the requests' (one step decodes a token of each).
        double last_first = 0, mean_ttft = 0, tok_s = 0;
        for (const RequestTimings& tm : tms) {
            spec.merge(tm.speculative);
            mean_ttft += tm.first_token_s / B;
            last_first = std::max(last_first, tm.first_token_s);
            if (t.gen > 1) tok_s += (tm.generated_tokens - 1) / tm.decode_s;
        }
        ttft.push_back(mean_ttft);
        if (t.prompt > 1) {
            // one request: its own prefill time; a batch: submit to its last first token
            const double s = B == 1 ? tms[0].prefill_s : last_first;
            prefill.push_back(double(B) * t.prompt / s);
            tflops.push_back(double(B) * prefill_flops(c, p, t.prompt) / s / 1e12);
            if (gemm_flops > 0) gemm_fraction.push_back(tflops.back() * 1e12 / gemm_flops);
        }
        if (t.gen > 1) {
            decode.push_back(tok_s);
            roofline.push_back(tok_s / B * step_bytes / copy_bw);
        }
    }
    nlohmann::json j = {{"test", t.name},
                        {"batch", B},
                        {"prompt_tokens", t.prompt},
                        {"gen_tokens", t.gen},
                        {"reps", o.reps},
                        {"ttft_s", stat_json(stat_of(ttft))}};
    if (!prefill.empty()) {
        j["prefill_tok_s"] = stat_json(stat_of(prefill));
        j["prefill_tflops"] = stat_json(stat_of(tflops));
        // Prefill's rate against one device's dense GEMM rate, measured in the same run.
        if (!gemm_fraction.empty()) j["prefill_gemm_fraction"] = stat_json(stat_of(gemm_fraction));
        j["prefill_tok_s_runs"] = prefill;
    }
    if (!decode.empty()) {
        j["decode_tok_s"] = stat_json(stat_of(decode));
        j["decode_roofline_fraction"] = stat_json(stat_of(roofline));
        j["decode_bytes_per_step"] = step_bytes;
        j["decode_tok_s_runs"] = decode;
    }
    if (!o.engine.speculative.empty())
        j["speculative"] =
            nlohmann::json::parse(speculative_json(o.engine.speculative, o.engine.draft_tokens, spec));
    return j;
}

void print_table(const nlohmann::json& out) {
    std::printf("%s | %s | %s | batch %d | load %.1f s | copy %.0f GB/s | gemm %.0f TFLOP/s\n",
                out["model"].get<std::string>().c_str(), out["device"].get<std::string>().c_str(),
                out["dtype"].get<std::string>().c_str(), out["batch"].get<int>(),
                out["load_s"].get<double>(),
                out["ceilings"]["copy_bytes_per_s"].get<double>() / 1e9,
                out["ceilings"]["gemm_flops"].get<double>() / 1e12);
    std::printf("%-14s %18s %12s %10s %18s %10s %10s\n", "test", "prefill tok/s", "TFLOP/s",
                "of GEMM", "decode tok/s", "roofline", "TTFT s");
    for (const auto& r : out["results"]) {
        auto cell = [&](const char* key, double scale) {
            if (!r.contains(key)) return std::string("-");
            char buf[64];
            std::snprintf(buf, sizeof buf, "%.1f ± %.1f", r[key]["mean"].get<double>() * scale,
                          r[key]["std"].get<double>() * scale);
            return std::string(buf);
        };
        std::printf("%-14s %18s %12s %10s %18s %10s %10.4f\n", r["test"].get<std::string>().c_str(),
                    cell("prefill_tok_s", 1).c_str(), cell("prefill_tflops", 1).c_str(),
                    cell("prefill_gemm_fraction", 100).c_str(), cell("decode_tok_s", 1).c_str(),
                    cell("decode_roofline_fraction", 100).c_str(),
                    r["ttft_s"]["mean"].get<double>());
    }
}

int bench(BenchOptions o) {
    const std::vector<Test> tests = make_tests(o);
    int longest = 0, largest_chunk = o.engine.prefill_chunk;
    for (const Test& t : tests) longest = std::max(longest, t.prompt + t.gen);
    // --batch sequences (1 by default), the KV of the longest test for each (not sized from
    // memory), and no prefix cache, so repetitions and tests whose random prompts share a start
    // all compute in full.
    o.engine.max_context = longest + 1;
    o.engine.max_sequences = o.batch;
    o.engine.prefix_cache = false; // repetitions must not be served from the cache
    // Each sequence holds whole KV blocks: batch x max_context tokens rounded once for the pool
    // left the last requests of a batch waiting for blocks (-p 8 --batch 3: 30 tokens, two
    // 16-token blocks for three sequences).
    const int64_t block = o.engine.kv_block_size;
    o.engine.kv_cache_tokens =
        (int64_t(o.engine.max_context) + block - 1) / block * block * o.batch;
    // Rows a step may hold: at least one chunk and one decode row per request; a larger
    // --max-batch-tokens is kept, so a --batch prefills several prompts a step, as a server does.
    o.engine.max_batch_tokens = std::max({o.engine.max_batch_tokens, largest_chunk, o.batch, 1});
    const io::ModelConfig c = io::load_hf_config(
        o.engine.config_file.empty() ? o.engine.model_dir : o.engine.config_file);
    // Ceilings, measured in this run on this device (before the engine starts its threads).
    ops::ExecContext ctx =
        o.engine.device == "cpu" ? ops::ExecContext::cpu() : ops::ExecContext::cuda(0, DType::BF16);
    if (o.engine.device.rfind("cuda:", 0) == 0)
        ctx.device.index = std::stoi(o.engine.device.substr(5));
    if (o.engine.dtype == "f32") ctx.dtype = DType::F32;
    ops::bind_device(ctx);
    const bool gpu = !ctx.device.is_cpu();
    if (!gpu) ops::set_cpu_threads(o.engine.threads); // the ceilings with the engine's threads
    const double copy_bw =
        ops::measure_copy_bandwidth(ctx, gpu ? (int64_t(1) << 31) : (int64_t(1) << 28), 5);
    const int streaming_devices = bandwidth_devices(o.engine, gpu);
    const double gemm = ops::measure_gemm_flops(ctx, gpu ? 8192 : 1024, 5);
    const auto t0 = std::chrono::steady_clock::now();
    Engine engine(o.engine);
    const double load_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const MemoryStats mem0 = engine.memory_stats();
    const int64_t elem = dtype_size(ctx.dtype);
    const model::ParamCounts p = model::count_params(c, c.mtp_num_hidden_layers);
    // The engine keeps an fp8 config's projections fp8 on CUDA with bf16 (EngineOptions).
    const bool fp8_resident = c.fp8 && gpu && ctx.dtype == DType::BF16 &&
                              o.engine.fp8_weights != "dequantize";
    // Groupwise projections stay codes with --group-weights resident (auto: on CUDA with bf16):
    // F16 scales as ninfer convert writes them, F32 for random weights (weight_binder.h).
    const bool grouped_resident =
        c.group_bits != 0 && (o.engine.group_weights == "resident" ||
                              (o.engine.group_weights == "auto" && gpu && ctx.dtype == DType::BF16));
    const int grouped_scale_bytes = o.engine.random_weights ? 4 : 2;
    const int64_t weight_bytes =
        fp8_resident       ? model::active_weight_bytes(p, true)
        : grouped_resident ? model::grouped_weight_bytes(p.active_per_token, p.active_fp8_quantized,
                                                         c.group_bits, c.group_size,
                                                         grouped_scale_bytes)
                           : p.active_per_token * elem;
    // Bytes per routed-expert parameter as resident (the experts are in the quantized set).
    const double expert_param_bytes =
        fp8_resident       ? model::fp8_bytes_per_param()
        : grouped_resident ? c.group_bits / 8.0 + double(grouped_scale_bytes) / double(c.group_size)
                           : double(elem);
    nlohmann::json out = {
        {"schema_version", kSchemaVersion},
        {"model",
         o.engine.random_weights ? o.engine.config_file + " (random weights)" : o.engine.model_dir},
        {"model_type", c.model_type},
        {"device", o.engine.device},
        {"dtype", dtype_name(ctx.dtype)},
        {"kv_dtype", ops::kv_dtype_name(ops::parse_kv_dtype(o.engine.kv_dtype), ctx.dtype)},
        {"gdn_state_dtype", engine.stats().gdn_state_dtype},
        {"weights", fp8_resident       ? std::string("fp8 block-wise (resident)")
                    : grouped_resident ? concat("groupwise ", c.group_bits, "-bit, groups of ",
                                                c.group_size, " (resident)")
                                       : std::string(dtype_name(ctx.dtype))},
        {"prefill_chunk", o.engine.prefill_chunk},
        {"batch", o.batch},
        {"route_table", engine.model_info().route_table},
        {"tensor_parallel", engine.model_info().tensor_parallel},
        {"collective", engine.model_info().collective},
        {"expert_parallel", engine.model_info().expert_parallel},
        {"load_s", load_s},
        {"ceilings",
         {{"copy_bytes_per_s", copy_bw}, {"gemm_flops", gemm},
          {"roofline_devices", streaming_devices}}},
        {"parameters", {{"text_total", p.text_total}, {"active_per_token", p.active_per_token}}}};
    nlohmann::json results = nlohmann::json::array();
    // Decode's roofline: the copy rate of one device times the devices streaming at once.
    for (const Test& t : tests)
        results.push_back(run_test(engine, t, o, c, p, elem, weight_bytes, expert_param_bytes,
                                   copy_bw * streaming_devices, gemm));
    out["results"] = results;
    const MemoryStats mem = engine.memory_stats();
    out["memory_bytes"] = {{"weights", mem0.weights},
                           {"kv_cache", mem.kv_cache},
                           {"state", mem.state},
                           {"workspace", mem.workspace}};
    if (o.output == "json")
        std::cout << out.dump(2) << std::endl;
    else
        print_table(out);
    return 0;
}

} // namespace

Action add_bench_command(CLI::App& app) {
    auto o = std::make_shared<BenchOptions>();
    app.add_option("--model", o->engine.model_dir,
                   "HF checkpoint directory, or ORG/NAME in the Hugging Face cache");
    app.add_option("-p,--prompts", o->prompts, "Prefill tests: prompt lengths, comma separated");
    app.add_option("-n,--gen", o->gens, "Decode tests: generated tokens, comma separated");
    app.add_option("--pg", o->pg, "Prefill then decode: PROMPT,GEN (repeatable)");
    app.add_option("-r,--reps", o->reps, "Measured repetitions")->check(CLI::PositiveNumber);
    app.add_option("--warmup", o->warmup, "Unmeasured runs first")->check(CLI::NonNegativeNumber);
    app.add_option("--batch", o->batch,
                   "Requests run at once (each its own random prompt): aggregate prefill and "
                   "decode rates, decode against a step of that many rows")
        ->check(CLI::Range(1, 4096));
    app.add_option("--max-batch-tokens,--max-num-batched-tokens", o->engine.max_batch_tokens,
                   "Most rows in one step (0: one prefill chunk or --batch, the larger); a "
                   "larger budget prefills several of the batch's prompts a step")
        ->check(CLI::NonNegativeNumber);
    add_engine_options(app, o->engine,
                       kRandomWeightFlags | kDeviceFlags | kSingleRequestPrefill | kMemoryFlags |
                           kSpeculativeFlags);
    app.add_option("-o,--output", o->output, "table or json")
        ->check(CLI::IsMember({"table", "json"}));
    return [o] {
        // --random-weights needs --config and no --model; otherwise --model, or (as run, chat
        // and perplexity) the default model.
        const bool random = o->engine.random_weights;
        require(random == !o->engine.config_file.empty(),
                "--random-weights and --config FILE go together (or give --model DIR)");
        require(!random || o->engine.model_dir.empty(),
                "give --model DIR, or --config FILE --random-weights, not both");
        if (!random) o->engine.model_dir = model_dir_or_default(o->engine.model_dir);
        return bench(*o);
    };
}

} // namespace ninfer::app
