#include "text/chat_template.h"

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "text/jinja/template.h"

namespace ninfer::text {

struct ChatTemplate::Impl {
    jinja::Template tpl;
    nlohmann::ordered_json special_tokens;
};

namespace {

std::string read_file(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    if (!in) fail(ErrorCategory::Io, "cannot read ", p.string());
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// bos_token etc. of tokenizer_config.json: a string, or an AddedToken object with "content".
nlohmann::ordered_json special_tokens_of(const nlohmann::ordered_json& config) {
    nlohmann::ordered_json out = nlohmann::ordered_json::object();
    for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
                            "cls_token", "mask_token"}) {
        if (!config.contains(key) || config[key].is_null()) continue;
        const auto& v = config[key];
        if (v.is_string())
            out[key] = v;
        else if (v.is_object() && v.contains("content"))
            out[key] = v["content"];
    }
    return out;
}

} // namespace

ChatTemplate::ChatTemplate(const std::string& source, nlohmann::ordered_json special_tokens) {
    auto impl = std::make_shared<Impl>(Impl{jinja::Template(source), std::move(special_tokens)});
    impl_ = std::move(impl);
}

ChatTemplate ChatTemplate::from_file(const std::filesystem::path& file,
                                     nlohmann::ordered_json special_tokens) {
    if (!std::filesystem::is_regular_file(file))
        fail(ErrorCategory::Io, "chat template ", file.string(), ": not a file");
    return ChatTemplate(read_file(file), std::move(special_tokens));
}

ChatTemplate ChatTemplate::from_model_dir(const std::filesystem::path& dir,
                                          const std::filesystem::path& template_file) {
    const auto config_path = dir / "tokenizer_config.json";
    nlohmann::ordered_json config = nlohmann::ordered_json::object();
    if (std::filesystem::exists(config_path)) {
        try {
            config = nlohmann::ordered_json::parse(read_file(config_path));
        } catch (const nlohmann::ordered_json::exception& e) {
            fail_invalid(config_path.string(), ": ", e.what());
        }
    }
    const nlohmann::ordered_json specials = special_tokens_of(config);
    if (!template_file.empty()) return from_file(template_file, specials);
    if (std::filesystem::exists(dir / "chat_template.jinja"))
        return ChatTemplate(read_file(dir / "chat_template.jinja"), specials);
    if (config.contains("chat_template")) {
        const auto& t = config["chat_template"];
        if (t.is_string()) return ChatTemplate(t.get<std::string>(), specials);
        if (t.is_array())
            for (const auto& entry : t)
                if (entry.value("name", "") == "default")
                    return ChatTemplate(entry.at("template").get<std::string>(), specials);
    }
    fail(ErrorCategory::Io, dir.string(),
         ": no chat template (chat_template.jinja or tokenizer_config.json chat_template)");
}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages,
                                 const nlohmann::ordered_json& tools,
                                 const ChatOptions& options) const {
    require(messages.is_array(), "messages must be a JSON array");
    require(tools.is_null() || tools.is_array(), "tools must be a JSON array");
    jinja::Value ctx = jinja::Value::dict();
    jinja::Dict& d = ctx.as_dict();
    for (const auto& [k, v] : impl_->special_tokens.items()) d.set(k, jinja::Value::from_json(v));
    d.set("messages", jinja::Value::from_json(messages));
    d.set("tools", jinja::Value::from_json(tools));
    d.set("add_generation_prompt", jinja::Value(options.add_generation_prompt));
    if (options.variables.is_object())
        for (const auto& [k, v] : options.variables.items()) d.set(k, jinja::Value::from_json(v));
    return impl_->tpl.render(ctx);
}

} // namespace ninfer::text
