// CUDA logprobs_top_k and sample_tokens (split + merge kernels) against the CPU reference: the
// real vocabulary (248,320 columns, padded past the token limit), split boundaries and tiny rows,
// 1-5 rows mixing greedy and sampled rows, ties across chunks, non-finite rows, top-k logprobs
// with k = 0, 1, 20, the chosen-logit gather; and the Sampler on CUDA against it on the CPU.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "ops/logits.h"
#include "ops/sampling.h"
#include "runtime/sampler.h"

namespace ninfer::test {
namespace {

const ops::ExecContext& gpu() {
    static const ops::ExecContext c = cuda_ctx(DType::BF16);
    return c;
}

// Row widths: the real vocabulary (padded: ids >= limit are not tokens), several splits, the split
// count's cap (256 splits of 1025 columns), one split, a single column.
struct Vocab {
    int64_t V, limit;
};
const Vocab kVocabs[] = {{248320, 248077}, {262145, 262100}, {5000, 5000},
                         {1025, 1000},     {37, 30},         {1, 1}};

std::string label(const Vocab& v, int64_t R, int64_t k = -1) {
    return "V=" + std::to_string(v.V) + " limit=" + std::to_string(v.limit) +
           " R=" + std::to_string(R) + (k >= 0 ? " k=" + std::to_string(k) : "");
}

// Random rows with planted structure: a group of equal values spread over the row (top-k ties in
// id order), a tie for the maximum between an early and the last real id (different chunks on a
// wide row: the lower id wins), and a larger value in the padding (never a token, still in lse).
Tensor planted_logits(const Vocab& vocab, int64_t R, uint64_t seed) {
    Tensor t = random_tensor({R, vocab.V}, seed, 3.0f);
    const int64_t L = vocab.limit;
    for (int64_t r = 0; r < R; ++r) {
        float* l = t.ptr<float>() + r * vocab.V;
        for (int64_t i = 0; i < std::min<int64_t>(24, L); ++i) l[(i * 9973 + r) % L] = 12.0f;
        if (L >= 4) l[(r + 1) % (L / 2)] = l[L - 1] = 25.0f + float(r);
        if (vocab.V > L) l[vocab.V - 1] = 40.0f;
    }
    return t;
}

struct Logprobs {
    Tensor lse, ids, lp;
};

Logprobs cpu_logprobs(const Tensor& logits, int64_t limit, int64_t k) {
    const int64_t R = logits.size(0);
    Logprobs out{zeros({R}), zeros({R, k}, DType::I32), zeros({R, k})};
    ops::logprobs_top_k(kCpuRef, logits, limit, out.lse, k ? out.ids.view() : TensorView{},
                        k ? out.lp.view() : TensorView{});
    return out;
}

Logprobs gpu_logprobs(const Tensor& logits, int64_t limit, int64_t k) {
    const auto& c = gpu();
    const int64_t R = logits.size(0);
    Tensor lse = to_device(c, zeros({R}), DType::F32);
    Tensor ids = to_device(c, zeros({R, k}, DType::I32), DType::I32);
    Tensor lp = to_device(c, zeros({R, k}), DType::F32);
    ops::logprobs_top_k(c, to_device(c, logits, DType::F32), limit, lse,
                        k ? ids.view() : TensorView{}, k ? lp.view() : TensorView{});
    Logprobs out{to_host(c, lse), zeros({R, k}, DType::I32), zeros({R, k})};
    if (k) out.ids = to_host(c, ids), out.lp = to_host(c, lp);
    return out;
}

TEST(CudaSamplingOps, LogprobsMatchTheCpuReference) {
    for (const Vocab& vocab : kVocabs)
        for (int64_t R : {1, 2, 5})
            for (int64_t k : {0, 1, 20}) {
                if (k > vocab.limit) continue;
                Tensor logits = planted_logits(vocab, R, 700 + uint64_t(R));
                const Logprobs ref = cpu_logprobs(logits, vocab.limit, k);
                const Logprobs got = gpu_logprobs(logits, vocab.limit, k);
                EXPECT_TRUE(near(got.lse, ref.lse, kCudaF32)) << label(vocab, R, k);
                EXPECT_TRUE(near(got.ids, ref.ids, kExact)) << label(vocab, R, k);
                EXPECT_TRUE(near(got.lp, ref.lp, kCudaF32)) << label(vocab, R, k);
            }
}

TEST(CudaSamplingOps, TopLogprobsOfATieGroupComeInIdOrder) {
    // 30 equal maxima spread over the whole row (every chunk holds some): ids ascending.
    const int64_t V = 248320, k = 20;
    Tensor logits = random_tensor({1, V}, 710, 1.0f);
    for (int64_t i = 0; i < 30; ++i) logits.ptr<float>()[(i * 8191 + 5) % V] = 9.0f;
    const Logprobs ref = cpu_logprobs(logits, V, k), got = gpu_logprobs(logits, V, k);
    EXPECT_TRUE(near(got.ids, ref.ids, kExact));
    EXPECT_TRUE(near(got.lp, ref.lp, kCudaF32));
}

// Row r's parameters: greedy, sampled with top-k, sampled with top-p, greedy, greedy through
// temperature 0 (then min-p on a sampled row past five rows).
ops::SamplingParamsRow params_for(int64_t r) {
    ops::SamplingParamsRow p;
    p.seed = 900 + uint64_t(r);
    p.position = 3 * r + 1;
    switch (r % 6) {
    case 0:
        p.greedy = 1;
        break;
    case 1:
        p.temperature = 0.8f, p.top_k = 40;
        break;
    case 2:
        p.top_p = 0.9f;
        break;
    case 3:
        p.greedy = 1;
        break;
    case 4:
        p.temperature = 0.0f;
        break;
    default:
        p.temperature = 1.3f, p.min_p = 0.05f;
        break;
    }
    return p;
}

// Non-finite values among the real ids of some rows (a sampled row: NaN in the last chunk; a
// greedy row: -inf at id 0; a sampled row: +inf), and a NaN in the padding of row 0, which is
// not a token and must not fail the row.
void plant_non_finite(Tensor& logits, const Vocab& vocab) {
    const int64_t R = logits.size(0), V = vocab.V, L = vocab.limit;
    float* l = logits.ptr<float>();
    if (R >= 3) l[2 * V + L - 1] = NAN;
    if (R == 5) l[4 * V] = -INFINITY;
    if (R == 4) l[1 * V + L / 2] = INFINITY;
    if (V > L) l[V - 2] = NAN;
}

struct Sampled {
    Tensor tokens, status, chosen;
};

Sampled cpu_sample(const Tensor& logits, const Tensor& source, int64_t limit,
                   const std::vector<ops::SamplingParamsRow>& params) {
    const int64_t R = logits.size(0);
    Sampled s{zeros({R}, DType::I32), zeros({R}, DType::I32), zeros({R})};
    ops::sample_tokens(kCpuRef, logits, limit, params.data(), s.tokens, s.status, source, s.chosen);
    return s;
}

Sampled gpu_sample(const Tensor& logits, const Tensor& source, int64_t limit,
                   const std::vector<ops::SamplingParamsRow>& params) {
    const auto& c = gpu();
    const int64_t R = logits.size(0), bytes = R * int64_t(sizeof(ops::SamplingParamsRow));
    Tensor d_params = Tensor::empty(ops::device_allocator(c.device), DType::U8, {bytes});
    ops::upload(c,
                TensorView::contiguous(const_cast<ops::SamplingParamsRow*>(params.data()),
                                       DType::U8, Device::cpu(), {bytes}),
                d_params);
    Tensor tok = to_device(c, zeros({R}, DType::I32), DType::I32);
    Tensor st = to_device(c, zeros({R}, DType::I32), DType::I32);
    Tensor chosen = to_device(c, zeros({R}), DType::F32);
    ops::sample_tokens(c, to_device(c, logits, DType::F32), limit,
                       static_cast<const ops::SamplingParamsRow*>(d_params.view().data), tok, st,
                       to_device(c, source, DType::F32), chosen);
    return {to_host(c, tok), to_host(c, st), to_host(c, chosen)};
}

void expect_same_samples(const Sampled& got, const Sampled& ref, const std::string& what) {
    EXPECT_TRUE(near(got.status, ref.status, kExact)) << what;
    EXPECT_TRUE(near(got.tokens, ref.tokens, kExact)) << what;
    for (int64_t r = 0; r < ref.status.size(0); ++r) {
        const float g = got.chosen.ptr<float>()[r], e = ref.chosen.ptr<float>()[r];
        if (ref.status.ptr<int32_t>()[r] == ops::kSampleOk)
            EXPECT_EQ(g, e) << what << " row " << r; // a gather: bit-exact
        else
            EXPECT_TRUE(std::isnan(g)) << what << " row " << r;
    }
}

TEST(CudaSamplingOps, TokensStatusAndChosenLogitsMatchTheCpuReference) {
    for (const Vocab& vocab : kVocabs)
        for (int64_t R = 1; R <= 5; ++R) {
            Tensor logits = planted_logits(vocab, R, 800 + uint64_t(R));
            plant_non_finite(logits, vocab);
            // The gather source differs from the sampled rows (as raw logits differ from
            // penalized ones), so the test sees which one the chosen logit comes from.
            Tensor source = random_tensor({R, vocab.V}, 850 + uint64_t(R), 2.0f);
            std::vector<ops::SamplingParamsRow> params;
            for (int64_t r = 0; r < R; ++r) params.push_back(params_for(r));
            const Sampled ref = cpu_sample(logits, source, vocab.limit, params);
            expect_same_samples(gpu_sample(logits, source, vocab.limit, params), ref,
                                label(vocab, R));
            if (R >= 3) {
                EXPECT_EQ(ref.status.ptr<int32_t>()[2], ops::kSampleNonFinite);
            }
            EXPECT_EQ(ref.status.ptr<int32_t>()[0], ops::kSampleOk) << label(vocab, R);
        }
}

TEST(CudaSamplingOps, GreedyTiesAcrossChunksPickTheLowerId) {
    // The maximum at ids 3 (first chunk), 123456 and 248000 (later chunks).
    const int64_t V = 248320;
    Tensor logits = random_tensor({2, V}, 720, 1.0f);
    for (int64_t id : {3, 123456, 248000}) logits.ptr<float>()[id] = 8.0f;
    for (int64_t id : {248000, 123456}) logits.ptr<float>()[V + id] = 8.0f; // row 1: later chunks
    std::vector<ops::SamplingParamsRow> params(2);
    params[0].greedy = params[1].greedy = 1;
    const Sampled ref = cpu_sample(logits, logits, V, params);
    EXPECT_EQ(ref.tokens.ptr<int32_t>()[0], 3);
    EXPECT_EQ(ref.tokens.ptr<int32_t>()[1], 123456);
    expect_same_samples(gpu_sample(logits, logits, V, params), ref, "greedy ties");
}

TEST(CudaSamplingOps, ManyRowsMixGreedyAndSampled) {
    const Vocab vocab{5000, 4990};
    const int64_t R = 70;
    Tensor logits = planted_logits(vocab, R, 730);
    const Logprobs lref = cpu_logprobs(logits, vocab.limit, 5);
    const Logprobs lgot = gpu_logprobs(logits, vocab.limit, 5);
    EXPECT_TRUE(near(lgot.ids, lref.ids, kExact));
    EXPECT_TRUE(near(lgot.lse, lref.lse, kCudaF32));
    plant_non_finite(logits, vocab); // after the logprobs: the CPU top-k sort needs no NaN
    std::vector<ops::SamplingParamsRow> params;
    for (int64_t r = 0; r < R; ++r) params.push_back(params_for(r));
    const Sampled ref = cpu_sample(logits, logits, vocab.limit, params);
    expect_same_samples(gpu_sample(logits, logits, vocab.limit, params), ref, "R=70");
}

// Drafts with a sparse q (ops/sampling.h): row r verifies a draft drawn from q over 16 ids
// (the row's top ids and some of the tail), some rows a draft outside q or none; the CUDA accept
// test and residual give the CPU's tokens.
struct Drafts {
    Tensor draft, ids, q;
};

Drafts planted_drafts(const Tensor& logits, int64_t limit, uint64_t seed) {
    const int64_t R = logits.size(0), k = 16;
    const Logprobs top = cpu_logprobs(logits, limit, 8);
    Drafts d{zeros({R}, DType::I32), zeros({R, k}, DType::I32), zeros({R, k})};
    std::mt19937_64 gen(seed);
    for (int64_t r = 0; r < R; ++r) {
        int32_t* ids = d.ids.ptr<int32_t>() + r * k;
        float* q = d.q.ptr<float>() + r * k;
        std::vector<int32_t> chosen;
        for (int64_t i = 0; i < 8; ++i) chosen.push_back(top.ids.ptr<int32_t>()[r * 8 + i]);
        while (int64_t(chosen.size()) < k) { // distinct tail ids
            const int32_t id = int32_t(gen() % uint64_t(limit));
            if (std::find(chosen.begin(), chosen.end(), id) == chosen.end()) chosen.push_back(id);
        }
        std::shuffle(chosen.begin(), chosen.end(), gen);
        double sum = 0;
        std::vector<double> w(static_cast<size_t>(k));
        for (auto& x : w) sum += x = 0.05 + double(gen() % 1000) / 1000.0;
        for (int64_t i = 0; i < k; ++i) {
            ids[i] = chosen[size_t(i)];
            q[i] = float(w[size_t(i)] / sum);
        }
        if (r % 7 == 3) ids[k - 1] = -1, q[k - 1] = 0, q[0] += float(w[size_t(k - 1)] / sum);
        std::discrete_distribution<int> pick(q, q + k);
        d.draft.ptr<int32_t>()[r] = r % 11 == 5 ? -1 : ids[pick(gen)];
        if (r % 13 == 6) d.draft.ptr<int32_t>()[r] = int32_t((r * 7919) % limit); // outside q
    }
    return d;
}

TEST(CudaSamplingOps, SparseDraftsMatchTheCpuReference) {
    const Vocab vocab{248320, 248077};
    const int64_t R = 96;
    Tensor logits = planted_logits(vocab, R, 760);
    const Drafts d = planted_drafts(logits, vocab.limit, 761);
    std::vector<ops::SamplingParamsRow> params;
    for (int64_t r = 0; r < R; ++r) {
        ops::SamplingParamsRow p = params_for(r);
        p.temperature = p.temperature > 0 ? p.temperature * 2.5f : p.temperature; // flatter p
        params.push_back(p);
    }
    Sampled ref{zeros({R}, DType::I32), zeros({R}, DType::I32), zeros({R})};
    ops::sample_tokens(kCpuRef, logits, vocab.limit, params.data(), ref.tokens, ref.status, logits,
                       ref.chosen, {d.draft, d.ids, d.q});
    const auto& c = gpu();
    const int64_t bytes = R * int64_t(sizeof(ops::SamplingParamsRow));
    Tensor d_params = Tensor::empty(ops::device_allocator(c.device), DType::U8, {bytes});
    ops::upload(c, TensorView::contiguous(params.data(), DType::U8, Device::cpu(), {bytes}),
                d_params);
    Tensor tok = to_device(c, zeros({R}, DType::I32), DType::I32);
    Tensor st = to_device(c, zeros({R}, DType::I32), DType::I32);
    Tensor chosen = to_device(c, zeros({R}), DType::F32);
    const Tensor d_logits = to_device(c, logits, DType::F32);
    ops::sample_tokens(c, d_logits, vocab.limit,
                       static_cast<const ops::SamplingParamsRow*>(d_params.view().data), tok, st,
                       d_logits, chosen,
                       {to_device(c, d.draft, DType::I32), to_device(c, d.ids, DType::I32),
                        to_device(c, d.q, DType::F32)});
    expect_same_samples({to_host(c, tok), to_host(c, st), to_host(c, chosen)}, ref, "drafts");
    // Both branches ran: sampled rows that took their draft and sampled rows that did not.
    int accepted = 0, rejected = 0;
    for (int64_t r = 0; r < R; ++r) {
        const ops::SamplingParamsRow& p = params[size_t(r)];
        const int32_t draft = d.draft.ptr<int32_t>()[r];
        if (p.greedy || p.temperature <= 0 || draft < 0) continue;
        (ref.tokens.ptr<int32_t>()[r] == draft ? accepted : rejected) += 1;
    }
    EXPECT_GT(accepted, 3);
    EXPECT_GT(rejected, 3);
}

// ---------------------------------------------------------------------------------------------
// The Sampler: one packed download per step on CUDA; the same outputs as on the CPU.

struct SamplerRows {
    std::vector<SamplingOptions> options;
    std::unordered_set<int32_t> prompt{5, 17, 900};
    std::unordered_map<int32_t, int32_t> counts{{17, 2}, {42, 1}};
    std::vector<uint8_t> allowed;
    std::vector<runtime::SampleInput> inputs;

    explicit SamplerRows(int64_t limit) : options(5), allowed(size_t(limit), 0) {
        for (size_t v = 0; v < allowed.size(); v += 3) allowed[v] = 1;
        options[0].greedy = true;
        options[1].temperature = 0.7f, options[1].top_k = 50, options[1].repetition_penalty = 1.3f;
        options[1].frequency_penalty = 0.2f;
        options[2].top_p = 0.95f;
        options[3].greedy = true;
        options[4].temperature = 0.9f;
        const int top[5] = {5, 0, 20, 1, 3};
        for (size_t r = 0; r < options.size(); ++r)
            inputs.push_back({&options[r], 300 + r, int64_t(10 + r), top[r], &prompt, &counts,
                              r == 4 ? &allowed : nullptr});
    }
};

TEST(CudaSampler, MatchesTheCpuSampler) {
    const Vocab vocab{248320, 248077};
    Tensor logits = planted_logits(vocab, 5, 740);
    // Row 3: non-finite, no token (+inf, as the top-k logprobs still order the row on the CPU).
    logits.ptr<float>()[3 * vocab.V + 77] = INFINITY;
    SamplerRows rows(vocab.limit);
    runtime::Sampler cpu_sampler(ops::ExecContext::cpu());
    const auto ref = cpu_sampler.sample(logits, vocab.limit, rows.inputs);
    runtime::Sampler gpu_sampler(gpu());
    const Tensor d_logits = to_device(gpu(), logits, DType::F32);
    for (int step = 0; step < 2; ++step) { // the second step reuses the device buffers
        const auto got = gpu_sampler.sample(d_logits, vocab.limit, rows.inputs);
        ASSERT_EQ(got.size(), ref.size());
        for (size_t r = 0; r < ref.size(); ++r) {
            const std::string what = "step " + std::to_string(step) + " row " + std::to_string(r);
            EXPECT_EQ(got[r].non_finite, ref[r].non_finite) << what;
            EXPECT_EQ(got[r].token.id, ref[r].token.id) << what;
            EXPECT_NEAR(got[r].token.logprob, ref[r].token.logprob, 2e-4) << what;
            ASSERT_EQ(got[r].token.top_logprobs.size(), ref[r].token.top_logprobs.size()) << what;
            for (size_t i = 0; i < ref[r].token.top_logprobs.size(); ++i) {
                EXPECT_EQ(got[r].token.top_logprobs[i].id, ref[r].token.top_logprobs[i].id);
                EXPECT_NEAR(got[r].token.top_logprobs[i].logprob,
                            ref[r].token.top_logprobs[i].logprob, 2e-4);
            }
        }
    }
    EXPECT_TRUE(ref[3].non_finite);
    EXPECT_EQ(ref[4].token.id % 3, 0); // the mask held
    EXPECT_EQ(ref[0].token.top_logprobs.size(), 5u);
}

} // namespace
} // namespace ninfer::test
