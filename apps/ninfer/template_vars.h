// Chat-template variables from the command line, shared by run, chat and render:
// --no-thinking (enable_thinking = false), --reasoning-effort LEVEL (the reasoning_effort that
// Qwen3.8's template reads) and --var KEY=JSON for any other variable the model's template reads.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace ninfer::app {

struct TemplateVarOptions {
    bool no_thinking = false;
    std::string reasoning_effort;  // empty: the template's default
    std::vector<std::string> vars; // KEY=JSON; a value that is not JSON is taken as a string
};

void add_template_var_options(CLI::App& app, TemplateVarOptions& o);

// The variables to render with. --var comes first, so the dedicated flags win over it.
// A --var without '=' or with an empty key is an InvalidArgument error.
nlohmann::ordered_json template_variables(const TemplateVarOptions& o);

} // namespace ninfer::app
