// Errors of the HTTP API: an ApiError carries the HTTP status and the error type; each API
// (OpenAI, Anthropic) renders it in its own JSON shape. ninfer::Error categories map to
// statuses (InvalidArgument/Unsupported: 400, Io/Cuda/Internal: 500).
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <utility>

namespace ninfer::server {

enum class ApiStyle { OpenAI, Anthropic };

class ApiError : public std::runtime_error {
public:
    ApiError(int status, const std::string& message, std::string param = {}, std::string code = {})
        : std::runtime_error(message), status_(status), param_(std::move(param)),
          code_(std::move(code)) {}
    int status() const { return status_; }
    const std::string& param() const { return param_; }
    const std::string& code() const { return code_; }

private:
    int status_;
    std::string param_;
    std::string code_;
};

// 400 with the offending parameter named.
[[noreturn]] void bad_param(const std::string& param, const std::string& message);

// Runs `fn`; a 400 it raises names the top-level request field `field`: "field.inner" for a
// parameter inside it, "field" for one without a name.
template <class F> decltype(auto) within(const std::string& field, F&& fn) {
    try {
        return std::forward<F>(fn)();
    } catch (const ApiError& e) {
        if (e.status() != 400 || e.param() == field || e.param().rfind(field + ".", 0) == 0) throw;
        throw ApiError(e.status(), e.what(), e.param().empty() ? field : field + "." + e.param(),
                       e.code());
    }
}

// The error type string of `status` in `style` (invalid_request_error, authentication_error...).
std::string error_type(ApiStyle style, int status);

// {"error": {"message", "type", "param", "code"}} or
// {"type": "error", "error": {"type", "message"}}.
nlohmann::ordered_json error_body(ApiStyle style, int status, const std::string& message,
                                  const std::string& param = {}, const std::string& code = {});
nlohmann::ordered_json error_body(ApiStyle style, const ApiError& e);

// Any exception as an ApiError (ninfer::Error by category; others are 500).
ApiError to_api_error(const std::exception& e);

// JSON text that never throws on invalid UTF-8 (replaced by U+FFFD).
std::string dump_json(const nlohmann::ordered_json& j);

} // namespace ninfer::server
