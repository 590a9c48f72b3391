// ninfer render: the exact prompt a model's chat template makes of a conversation.
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/error.h"
#include "engine_flags.h"
#include "messages_file.h"
#include "template_vars.h"
#include "text/chat_template.h"

namespace ninfer::app {
namespace {

struct RenderOptions {
    std::string model_dir;
    std::string template_file;
    std::string messages_file;
    TemplateVarOptions template_vars;
    bool no_generation_prompt = false;
    bool jsonl = false;
};

// --model (its template, or --template with its special tokens) or --template alone.
text::ChatTemplate load(const RenderOptions& o) {
    require(!o.model_dir.empty() || !o.template_file.empty(), "give --model or --template");
    if (o.model_dir.empty()) return text::ChatTemplate::from_file(o.template_file);
    return text::ChatTemplate::from_model_dir(o.model_dir, o.template_file);
}

text::ChatOptions options(const RenderOptions& o) {
    text::ChatOptions c;
    c.add_generation_prompt = !o.no_generation_prompt;
    c.variables = template_variables(o.template_vars);
    return c;
}

// Each stdin line: {"messages": [...], "tools": [...], "variables": {...},
// "add_generation_prompt": bool}; each output line: the prompt as a JSON string, or
// {"error": "..."} when rendering fails.
int render_jsonl(const text::ChatTemplate& t) {
    for (std::string line; std::getline(std::cin, line);) {
        const nlohmann::ordered_json j = nlohmann::ordered_json::parse(line);
        nlohmann::ordered_json out;
        try {
            const Conversation c = parse_conversation(j, "stdin");
            text::ChatOptions opt;
            opt.add_generation_prompt = j.value("add_generation_prompt", true);
            if (j.contains("variables")) opt.variables = j["variables"];
            out = t.render(c.messages, c.tools, opt);
        } catch (const Error& e) {
            out = {{"error", e.what()}};
        }
        std::cout << out.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace)
                  << '\n';
    }
    return 0;
}

int render(const RenderOptions& o) {
    const text::ChatTemplate t = load(o);
    if (o.jsonl) return render_jsonl(t);
    require(!o.messages_file.empty(), "--messages is required");
    const Conversation c = read_messages_file(o.messages_file);
    std::cout << t.render(c.messages, c.tools, options(o));
    return 0;
}

} // namespace

Action add_render_command(CLI::App& app) {
    auto o = std::make_shared<RenderOptions>();
    app.add_option("--model", o->model_dir,
                   "Model directory (chat template of its tokenizer), or ORG/NAME in the Hugging "
                   "Face cache")
        ->transform(hub_model_path());
    app.add_option("--template,--chat-template", o->template_file,
                   "A Jinja chat template file (with --model: instead of the model's)");
    app.add_option("--messages", o->messages_file,
                   "JSON file: a messages array, or {\"messages\": [...], \"tools\": [...]}");
    add_template_var_options(app, o->template_vars);
    app.add_flag("--no-generation-prompt", o->no_generation_prompt,
                 "Do not open the assistant turn at the end");
    app.add_flag("--jsonl", o->jsonl, "Render one JSON request per stdin line (testing)");
    return [o] { return render(*o); };
}

} // namespace ninfer::app
