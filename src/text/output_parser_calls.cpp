// Tool-call blocks of OutputParser: qwen3_coder XML, parsed incrementally, or JSON (drift).
#include "text/output_parser.h"
#include "text/tool_call_format.h"

namespace ninfer::text {
namespace {

constexpr std::string_view kFunction = "<function=";
constexpr std::string_view kFunctionEnd = "</function>";
constexpr std::string_view kParam = "<parameter=";
constexpr std::string_view kParamEnd = "</parameter>";

std::string trim(std::string_view s) {
    const char* ws = " \t\r\n\v\f";
    const size_t b = s.find_first_not_of(ws);
    if (b == std::string_view::npos) return "";
    return std::string(s.substr(b, s.find_last_not_of(ws) - b + 1));
}

} // namespace

void OutputParser::send(ParsedDelta& d, const std::string& name, const std::string& args,
                        bool header) {
    ToolCallDelta t;
    t.index = int(calls_.size()) - (header ? 0 : 1);
    if (header) {
        t.id = opt_.id_prefix + std::to_string(t.index);
        t.name = name;
        calls_.push_back({t.id, name, ""});
    }
    t.arguments = args;
    calls_.back().arguments += args;
    d.tool_calls.push_back(std::move(t));
}

void OutputParser::reset_call() {
    block_.clear();
    block_pos_ = 0;
    header_sent_ = false;
    params_sent_ = 0;
}

// A block that is no tool call stays text: the content gets it back, tags included.
bool OutputParser::not_a_call(ParsedDelta& d) {
    const std::string open = bare_function_ ? "" : "<tool_call>";
    const std::string close =
        closed_by_tag_ ? (bare_function_ ? "</function>" : "</tool_call>") : "";
    emit_content(d, open + block_ + close, false);
    reset_call();
    return false;
}

// Drift: {"name": ..., "arguments": {...} or "{...}"} inside <tool_call>.
bool OutputParser::close_json_call(ParsedDelta& d, const std::string& body) {
    const auto j = nlohmann::ordered_json::parse(body, nullptr, false);
    if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return not_a_call(d);
    auto args = j.contains("arguments") ? j["arguments"]
                                        : j.value("parameters", nlohmann::ordered_json::object());
    if (args.is_string())
        args = nlohmann::ordered_json::parse(args.get<std::string>(), nullptr, false);
    if (!args.is_object()) args = nlohmann::ordered_json::object();
    send(d, j["name"].get<std::string>(), detail::dumps(args), true);
    reset_call();
    return true;
}

// <function=NAME> then <parameter=K>V</parameter>...: the header once its '>' arrived, each
// parameter once its end is certain (its closing tag, the next parameter or </function>).
bool OutputParser::parse_xml_call(ParsedDelta& d, bool closed) {
    size_t pos = block_pos_;
    if (!header_sent_) {
        const size_t f = block_.find(kFunction);
        const size_t gt = f == std::string::npos ? f : block_.find('>', f);
        if (gt == std::string::npos) return closed ? not_a_call(d) : true;
        send(d,
             trim(std::string_view(block_).substr(f + kFunction.size(), gt - f - kFunction.size())),
             "", true);
        header_sent_ = true;
        pos = gt + 1;
    }
    while (true) {
        const size_t p = block_.find(kParam, pos);
        const size_t gt = p == std::string::npos ? p : block_.find('>', p);
        if (gt == std::string::npos) break;
        const size_t vs = gt + 1;
        size_t term = std::min(
            {block_.find(kParamEnd, vs), block_.find(kParam, vs), block_.find(kFunctionEnd, vs)});
        if (term == std::string::npos && !closed) break;
        if (term == std::string::npos) term = block_.size();
        const std::string name =
            trim(std::string_view(block_).substr(p + kParam.size(), gt - p - kParam.size()));
        const std::string raw = detail::strip_value_newlines(block_.substr(vs, term - vs));
        const auto value = detail::typed_value(
            raw, detail::parameter_schema(opt_.tools, calls_.back().name, name));
        send(d, "",
             (params_sent_ == 0 ? "{" : ", ") + detail::dumps(name) + ": " + detail::dumps(value),
             false);
        ++params_sent_;
        pos =
            block_.compare(term, kParamEnd.size(), kParamEnd) == 0 ? term + kParamEnd.size() : term;
    }
    block_pos_ = pos;
    if (!closed) return true;
    send(d, "", params_sent_ == 0 ? "{}" : "}", false);
    reset_call();
    return true;
}

// With closed false: streams what is certain. With closed true (the block is complete or the
// output ended): emits the rest and closes the call.
bool OutputParser::close_call(ParsedDelta& d, bool closed) {
    const std::string body = trim(block_);
    if (!body.empty() && body[0] == '{') return closed ? close_json_call(d, body) : true;
    return parse_xml_call(d, closed);
}

bool prompt_opens_reasoning(std::string_view prompt) {
    const size_t turn = prompt.rfind("<|im_start|>assistant");
    const std::string_view tail = turn == std::string_view::npos ? prompt : prompt.substr(turn);
    const size_t open = tail.rfind("<think>");
    if (open == std::string_view::npos) return false;
    const size_t close = tail.rfind("</think>");
    return close == std::string_view::npos || close < open;
}

nlohmann::ordered_json openai_tool_call(const ToolCall& call) {
    return {{"id", call.id},
            {"type", "function"},
            {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
}

nlohmann::ordered_json anthropic_tool_use(const ToolCall& call) {
    nlohmann::ordered_json input = nlohmann::ordered_json::object();
    try {
        input = nlohmann::ordered_json::parse(call.arguments);
    } catch (const nlohmann::json::exception&) {
    }
    return {{"type", "tool_use"}, {"id", call.id}, {"name", call.name}, {"input", input}};
}

} // namespace ninfer::text
