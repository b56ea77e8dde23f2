#include <octop/testing/fake_clock.h>

namespace octop {

// Gives FakeClock access to WakeSignal's internals without making them public.
class FakeClockAccess {
 public:
  static std::mutex& Mutex(WakeSignal& s) { return s.mu_; }
  static std::condition_variable_any& Cv(WakeSignal& s) { return s.cv_; }
  static bool& Notified(WakeSignal& s) { return s.notified_; }
};

namespace testing {

namespace {
// The steady epoch of every FakeClock: a fixed, arbitrary point so fake steady times are comparable across
// runs.
const SteadyTime kSteadyStart{std::chrono::hours(24 * 365)};
}  // namespace

FakeClock::FakeClock(WallTime start) : wall_start_(start) {}

WallTime FakeClock::DefaultStart() {
  return WallTime{std::chrono::duration_cast<WallTime::duration>(
      std::chrono::sys_days{std::chrono::year{2026} / std::chrono::January / 1}.time_since_epoch())};
}

WallTime FakeClock::WallNow() const {
  return wall_start_ + std::chrono::duration_cast<WallTime::duration>(
                           std::chrono::nanoseconds(offset_ns_.load() + wall_step_ns_.load()));
}

SteadyTime FakeClock::SteadyNow() const {
  return kSteadyStart +
         std::chrono::duration_cast<SteadyTime::duration>(std::chrono::nanoseconds(offset_ns_.load()));
}

ClockReading FakeClock::Now() const {
  // One read of the advance, so an Advance on another thread cannot fall between the two.
  const std::int64_t advanced = offset_ns_.load();
  return {
      wall_start_ + std::chrono::duration_cast<WallTime::duration>(
                        std::chrono::nanoseconds(advanced + wall_step_ns_.load())),
      kSteadyStart + std::chrono::duration_cast<SteadyTime::duration>(std::chrono::nanoseconds(advanced))};
}

WakeReason FakeClock::WaitUntil(SteadyTime deadline, std::stop_token stop, WakeSignal* signal) {
  WakeSignal local;
  WakeSignal& s = signal != nullptr ? *signal : local;
  // Lock order: mu_ (clock) before the signal's mutex; this thread never holds both.
  {
    std::lock_guard lock(mu_);
    waiting_.insert({deadline, &s});
  }
  waiters_changed_.notify_all();
  WakeReason reason;
  {
    std::unique_lock lock(FakeClockAccess::Mutex(s));
    FakeClockAccess::Cv(s).wait(lock, stop,
                                [&] { return FakeClockAccess::Notified(s) || SteadyNow() >= deadline; });
    if (stop.stop_requested()) {
      reason = WakeReason::kStopped;
    } else if (std::exchange(FakeClockAccess::Notified(s), false)) {
      reason = WakeReason::kSignalled;
    } else {
      reason = WakeReason::kDeadline;
    }
  }
  {
    std::lock_guard lock(mu_);
    waiting_.erase({deadline, &s});
  }
  waiters_changed_.notify_all();
  return reason;
}

void FakeClock::NotifyAll() {
  std::lock_guard lock(mu_);
  for (const Waiter& w : waiting_) {
    // Taking the signal's mutex orders this notify after the waiter's predicate check: no lost wake-up.
    std::lock_guard signal_lock(FakeClockAccess::Mutex(*w.signal));
    FakeClockAccess::Cv(*w.signal).notify_all();
  }
}

void FakeClock::StepWall(std::chrono::nanoseconds d) {
  wall_step_ns_.fetch_add(d.count());
  NotifyAll();
}

void FakeClock::Advance(std::chrono::nanoseconds d) {
  if (d.count() > 0) offset_ns_.fetch_add(d.count());
  NotifyAll();
}

bool FakeClock::AdvanceToNextDeadline() {
  SteadyTime earliest = SteadyTime::max();
  {
    std::lock_guard lock(mu_);
    for (const Waiter& w : waiting_) earliest = std::min(earliest, w.deadline);
  }
  if (earliest == SteadyTime::max()) return false;
  const auto now = SteadyNow();
  Advance(earliest > now ? std::chrono::duration_cast<std::chrono::nanoseconds>(earliest - now)
                         : std::chrono::nanoseconds(0));
  return true;
}

bool FakeClock::WaitForWaiters(int n, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return waiters_changed_.wait_for(lock, timeout, [&] { return static_cast<int>(waiting_.size()) >= n; });
}

int FakeClock::waiters() const {
  std::lock_guard lock(mu_);
  return static_cast<int>(waiting_.size());
}

}  // namespace testing
}  // namespace octop
