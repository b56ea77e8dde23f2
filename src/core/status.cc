#include <octop/status.h>

namespace octop {

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string out(ErrorName(code_));
  out += ": ";
  out += message_;
  return out;
}

Status InvalidArgumentError(std::string message) {
  return {StatusCode::kInvalidArgument, std::move(message)};
}
Status NotFoundError(std::string message) { return {StatusCode::kNotFound, std::move(message)}; }
Status ConflictError(std::string message) { return {StatusCode::kConflict, std::move(message)}; }
Status UnauthenticatedError(std::string message) {
  return {StatusCode::kUnauthenticated, std::move(message)};
}
Status PermissionDeniedError(std::string message) {
  return {StatusCode::kPermissionDenied, std::move(message)};
}
Status FailedPreconditionError(std::string message) {
  return {StatusCode::kFailedPrecondition, std::move(message)};
}
Status UnavailableError(std::string message) { return {StatusCode::kUnavailable, std::move(message)}; }
Status DeadlineExceededError(std::string message) {
  return {StatusCode::kDeadlineExceeded, std::move(message)};
}
Status CancelledError(std::string message) { return {StatusCode::kCancelled, std::move(message)}; }
Status InternalError(std::string message) { return {StatusCode::kInternal, std::move(message)}; }

namespace {

struct CodeInfo {
  std::string_view name;
  std::string_view backstage_name;
  int http;
};

// The one table that maps a code to its Backstage error name and HTTP status.
CodeInfo Info(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return {"OK", "OK", 200};
    case StatusCode::kInvalidArgument:
      return {"INVALID_ARGUMENT", "InputError", 400};
    case StatusCode::kNotFound:
      return {"NOT_FOUND", "NotFoundError", 404};
    case StatusCode::kConflict:
      return {"CONFLICT", "ConflictError", 409};
    case StatusCode::kUnauthenticated:
      return {"UNAUTHENTICATED", "AuthenticationError", 401};
    case StatusCode::kPermissionDenied:
      return {"PERMISSION_DENIED", "NotAllowedError", 403};
    case StatusCode::kFailedPrecondition:
      return {"FAILED_PRECONDITION", "ConflictError", 409};
    case StatusCode::kUnavailable:
      return {"UNAVAILABLE", "ServiceUnavailableError", 503};
    case StatusCode::kDeadlineExceeded:
      return {"DEADLINE_EXCEEDED", "Error", 504};
    case StatusCode::kCancelled:
      return {"CANCELLED", "Error", 503};
    case StatusCode::kInternal:
      return {"INTERNAL", "Error", 500};
  }
  return {"UNKNOWN", "Error", 500};
}

}  // namespace

std::string_view ErrorName(StatusCode code) { return Info(code).backstage_name; }
int HttpStatus(StatusCode code) { return Info(code).http; }
std::string_view StatusCodeName(StatusCode code) { return Info(code).name; }

}  // namespace octop
