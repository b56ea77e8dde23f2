// What every store shares: the migration lines' names, and task id validation (done before any write,
// identically on every backend).
#include <string>

#include "core/js_text.h"
#include "store/job_store.h"
#include "store/task_store.h"

namespace octop::store {

namespace {

constexpr std::size_t kMaxTaskIdBytes = 255;  // the column is varchar(255)

}  // namespace

std::span<const std::string_view> MigrationNames(MigrationLine line) {
  if (line == MigrationLine::kTasks) return kTaskMigrationNames;
  return kJobMigrationNames;
}

Status NoSuchTask(std::string_view id) {
  return NotFoundError("Task " + std::string(id) + " does not exist");
}

Status ValidateTaskId(std::string_view id) {
  if (id.size() > kMaxTaskIdBytes) {
    return InvalidArgumentError("Task id '" + std::string(id.substr(0, 40)) +
                                "...' is too long: " + std::to_string(id.size()) + " bytes, the limit is " +
                                std::to_string(kMaxTaskIdBytes) + " bytes");
  }
  // Well-formed UTF-8 round-trips through PostgreSQL's UTF8 text.
  if (!text::IsValidUtf8(id)) return InvalidArgumentError("Task id is not valid UTF-8");
  if (id.find('\0') != std::string_view::npos) {
    return InvalidArgumentError("Task id must not contain a NUL character");
  }
  // Backstage's validateId trims (JavaScript's trim) before its emptiness check.
  if (text::JsTrim(id).empty()) {
    return InvalidArgumentError(std::string(id) + " is not a valid ID, expected non-empty string");
  }
  return Status::Ok();
}

}  // namespace octop::store
