#include "server/api_error.h"

#include "ninfer/error.h"

namespace ninfer::server {

void bad_param(const std::string& param, const std::string& message) {
    throw ApiError(400, message, param);
}

std::string error_type(ApiStyle style, int status) {
    const bool anthropic = style == ApiStyle::Anthropic;
    switch (status) {
    case 400:
    case 422:
        return "invalid_request_error";
    case 401:
        return "authentication_error";
    case 403:
        return "permission_error";
    case 404:
        return "not_found_error";
    case 413:
        return anthropic ? "request_too_large" : "invalid_request_error";
    case 429:
        return "rate_limit_error";
    case 503:
        return anthropic ? "overloaded_error" : "service_unavailable_error";
    default:
        if (status < 500) return "invalid_request_error";
        return anthropic ? "api_error" : "server_error";
    }
}

nlohmann::ordered_json error_body(ApiStyle style, int status, const std::string& message,
                                  const std::string& param, const std::string& code) {
    const std::string type = error_type(style, status);
    if (style == ApiStyle::Anthropic)
        return {{"type", "error"}, {"error", {{"type", type}, {"message", message}}}};
    nlohmann::ordered_json err = {
        {"message", message},
        {"type", type},
        {"param", param.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(param)},
        {"code", code.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(code)}};
    return {{"error", err}};
}

nlohmann::ordered_json error_body(ApiStyle style, const ApiError& e) {
    return error_body(style, e.status(), e.what(), e.param(), e.code());
}

ApiError to_api_error(const std::exception& e) {
    if (const auto* api = dynamic_cast<const ApiError*>(&e)) return *api;
    if (const auto* err = dynamic_cast<const Error*>(&e)) {
        switch (err->category()) {
        case ErrorCategory::InvalidArgument:
        case ErrorCategory::Unsupported:
        case ErrorCategory::OutOfMemory: // a request larger than the whole KV cache
            return ApiError(400, err->what());
        case ErrorCategory::Io:
        case ErrorCategory::Cuda:
        case ErrorCategory::Internal:
            return ApiError(500, err->what());
        }
    }
    if (dynamic_cast<const nlohmann::ordered_json::exception*>(&e))
        return ApiError(400, std::string("invalid request: ") + e.what());
    return ApiError(500, std::string("internal error: ") + e.what());
}

std::string dump_json(const nlohmann::ordered_json& j) {
    return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

} // namespace ninfer::server
