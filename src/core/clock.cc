#include <octop/clock.h>

namespace octop {

void WakeSignal::Notify() {
  {
    std::lock_guard lock(mu_);
    notified_ = true;
  }
  cv_.notify_all();
}

bool WakeSignal::Consume() {
  std::lock_guard lock(mu_);
  return std::exchange(notified_, false);
}

ClockReading Clock::Now() const {
  constexpr int kTries = 4;
  constexpr std::chrono::milliseconds kTolerance{1};
  ClockReading reading;
  for (int i = 0; i < kTries; ++i) {
    const SteadyTime first = SteadyNow();
    reading.wall = WallNow();
    const SteadyTime second = SteadyNow();
    reading.steady = first + (second - first) / 2;
    if (second - first <= kTolerance) break;
  }
  return reading;
}

Clock& Clock::Real() {
  static auto* clock = new RealClock();  // never destroyed: threads may outlive static destruction order
  return *clock;
}

WakeReason RealClock::WaitUntil(SteadyTime deadline, std::stop_token stop, WakeSignal* signal) {
  WakeSignal local;
  WakeSignal& s = signal != nullptr ? *signal : local;
  std::unique_lock lock(s.mu_);
  s.cv_.wait_until(lock, stop, deadline, [&] { return s.notified_; });
  if (stop.stop_requested()) return WakeReason::kStopped;
  if (std::exchange(s.notified_, false)) return WakeReason::kSignalled;
  return WakeReason::kDeadline;
}

}  // namespace octop
