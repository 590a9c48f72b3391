#include "text/output_parser.h"

#include "text/tool_call_format.h"

namespace ninfer::text {
namespace {

constexpr std::string_view kThinkStart = "<think>";
constexpr std::string_view kThinkEnd = "</think>";
constexpr std::string_view kCallStart = "<tool_call>";
constexpr std::string_view kCallEnd = "</tool_call>";
constexpr std::string_view kFunction = "<function=";
constexpr std::string_view kFunctionEnd = "</function>";

bool is_ws(char c) {
    return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\v' || c == '\f';
}

void strip_leading_ws(std::string& s) {
    size_t i = 0;
    while (i < s.size() && is_ws(s[i])) ++i;
    s.erase(0, i);
}

bool is_prefix_of(std::string_view text, std::string_view marker) {
    return text.size() < marker.size() && marker.substr(0, text.size()) == text;
}

} // namespace

OutputParser::OutputParser(ParserOptions options)
    : opt_(std::move(options)), stop_(opt_.stop),
      state_(opt_.starts_in_reasoning ? State::Reasoning : State::Content) {}

ParsedDelta OutputParser::push(std::string_view text) {
    ParsedDelta d;
    pending_ += stop_.push(text);
    run(d, false);
    return d;
}

ParsedDelta OutputParser::finish() {
    ParsedDelta d;
    pending_ += stop_.finish();
    run(d, true);
    if (state_ == State::ToolCall) close_call(d, true);
    ws_reasoning_.clear();
    ws_content_.clear();
    return d;
}

void OutputParser::run(ParsedDelta& d, bool final) {
    while (true) {
        bool progressed = false;
        switch (state_) {
        case State::Reasoning:
            progressed = step_reasoning(d, final);
            break;
        case State::Content:
            progressed = step_content(d, final);
            break;
        case State::ToolCall:
            progressed = step_tool_call(d, final);
            break;
        }
        if (!progressed) return;
    }
}

void OutputParser::emit_reasoning(ParsedDelta& d, std::string text, bool final_part) {
    if (!reasoning_started_) {
        strip_leading_ws(text);
        if (text.empty()) return;
        reasoning_started_ = true;
    }
    std::string full = ws_reasoning_ + text;
    size_t t = full.size();
    while (t > 0 && is_ws(full[t - 1])) --t;
    ws_reasoning_ = final_part ? std::string() : full.substr(t);
    full.resize(t);
    d.reasoning += full;
    reasoning_ += full;
}

void OutputParser::emit_content(ParsedDelta& d, std::string text, bool final_part) {
    if (!content_started_) {
        strip_leading_ws(text);
        if (text.empty()) return;
        content_started_ = true;
    }
    std::string full = ws_content_ + text;
    size_t t = full.size();
    while (t > 0 && is_ws(full[t - 1])) --t;
    ws_content_ = final_part ? std::string() : full.substr(t);
    full.resize(t);
    d.content += full;
    content_ += full;
}

bool OutputParser::step_reasoning(ParsedDelta& d, bool final) {
    if (!reasoning_started_) { // the model may repeat the <think> the prompt opened
        strip_leading_ws(pending_);
        if (pending_.empty()) return false;
        if (pending_.compare(0, kThinkStart.size(), kThinkStart) == 0) {
            pending_.erase(0, kThinkStart.size());
            return true;
        }
        if (!final && is_prefix_of(pending_, kThinkStart)) return false;
    }
    const size_t p = pending_.find(kThinkEnd);
    if (p != std::string::npos) {
        emit_reasoning(d, pending_.substr(0, p), true);
        pending_.erase(0, p + kThinkEnd.size());
        state_ = State::Content;
        return true;
    }
    const size_t keep = final ? 0 : partial_suffix(pending_, kThinkEnd);
    emit_reasoning(d, pending_.substr(0, pending_.size() - keep), final);
    pending_.erase(0, pending_.size() - keep);
    return false;
}

bool OutputParser::step_content(ParsedDelta& d, bool final) {
    if (after_call_ || !content_started_) strip_leading_ws(pending_);
    if (pending_.empty()) return false;
    if (after_call_) { // drift: </tool_call> after a bare <function=...> block
        if (pending_.compare(0, kCallEnd.size(), kCallEnd) == 0) {
            pending_.erase(0, kCallEnd.size());
            return true;
        }
        if (!final && is_prefix_of(pending_, kCallEnd)) return false;
        after_call_ = false;
    }
    if (!content_started_ && !reasoning_started_ && calls_.empty()) { // model opens reasoning
        if (pending_.compare(0, kThinkStart.size(), kThinkStart) == 0) {
            pending_.erase(0, kThinkStart.size());
            state_ = State::Reasoning;
            return true;
        }
        if (!final && is_prefix_of(pending_, kThinkStart)) return false;
    }
    if (opt_.parse_tool_calls) {
        const size_t a = pending_.find(kCallStart), b = pending_.find(kFunction);
        const size_t p = std::min(a, b);
        if (p != std::string::npos) {
            emit_content(d, pending_.substr(0, p), true);
            bare_function_ = p == b && b < a;
            pending_.erase(0, p + (bare_function_ ? 0 : kCallStart.size()));
            state_ = State::ToolCall;
            return true;
        }
    }
    size_t keep = 0;
    if (!final && opt_.parse_tool_calls)
        keep = std::max(partial_suffix(pending_, kCallStart), partial_suffix(pending_, kFunction));
    emit_content(d, pending_.substr(0, pending_.size() - keep), final);
    pending_.erase(0, pending_.size() - keep);
    return false;
}

bool OutputParser::step_tool_call(ParsedDelta& d, bool final) {
    block_ += pending_;
    pending_.clear();
    // The block ends at its closing tag, or where a new call starts (a missing closing tag).
    const std::string_view end = bare_function_ ? kFunctionEnd : kCallEnd;
    size_t p = block_.find(end);
    size_t resume = p == std::string::npos ? p : p + end.size();
    const size_t next =
        block_.find(bare_function_ ? kFunction : kCallStart, bare_function_ ? 1 : 0);
    if (next < p) p = resume = next;
    if (p == std::string::npos) {
        close_call(d, false); // streams the parameters completed so far; finish() closes
        return false;
    }
    pending_ = block_.substr(resume);
    closed_by_tag_ = resume != p;
    block_.resize(p);
    after_call_ = close_call(d, true);
    closed_by_tag_ = false;
    state_ = State::Content;
    return true;
}

} // namespace ninfer::text
