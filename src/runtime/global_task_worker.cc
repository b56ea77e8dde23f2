#include "runtime/global_task_worker.h"

#include <algorithm>
#include <system_error>
#include <unordered_map>
#include <utility>

#include <uuid/uuid.h>

#include <octop/error_json.h>

#include "runtime/scheduler_metrics.h"

namespace octop::runtime {

namespace {

constexpr std::chrono::hours kMaxSleep{1};
// A pass of the poller reads the database's clock when its last reading (a poll is one) is this old.
constexpr std::chrono::milliseconds kReadingInterval{500};
// The shortest lease a timed-out run holds while it is being stopped (three checks, at least this).
constexpr std::chrono::seconds kStopLease{5};
// A poll that finds a task due but not yet ready is repeated at once, at most kMaxEarlyPolls times in a row.
constexpr int kMaxEarlyPolls = 3;

std::string Name(const std::string& plugin_id, std::string_view id) {
  return plugin_id + "/" + std::string(id);
}

}  // namespace

std::string NewTicket() {
  uuid_t uuid;
  uuid_generate_random(uuid);
  char text[37];
  uuid_unparse_lower(uuid, text);
  return text;
}

GlobalTaskWorker::GlobalTaskWorker(const SchedulerContext& context, std::string plugin_id,
                                   store::TaskStore& store, ClockReading before, WallTime db_now)
    : context_(context), plugin_id_(std::move(plugin_id)), store_(store), db_clock_(*context.clock) {
  db_clock_.Record(before, db_now);
  last_reading_ = before.steady;
}

GlobalTaskWorker::~GlobalTaskWorker() { Join(); }

void GlobalTaskWorker::Start() {
  std::lock_guard lock(mu_);
  if (joined_ || poller_.joinable()) return;
  poller_ = std::thread([this] { PollLoop(context_.shutdown); });
  listener_ = std::thread([this] { ListenLoop(context_.shutdown); });
}

WallTime GlobalTaskWorker::DatabaseNowEstimate() const { return db_clock_.Now(); }

void GlobalTaskWorker::Schedule(const std::string& id, TaskSettingsV2 settings, TaskCadence cadence,
                                TaskFunction fn, std::optional<std::stop_token> signal) {
  // Built before taking mu_: the callback runs right here when the signal is already stopped.
  auto fired = std::make_shared<std::atomic<bool>>(false);
  TaskSignalCallback callback = MakeTaskSignalCallback(signal, fired, wake_);
  TaskSignalCallback old_callback;
  {
    std::lock_guard lock(mu_);
    if (joined_) return;
    auto it = tasks_.find(id);
    if (it == tasks_.end()) {
      it = tasks_.emplace(id, std::make_unique<Task>()).first;
      it->second->id = id;  // never written again: run threads read it without the lock
    }
    Task& task = *it->second;
    task.settings = std::move(settings);
    task.cadence = std::move(cadence);
    task.fn = std::move(fn);
    task.unscheduled = false;
    task.stopped = false;
    task.signal_fired = fired;
    old_callback = std::exchange(task.signal_callback, std::move(callback));
    task.initial_wait_until.reset();
    if (!RunningLocked(task) && task.cadence.initial_delay.has_value()) {
      task.initial_wait_until = context_.clock->SteadyNow() + *task.cadence.initial_delay;
    }
  }
  old_callback.reset();  // outside mu_: its destructor waits for a callback running elsewhere
  Wake();
}

void GlobalTaskWorker::Unschedule(std::string_view id) {
  {
    std::lock_guard lock(mu_);
    auto it = tasks_.find(id);
    if (it == tasks_.end()) return;
    it->second->unscheduled = true;
  }
  Wake();
}

void GlobalTaskWorker::NoteTriggered(std::string_view id) {
  {
    std::lock_guard lock(mu_);
    auto it = tasks_.find(id);
    if (it != tasks_.end()) it->second->initial_wait_until.reset();
  }
  Wake();
}

void GlobalTaskWorker::NoteCancelled(std::string_view id) {
  {
    std::lock_guard lock(mu_);
    auto it = tasks_.find(id);
    if (it != tasks_.end() && RunningLocked(*it->second)) it->second->run->stop.request_stop();
  }
  Wake();
}

std::optional<WorkerStatus> GlobalTaskWorker::WorkerState(std::string_view id) const {
  std::lock_guard lock(mu_);
  auto it = tasks_.find(id);
  if (it == tasks_.end()) return std::nullopt;
  const Task& task = *it->second;
  if (RunningLocked(task)) return WorkerStatus::kRunning;
  if (task.initial_wait_until.has_value() && context_.clock->SteadyNow() < *task.initial_wait_until) {
    return WorkerStatus::kInitialWait;
  }
  return WorkerStatus::kIdle;
}

std::chrono::milliseconds GlobalTaskWorker::PollIntervalLocked() const {
  // Like Backstage's loop interval: a duration cadence shorter than the poll interval lowers it, so a task
  // that runs on another node is picked up within one cadence when that node goes away.
  std::chrono::milliseconds interval = context_.poll_interval;
  for (const auto& [id, task] : tasks_) {
    if (task->stopped || task->unscheduled || task->cadence.kind != CadenceKind::kDuration) continue;
    interval =
        std::min(interval, std::chrono::duration_cast<std::chrono::milliseconds>(task->cadence.period));
  }
  return std::max(interval, kMinPollInterval);
}

void GlobalTaskWorker::PollLoop(std::stop_token stop) {
  const bool janitor = context_.janitor_interval.count() > 0;
  SteadyTime janitor_at = context_.clock->SteadyNow();  // the first sweep runs at once, as Backstage's
  SteadyTime poll_at = janitor_at;
  while (!stop.stop_requested()) {
    SteadyTime now = context_.clock->SteadyNow();
    // The database's clock is read on every pass (a poll reads it too): leases are in its time.
    if (!step_.has_value() && now - last_reading_ >= kReadingInterval) step_ = ReadDatabaseClock();
    if (std::optional<std::chrono::nanoseconds> step = std::exchange(step_, std::nullopt)) {
      OnClockStep(*step);
      // Other nodes on the stepped clock renew at their next liveness check; the janitor waits for that, and
      // the next poll re-reads the database's now.
      janitor_at = std::max(janitor_at, now + 2 * context_.work_check_frequency);
      poll_at = now;
    }
    if (janitor && now >= janitor_at) {
      Sweep();
      now = context_.clock->SteadyNow();
      janitor_at = now + context_.janitor_interval;
      poll_at = now;  // a freed run may be claimable
    }
    std::vector<std::unique_ptr<ActiveRun>> finished;
    std::vector<TicketCheck> checks;
    std::vector<std::string> waiting;
    SteadyTime wake_at = now + kMaxSleep;
    if (janitor) wake_at = std::min(wake_at, janitor_at);
    std::chrono::milliseconds poll_interval;
    {
      std::lock_guard lock(mu_);
      poll_interval = PollIntervalLocked();
      for (auto& [id, task_ptr] : tasks_) {
        Task& task = *task_ptr;
        if (task.run != nullptr && task.run->done) finished.push_back(std::move(task.run));
        if (task.signal_fired != nullptr && task.signal_fired->load() && !task.stopped) {
          task.stopped = true;
          if (RunningLocked(task)) task.run->stop.request_stop();
          context_.Log(LogLevel::kInfo, "Task worker finished: " + Name(plugin_id_, task.id));
        }
        if (RunningLocked(task)) {
          ActiveRun& run = *task.run;
          if (run.deadline.has_value() && !run.deadline_fired) {
            if (now >= *run.deadline) {
              run.deadline_fired = true;
              run.stop.request_stop();
              run.next_check = now;  // hold the lease at once while the run is being stopped
            } else {
              wake_at = std::min(wake_at, *run.deadline);
            }
          }
          if (now >= run.next_check) {
            checks.push_back({task.id, run.ticket, run.deadline_fired && !run.fn_returned});
            run.next_check = now + context_.work_check_frequency;
          }
          wake_at = std::min(wake_at, run.next_check);
          continue;
        }
        if (task.stopped || task.unscheduled) continue;
        if (task.initial_wait_until.has_value()) {
          if (now < *task.initial_wait_until) {
            wake_at = std::min(wake_at, *task.initial_wait_until);
            continue;
          }
          task.initial_wait_until.reset();
          poll_at = now;
        }
        waiting.push_back(task.id);
      }
    }
    for (auto& run : finished) run->thread.join();
    finished.clear();

    for (const TicketCheck& check : checks) {
      // A timed-out run still stopping keeps its lease, so no janitor frees the task while its process may
      // live; the lease outlasts a missed check or two (docs/scheduler.md, "Timeouts").
      std::optional<std::chrono::microseconds> lease;
      if (check.stopping)
        lease = std::max<std::chrono::microseconds>(3 * context_.work_check_frequency, kStopLease);
      Result<bool> valid = store_.CheckTaskTicket({check.id, check.ticket, lease});
      if (!valid.ok()) {
        context_.Log(LogLevel::kWarn, "Failed to check the liveness of task " + Name(plugin_id_, check.id) +
                                          ", " + valid.status().ToString());
        continue;
      }
      if (*valid) continue;
      context_.Log(LogLevel::kInfo,
                   "Task " + Name(plugin_id_, check.id) +
                       " ticket is no longer valid (cancelled or reclaimed); aborting execution");
      std::lock_guard lock(mu_);
      auto it = tasks_.find(check.id);
      if (it != tasks_.end() && RunningLocked(*it->second) && it->second->run->ticket == check.ticket) {
        it->second->run->stop.request_stop();
      }
    }

    if (!waiting.empty()) {
      if (context_.clock->SteadyNow() >= poll_at) {
        claimed_ = false;
        poll_at = PollAndClaim(waiting, poll_interval);
        // A new run's timeout and liveness check are not in wake_at yet, and a step the poll read is handled
        // at the top: go round once more before sleeping.
        if (claimed_ || step_.has_value()) continue;
      }
      wake_at = std::min(wake_at, poll_at);
    }
    if (context_.clock->WaitUntil(wake_at, stop, &wake_) == WakeReason::kSignalled) {
      poll_at = context_.clock->SteadyNow();
    }
  }
}

SteadyTime GlobalTaskWorker::PollAndClaim(const std::vector<std::string>& ids,
                                          std::chrono::milliseconds interval) {
  // Due times are derived from the steady time *before* the query: the database read its clock after it, so a
  // due time can only come out early (answered by another poll right away), never late.
  const ClockReading before_poll = context_.clock->Now();
  const SteadyTime before = before_poll.steady;
  Result<store::PollTasksResult> polled = store_.PollTasks({ids});
  const SteadyTime after = context_.clock->SteadyNow();
  if (!polled.ok()) {
    context_.Log(LogLevel::kWarn, "Task state poll failed, " + polled.status().ToString());
    return after + std::min<std::chrono::milliseconds>(kRetryAfterFailure, interval);
  }
  last_reading_ = before;
  step_ = db_clock_.Record(before_poll, polled->db_now);
  std::unordered_map<std::string_view, const store::PolledTask*> rows;
  for (const store::PolledTask& row : polled->tasks) rows.emplace(row.id, &row);

  SteadyTime next_poll = after + interval;
  bool early = false;
  for (const std::string& id : ids) {
    auto it = rows.find(id);
    if (it == rows.end()) {
      context_.Log(
          LogLevel::kInfo,
          "No longer able to find task; aborting and assuming that it has been unregistered or expired: " +
              Name(plugin_id_, id));
      std::lock_guard lock(mu_);
      auto task = tasks_.find(id);
      if (task != tasks_.end()) task->second->stopped = true;
      continue;
    }
    const store::PolledTask& row = *it->second;
    if (row.ready) {
      TryClaim(id, row);
      continue;
    }
    if (row.running || !row.next_run_start_at.has_value()) continue;  // another node runs it / manual
    SteadyTime due =
        before + std::chrono::duration_cast<SteadyTime::duration>(*row.next_run_start_at - polled->db_now);
    if (std::optional<std::chrono::microseconds> capped = CapNextRun(row, polled->db_now)) {
      due = before + std::chrono::duration_cast<SteadyTime::duration>(*capped);
    }
    if (due <= after) {
      // Due by now but not ready at the query: woken a hair early. Ask again soon -- but a store comparing at
      // a coarser precision than it reports would make that spin, so back off after a few tries.
      early = true;
      due = early_polls_ < kMaxEarlyPolls ? after : after + kMinPollInterval;
    }
    next_poll = std::min(next_poll, due);
  }
  early_polls_ = early ? early_polls_ + 1 : 0;
  return next_poll;
}

void GlobalTaskWorker::TryClaim(const std::string& id, const store::PolledTask& row) {
  auto abort = [&](const Status& status) {
    context_.Log(LogLevel::kInfo, "Task " + Name(plugin_id_, id) +
                                      " has settings this worker can no longer parse; assuming that a newer "
                                      "version is handled by other workers, " +
                                      status.message());
    std::lock_guard lock(mu_);
    auto task = tasks_.find(id);
    if (task != tasks_.end()) task->second->stopped = true;
  };
  Result<TaskSettingsV2> settings = TaskSettingsV2::FromJson(row.settings_json);
  if (!settings.ok()) return abort(settings.status());
  Result<TaskCadence> cadence = TaskCadence::FromSettings(*settings);
  if (!cadence.ok()) return abort(cadence.status());

  std::string ticket = NewTicket();
  Result<std::optional<store::ClaimedRun>> claimed = store_.TryClaimTask({id, ticket, cadence->timeout});
  if (!claimed.ok()) {
    context_.Log(LogLevel::kWarn,
                 "Failed to claim task " + Name(plugin_id_, id) + ", " + claimed.status().ToString());
    return;
  }
  if (!claimed->has_value()) return;  // another node won

  std::lock_guard lock(mu_);
  auto it = tasks_.find(id);
  Task* task = it == tasks_.end() ? nullptr : it->second.get();
  const SteadyTime now = context_.clock->SteadyNow();
  auto run = std::make_unique<ActiveRun>();
  run->ticket = std::move(ticket);
  run->db_cadence = std::move(*cadence);
  run->due_at = (*claimed)->due_at;
  run->next_check = now + context_.work_check_frequency;
  if (run->db_cadence.timeout.has_value()) run->deadline = now + *run->db_cadence.timeout;
  TaskFunction fn;
  if (task != nullptr && !task->stopped && !task->unscheduled && !RunningLocked(*task) &&
      !context_.shutdown.stop_requested()) {
    fn = task->fn;
  } else {
    // Stopped between the poll and the claim: the run thread releases the claim without calling anything.
    run->stop.request_stop();
  }
  if (task == nullptr || RunningLocked(*task)) {
    // Cannot happen (tasks are never erased, and a running task is not polled); release right here.
    (void)store_.TryReleaseTask({id, run->ticket, store::FixedRateAfter{}, std::nullopt});
    return;
  }
  ActiveRun* raw = run.get();
  try {
    run->thread = std::thread([this, task, raw, fn = std::move(fn)] { RunThread(task, raw, fn); });
  } catch (const std::system_error& e) {
    context_.Log(LogLevel::kWarn,
                 "Task worker failed unexpectedly, " + Name(plugin_id_, id) + ", " + e.what());
    (void)store_.TryReleaseTask({id, raw->ticket, store::FixedRateAfter{}, std::nullopt});
    return;
  }
  task->run = std::move(run);
  claimed_ = true;
}

void GlobalTaskWorker::RunThread(Task* task, ActiveRun* run, TaskFunction fn) {
  RunOutcome outcome;
  if (fn) {
    std::stop_callback on_shutdown(context_.shutdown, [run] { run->stop.request_stop(); });
    outcome = context_.metrics->Run(fn, run->stop.get_token(), *context_.clock, plugin_id_, task->id,
                                    TaskScope::kGlobal);
    if (outcome.error.has_value()) {
      context_.Log(LogLevel::kError, "Task " + Name(plugin_id_, task->id) + " failed, " + *outcome.error);
    }
  }

  run->fn_returned = true;  // from here a lease extension would only delay a janitor (see the poll loop)

  store::TimeSpec next_run = store::NullTime{};
  if (Result<store::TimeSpec> next = run->db_cadence.NextRunAfterRun(DatabaseNowEstimate(), run->due_at);
      next.ok()) {
    next_run = *next;
  } else {
    context_.Log(LogLevel::kWarn, "Task " + Name(plugin_id_, task->id) + " has no next cron occurrence, " +
                                      next.status().message());
  }
  store::ReleaseTaskParams release{task->id, run->ticket, next_run, std::nullopt};
  if (outcome.error.has_value()) release.error_json = SerializeErrorMessage(*outcome.error);

  bool last_attempt = false;
  for (;;) {
    Result<bool> released = store_.TryReleaseTask(release);
    if (released.ok()) {
      if (!*released) {
        context_.Log(LogLevel::kInfo,
                     "Task " + Name(plugin_id_, task->id) +
                         " was no longer owned by this node when its run ended (ticket cleared)");
      }
      break;
    }
    context_.Log(LogLevel::kWarn, "Failed to release task " + Name(plugin_id_, task->id) + ", " +
                                      released.status().ToString());
    if (last_attempt) break;  // the janitor frees the row once its run expires
    if (context_.shutdown.stop_requested()) {
      last_attempt = true;
      continue;
    }
    context_.clock->WaitFor(kRetryAfterFailure, context_.shutdown);
  }
  {
    std::lock_guard lock(mu_);
    run->done = true;
  }
  Wake();
}

void GlobalTaskWorker::OnClockStep(std::chrono::nanoseconds step) {
  struct Held {
    std::string id;
    std::string ticket;
    std::chrono::microseconds lease;
  };
  std::vector<Held> held;
  {
    std::lock_guard lock(mu_);
    const SteadyTime now = context_.clock->SteadyNow();
    for (auto& [id, task] : tasks_) {
      if (!RunningLocked(*task) || !task->run->deadline.has_value()) continue;  // no timeout: no expiry
      // Until the run's own timeout on the monotonic clock, and the stop lease after it.
      const auto left = std::max(*task->run->deadline - now, SteadyTime::duration::zero());
      held.push_back({id, task->run->ticket,
                      std::chrono::duration_cast<std::chrono::microseconds>(left) +
                          std::chrono::duration_cast<std::chrono::microseconds>(kStopLease)});
    }
  }
  int renewed = 0;
  for (const Held& h : held) {
    Result<bool> valid = store_.CheckTaskTicket({h.id, h.ticket, h.lease});
    if (!valid.ok()) {
      context_.Log(LogLevel::kWarn, "Failed to renew the lease of task " + Name(plugin_id_, h.id) +
                                        " after a clock step, " + valid.status().ToString());
    } else if (*valid) {
      ++renewed;
    }
  }
  context_.Log(LogLevel::kWarn, "The database's clock stepped " + DatabaseClock::Describe(step) +
                                    " against this node's monotonic clock: renewed the leases of " +
                                    std::to_string(renewed) + " running tasks of plugin " + plugin_id_ +
                                    " on this node");
}

std::optional<std::chrono::microseconds> GlobalTaskWorker::CapNextRun(const store::PolledTask& row,
                                                                      WallTime db_now) {
  using std::chrono::microseconds;
  const auto ahead = std::chrono::duration_cast<microseconds>(*row.next_run_start_at - db_now);
  if (ahead <= DatabaseClock::kStepThreshold) return std::nullopt;
  Result<TaskSettingsV2> settings = TaskSettingsV2::FromJson(row.settings_json);
  if (!settings.ok()) return std::nullopt;  // the claim reports it
  Result<TaskCadence> cadence = TaskCadence::FromSettings(*settings);
  if (!cadence.ok() || cadence->kind != CadenceKind::kDuration) return std::nullopt;
  // A registration's initial delay may lie further ahead than one period; a skew of up to the step threshold
  // between writers is not a step.
  const microseconds within = std::max(cadence->period, cadence->initial_delay.value_or(microseconds(0)));
  if (ahead <= within + DatabaseClock::kStepThreshold) return std::nullopt;
  Result<bool> moved = store_.CapTaskNextRun({row.id, within});
  if (!moved.ok()) {
    context_.Log(LogLevel::kWarn, "Failed to bring the next run of task " + Name(plugin_id_, row.id) +
                                      " to its cadence, " + moved.status().ToString());
    return std::nullopt;
  }
  if (!*moved) return std::nullopt;  // claimed or moved meanwhile: the next poll sees it
  context_.Log(LogLevel::kWarn,
               "Task " + Name(plugin_id_, row.id) + " was due " + DatabaseClock::Describe(ahead) +
                   " from now, beyond its cadence (the wall clock stepped back?); it is now due in " +
                   DatabaseClock::Describe(within));
  return within;
}

std::optional<std::chrono::nanoseconds> GlobalTaskWorker::ReadDatabaseClock() {
  last_reading_ = context_.clock->SteadyNow();
  return runtime::ReadDatabaseClock(context_, db_clock_, store_);
}

void GlobalTaskWorker::Sweep() {
  // Recorded as a Backstage node records a lost run, so the task shows it failed rather than looking idle and
  // clean (docs/scheduler.md, "Janitor"). Bounded by this node's estimate of the database's now, so a step of
  // the database's clock since the last reading expires nothing before this node has renewed its own runs.
  Result<std::vector<std::string>> swept = store_.SweepExpiredTaskRuns(
      {.error_json = SerializeErrorMessage("Task timed out"), .expired_before = db_clock_.Now()});
  if (!swept.ok()) {
    context_.Log(LogLevel::kWarn, "Error while performing janitorial tasks, " + swept.status().ToString());
    return;
  }
  for (const std::string& id : *swept) {
    context_.Log(LogLevel::kWarn, "Task timed out and was lost: " + Name(plugin_id_, id));
  }
}

void GlobalTaskWorker::ListenLoop(std::stop_token stop) {
  ListenUntilStopped(
      context_, store_, {std::string(store::kTasksChannel)}, "task triggers of plugin " + plugin_id_,
      [this] { Wake(); },  // a trigger may have been missed while not listening
      [this](const store::Notification& note) {
        if (note.channel == store::kTasksChannel) NoteTriggered(note.payload);
      },
      stop);
}

void GlobalTaskWorker::Join() {
  std::thread poller;
  std::thread listener;
  {
    std::lock_guard lock(mu_);
    joined_ = true;
    poller = std::move(poller_);
    listener = std::move(listener_);
  }
  if (poller.joinable()) poller.join();
  if (listener.joinable()) listener.join();
  StopAndJoinRuns(mu_, tasks_);
}

}  // namespace octop::runtime
