#include "text/stop_matcher.h"

#include <algorithm>

namespace ninfer::text {

size_t partial_suffix(std::string_view text, std::string_view marker) {
    for (size_t n = std::min(text.size(), marker.size() - (marker.empty() ? 0 : 1)); n > 0; --n)
        if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
    return 0;
}

StopMatcher::StopMatcher(std::vector<std::string> stops) {
    for (auto& s : stops)
        if (!s.empty()) stops_.push_back(std::move(s));
}

std::string StopMatcher::push(std::string_view text) {
    if (stopped_) return {};
    held_ += text;
    size_t best = std::string::npos;
    for (const auto& s : stops_) {
        const size_t p = held_.find(s);
        if (p < best || (p == best && p != std::string::npos && s.size() > matched_.size())) {
            best = p;
            matched_ = s;
        }
    }
    if (best != std::string::npos) {
        stopped_ = true;
        std::string out = held_.substr(0, best);
        held_.clear();
        return out;
    }
    size_t keep = 0;
    for (const auto& s : stops_) keep = std::max(keep, partial_suffix(held_, s));
    std::string out = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return out;
}

std::string StopMatcher::finish() {
    std::string out;
    out.swap(held_);
    return stopped_ ? std::string() : out;
}

} // namespace ninfer::text
