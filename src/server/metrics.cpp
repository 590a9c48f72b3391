#include "server/metrics.h"

#include <cstdio>

namespace ninfer::server {
namespace {

std::string num(double v) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.17g", v);
    return buf;
}

void header(std::string& out, const std::string& name, const char* type, const std::string& help) {
    out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void gauge(std::string& out, const std::string& name, double v, const std::string& help) {
    header(out, name, "gauge", help);
    out += name + " " + num(v) + "\n";
}

void counter(std::string& out, const std::string& name, uint64_t v, const std::string& help) {
    header(out, name, "counter", help);
    out += name + " " + std::to_string(v) + "\n";
}

} // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
    size_t i = 0;
    while (i < bounds_.size() && v > bounds_[i]) ++i;
    ++counts_[i];
    sum_ += v;
    ++count_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& help) const {
    header(out, name, "histogram", help);
    uint64_t cumulative = 0;
    for (size_t i = 0; i < bounds_.size(); ++i) {
        cumulative += counts_[i];
        out +=
            name + "_bucket{le=\"" + num(bounds_[i]) + "\"} " + std::to_string(cumulative) + "\n";
    }
    out += name + "_bucket{le=\"+Inf\"} " + std::to_string(count_) + "\n";
    out += name + "_sum " + num(sum_) + "\n" + name + "_count " + std::to_string(count_) + "\n";
}

Metrics::Metrics()
    : ttft_({0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}),
      itl_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}),
      duration_({0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}) {}

void Metrics::request(const std::string& endpoint, int status) {
    std::lock_guard lock(mutex_);
    ++requests_[{endpoint, status}];
}

void Metrics::finished(const std::string& reason) {
    std::lock_guard lock(mutex_);
    ++finished_[reason];
}

void Metrics::tokens(int prompt, int completion, int cached) {
    std::lock_guard lock(mutex_);
    prompt_tokens_ += uint64_t(prompt);
    generation_tokens_ += uint64_t(completion);
    cached_tokens_ += uint64_t(cached);
}

void Metrics::ttft(double s) {
    std::lock_guard lock(mutex_);
    ttft_.observe(s);
}

void Metrics::inter_token(int tokens, double gap_s) {
    std::lock_guard lock(mutex_);
    for (int i = 0; i < tokens; ++i) itl_.observe(gap_s / tokens);
}

void Metrics::duration(double s) {
    std::lock_guard lock(mutex_);
    duration_.observe(s);
}

std::string Metrics::render(const EngineStats& e, const MemoryStats& m, int64_t in_flight,
                            int64_t capacity) const {
    std::lock_guard lock(mutex_);
    std::string out;
    header(out, "ninfer_requests_total", "counter", "HTTP requests by endpoint and status");
    for (const auto& [key, n] : requests_)
        out += "ninfer_requests_total{endpoint=\"" + key.first + "\",status=\"" +
               std::to_string(key.second) + "\"} " + std::to_string(n) + "\n";
    header(out, "ninfer_generations_finished_total", "counter",
           "Generated choices by finish reason (stop, length, cancelled, error)");
    for (const char* r : {"stop", "length", "cancelled", "error"}) {
        auto it = finished_.find(r);
        out += std::string("ninfer_generations_finished_total{reason=\"") + r + "\"} " +
               std::to_string(it == finished_.end() ? 0 : it->second) + "\n";
    }
    counter(out, "ninfer_prompt_tokens_total", prompt_tokens_, "Prompt tokens processed");
    counter(out, "ninfer_prompt_tokens_cached_total", cached_tokens_,
            "Prompt tokens served from the prefix cache (usage cached_tokens)");
    counter(out, "ninfer_generation_tokens_total", generation_tokens_, "Tokens generated");
    ttft_.render(out, "ninfer_time_to_first_token_seconds", "Time to first token");
    itl_.render(out, "ninfer_inter_token_latency_seconds", "Time between generated tokens");
    duration_.render(out, "ninfer_request_duration_seconds", "Generation request duration");
    gauge(out, "ninfer_requests_in_flight", double(in_flight),
          "Sequences admitted by the server (running or queued)");
    gauge(out, "ninfer_requests_capacity", double(capacity),
          "Sequences the server admits before answering 429");
    gauge(out, "ninfer_queue_depth", double(e.waiting), "Sequences waiting for the engine");
    gauge(out, "ninfer_sequences_running", double(e.active), "Sequences the engine runs");
    gauge(out, "ninfer_kv_blocks_used", double(e.kv_blocks_used), "KV cache blocks in use");
    gauge(out, "ninfer_kv_blocks_total", double(e.kv_blocks_total), "KV cache blocks");
    gauge(out, "ninfer_kv_cache_usage_ratio",
          e.kv_blocks_total > 0 ? double(e.kv_blocks_used) / double(e.kv_blocks_total) : 0.0,
          "Fraction of the KV cache in use");
    gauge(out, "ninfer_state_slots_used", double(e.state_slots_used), "GDN state slots in use");
    gauge(out, "ninfer_state_slots_total", double(e.state_slots_total), "GDN state slots");
    counter(out, "ninfer_prefix_cache_queries_tokens_total", uint64_t(e.prefix_query_tokens),
            "Prompt tokens looked up in the prefix cache");
    counter(out, "ninfer_prefix_cache_hits_tokens_total", uint64_t(e.prefix_hit_tokens),
            "Prompt tokens found in the prefix cache");
    gauge(out, "ninfer_prefix_cache_hit_rate",
          e.prefix_query_tokens > 0 ? double(e.prefix_hit_tokens) / double(e.prefix_query_tokens)
                                    : 0.0,
          "Fraction of the prompt tokens looked up that the prefix cache held");
    counter(out, "ninfer_prefix_cache_warm_tokens_total", uint64_t(e.prefill_only_tokens),
            "Tokens prefilled ahead of a conversation's next turn (next-turn warming)");
    gauge(out, "ninfer_kv_blocks_cached", double(e.kv_blocks_cached),
          "Unreferenced KV blocks kept for the prefix cache (evictable)");
    header(out, "ninfer_prefix_snapshots", "gauge", "GDN state snapshots held, by memory tier");
    out += "ninfer_prefix_snapshots{tier=\"device\"} " + std::to_string(e.snapshots_device) + "\n";
    out += "ninfer_prefix_snapshots{tier=\"host\"} " + std::to_string(e.snapshots_host) + "\n";
    gauge(out, "ninfer_prefix_snapshots_total_slots", double(e.snapshots_device_total),
          "GDN state snapshot slots on the device");
    counter(out, "ninfer_preemptions_total", uint64_t(e.preemptions),
            "Requests preempted under memory pressure (recomputed later)");
    if (!e.speculative.empty()) { // vLLM's spec-decode metric names, ninfer_ prefixed
        const SpeculativeStats& sp = e.speculation;
        counter(out, "ninfer_spec_decode_num_drafts_total", uint64_t(sp.rounds),
                "Speculative rounds (sequence steps that verified drafts)");
        counter(out, "ninfer_spec_decode_num_draft_tokens_total", uint64_t(sp.drafted),
                "Draft tokens proposed");
        counter(out, "ninfer_spec_decode_num_accepted_tokens_total", uint64_t(sp.accepted),
                "Draft tokens accepted");
        header(out, "ninfer_spec_decode_num_accepted_tokens_per_pos", "counter",
               "Accepted draft tokens by position in the round (with every earlier one)");
        for (size_t i = 0; i < sp.accepted_at.size(); ++i)
            out += "ninfer_spec_decode_num_accepted_tokens_per_pos{position=\"" +
                   std::to_string(i) + "\"} " + std::to_string(sp.accepted_at[i]) + "\n";
        gauge(out, "ninfer_spec_decode_draft_tokens", double(e.draft_tokens),
              "Draft tokens per round chosen for the latest drafting step");
    }
    header(out, "ninfer_memory_bytes", "gauge", "Device memory held by the engine");
    out += "ninfer_memory_bytes{kind=\"weights\"} " + std::to_string(m.weights) + "\n";
    out += "ninfer_memory_bytes{kind=\"kv_cache\"} " + std::to_string(m.kv_cache) + "\n";
    out += "ninfer_memory_bytes{kind=\"state\"} " + std::to_string(m.state) + "\n";
    out += "ninfer_memory_bytes{kind=\"workspace\"} " + std::to_string(m.workspace) + "\n";
    return out;
}

} // namespace ninfer::server
