// Logger: where the scheduler and the job queue send their log lines, one call per line, with the plugin,
// task or job already formatted into the message. The default of both (when an options struct leaves it
// empty) writes to spdlog's default logger.
//
// Thread-safety: a Logger is called from the scheduler's and the queue's threads at once; the function given
// must be safe for that.
#ifndef OCTOP_LOGGER_H_
#define OCTOP_LOGGER_H_

#include <functional>
#include <string_view>

namespace octop {

enum class LogLevel { kDebug, kInfo, kWarn, kError };

// "debug", "info", "warn", "error".
constexpr std::string_view LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

using Logger = std::function<void(LogLevel level, std::string_view message)>;

}  // namespace octop

#endif  // OCTOP_LOGGER_H_
