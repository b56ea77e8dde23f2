// RuntimeContext: what every long-lived part of a Scheduler or a JobQueue shares -- the clock it runs on, the
// log sink, the shutdown token -- and the plumbing both build on it: the loop that keeps a store's
// notifications coming (ListenUntilStopped) and a reading of the database's clock that logs its failure.
// SchedulerContext and JobQueueContext extend it with their own parts.
//
// Thread-safety: a context is immutable after construction and its logger is thread-safe, so it may be used
// from any thread; ListenUntilStopped runs on the caller's thread until `stop`.
#ifndef OCTOP_RUNTIME_RUNTIME_CONTEXT_H_
#define OCTOP_RUNTIME_RUNTIME_CONTEXT_H_

#include <chrono>
#include <functional>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include <octop/clock.h>
#include <octop/logger.h>

#include "runtime/database_clock.h"
#include "store/store.h"

namespace octop::runtime {

struct RuntimeContext {
  Clock* clock = nullptr;
  Logger logger;
  std::stop_token shutdown;

  void Log(LogLevel level, std::string_view message) const {
    if (logger) logger(level, message);
  }
};

// The logger used when the options name none: spdlog's default logger, level for level.
Logger DefaultLogger();

// How long a loop waits before retrying after a failed database call (a database outage), as Backstage does.
inline constexpr std::chrono::milliseconds kRetryAfterFailure{1000};

// Keeps a subscription to `channels` of `store` until `stop`, handing every notification to `on_note`. After
// each (re)subscription it calls `on_subscribed`: a notification may have been missed while not listening.
// A failure to subscribe or to wait is logged (once while it lasts, naming `what`, e.g. "job notifications"),
// and subscribing is retried every kRetryAfterFailure on real time: the backoff is about the connection, not
// the schedule.
void ListenUntilStopped(const RuntimeContext& context, store::Store& store,
                        const std::vector<std::string>& channels, std::string_view what,
                        const std::function<void()>& on_subscribed,
                        const std::function<void(const store::Notification&)>& on_note, std::stop_token stop);

// A reading of the database's clock through `store` (DatabaseClock::Read): the step since the last reading
// when it stepped; nullopt when it did not, or when the query failed (logged as a warning).
std::optional<std::chrono::nanoseconds> ReadDatabaseClock(const RuntimeContext& context,
                                                          DatabaseClock& db_clock, store::Store& store);

}  // namespace octop::runtime

#endif  // OCTOP_RUNTIME_RUNTIME_CONTEXT_H_
