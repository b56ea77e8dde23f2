#include "runtime/job_worker.h"

#include <algorithm>
#include <exception>
#include <utility>

namespace octop::runtime {

namespace {

constexpr std::chrono::hours kMaxSleep{1};
constexpr int kMaxClaimBatch = 1000;
// A due time that has already passed when the claim found nothing (another node holds the job, or its kind
// has no handler here) is re-checked quickly a few times, then left to the poll interval.
constexpr std::chrono::milliseconds kEarlyRepoll{1};
constexpr int kMaxEarlyPolls = 3;

std::string Millis(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }

}  // namespace

JobQueueWorker::JobQueueWorker(JobQueueContext& context, JobCompleter& completer, std::string queue,
                               int concurrency)
    : context_(context),
      completer_(completer),
      queue_(std::move(queue)),
      prefetch_(std::max(0, context.options.prefetch)),
      prefetch_ttl_(context.options.prefetch_ttl),
      claim_series_(context.metrics->ClaimSeriesFor(queue_)),
      rng_(std::random_device{}()),
      concurrency_(std::max(1, concurrency)) {}

JobQueueWorker::~JobQueueWorker() { Shutdown(std::chrono::milliseconds(0)); }

void JobQueueWorker::Start() {
  std::lock_guard lock(mu_);
  if (started_ || joined_) return;
  started_ = true;
  for (int i = 0; i < concurrency_; ++i) workers_.emplace_back([this] { WorkerLoop(); });
  producer_ = std::thread([this] { ProducerLoop(producer_stop_.get_token()); });
}

void JobQueueWorker::Grow(int concurrency) {
  {
    std::lock_guard lock(mu_);
    if (joined_ || concurrency <= concurrency_) return;
    if (started_) {
      for (int i = concurrency_; i < concurrency; ++i) workers_.emplace_back([this] { WorkerLoop(); });
    }
    concurrency_ = concurrency;
  }
  Notify();
}

void JobQueueWorker::Notify() {
  dirty_.store(true);
  wake_.Notify();
}

void JobQueueWorker::SetPaused(bool paused) {
  if (paused_.exchange(paused) != paused && !paused) Notify();
}

bool JobQueueWorker::CancelRunning(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = running_.find(id);
  if (it == running_.end()) return false;
  it->second->cancelled = true;
  it->second->stop.request_stop();
  return true;
}

std::vector<std::string> JobQueueWorker::HeldTokens() const {
  std::vector<std::string> tokens;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, run] : running_) {
      if (run->row.attempt_token) tokens.push_back(*run->row.attempt_token);
    }
  }
  std::sort(tokens.begin(), tokens.end());
  tokens.erase(std::unique(tokens.begin(), tokens.end()), tokens.end());
  return tokens;
}

std::chrono::milliseconds JobQueueWorker::ClaimLease() const {
  // A prefetched job may wait up to prefetch_ttl before its timeout starts counting.
  return context_.handlers.MaxTimeout(context_.DefaultTimeout()) + context_.options.rescue_grace +
         (prefetch_ > 0 ? prefetch_ttl_ : std::chrono::milliseconds(0));
}

void JobQueueWorker::ProducerLoop(std::stop_token stop) {
  Clock& clock = *context_.clock;
  last_claim_ = clock.SteadyNow() - context_.PollInterval();  // the first pass claims
  bool claim_again = false;  // the last claim filled its limit (or a job became due during it): more may wait
  const std::chrono::microseconds wake_interval = context_.options.wake_claim_interval;
  while (!stop.stop_requested()) {
    const SteadyTime now = clock.SteadyNow();
    SteadyTime wake_at = now + kMaxSleep;
    int free = 0;
    std::vector<std::shared_ptr<Run>> stale;  // prefetched, waited longer than prefetch_ttl
    {
      std::lock_guard lock(mu_);
      while (!ready_.empty() && PastTtl(*ready_.front(), now)) {
        stale.push_back(std::move(ready_.front()));
        ready_.pop_front();
        ForgetLocked(*stale.back());
      }
      if (!ready_.empty() && prefetch_ > 0)
        wake_at = std::min(wake_at, ready_.front()->claimed_at + prefetch_ttl_);
      for (auto& [id, run] : running_) {
        if (!run->started) {
          // Not started (or starting right now, unseen): its deadline is no earlier than now + its timeout.
          // Waking then re-reads the real one, without a wake-up per job start.
          wake_at = std::min(wake_at, now + run->timeout);
          continue;
        }
        if (run->timed_out || run->cancelled) continue;
        if (now >= run->deadline) {
          run->timed_out = true;
          run->stop.request_stop();
          context_.Log(LogLevel::kWarn, "Job " + id + " (" + run->row.kind + ") timed out after " +
                                            Millis(run->timeout) + "; its stop was requested");
        } else {
          wake_at = std::min(wake_at, run->deadline);
        }
      }
      free = WantLocked();
      waiting_for_slot_ = free <= 0;
    }
    if (!stale.empty()) Release(std::move(stale), "waited longer than the prefetch time-to-live");
    const std::chrono::milliseconds poll = context_.PollInterval();
    if (free > 0) {
      const bool poll_due = now >= last_claim_ + poll;
      const bool job_due = next_due_.has_value() && now >= *next_due_;
      const bool woken = dirty_.load();
      if (claim_again || poll_due || job_due || woken) {
        // A claim started by a wake-up alone (an enqueue) within wake_claim_interval of the previous claim's
        // end waits out the rest, so the jobs enqueued meanwhile share one claim; an idle queue's last claim
        // is older and it claims at once. Real time, not the context's clock: a pause of at most 100 ms that
        // must also pass under a FakeClock nobody advances.
        if (!claim_again && !poll_due && !job_due) {
          const auto until = last_claim_real_ + wake_interval;
          const auto real_now = std::chrono::steady_clock::now();
          if (real_now < until) {
            std::this_thread::sleep_for(until - real_now);
            continue;  // re-read the clock, the slots and the deadlines, then claim
          }
        }
        dirty_.store(false);
        claim_again = Claim(free, now);
        last_claim_real_ = std::chrono::steady_clock::now();
        continue;  // re-evaluate the slots and deadlines of what was just dispatched
      }
      wake_at = std::min(wake_at, last_claim_ + poll);
      if (next_due_.has_value() && !paused_.load()) wake_at = std::min(wake_at, *next_due_);
    }
    clock.WaitUntil(wake_at, stop, &wake_);
  }
}

bool JobQueueWorker::Claim(int free, SteadyTime now) {
  if (kinds_version_ != context_.handlers.version()) {
    kinds_version_ = context_.handlers.version();
    kinds_ = context_.handlers.Kinds();
  }
  last_claim_ = now;
  next_due_.reset();
  if (kinds_.empty()) return false;  // no handler on this node: leave every job to the others

  store::ClaimJobsParams params;
  params.queue = queue_;
  params.limit = std::min(free, kMaxClaimBatch);
  params.kinds = kinds_;
  params.timeout = std::chrono::duration_cast<std::chrono::microseconds>(ClaimLease());
  params.worker_id = context_.worker_id;
  const SteadyTime before = context_.clock->SteadyNow();
  Result<std::vector<JobInfo>> claimed = context_.store->ClaimJobs(params);
  const SteadyTime after = context_.clock->SteadyNow();
  last_claim_ = after;
  claim_series_.duration->Observe(std::chrono::duration<double>(after - before).count());
  if (claimed.ok()) claim_series_.claimed->Increment(static_cast<double>(claimed->size()));
  if (!claimed.ok()) {
    context_.Log(LogLevel::kWarn,
                 "Failed to claim jobs of queue " + queue_ + ", " + claimed.status().ToString());
    next_due_ = after + kRetryAfterFailure;
    return false;
  }

  if (!claimed->empty()) {
    const std::chrono::milliseconds fallback = context_.DefaultTimeout();
    std::vector<std::shared_ptr<Run>> runs;
    runs.reserve(claimed->size());
    for (JobInfo& row : *claimed) {
      auto run = std::make_shared<Run>();
      run->entry = context_.handlers.Find(row.kind);
      run->timeout = run->entry != nullptr ? run->entry->options.timeout.value_or(fallback) : fallback;
      auto series = series_.find(row.kind);
      if (series == series_.end())
        series = series_.emplace(row.kind, context_.metrics->SeriesFor(queue_, row.kind)).first;
      run->series = series->second;
      run->claimed_at = after;
      run->row = std::move(row);
      runs.push_back(std::move(run));
    }
    bool wake = false;
    {
      std::lock_guard lock(mu_);
      for (auto& run : runs) {
        running_[run->row.id] = run;
        ready_.push_back(run);
        ++busy_;
      }
      wake = WakeWorkerLocked();
    }
    // One worker is woken; each worker that takes a job while more are ready wakes the next (WorkerLoop), one
    // wake-up on its way at a time, so a claim reaches every idle worker it has jobs for without waking them
    // all onto mu_ at once, and short jobs are run by the workers already awake: with more workers than
    // cores, waking every worker for a claim cost CPU and context switches per job (docs/performance.md
    // "Workers woken one by one"). A worker that is busy now takes what is left when it finishes (it reads
    // ready_ before it waits).
    if (wake) work_cv_.notify_one();
  }
  if (!claimed->empty()) early_polls_ = 0;
  if (static_cast<int>(claimed->size()) >= params.limit) return true;

  // The due jobs are drained: sleep until the next one becomes due (a scheduled job, a retry).
  if (paused_.load()) return false;
  Result<std::optional<WallTime>> next = context_.store->NextJobDueAt(queue_);
  if (!next.ok()) {
    context_.Log(LogLevel::kWarn,
                 "Failed to read the next due job of queue " + queue_ + ", " + next.status().ToString());
    return false;
  }
  if (!next->has_value()) {
    early_polls_ = 0;
    return false;
  }
  SteadyTime due = context_.db_clock->SteadyAt(**next);
  if (due <= after) {
    // Due already by this node's estimate of the database clock, yet not claimed: it became due during the
    // claim (claim again at once), or the estimate is a hair off (again after a millisecond), or another node
    // holds it or it is of a kind without a handler here (give up after a few tries; the poll remains).
    // When a wake-up came in meanwhile (most likely the enqueue of this very job), the claim it starts, paced
    // by wake_claim_interval, takes the job: claiming again at once would let a stream of enqueues bypass the
    // pacing, one immediate claim after each claim.
    if (dirty_.load()) return false;
    const int tries = early_polls_++;
    if (tries == 0) return true;
    if (tries > kMaxEarlyPolls) return false;
    due = after + kEarlyRepoll;
  } else {
    early_polls_ = 0;
  }
  next_due_ = due;
  return false;
}

bool JobQueueWorker::PastTtl(const Run& run, SteadyTime now) const {
  return prefetch_ > 0 && now >= run.claimed_at + prefetch_ttl_;
}

void JobQueueWorker::ForgetLocked(const Run& run) {
  running_.erase(run.row.id);
  --busy_;
  if (busy_ == 0) idle_cv_.notify_all();
}

bool JobQueueWorker::WakeWorkerLocked() {
  if (ready_.empty() || idle_workers_ == 0 || worker_waking_) return false;
  worker_waking_ = true;
  return true;
}

int JobQueueWorker::WantLocked() const {
  const int free = concurrency_ + prefetch_ - busy_;
  if (free <= 0 || static_cast<int>(ready_.size()) > prefetch_ / 2) return 0;
  return free;
}

void JobQueueWorker::Release(std::vector<std::shared_ptr<Run>> held, const char* why) {
  for (const std::shared_ptr<Run>& run : held) {
    PendingCompletion out;
    out.queue = queue_;
    out.kind = run->row.kind;
    out.result = "released";
    out.completion.id = run->row.id;
    out.completion.attempt_token = run->row.attempt_token.value_or("");
    out.completion.outcome = store::JobOutcome::kRelease;
    out.completion.error = run->row.last_error;  // as it was before the claim
    completer_.Add(std::move(out));
  }
  context_.Log(LogLevel::kDebug, "Handing " + std::to_string(held.size()) + " prefetched jobs of queue " +
                                     queue_ + " back to the queue: " + why);
}

void JobQueueWorker::WorkerLoop() {
  while (true) {
    std::shared_ptr<Run> run;
    bool wake = false;
    bool stale = false;
    bool cancelled = false;
    bool more = false;  // jobs are left after this one and nobody is on the way: wake a worker (Claim: why)
    {
      std::unique_lock lock(mu_);
      while (ready_.empty() && !stopping_) {
        ++idle_workers_;
        work_cv_.wait(lock);
        --idle_workers_;
        worker_waking_ = false;
      }
      if (ready_.empty()) return;
      run = std::move(ready_.front());
      ready_.pop_front();
      more = WakeWorkerLocked();
      const SteadyTime now = context_.clock->SteadyNow();
      // A held job past its time-to-live is not started even if the producer has not swept it yet (after a
      // SIGSTOP, say): its expiry in the database no longer covers a whole run, another node may have it.
      stale = PastTtl(*run, now);
      if (stale) {
        ForgetLocked(*run);
      } else {
        run->started = true;
        run->deadline = now + run->timeout;
        cancelled = run->cancelled;
      }
      if (waiting_for_slot_ && WantLocked() > 0) {
        waiting_for_slot_ = false;
        wake = true;
      }
    }
    if (more) work_cv_.notify_one();
    if (wake) wake_.Notify();
    if (stale) {
      Release({run}, "waited longer than the prefetch time-to-live");
      continue;
    }
    Execute(run, cancelled);
  }
}

std::chrono::milliseconds JobQueueWorker::Backoff(int attempt) {
  double unit = 0;
  {
    std::lock_guard lock(rng_mu_);
    unit = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
  }
  return context_.options.retry.Delay(attempt, unit);
}

void JobQueueWorker::Execute(const std::shared_ptr<Run>& run, bool cancelled_before_start) {
  // The worker's locks per job: mu_ when it took the job (WorkerLoop) and once here at its end, and the
  // completer's; metrics and the handler were resolved at the claim (docs/performance.md).
  JobInfo& row = run->row;
  const JobMetrics::Series& series = run->series;
  series.running->Increment();
  const SteadyTime start = context_.clock->SteadyNow();
  if (row.started_at.has_value()) {
    // Start latency on the database's clock: the claim's time plus how long the job waited here.
    const WallTime due = std::max(row.scheduled_at, row.created_at);
    const auto waited = std::chrono::duration_cast<WallTime::duration>(start - run->claimed_at);
    series.latency->Observe(
        std::max(0.0, std::chrono::duration<double>(*row.started_at + waited - due).count()));
  }
  JobResult result = JobResult::Fail("No handler for job kind '" + row.kind + "' on this node");
  if (cancelled_before_start) {
    result = JobResult::Cancel("Cancelled before it started");
  } else if (run->entry != nullptr && run->entry->handler) {
    // The payload is read by the handler only: it moves into the context rather than being copied.
    const JobContext job{.id = row.id,
                         .kind = row.kind,
                         .queue = row.queue,
                         .payload = std::move(row.payload),
                         .attempt = row.attempt,
                         .max_retries = row.max_retries,
                         .stop_token = run->stop.get_token()};
    try {
      result = run->entry->handler(job);
    } catch (const std::exception& e) {
      result = JobResult::Fail(e.what());
    } catch (...) {
      result = JobResult::Fail("Unknown error");
    }
  }
  series.duration->Observe(std::chrono::duration<double>(context_.clock->SteadyNow() - start).count());
  series.running->Decrement();
  bool timed_out = false;
  bool cancelled = false;
  bool interrupted = false;
  bool wake = false;
  {
    // Forgotten before its completion is queued: Shutdown, which waits for busy_ to reach 0, joins this
    // thread before the completer, so the completion below is never lost.
    std::lock_guard lock(mu_);
    timed_out = run->timed_out;
    cancelled = run->cancelled;
    interrupted = run->interrupted;
    ForgetLocked(*run);
    if (waiting_for_slot_ && WantLocked() > 0) {
      waiting_for_slot_ = false;
      wake = true;
    }
  }
  completer_.Add(Complete(*run, std::move(result), timed_out, cancelled, interrupted));
  if (wake) wake_.Notify();
}

PendingCompletion JobQueueWorker::Complete(const Run& run, JobResult result, bool timed_out, bool cancelled,
                                           bool interrupted) {
  const JobInfo& row = run.row;
  PendingCompletion out;
  out.queue = queue_;
  out.kind = row.kind;
  out.completion.id = row.id;
  out.completion.attempt_token = row.attempt_token.value_or("");
  JobResult::Kind kind = result.kind();
  std::string error = result.error();
  if (kind != JobResult::Kind::kDone) {
    if (cancelled) {
      kind = JobResult::Kind::kCancel;
      error = std::string(kJobCancelledError);
    } else if (timed_out) {
      if (kind == JobResult::Kind::kRetry) kind = JobResult::Kind::kFail;
      error = "Job timed out after " + Millis(run.timeout) + (error.empty() ? "" : ": " + error);
    } else if (interrupted) {
      // Not the job's fault: handed back as a prefetched job is, so the attempt does not count and a deploy
      // can never freeze a job; due again at once, on another node or here after the restart
      // (docs/jobs.md, "Shutdown").
      out.completion.outcome = store::JobOutcome::kRelease;
      out.completion.error = "Interrupted by shutdown";
      out.result = "released";
      context_.Log(LogLevel::kInfo, "Job " + row.id + " (" + row.kind + ") attempt " +
                                        std::to_string(row.attempt) +
                                        " was interrupted by shutdown; handed back to the queue");
      return out;
    }
  }
  const bool last_attempt = row.attempt > row.max_retries;
  switch (kind) {
    case JobResult::Kind::kDone:
      out.completion.outcome = store::JobOutcome::kSuccess;
      out.result = "success";
      return out;
    case JobResult::Kind::kCancel:
      out.completion.outcome = store::JobOutcome::kCancel;
      out.result = "cancelled";
      break;
    case JobResult::Kind::kRetry: {
      out.completion.outcome = store::JobOutcome::kRetry;
      const std::chrono::milliseconds delay =
          result.retry_after()
              ? std::clamp(*result.retry_after(), std::chrono::milliseconds(0), kMaxJobRetryAfter)
              : Backoff(row.attempt);
      out.completion.retry_delay = std::chrono::duration_cast<std::chrono::microseconds>(delay);
      out.result = last_attempt ? "frozen" : "retry";
      break;
    }
    case JobResult::Kind::kFail:
      out.completion.outcome = store::JobOutcome::kFail;
      out.completion.retry_delay =
          std::chrono::duration_cast<std::chrono::microseconds>(Backoff(row.attempt));
      out.result = last_attempt ? "frozen" : "failed";
      break;
  }
  out.completion.error = error;
  std::string next =
      out.result == "cancelled" || out.result == "frozen"
          ? "frozen"
          : "retry in " +
                Millis(std::chrono::duration_cast<std::chrono::milliseconds>(out.completion.retry_delay));
  context_.Log(LogLevel::kWarn, "Job " + row.id + " (" + row.kind + ") attempt " +
                                    std::to_string(row.attempt) + " of " +
                                    std::to_string(row.max_retries + 1) + " failed, " + error + "; " + next);
  return out;
}

void JobQueueWorker::Shutdown(std::chrono::milliseconds grace) {
  std::thread producer;
  {
    std::lock_guard lock(mu_);
    if (joined_) return;
    joined_ = true;
    producer = std::move(producer_);
  }
  producer_stop_.request_stop();
  if (producer.joinable()) producer.join();
  std::vector<std::shared_ptr<Run>> held;  // claimed, not started: back to the queue rather than run now
  {
    std::lock_guard lock(mu_);
    for (std::shared_ptr<Run>& run : ready_) {
      ForgetLocked(*run);
      held.push_back(std::move(run));
    }
    ready_.clear();
  }
  if (!held.empty()) Release(std::move(held), "shutdown");
  {
    std::unique_lock lock(mu_);
    // Real time: a drain at process stop must end even under a FakeClock nobody advances.
    idle_cv_.wait_for(lock, grace, [&] { return busy_ == 0; });
    if (busy_ > 0) {
      context_.Log(LogLevel::kInfo, std::to_string(busy_) + " jobs of queue " + queue_ +
                                        " still running after the shutdown grace; requesting them to stop");
      for (auto& [id, run] : running_) {
        run->interrupted = true;
        run->stop.request_stop();
      }
    }
    idle_cv_.wait(lock, [&] { return busy_ == 0; });
    stopping_ = true;
  }
  work_cv_.notify_all();
  std::vector<std::thread> workers;
  {
    std::lock_guard lock(mu_);
    workers = std::move(workers_);
  }
  for (std::thread& t : workers) t.join();
}

}  // namespace octop::runtime
