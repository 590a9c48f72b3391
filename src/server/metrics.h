// Server metrics in the Prometheus text format (GET /metrics): request counts by endpoint and
// status, finished generations by reason, prompt and generated tokens, histograms of time to
// first token, inter-token latency and request duration, gauges of the engine's load (queue
// depth, running sequences, KV blocks and GDN state slots in use, memory) and the prefix cache
// (tokens looked up and found, hit rate, cached KV blocks, state snapshots, preemptions).
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "ninfer/engine.h"

namespace ninfer::server {

class Histogram {
public:
    explicit Histogram(std::vector<double> bounds);
    void observe(double v);
    // Appends the _bucket, _sum and _count lines of `name`.
    void render(std::string& out, const std::string& name, const std::string& help) const;

private:
    std::vector<double> bounds_;
    std::vector<uint64_t> counts_; // per bucket (not cumulative); last: +Inf
    double sum_ = 0;
    uint64_t count_ = 0;
};

class Metrics {
public:
    Metrics();
    void request(const std::string& endpoint, int status);
    void finished(const std::string& reason); // stop, length, cancelled, error
    // `cached`: of the prompt tokens, those served from the prefix cache
    void tokens(int prompt, int completion, int cached = 0);
    void ttft(double s);
    void inter_token(int tokens, double gap_s); // gap over `tokens` tokens
    void duration(double s);
    std::string render(const EngineStats& engine, const MemoryStats& memory, int64_t in_flight,
                       int64_t capacity) const;

private:
    mutable std::mutex mutex_;
    std::map<std::pair<std::string, int>, uint64_t> requests_;
    std::map<std::string, uint64_t> finished_;
    uint64_t prompt_tokens_ = 0, generation_tokens_ = 0, cached_tokens_ = 0;
    Histogram ttft_, itl_, duration_;
};

} // namespace ninfer::server
