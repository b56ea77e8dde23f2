#include <nlohmann/json.hpp>

#include <octop/error_json.h>
#include <octop/json_depth.h>

namespace octop {

namespace {
using OrderedJson = nlohmann::ordered_json;

OrderedJson ToJsonValue(const SerializedError& error) {
  OrderedJson j;
  j["name"] = error.name;
  j["message"] = error.message;
  if (error.stack) j["stack"] = *error.stack;
  if (error.cause_json) {
    // A cause that is not JSON is kept as a string rather than dropped.
    OrderedJson cause = JsonDepthAllowed(*error.cause_json)
                            ? OrderedJson::parse(*error.cause_json, nullptr, /*allow_exceptions=*/false)
                            : OrderedJson(OrderedJson::value_t::discarded);
    j["cause"] = cause.is_discarded() ? OrderedJson(*error.cause_json) : cause;
  }
  return j;
}
}  // namespace

std::string SerializeError(const SerializedError& error) {
  // Invalid UTF-8 in a message (e.g. a command's stderr) is replaced, never a reason to lose the error.
  return ToJsonValue(error).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string SerializeErrorMessage(std::string_view message) {
  return SerializeError({.name = "Error", .message = std::string(message)});
}

std::optional<SerializedError> ParseSerializedError(std::string_view json) {
  if (!JsonDepthAllowed(json)) return std::nullopt;
  OrderedJson j = OrderedJson::parse(json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  auto message = j.find("message");
  if (message == j.end() || !message->is_string()) return std::nullopt;
  SerializedError error;
  error.message = message->get<std::string>();
  if (auto name = j.find("name"); name != j.end() && name->is_string()) error.name = name->get<std::string>();
  if (auto stack = j.find("stack"); stack != j.end() && stack->is_string())
    error.stack = stack->get<std::string>();
  if (auto cause = j.find("cause"); cause != j.end() && !cause->is_null()) error.cause_json = cause->dump();
  return error;
}

}  // namespace octop
