// DatabaseClock: this node's reading of the database server's clock, kept on the node's monotonic clock.
//
// Leases and due times are the database's times; a node sleeps on its own steady clock. Each measurement (a
// query that returns the database's now) anchors the database's time to a steady instant, and between
// measurements the estimate runs on the steady clock: a step of the node's wall clock does not move it, and a
// step of the database's clock (on SQLite the host's wall clock, on PostgreSQL the server's) shows as the
// difference between a measurement and the estimate (docs/reliability.md, "Clock steps"). A clock with a
// DatabaseNowOverride is the database's clock (the stores compare against it), so it is read directly, at one
// instant with the steady clock, instead of through a query that a test's Advance could straddle.
//
// Thread-safety: every method may be called from any thread.
#ifndef OCTOP_RUNTIME_DATABASE_CLOCK_H_
#define OCTOP_RUNTIME_DATABASE_CLOCK_H_

#include <chrono>
#include <mutex>
#include <optional>
#include <string>

#include <octop/clock.h>
#include <octop/status.h>

#include "store/store.h"

namespace octop::runtime {

class DatabaseClock {
 public:
  // A jump between a measurement and the estimate of at least this much is a step. NTP slews at most 0.5 ms
  // per second, far below it between two measurements; every lease octop takes is longer.
  static constexpr std::chrono::milliseconds kStepThreshold{1000};

  explicit DatabaseClock(const Clock& clock) : clock_(clock) {}

  // Takes `db_now`, the database's now returned by a query started at `before`, as the new anchor. Returns
  // the database clock's step since the previous anchor when it reaches kStepThreshold either way. A query
  // whose round trip exceeds the threshold measures nothing (it returns nullopt and keeps the anchor).
  std::optional<std::chrono::nanoseconds> Record(ClockReading before, WallTime db_now);
  // A reading through `store`'s DatabaseNow(), recorded as above; its Status when the query fails.
  Result<std::optional<std::chrono::nanoseconds>> Read(store::Store& store);

  // The database's now, by this node's estimate (the node's wall clock until the first measurement).
  WallTime Now() const;

  // The instant of this node's steady clock at which the database's clock will show `db_time`.
  SteadyTime SteadyAt(WallTime db_time) const;

  // A step for a log line: "+7200.0 s", "-0.5 s".
  static std::string Describe(std::chrono::nanoseconds step);

 private:
  const Clock& clock_;
  mutable std::mutex mu_;
  bool anchored_ = false;     // guarded by mu_
  WallTime db_anchor_;        // guarded by mu_
  SteadyTime steady_anchor_;  // guarded by mu_
};

}  // namespace octop::runtime

#endif  // OCTOP_RUNTIME_DATABASE_CLOCK_H_
