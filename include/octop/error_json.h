// The JSON form of an error stored in last_run_error_json and shown as lastRunError, as Backstage's
// serializeError writes it: {"name":"Error","message":"Task was cancelled"} (plus "stack"/"cause" when
// present).
//
// Thread-safety: pure functions.
#ifndef OCTOP_ERROR_JSON_H_
#define OCTOP_ERROR_JSON_H_

#include <optional>
#include <string>
#include <string_view>

namespace octop {

struct SerializedError {
  std::string name = "Error";
  std::string message;
  std::optional<std::string> stack;
  std::optional<std::string> cause_json;  // a nested serialized error, already JSON
};

std::string SerializeError(const SerializedError& error);
// Convenience: {"name":"Error","message":message}.
std::string SerializeErrorMessage(std::string_view message);
// Parses what SerializeError wrote (or a Backstage backend did); nullopt if it is not such an object.
std::optional<SerializedError> ParseSerializedError(std::string_view json);

}  // namespace octop

#endif  // OCTOP_ERROR_JSON_H_
