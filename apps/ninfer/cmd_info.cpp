// ninfer info: a model's configuration, parameter counts and memory needs, from a checkpoint
// directory or a config file alone (real sizes without weights).
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "commands.h"
#include "core/error.h"
#include "default_model.h"
#include "io/hf_config.h"
#include "io/safetensors.h"
#include "model/param_count.h"
#include "model/weight_loader.h"
#include "runtime/placement.h"
#include "runtime/route_selection.h"

namespace ninfer::app {
namespace {

struct InfoOptions {
    std::string model_dir;
    std::string config_file;
    bool json = false;
    int64_t context = 0;
    std::string plan;       // "split:N" or "tp:N": a multi-GPU placement plan (runtime/placement.h)
    double plan_device_gb = 141; // memory of each planned device (GB; an H200)
    std::string device = "cpu";    // whose kernel route table to name
    std::string route_table = "auto";
    // --decode-batch B: the bytes a decode step of B sequences reads (model::decode_step_bytes),
    // at decode_context KV tokens each, with these weights, KV and GDN state.
    int64_t decode_batch = 0;
    double decode_context = 0;
    std::string decode_weights = "bf16"; // or "fp8": an fp8 config's projections resident
    std::string kv_dtype = "bf16";
    std::string gdn_state_dtype = "f32";
};

// --decode-batch: a decode step's bytes by part, as `ninfer bench` counts them (its roofline).
nlohmann::json decode_step_json(const io::ModelConfig& c, int64_t mtp_layers,
                                const InfoOptions& o) {
    const bool fp8 = o.decode_weights == "fp8";
    require(!fp8 || c.fp8, "--decode-weights fp8 needs an fp8 config (quantization_config)");
    const model::ParamCounts p = model::count_params(c, mtp_layers);
    constexpr int64_t kBf16 = 2;
    const int64_t block = c.fp8_block[0] * c.fp8_block[1];
    const int64_t weight_bytes = model::active_weight_bytes(p, fp8, block);
    const double expert_param_bytes = fp8 ? model::fp8_bytes_per_param(block) : double(kBf16);
    const model::DecodeStepBytes b = model::decode_step_bytes(
        c, weight_bytes, expert_param_bytes, o.decode_batch, o.decode_context,
        model::kv_bytes_per_token(c, ops::parse_kv_dtype(o.kv_dtype), DType::BF16),
        model::gdn_state_bytes_per_sequence(c, kBf16, o.gdn_state_dtype == "bf16" ? 2 : 4));
    return {{"batch", o.decode_batch},
            {"context", o.decode_context},
            {"weights", o.decode_weights},
            {"kv_dtype", o.kv_dtype},
            {"gdn_state_dtype", o.gdn_state_dtype},
            {"bytes_by_part",
             {{"weights_every_token", b.weights_every_token},
              {"routed_experts", b.routed_experts},
              {"gdn_state", b.gdn_state},
              {"kv", b.kv}}},
            {"bytes", b.total()}};
}

// --plan split:N | tp:N | ep:N: where the weights live and the KV capacity, against one device.
nlohmann::json placement_json(const io::ModelConfig& c, int64_t mtp_layers, const InfoOptions& o) {
    const size_t colon = o.plan.find(':');
    const std::string mode = o.plan.substr(0, colon);
    require((mode == "split" || mode == "tp" || mode == "ep") && colon != std::string::npos &&
                o.plan.find_first_not_of("0123456789", colon + 1) == std::string::npos &&
                colon + 1 < o.plan.size() && o.plan.size() - colon <= 4,
            "--plan takes split:N, tp:N or ep:N (N devices), got '", o.plan, "'");
    runtime::PlacementRequest r;
    r.mode = mode == "split" ? runtime::PlacementMode::Split : runtime::PlacementMode::Tensor;
    r.devices = std::stoi(o.plan.substr(colon + 1));
    r.expert_parallel = mode == "ep";
    r.device_bytes = int64_t(o.plan_device_gb * 1e9);
    r.workspace_bytes = int64_t(4) << 30; // about what a profile forward measures at 8k chunks
    r.mtp_layers = mtp_layers;
    const runtime::PlacementPlan plan = runtime::plan_placement(c, r);
    nlohmann::json devices = nlohmann::json::array(), tensors = nlohmann::json::array();
    for (const runtime::DevicePlan& d : plan.devices)
        devices.push_back({{"weight_bytes", d.weight_bytes},
                           {"kv_bytes_per_token", d.kv_bytes_per_token},
                           {"gdn_state_bytes_per_sequence", d.state_bytes_per_sequence},
                           {"free_bytes", d.free_bytes}});
    for (const runtime::TensorHome& t : plan.tensors)
        tensors.push_back({{"group", t.group},
                           {"device", t.rank < 0 ? nlohmann::json("every") : nlohmann::json(t.rank)},
                           {"share", t.share},
                           {"bytes", t.bytes}});
    return {{"mode", mode},
            {"devices", devices},
            {"tensors", tensors},
            {"device_gb", o.plan_device_gb},
            {"utilization", r.utilization},
            {"workspace_bytes", r.workspace_bytes},
            {"sequences", r.sequences},
            {"kv_tokens", plan.kv_tokens},
            {"limiting_device", plan.limiting_device},
            {"single_device_kv_tokens", runtime::single_device_kv_tokens(c, r)},
            {"note", mode == "split"
                         ? "--devices runs this layout (run, serve, bench: e.g. --devices 0,1)"
                         : mode == "tp"
                             ? "--tensor-parallel N runs this layout (run, serve, bench)"
                             : "--tensor-parallel N --expert-parallel runs this layout (run, "
                               "serve, bench)"}};
}

std::string layer_pattern(const io::ModelConfig& c) {
    std::string s;
    for (io::LayerKind k : c.layer_types) s += k == io::LayerKind::FullAttention ? 'A' : 'G';
    return s;
}

nlohmann::json describe(const io::ModelConfig& c, int64_t mtp_layers, int64_t context,
                        int64_t checkpoint_bytes) {
    const model::ParamCounts p = model::count_params(c, mtp_layers);
    constexpr int64_t kBf16 = 2;
    nlohmann::json j;
    j["model_type"] = c.model_type;
    j["text_model_type"] = c.text_model_type;
    j["config"] = {{"hidden_size", c.hidden_size},
                   {"layers", c.num_layers},
                   {"layer_pattern", layer_pattern(c)},
                   {"vocab_size", c.vocab_size},
                   {"attention",
                    {{"heads", c.num_heads},
                     {"kv_heads", c.num_kv_heads},
                     {"head_dim", c.head_dim},
                     {"rotary_dim", c.rotary_dim},
                     {"rope_theta", c.rope_theta},
                     {"rope_type", c.rope_type},
                     {"rope_attention_factor", c.rope_attention_factor},
                     {"position_limit", c.position_limit}}},
                   {"gdn",
                    {{"key_heads", c.linear_num_key_heads},
                     {"value_heads", c.linear_num_value_heads},
                     {"key_head_dim", c.linear_key_head_dim},
                     {"value_head_dim", c.linear_value_head_dim},
                     {"conv_kernel", c.linear_conv_kernel}}},
                   {"tie_word_embeddings", c.tie_word_embeddings},
                   {"max_position_embeddings", c.max_position_embeddings},
                   {"mtp_layers", mtp_layers},
                   {"vision", c.has_vision}};
    if (c.moe)
        j["config"]["moe"] = {{"experts", c.num_experts},
                              {"top_k", c.num_experts_per_tok},
                              {"expert_intermediate", c.moe_intermediate_size},
                              {"shared_intermediate", c.shared_expert_intermediate_size}};
    else
        j["config"]["mlp_intermediate"] = c.intermediate_size;
    j["parameters"] = {{"embedding", p.embedding},
                       {"lm_head", p.lm_head},
                       {"gdn", p.gdn_layers},
                       {"attention", p.attention_layers},
                       {"mlp", p.mlp},
                       {"norms", p.norms},
                       {"text_total", p.text_total},
                       {"active_per_token", p.active_per_token},
                       {"mtp", p.mtp},
                       {"total_with_mtp", p.text_total + p.mtp}};
    const int64_t kv_token = model::kv_bytes_per_token(c, ops::KvDtype::Activation, DType::BF16);
    const int64_t gdn_seq = model::gdn_state_bytes_per_sequence(c, kBf16);
    j["memory_bytes"] = {{"weights_bf16", (p.text_total + p.mtp) * kBf16},
                         {"weights_read_per_token_bf16", p.active_per_token * kBf16},
                         {"kv_per_token_bf16", kv_token},
                         {"kv_per_token_int8",
                          model::kv_bytes_per_token(c, ops::KvDtype::Int8, DType::BF16)},
                         {"kv_per_token_fp8",
                          model::kv_bytes_per_token(c, ops::KvDtype::Fp8, DType::BF16)},
                         {"gdn_state_per_sequence", gdn_seq},
                         {"gdn_state_per_sequence_bf16",
                          model::gdn_state_bytes_per_sequence(c, kBf16, 2)},
                         {"context", context},
                         {"one_sequence_at_context", kv_token * context + gdn_seq}};
    if (checkpoint_bytes > 0) j["memory_bytes"]["checkpoint_tensors"] = checkpoint_bytes;
    if (c.group_bits) { // resident (CUDA's default), F16 scales (as ninfer convert writes)
        j["memory_bytes"]["text_weights_grouped_resident"] =
            model::grouped_weight_bytes(p.text_total, p.text_fp8_quantized, c.group_bits,
                                        c.group_size, 2);
        j["memory_bytes"]["weights_read_per_token_grouped_resident"] =
            model::grouped_weight_bytes(p.active_per_token, p.active_fp8_quantized, c.group_bits,
                                        c.group_size, 2);
    }
    if (c.fp8) { // what CUDA holds with --fp8-weights auto (text weights; bf16 MTP and tower)
        const int64_t blocks = c.fp8_block[0] * c.fp8_block[1];
        j["memory_bytes"]["text_weights_fp8_resident"] = model::text_weight_bytes(p, true, blocks);
        j["memory_bytes"]["weights_read_per_token_fp8_resident"] =
            model::active_weight_bytes(p, true, blocks);
    }
    // The checkpoint's weight format: block-wise fp8 projections stay fp8 on CUDA with bf16
    // compute (about half the bf16 bytes above); the CPU, or --fp8-weights dequantize, holds
    // the bf16 weights above.
    // Groupwise w8/q4 checkpoints: the projections kept as codes on CUDA with bf16 compute (the
    // *_grouped_resident bytes), dequantized at load on the CPU or with --group-weights
    // dequantize (weights_bf16 above).
    if (c.fp8)
        j["format"] = {{"weights", "fp8 e4m3, block-wise (resident as fp8 on CUDA; dequantized "
                                   "at load on the CPU or with --fp8-weights dequantize)"},
                       {"block", {c.fp8_block[0], c.fp8_block[1]}}};
    else if (c.group_bits)
        j["format"] = {{"weights", concat("ninfer_groupwise ", c.group_bits == 8 ? "w8" : "q4",
                                          ": ", c.group_bits, "-bit integer codes, a scale per ",
                                          c.group_size, " input columns (resident as codes on "
                                          "CUDA; dequantized at load on the CPU or with "
                                          "--group-weights dequantize)")},
                       {"bits", c.group_bits},
                       {"group_size", c.group_size}};
    else
        j["format"] = {{"weights", c.dtype.empty() ? "unspecified" : c.dtype}};
    return j;
}

std::string human(double bytes) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (bytes >= 1024 && u < 4) {
        bytes /= 1024;
        ++u;
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f %s", bytes, units[u]);
    return buf;
}

void print_text(const nlohmann::json& j) {
    const auto& c = j["config"];
    const auto& p = j["parameters"];
    const auto& m = j["memory_bytes"];
    std::printf("model_type        %s (%s)\n", j["model_type"].get<std::string>().c_str(),
                j["text_model_type"].get<std::string>().c_str());
    std::printf("layers            %lld  %s  (G = Gated DeltaNet, A = gated attention)\n",
                c["layers"].get<long long>(), c["layer_pattern"].get<std::string>().c_str());
    std::printf("config            %s\n", c.dump().c_str());
    std::printf("format            %s\n", j["format"].dump().c_str());
    for (const char* key : {"embedding", "lm_head", "gdn", "attention", "mlp", "norms",
                            "text_total", "active_per_token", "mtp", "total_with_mtp"})
        std::printf("params %-17s %15lld  (%.3f B)\n", key, p[key].get<long long>(),
                    double(p[key].get<long long>()) / 1e9);
    for (auto it = m.begin(); it != m.end(); ++it)
        std::printf("memory %-32s %s\n", it.key().c_str(),
                    it.key() == "context" ? std::to_string(it.value().get<long long>()).c_str()
                                          : human(double(it.value().get<long long>())).c_str());
    std::printf("route_table       %s (%s: %s)\n",
                j["route_table"]["source"].get<std::string>().c_str(),
                j["route_table"]["device"].get<std::string>().c_str(),
                j["route_table"]["note"].get<std::string>().c_str());
    if (j["route_table"].contains("cudnn"))
        std::printf("cudnn             %s\n",
                    j["route_table"]["cudnn"].get<std::string>().c_str());
    if (j.contains("decode_step")) {
        const auto& d = j["decode_step"];
        std::printf("decode step       %lld sequences x %.0f tokens (%s weights, %s KV, %s state): "
                    "%s",
                    d["batch"].get<long long>(), d["context"].get<double>(),
                    d["weights"].get<std::string>().c_str(),
                    d["kv_dtype"].get<std::string>().c_str(),
                    d["gdn_state_dtype"].get<std::string>().c_str(),
                    human(d["bytes"].get<double>()).c_str());
        for (auto it = d["bytes_by_part"].begin(); it != d["bytes_by_part"].end(); ++it)
            std::printf(", %s %s", it.key().c_str(), human(it.value().get<double>()).c_str());
        std::printf("\n");
    }
    if (!j.contains("placement")) return;
    const auto& pl = j["placement"];
    const auto& devices = pl["devices"];
    for (size_t d = 0; d < devices.size(); ++d)
        std::printf("plan %s device %zu  weights %s  KV %s a token  free %s\n",
                    pl["mode"].get<std::string>().c_str(), d,
                    human(double(devices[d]["weight_bytes"].get<long long>())).c_str(),
                    human(double(devices[d]["kv_bytes_per_token"].get<long long>())).c_str(),
                    human(double(devices[d]["free_bytes"].get<long long>())).c_str());
    for (const auto& t : pl["tensors"])
        std::printf("plan device %-5s %s: %s\n", t["device"].dump().c_str(),
                    t["group"].get<std::string>().c_str(), t["share"].get<std::string>().c_str());
    std::printf("plan kv_tokens %lld (one device: %lld), %s\n", pl["kv_tokens"].get<long long>(),
                pl["single_device_kv_tokens"].get<long long>(),
                pl["note"].get<std::string>().c_str());
}

int info(InfoOptions o) {
    require(o.model_dir.empty() || o.config_file.empty(),
            "give one of --model or --config, not both");
    // Neither: the demo model, as `ninfer run` uses it.
    if (o.config_file.empty()) o.model_dir = model_dir_or_default(o.model_dir);
    io::ModelConfig c;
    int64_t mtp_layers = 0, checkpoint_bytes = 0;
    if (!o.model_dir.empty()) {
        c = io::load_hf_config(o.model_dir);
        io::SafetensorsCheckpoint ckpt = io::SafetensorsCheckpoint::open(o.model_dir);
        mtp_layers = model::count_mtp_layers(ckpt);
        for (const auto& [name, e] : ckpt.entries()) checkpoint_bytes += e.nbytes;
    } else {
        c = io::load_hf_config(o.config_file);
        mtp_layers = c.mtp_num_hidden_layers;
    }
    const int64_t context = o.context > 0 ? o.context : c.max_position_embeddings;
    nlohmann::json j = describe(c, mtp_layers, context, checkpoint_bytes);
    if (!o.plan.empty()) j["placement"] = placement_json(c, mtp_layers, o);
    if (o.decode_batch > 0) j["decode_step"] = decode_step_json(c, mtp_layers, o);
    // The kernel route table the engine would put in force on --device (ops/route_table.h).
    const Device device = runtime::parse_device(o.device);
    const ops::RouteTable routes = runtime::select_route_table(o.route_table, device);
    j["route_table"] = {{"device", o.device},
                        {"source", routes.source()},
                        {"note", device.is_cpu() ? "the CPU runs no routed kernels"
                                 : routes.tuned() ? "tuned by ninfer tune"
                                                  : "built-in (H200-measured boundaries)"}};
    // The library of the cuDNN prefill-attention kernel (opened at run time).
    if (!device.is_cpu()) j["route_table"]["cudnn"] = ops::cudnn_library_status();
    if (o.json)
        std::cout << j.dump(2) << std::endl;
    else
        print_text(j);
    return 0;
}

} // namespace

Action add_info_command(CLI::App& app) {
    auto o = std::make_shared<InfoOptions>();
    app.add_option("--model", o->model_dir,
                   "HF checkpoint directory, or ORG/NAME in the Hugging Face cache (default: the "
                   "demo model)");
    app.add_option("--config", o->config_file, "An HF config.json (no weights needed)");
    app.add_option("--context", o->context, "Context length for the memory estimate");
    app.add_flag("--json", o->json, "Print JSON");
    app.add_option("--plan", o->plan,
                   "A multi-GPU placement plan: split:N (post-attention blocks on devices 1..N-1) "
                   "tp:N (tensor parallelism over N ranks) or ep:N (tp:N with expert "
                   "parallelism): weights per device and KV capacity");
    app.add_option("--plan-device-gb", o->plan_device_gb, "Memory of each planned device (GB)")
        ->check(CLI::PositiveNumber);
    app.add_option("--device", o->device,
                   "The device whose kernel route table to name (cpu, cuda or cuda:N)");
    app.add_option("--route-table", o->route_table,
                   "As the engine's --route-table: auto, builtin or a table file");
    app.add_option("--decode-batch", o->decode_batch,
                   "The bytes a decode step of this many sequences reads (JSON decode_step: the "
                   "memory roofline of ninfer bench and bench/serve/decode_roofline.py)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--decode-context", o->decode_context, "KV tokens of each decode sequence")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--decode-weights", o->decode_weights,
                   "Decode weights: bf16, or fp8 (an fp8 config's projections resident)")
        ->check(CLI::IsMember({"bf16", "fp8"}));
    app.add_option("--kv-dtype", o->kv_dtype, "Decode KV storage: bf16, int8 or fp8")
        ->check(CLI::IsMember({"bf16", "int8", "fp8"}));
    app.add_option("--gdn-state-dtype", o->gdn_state_dtype, "Decode GDN state storage: f32 or bf16")
        ->check(CLI::IsMember({"f32", "bf16"}));
    return [o] { return info(*o); };
}

} // namespace ninfer::app
