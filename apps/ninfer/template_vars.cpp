#include "template_vars.h"

#include <CLI/CLI.hpp>

#include "core/error.h"

namespace ninfer::app {

void add_template_var_options(CLI::App& app, TemplateVarOptions& o) {
    app.add_flag("--no-thinking", o.no_thinking,
                 "Answer without reasoning (enable_thinking=false)");
    app.add_option("--reasoning-effort", o.reasoning_effort,
                   "reasoning_effort for templates that read it (Qwen3.8: low, medium, high, "
                   "xhigh)");
    app.add_option("--var", o.vars,
                   "Chat-template variable KEY=JSON (repeatable), e.g. preserve_thinking=true");
}

nlohmann::ordered_json template_variables(const TemplateVarOptions& o) {
    nlohmann::ordered_json v = nlohmann::ordered_json::object();
    for (const auto& kv : o.vars) {
        const size_t eq = kv.find('=');
        require(eq != std::string::npos && eq > 0, "--var: expected KEY=JSON, got '", kv, "'");
        const std::string value = kv.substr(eq + 1);
        try {
            v[kv.substr(0, eq)] = nlohmann::ordered_json::parse(value);
        } catch (const nlohmann::ordered_json::exception&) {
            v[kv.substr(0, eq)] = value; // a bare string
        }
    }
    if (o.no_thinking) v["enable_thinking"] = false;
    if (!o.reasoning_effort.empty()) v["reasoning_effort"] = o.reasoning_effort;
    return v;
}

} // namespace ninfer::app
