#include <cstdio>

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

ClockStepWatch::ClockStepWatch(const Clock& clock) : clock_(clock), offset_(Offset()) {}

std::chrono::nanoseconds ClockStepWatch::Offset() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_.WallNow().time_since_epoch()) -
         std::chrono::duration_cast<std::chrono::nanoseconds>(clock_.SteadyNow().time_since_epoch());
}

std::optional<std::chrono::nanoseconds> ClockStepWatch::Check() {
  const std::chrono::nanoseconds now = Offset();
  const std::chrono::nanoseconds step = now - std::exchange(offset_, now);
  if (step >= kThreshold || -step >= kThreshold) return step;
  return std::nullopt;
}

std::string ClockStepWatch::Describe(std::chrono::nanoseconds step) {
  char text[48];
  std::snprintf(text, sizeof text, "%+.1f s", std::chrono::duration<double>(step).count());
  return text;
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
