// Stop strings over a text stream: text that could still be the start of a stop string is held
// back until it is resolved, so the caller never shows text that a stop string removes.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ninfer::text {

class StopMatcher {
public:
    explicit StopMatcher(std::vector<std::string> stops); // empty strings are ignored

    // Appends `text`; returns the text now known to precede any stop string. After a stop
    // string matched, stopped() is true and the rest (the stop string included) is dropped.
    std::string push(std::string_view text);
    // Releases held text at the end of the stream.
    std::string finish();

    bool stopped() const { return stopped_; }
    const std::string& matched() const { return matched_; }

private:
    std::vector<std::string> stops_;
    std::string held_;
    bool stopped_ = false;
    std::string matched_;
};

// Length of the longest suffix of `text` that is a proper prefix of `marker`.
size_t partial_suffix(std::string_view text, std::string_view marker);

} // namespace ninfer::text
