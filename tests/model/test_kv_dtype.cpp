// --kv-dtype int8 | fp8 on the CPU: the engine allocates the smaller planes, reports them, and
// its teacher-forced log-probabilities stay within the codec's error of the unquantized cache's
// on every HF fixture (the exactness of hits, batching and preemption with quantized KV is in
// test_serving_exactness.cpp).
#include <algorithm>
#include <cmath>

#include "model/fixture_util.h"

namespace ninfer::test {
namespace {

// Typical |log p| shift a quantized KV cache may make on the fixtures' teacher-forced tokens:
// the median over each fixture's 173 scored tokens. The fixtures' models are random: their
// attention logits (normed q . k / sqrt(D)) are O(1), so int8-g64's ~0.4% value error moves a
// log-softmax by a few 1e-3 and e4m3's 4 significant bits ~8x as far. The maximum is no
// measure here: most prompt tokens sit at log p -10 to -18, and on moe_vlm_per_expert a router
// near-tie (bench/NOTES.md) turns any perturbation into a changed expert for a few tokens.
constexpr double kInt8KvMedianLogprobAbs = 2e-2;
constexpr double kFp8KvMedianLogprobAbs = 1.5e-1;

std::vector<double> prompt_logprobs(const Fixture& f, const char* kv_dtype,
                                    const std::vector<int32_t>& text, EngineStats* stats = nullptr,
                                    MemoryStats* memory = nullptr) {
    EngineOptions o;
    o.model_dir = f.dir;
    o.max_context = 512;
    o.prefill_chunk = 24; // several chunks: later chunks read the cached (quantized) keys
    o.kv_dtype = kv_dtype;
    Engine engine(o);
    GenerationRequest r = greedy_request(text, 0, 0);
    r.prompt_logprobs = true;
    RequestStream s = engine.submit(r);
    std::vector<double> out;
    RequestUpdate u;
    while (s.next(u))
        for (const TokenLogprob& t : u.prompt_logprobs) out.push_back(t.logprob);
    if (stats) *stats = engine.stats();
    if (memory) *memory = engine.memory_stats();
    return out;
}

// The fixture's longest prompt followed by HF's greedy continuation.
std::vector<int32_t> scored_text(const Fixture& f) {
    const ReferenceCase& c = f.cases.back();
    std::vector<int32_t> text = c.prompt;
    for (const ReferenceStep& s : c.steps) text.push_back(s.id);
    return text;
}

struct Shift {
    double median = 0, mean = 0;
};

Shift shift(const std::vector<double>& a, const std::vector<double>& b) {
    EXPECT_EQ(a.size(), b.size());
    std::vector<double> d;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) d.push_back(std::fabs(a[i] - b[i]));
    if (d.empty()) return {};
    std::sort(d.begin(), d.end());
    double sum = 0;
    for (double x : d) sum += x;
    return {d[d.size() / 2], sum / double(d.size())};
}

class KvDtype : public ::testing::TestWithParam<Fixture> {};

TEST_P(KvDtype, QuantizedCachesTrackTheUnquantizedOne) {
    const Fixture& f = GetParam();
    const std::vector<int32_t> text = scored_text(f);
    EngineStats st;
    MemoryStats dense_mem, int8_mem, fp8_mem;
    const auto dense = prompt_logprobs(f, "bf16", text, &st, &dense_mem);
    EXPECT_EQ(st.kv_dtype, "f32"); // the CPU's activation dtype
    const auto int8 = prompt_logprobs(f, "int8", text, &st, &int8_mem);
    EXPECT_EQ(st.kv_dtype, "int8");
    const auto fp8 = prompt_logprobs(f, "fp8", text, &st, &fp8_mem);
    EXPECT_EQ(st.kv_dtype, "fp8");
    const Shift int8_shift = shift(int8, dense), fp8_shift = shift(fp8, dense);
    EXPECT_LE(int8_shift.median, kInt8KvMedianLogprobAbs) << f.name;
    EXPECT_LE(fp8_shift.median, kFp8KvMedianLogprobAbs) << f.name;
    // 8 significant bits move the model less than e4m3's 4; and quantization happened (a
    // cache that silently stayed f32 would give 0).
    EXPECT_LT(int8_shift.mean, fp8_shift.mean) << f.name;
    EXPECT_GT(int8_shift.median, 0.0) << f.name;
    RecordProperty("median_abs_logprob_shift_int8", std::to_string(int8_shift.median));
    RecordProperty("median_abs_logprob_shift_fp8", std::to_string(fp8_shift.median));
    // The same token capacity in under a third of the f32 cache's bytes (1 byte a dim plus
    // scales, against 4).
    EXPECT_LT(int8_mem.kv_cache * 3, dense_mem.kv_cache) << f.name;
    EXPECT_LT(fp8_mem.kv_cache * 3, dense_mem.kv_cache) << f.name;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, KvDtype, ::testing::ValuesIn(load_fixtures()),
                         [](const auto& param_info) { return param_info.param.name; });

TEST(KvDtypeOption, UnknownNamesAreRejected) {
    EngineOptions o;
    o.model_dir = load_fixtures().front().dir;
    o.kv_dtype = "int4";
    try {
        Engine engine(o);
        FAIL() << "an unknown --kv-dtype was accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("int4"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("--kv-dtype"), std::string::npos) << e.what();
    }
}

} // namespace
} // namespace ninfer::test
