#include "runtime/database_clock.h"

#include <cstdio>

namespace octop::runtime {

std::optional<std::chrono::nanoseconds> DatabaseClock::Record(ClockReading before, WallTime db_now) {
  WallTime db;
  SteadyTime steady;
  if (clock_.DatabaseNowOverride().has_value()) {
    const ClockReading now = clock_.Now();
    db = now.wall;
    steady = now.steady;
  } else {
    const SteadyTime after = clock_.Now().steady;
    // The server read its clock somewhere inside the round trip: the midpoint is off by half of it at most.
    if (after - before.steady > kStepThreshold) return std::nullopt;
    db = db_now;
    steady = before.steady + (after - before.steady) / 2;
  }
  std::lock_guard lock(mu_);
  std::optional<std::chrono::nanoseconds> step;
  if (anchored_) {
    const WallTime expected =
        db_anchor_ + std::chrono::duration_cast<WallTime::duration>(steady - steady_anchor_);
    const auto jump = std::chrono::duration_cast<std::chrono::nanoseconds>(db - expected);
    if (jump >= kStepThreshold || -jump >= kStepThreshold) step = jump;
  }
  anchored_ = true;
  db_anchor_ = db;
  steady_anchor_ = steady;
  return step;
}

Result<std::optional<std::chrono::nanoseconds>> DatabaseClock::Read(store::Store& store) {
  const ClockReading before = clock_.Now();
  OCTOP_ASSIGN_OR_RETURN(WallTime db_now, store.DatabaseNow());
  return Record(before, db_now);
}

WallTime DatabaseClock::Now() const {
  const ClockReading now = clock_.Now();
  std::lock_guard lock(mu_);
  if (!anchored_) return now.wall;
  return db_anchor_ + std::chrono::duration_cast<WallTime::duration>(now.steady - steady_anchor_);
}

SteadyTime DatabaseClock::SteadyAt(WallTime db_time) const {
  std::unique_lock lock(mu_);
  if (anchored_)
    return steady_anchor_ + std::chrono::duration_cast<SteadyTime::duration>(db_time - db_anchor_);
  lock.unlock();
  const ClockReading now = clock_.Now();
  return now.steady + std::chrono::duration_cast<SteadyTime::duration>(db_time - now.wall);
}

std::string DatabaseClock::Describe(std::chrono::nanoseconds step) {
  char text[48];
  std::snprintf(text, sizeof text, "%+.1f s", std::chrono::duration<double>(step).count());
  return text;
}

}  // namespace octop::runtime
