// Implements ops/attention.h on the CPU: cache writes (a copy, or the plane's codec), and causal
// attention per (row, head) over the paged cache with a two-pass softmax (scores, then weighted
// values) on the planes' values (decoded once per read for quantized planes).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/kv_codec.h"

namespace ninfer::ops::cpu {
namespace {

// Element offset of (sequence s, position p, kv head h) in a [NB, bs, nKV, X] plane.
inline int64_t row_offset(const TensorView& plane, const SeqBatch& b, int32_t s, int64_t p,
                          int64_t h) {
    int32_t block = b.host_block_table[int64_t(s) * b.block_table_stride + p / b.block_size];
    return plane.offset(block, p % b.block_size, h);
}

// Reads (token, kv head) rows of a plane as floats: the stored row itself when unquantized,
// else the codec's decoded values in `buffer` (one row: the last read's).
class PlaneReader {
public:
    explicit PlaneReader(const KvPlane& plane) : plane_(plane) {
        if (plane.quantized()) buffer_.resize(size_t(plane.size(3)));
    }
    const float* row(const SeqBatch& b, int32_t s, int64_t p, int64_t h) {
        const int64_t off = row_offset(plane_.data, b, s, p, h);
        switch (plane_.dtype()) {
        case KvDtype::Activation: return plane_.data.ptr<float>() + off;
        case KvDtype::Int8: return decode<kv::Int8G64>(b, s, p, h, off);
        case KvDtype::Fp8: return decode<kv::Fp8PerHead>(b, s, p, h, off);
        }
        return nullptr;
    }

private:
    template <typename Codec>
    const float* decode(const SeqBatch& b, int32_t s, int64_t p, int64_t h, int64_t off) {
        const int D = int(plane_.size(3)), gs = Codec::group_size(D);
        const auto* codes = plane_.data.ptr<typename Codec::Code>() + off;
        const auto* scales =
            plane_.scale.ptr<typename Codec::Scale>() + row_offset(plane_.scale, b, s, p, h);
        for (int d = 0; d < D; ++d)
            buffer_[size_t(d)] = Codec::decode(codes[d], Codec::scale_value(scales[d / gs]));
        return buffer_.data();
    }

    const KvPlane& plane_;
    std::vector<float> buffer_;
};

// Encodes one row of D floats into a quantized plane's (token, kv head) row.
template <typename Codec>
void encode_row(const float* x, int D, typename Codec::Code* codes, typename Codec::Scale* scales) {
    const int gs = Codec::group_size(D);
    for (int g = 0; g < Codec::groups(D); ++g) {
        const int d0 = g * gs, d1 = std::min(D, d0 + gs);
        float amax = 0.0f;
        for (int d = d0; d < d1; ++d) amax = std::fmax(amax, std::fabs(x[d]));
        // fmax drops NaN: a NaN element must poison its group's scale (kv_codec.h).
        for (int d = d0; d < d1; ++d)
            if (std::isnan(x[d])) amax = x[d];
        scales[g] = Codec::scale_for(amax);
        const float s = Codec::scale_value(scales[g]);
        for (int d = d0; d < d1; ++d) codes[d] = Codec::encode(x[d], s);
    }
}

void write_row(const float* x, const KvPlane& plane, const SeqBatch& b, int32_t s, int64_t p,
               int64_t h) {
    const int D = int(plane.size(3));
    const int64_t off = row_offset(plane.data, b, s, p, h);
    switch (plane.dtype()) {
    case KvDtype::Activation:
        std::memcpy(plane.data.ptr<float>() + off, x, size_t(D) * sizeof(float));
        return;
    case KvDtype::Int8:
        return encode_row<kv::Int8G64>(x, D, plane.data.ptr<int8_t>() + off,
                                       plane.scale.ptr<uint16_t>() +
                                           row_offset(plane.scale, b, s, p, h));
    case KvDtype::Fp8:
        return encode_row<kv::Fp8PerHead>(x, D, plane.data.ptr<uint8_t>() + off,
                                          plane.scale.ptr<float>() +
                                              row_offset(plane.scale, b, s, p, h));
    }
}

template <typename Acc>
void attend_row(const TensorView& q, const KvPlane& kc, const KvPlane& vc, const SeqBatch& b,
                int32_t s, int64_t r, int64_t h, int64_t kvh, float scale, const TensorView& out,
                std::vector<Acc>& scores, std::vector<Acc>& acc) {
    const int64_t D = q.size(2);
    const int64_t p = b.host_pos_begin[s] + (r - b.host_row_begin[s]);
    const float* qr = q.ptr<float>() + q.offset(r, h);
    PlaneReader keys(kc), values(vc);
    scores.resize(p + 1);
    Acc max_score = -std::numeric_limits<Acc>::infinity();
    for (int64_t tau = 0; tau <= p; ++tau) {
        const float* kr = keys.row(b, s, tau, kvh);
        Acc dot = 0;
        for (int64_t d = 0; d < D; ++d) dot += Acc(qr[d]) * Acc(kr[d]);
        scores[tau] = dot * Acc(scale);
        max_score = std::max(max_score, scores[tau]);
    }
    Acc denom = 0;
    for (int64_t tau = 0; tau <= p; ++tau) denom += scores[tau] = std::exp(scores[tau] - max_score);
    acc.assign(D, Acc(0));
    for (int64_t tau = 0; tau <= p; ++tau) {
        const float* vr = values.row(b, s, tau, kvh);
        const Acc w = scores[tau] / denom;
        for (int64_t d = 0; d < D; ++d) acc[d] += w * Acc(vr[d]);
    }
    float* o = out.ptr<float>() + out.offset(r, h);
    for (int64_t d = 0; d < D; ++d) o[d] = float(acc[d]);
}

} // namespace

void kv_cache_write(CpuMode mode, const TensorView& k, const TensorView& v, const SeqBatch& b,
                    const KvPlane& k_cache, const KvPlane& v_cache) {
    const int64_t nKV = k.size(1);
    for (int32_t s = 0; s < b.num_seqs; ++s) {
        for (int64_t r = b.host_row_begin[s]; r < b.host_row_begin[s + 1]; ++r) {
            const int64_t p = b.host_pos_begin[s] + (r - b.host_row_begin[s]);
            for (int64_t h = 0; h < nKV; ++h) {
                write_row(k.ptr<float>() + k.offset(r, h), k_cache, b, s, p, h);
                write_row(v.ptr<float>() + v.offset(r, h), v_cache, b, s, p, h);
            }
        }
    }
}

void paged_attention(CpuMode mode, const TensorView& q, const KvPlane& k_cache,
                     const KvPlane& v_cache, const SeqBatch& b, float scale,
                     const TensorView& out) {
    const int64_t nH = q.size(1), nKV = k_cache.size(2), group = nH / nKV;
    // Row -> sequence lookup, then one task per (row, head).
    std::vector<int32_t> seq_of_row(b.num_rows);
    for (int32_t s = 0; s < b.num_seqs; ++s)
        for (int32_t r = b.host_row_begin[s]; r < b.host_row_begin[s + 1]; ++r) seq_of_row[r] = s;
    for_each_task(
        mode, int64_t(b.num_rows) * nH,
        [&](int64_t task) {
            const int64_t r = task / nH, h = task % nH;
            if (mode == CpuMode::Reference) {
                std::vector<double> scores, acc;
                attend_row<double>(q, k_cache, v_cache, b, seq_of_row[r], r, h, h / group, scale,
                                   out, scores, acc);
            } else {
                thread_local std::vector<float> scores, acc;
                attend_row<float>(q, k_cache, v_cache, b, seq_of_row[r], r, h, h / group, scale,
                                  out, scores, acc);
            }
        },
        int64_t(b.max_context) * q.size(2) * 2);
}

} // namespace ninfer::ops::cpu
