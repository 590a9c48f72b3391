// Random DFlash / DFlash2 drafters written to disk in z-lab's published layout (config.json with
// dflash_config, safetensors named as z-lab's), sized for a fixture target: the engine loads
// them as it loads a downloaded drafter.
#pragma once

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "io/hf_config.h"
#include "io/safetensors_writer.h"

namespace ninfer::test {

struct DrafterShape {
    bool v2 = false;
    int64_t layers = 2, heads = 4, kv_heads = 2, head_dim = 16, intermediate = 96;
    int64_t window = 24; // the first layer slides with this window, the others are full
    float stddev = 0.08f; // large enough that the drafter's choices depend on its context
    uint64_t seed = 7;
};

inline nlohmann::json drafter_config(const io::ModelConfig& target, const DrafterShape& s) {
    nlohmann::json layer_types = nlohmann::json::array();
    for (int64_t l = 0; l < s.layers; ++l)
        layer_types.push_back(l == 0 ? "sliding_attention" : "full_attention");
    nlohmann::json d = {{"block_size", 16},
                        {"mask_token_id", target.vocab_size - 1},
                        {"target_layer_ids", {0, target.num_layers - 2}}};
    if (s.v2) {
        d["conv_kernel_size"] = 2;
        d["conv_group_size"] = 16;
        d["selector_rank"] = 8;
        d["selector_top_k"] = 16;
    }
    return {{"architectures", {s.v2 ? "DFlash2DraftModel" : "DFlashDraftModel"}},
            {"model_type", "qwen3"},
            {"hidden_size", target.hidden_size},
            {"intermediate_size", s.intermediate},
            {"num_hidden_layers", s.layers},
            {"num_attention_heads", s.heads},
            {"num_key_value_heads", s.kv_heads},
            {"head_dim", s.head_dim},
            {"vocab_size", target.vocab_size},
            {"rms_norm_eps", 1e-6},
            {"rope_theta", 1000000.0},
            {"layer_types", layer_types},
            {"sliding_window", s.window},
            {"use_sliding_window", true},
            {"is_causal", false},
            {"attention_bias", false},
            {"hidden_act", "silu"},
            {"dflash_config", d}};
}

// Writes config.json and model.safetensors (F32) of a random drafter into dir.
inline void write_random_drafter(const std::filesystem::path& dir, const io::ModelConfig& target,
                                 const DrafterShape& s) {
    std::filesystem::create_directories(dir);
    const nlohmann::json cfg = drafter_config(target, s);
    std::ofstream(dir / "config.json") << cfg.dump(2);
    const int64_t H = target.hidden_size, D = s.head_dim, I = s.intermediate, V = target.vocab_size;
    std::map<std::string, std::vector<int64_t>> shapes = {
        {"fc.weight", {H, 2 * H}}, {"hidden_norm.weight", {H}}, {"norm.weight", {H}}};
    for (int64_t l = 0; l < s.layers; ++l) {
        const std::string p = "layers." + std::to_string(l) + ".";
        shapes[p + "input_layernorm.weight"] = {H};
        shapes[p + "post_attention_layernorm.weight"] = {H};
        shapes[p + "self_attn.q_norm.weight"] = {D};
        shapes[p + "self_attn.k_norm.weight"] = {D};
        shapes[p + "self_attn.q_proj.weight"] = {s.heads * D, H};
        shapes[p + "self_attn.k_proj.weight"] = {s.kv_heads * D, H};
        shapes[p + "self_attn.v_proj.weight"] = {s.kv_heads * D, H};
        shapes[p + "self_attn.o_proj.weight"] = {H, s.heads * D};
        shapes[p + "mlp.gate_proj.weight"] = {I, H};
        shapes[p + "mlp.up_proj.weight"] = {I, H};
        shapes[p + "mlp.down_proj.weight"] = {H, I};
        if (s.v2) {
            for (const char* side : {"attention_conv.", "mlp_conv."}) {
                shapes[p + side + "base_kernel"] = {2, 2, H};
                shapes[p + side + "kernel_projection.weight"] = {2 * 2 * (H / 16), H};
            }
        }
    }
    if (s.v2) {
        shapes["candidate_selector.hidden_projection.weight"] = {8, H};
        shapes["candidate_selector.predecessor_codebook"] = {V, 8};
        shapes["candidate_selector.successor_codebook"] = {V, 8};
    }
    std::map<std::string, io::TensorSpec> specs;
    for (const auto& [name, shape] : shapes) {
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        specs[name] = {"F32", shape, n * 4};
    }
    std::mt19937_64 rng(s.seed);
    auto write = [&](const std::string& name) {
        const io::TensorSpec& spec = specs.at(name);
        const bool norm = name.find("norm.weight") != std::string::npos;
        // The conv's base kernels: tap 0 near 1 (the identity), tap 1 small.
        const bool base = name.find("base_kernel") != std::string::npos;
        std::normal_distribution<float> dist(0.0f, norm ? 0.05f : s.stddev);
        std::vector<float> v(size_t(spec.nbytes / 4));
        for (size_t i = 0; i < v.size(); ++i) {
            v[i] = dist(rng);
            if (norm) v[i] += 1.0f;
            if (base && (i / size_t(H)) % 2 == 0) v[i] += 1.0f;
        }
        std::vector<uint8_t> bytes(size_t(spec.nbytes));
        std::memcpy(bytes.data(), v.data(), bytes.size());
        return bytes;
    };
    io::write_safetensors(dir / "model.safetensors", specs, write);
}

} // namespace ninfer::test
