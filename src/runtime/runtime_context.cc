#include "runtime/runtime_context.h"

#include <memory>
#include <utility>

namespace octop::runtime {

namespace {

// How long one wait for notifications blocks before it checks `stop` again.
constexpr std::chrono::milliseconds kListenWait{500};

}  // namespace

void ListenUntilStopped(const RuntimeContext& context, store::Store& store,
                        const std::vector<std::string>& channels, std::string_view what,
                        const std::function<void()>& on_subscribed,
                        const std::function<void(const store::Notification&)>& on_note,
                        std::stop_token stop) {
  std::unique_ptr<store::Listener> listener;
  bool failing = false;
  while (!stop.stop_requested()) {
    if (listener == nullptr) {
      Result<std::unique_ptr<store::Listener>> opened = store.Listen(channels);
      if (!opened.ok()) {
        if (!failing) {
          context.Log(LogLevel::kWarn, "Cannot listen for " + std::string(what) +
                                           " (polling only until it recovers), " +
                                           opened.status().ToString());
        }
        failing = true;
        Clock::Real().WaitFor(kRetryAfterFailure, stop);
        continue;
      }
      listener = std::move(opened).value();
      if (failing) context.Log(LogLevel::kInfo, "Listening for " + std::string(what) + " again");
      failing = false;
      on_subscribed();
    }
    Result<std::vector<store::Notification>> notes = listener->Wait(kListenWait, stop);
    if (!notes.ok()) {
      if (stop.stop_requested()) break;
      context.Log(LogLevel::kWarn,
                  "Listening for " + std::string(what) + " failed, " + notes.status().ToString());
      failing = true;
      listener.reset();
      Clock::Real().WaitFor(kRetryAfterFailure, stop);
      continue;
    }
    for (const store::Notification& note : *notes) on_note(note);
  }
}

std::optional<std::chrono::nanoseconds> ReadDatabaseClock(const RuntimeContext& context,
                                                          DatabaseClock& db_clock, store::Store& store) {
  Result<std::optional<std::chrono::nanoseconds>> step = db_clock.Read(store);
  if (!step.ok()) {
    context.Log(LogLevel::kWarn, "Failed to read the database's clock, " + step.status().ToString());
    return std::nullopt;
  }
  return *step;
}

}  // namespace octop::runtime
