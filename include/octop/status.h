// Status and Result<T>: the error values that cross every octop module edge.
//
// A Status is a code plus a human-readable message; Ok() carries no message. Result<T> holds either a value
// or a non-OK Status. Both are plain values: copyable, movable, and safe to use from any thread as long as
// one object is not mutated concurrently. Exceptions are used only inside a module and are turned into a
// Status at its edge.
//
// The codes are few on purpose: each maps to one HTTP status and one Backstage error name (see ErrorName and
// HttpStatus), so an error keeps its meaning from the SQL layer up to the REST response.
#ifndef OCTOP_STATUS_H_
#define OCTOP_STATUS_H_

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace octop {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // bad input from a caller: InputError, HTTP 400
  kNotFound,            // NotFoundError, HTTP 404
  kConflict,            // ConflictError, HTTP 409 (e.g. "Task x is currently running")
  kUnauthenticated,     // AuthenticationError, HTTP 401
  kPermissionDenied,    // NotAllowedError, HTTP 403 (e.g. a cross-site request)
  kFailedPrecondition,  // the system is not in a state to do this (e.g. schema too new), HTTP 409
  kUnavailable,         // the database or a peer cannot be reached right now; retrying may help, HTTP 503
  kDeadlineExceeded,    // a timeout expired, HTTP 504
  kCancelled,           // the operation was stopped by a stop_token, HTTP 503
  kInternal,            // a bug or an unexpected failure, HTTP 500
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "NotFoundError: Task x does not exist"; "OK" for success.
  std::string ToString() const;

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

Status InvalidArgumentError(std::string message);
Status NotFoundError(std::string message);
Status ConflictError(std::string message);
Status UnauthenticatedError(std::string message);
Status PermissionDeniedError(std::string message);
Status FailedPreconditionError(std::string message);
Status UnavailableError(std::string message);
Status DeadlineExceededError(std::string message);
Status CancelledError(std::string message);
Status InternalError(std::string message);

// The Backstage error name for a code: InputError, NotFoundError, ConflictError, AuthenticationError,
// ServiceUnavailableError, Error.
std::string_view ErrorName(StatusCode code);
// The HTTP status a REST handler answers with for a code.
int HttpStatus(StatusCode code);
std::string_view StatusCodeName(StatusCode code);

// Either a T or a non-OK Status. Constructing a Result from an OK Status is a programming error (asserted).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value)
      : state_(std::in_place_index<0>, std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status)
      : state_(std::in_place_index<1>, std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!std::get<1>(state_).ok() && "Result built from an OK Status");
  }

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  // The error; Status::Ok() when this holds a value.
  Status status() const { return ok() ? Status::Ok() : std::get<1>(state_); }

  // REQUIRES: ok().
  T& value() & { return std::get<0>(state_); }
  const T& value() const& { return std::get<0>(state_); }
  T&& value() && { return std::get<0>(std::move(state_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  T value_or(T fallback) const& { return ok() ? std::get<0>(state_) : std::move(fallback); }

 private:
  std::variant<T, Status> state_;
};

}  // namespace octop

// Propagates a non-OK Status from an expression that yields a Status.
#define OCTOP_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::octop::Status octop_status_ = (expr);        \
    if (!octop_status_.ok()) return octop_status_; \
  } while (false)

#define OCTOP_CONCAT_INNER_(a, b) a##b
#define OCTOP_CONCAT_(a, b) OCTOP_CONCAT_INNER_(a, b)
// `OCTOP_ASSIGN_OR_RETURN(auto x, Foo());` declares x from a Result or returns its Status.
#define OCTOP_ASSIGN_OR_RETURN(lhs, expr) \
  OCTOP_ASSIGN_OR_RETURN_IMPL_(OCTOP_CONCAT_(octop_result_, __LINE__), lhs, expr)
#define OCTOP_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()

#endif  // OCTOP_STATUS_H_
