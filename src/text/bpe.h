// The BPE model of a byte-level tokenizer: vocabulary keyed by raw bytes and merges by rank.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ninfer::text {

class BpeModel {
public:
    // vocab: raw bytes -> id; merges: pairs of raw-byte tokens in rank order (rank = index).
    // Merges whose parts or result are not in the vocabulary raise InvalidArgument.
    BpeModel(std::unordered_map<std::string, int32_t> vocab,
             const std::vector<std::pair<std::string, std::string>>& merges, bool ignore_merges);

    // Appends the ids of one pre-tokenized piece (raw bytes). Thread-safe.
    void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;

    const std::unordered_map<std::string, int32_t>& vocab() const { return vocab_; }

private:
    struct Merge {
        int32_t rank;
        int32_t id;
    };
    static uint64_t key(int32_t a, int32_t b) {
        return (uint64_t(uint32_t(a)) << 32) | uint32_t(b);
    }
    void merge_word(std::vector<int32_t>& ids) const;

    std::unordered_map<std::string, int32_t> vocab_;
    std::unordered_map<uint64_t, Merge> merges_;
    int32_t byte_ids_[256];
    bool ignore_merges_ = false;

    static constexpr size_t kCacheMax = 1 << 16;  // pieces cached (HF keeps 10k)
    static constexpr size_t kCachePieceMax = 256; // longer pieces are not cached
    mutable std::mutex cache_mutex_;
    mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

} // namespace ninfer::text
