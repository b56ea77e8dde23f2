// JobQueue: the public face of the job queue (include/octop/queue.h) -- the store, the per-queue workers, the
// completer, the notification listener and the maintenance thread (rescuer, retention, config refresh).
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <thread>
#include <utility>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <octop/queue.h>

#include "runtime/job_completer.h"
#include "runtime/job_metrics.h"
#include "runtime/job_queue_context.h"
#include "runtime/job_queue_opener.h"
#include "runtime/job_worker.h"
#include "runtime/scheduler_context.h"
#include "store/job_store.h"

namespace octop {

namespace {

constexpr int kMaxRetentionRounds = 100;
constexpr int kMaxConcurrency = 1024;
constexpr int kLatestFailedShown = 10;
constexpr std::chrono::seconds kReconcileSpacing{1};
// A starting node claims before it sweeps: its first retention and reconcile passes, which each read many
// rows (a reconcile reads every job), wait this long, so they do not compete with its first claims
// (docs/jobs.md "Maintenance"). The rescuer runs at once: it finds its rows by index, and the runs a crash
// left expired should not wait.
constexpr std::chrono::seconds kStartupSweepDelay{1};

std::string DefaultWorkerId() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  return std::string(host[0] != '\0' ? host : "node") + "-" + std::to_string(::getpid());
}

// A config value in milliseconds: a JSON number, or {"value": number} (the seed's form). nullopt otherwise.
std::optional<std::int64_t> ConfigMillis(const std::string& json_text) {
  const nlohmann::json j = nlohmann::json::parse(json_text, nullptr, false);
  const nlohmann::json* v = &j;
  if (j.is_object() && j.contains("value")) v = &j["value"];
  if (!v->is_number()) return std::nullopt;
  const double ms = v->get<double>();
  if (!std::isfinite(ms) || ms < 1 || ms > 24.0 * 3600 * 1000) return std::nullopt;
  return static_cast<std::int64_t>(ms);
}

}  // namespace

std::chrono::milliseconds RetryPolicy::Delay(int attempt, double unit_random) const {
  const int exponent = std::clamp(attempt - 1, 0, 62);
  const double raw = static_cast<double>(base.count()) * std::ldexp(1.0, exponent);
  const double capped = std::min(raw, static_cast<double>(cap.count()));
  const double spread = std::clamp(jitter, 0.0, 1.0);
  const double factor = 1.0 + spread * (2.0 * std::clamp(unit_random, 0.0, 1.0) - 1.0);
  return std::chrono::milliseconds(std::max<long long>(0, std::llround(capped * factor)));
}

class JobQueue::Impl {
 public:
  explicit Impl(JobQueueOptions options) { context.options = std::move(options); }

  // Declared first: destroyed last, after every thread that uses it.
  std::unique_ptr<store::JobStore> store;
  std::unique_ptr<runtime::JobMetrics> metrics;
  runtime::JobQueueContext context;
  std::unique_ptr<runtime::JobCompleter> completer;

  std::stop_source stopper;
  WakeSignal maintenance_wake;
  std::atomic<bool> config_dirty{false};
  std::atomic<bool> cancels_dirty{false};  // cancel notifications may have been missed: read the requests
  // Plain SQL changed jobs, or such a notification may have been missed: reconcile the working sets.
  std::atomic<bool> reconcile_dirty{false};

  std::mutex mu;
  std::map<std::string, std::unique_ptr<runtime::JobQueueWorker>, std::less<>> workers;  // guarded by mu
  std::set<std::string, std::less<>> paused;                                             // guarded by mu
  bool started = false;                                                                  // guarded by mu
  bool shut_down = false;                                                                // guarded by mu
  std::thread listener;                                                                  // guarded by mu
  std::thread maintenance;                                                               // guarded by mu

  void Wake(std::string_view queue) {
    std::lock_guard lock(mu);
    auto it = workers.find(queue);
    if (it != workers.end()) it->second->Notify();
  }
  void WakeAll() {
    std::lock_guard lock(mu);
    for (auto& [name, worker] : workers) worker->Notify();
  }

  // A cancel request for a running job: if it runs here its stop_token fires and its attempt ends with
  // kCancel. Requests for jobs this node does not run are somebody else's.
  void StopRunning(std::string_view id) {
    std::lock_guard lock(mu);
    for (auto& [name, worker] : workers) {
      if (worker->CancelRunning(std::string(id))) return;
    }
  }

  // The fallback for a missed cancel notification: the requests for the attempts this node holds (`held`,
  // from HeldTokens()).
  void ReadCancelRequests(const std::vector<std::string>& held) {
    if (held.empty()) return;
    Result<std::vector<std::string>> ids = store->CancelRequestsFor(held);
    if (!ids.ok()) {
      context.Log(LogLevel::kWarn, "Failed to read the cancel requests, " + ids.status().ToString());
      return;
    }
    for (const std::string& id : *ids) StopRunning(id);
  }

  void RefreshConfig() {
    bool changed = false;
    for (auto [key, target, fallback] :
         {std::tuple{kJobsPollIntervalKey, &context.poll_interval_ms, context.options.default_poll_interval},
          std::tuple{kJobsDefaultTimeoutKey, &context.default_timeout_ms, context.options.default_timeout}}) {
      Result<std::optional<std::string>> value = store->GetConfig(key);
      if (!value.ok()) {
        context.Log(LogLevel::kWarn,
                    "Failed to read config " + std::string(key) + ", " + value.status().ToString());
        continue;
      }
      std::int64_t ms = fallback.count();
      if (value->has_value()) {
        if (auto parsed = ConfigMillis(**value)) {
          ms = *parsed;
        } else {
          context.Log(LogLevel::kWarn, "Ignoring config " + std::string(key) + " = " + **value +
                                           " (expected a number of milliseconds, 1 ms to 24 h)");
        }
      }
      const std::int64_t old = target->exchange(ms);
      if (old != ms) {
        changed = true;
        context.Log(LogLevel::kInfo,
                    "Job queue setting " + std::string(key) + " is now " + std::to_string(ms) + " ms");
      }
    }
    if (Result<std::vector<QueueInfo>> queues = store->ListQueues(); queues.ok()) {
      std::set<std::string, std::less<>> now_paused;
      for (const QueueInfo& q : *queues) {
        if (q.paused) now_paused.insert(q.name);
      }
      std::lock_guard lock(mu);
      paused = now_paused;
      for (auto& [name, worker] : workers) worker->SetPaused(paused.count(name) > 0);
    } else {
      context.Log(LogLevel::kWarn, "Failed to read the paused queues, " + queues.status().ToString());
    }
    if (changed) WakeAll();  // a new poll interval or timeout applies at once
  }

  // The attempt tokens of every job this node holds.
  std::vector<std::string> HeldTokens() {
    std::vector<std::string> tokens;
    std::lock_guard lock(mu);
    for (auto& [name, worker] : workers) {
      std::vector<std::string> held = worker->HeldTokens();
      tokens.insert(tokens.end(), held.begin(), held.end());
    }
    return tokens;
  }

  // Reads the database's clock; returns its step since the last reading, if it stepped.
  std::optional<std::chrono::nanoseconds> MeasureDatabaseClock() {
    return runtime::ReadDatabaseClock(context, *context.db_clock, *store);
  }

  // After a step of the database's clock the leases in the database say nothing true about this node's jobs:
  // a forward step makes them all look expired to every rescuer. This node renews its own from now, and its
  // rescuer waits `hold` so that the other nodes renew theirs first (docs/reliability.md, "Clock steps").
  void OnClockStep(std::chrono::nanoseconds step, std::chrono::milliseconds hold) {
    std::vector<std::pair<std::vector<std::string>, std::chrono::milliseconds>> held;
    {
      std::lock_guard lock(mu);
      for (auto& [name, worker] : workers) held.emplace_back(worker->HeldTokens(), worker->ClaimLease());
    }
    long renewed = 0;
    for (auto& [tokens, lease] : held) {
      if (tokens.empty()) continue;
      Result<long> count = store->RenewJobLeases(
          {std::move(tokens), std::chrono::duration_cast<std::chrono::microseconds>(lease)});
      if (!count.ok()) {
        context.Log(LogLevel::kWarn,
                    "Failed to renew job leases after a clock step, " + count.status().ToString());
        continue;
      }
      renewed += *count;
    }
    context.Log(LogLevel::kWarn, "The database's clock stepped " + runtime::DatabaseClock::Describe(step) +
                                     " against this node's monotonic clock: renewed the leases of " +
                                     std::to_string(renewed) +
                                     " running jobs of this node; the rescuer waits " +
                                     std::to_string(hold.count() / 1000) + " s before its next sweep");
  }

  // `held`: HeldTokens(), read for this pass.
  void Rescue(std::vector<std::string> held) {
    store::RescueExpiredJobsParams params;
    // This node's own attempts are alive whatever their expires_at says: it runs them, and ends each at its
    // timeout on the monotonic clock.
    params.spare_tokens = std::move(held);
    // Nor what a step of the database's clock since the last reading would expire: that step is handled
    // first, at the next reading.
    params.expired_before = context.db_clock->Now();
    params.backoff_base = std::chrono::duration_cast<std::chrono::microseconds>(context.options.retry.base);
    params.backoff_max = std::chrono::duration_cast<std::chrono::microseconds>(context.options.retry.cap);
    Result<std::vector<store::RescuedJob>> rescued = store->RescueExpiredJobs(params);
    if (!rescued.ok()) {
      context.Log(LogLevel::kWarn, "Job rescuer failed, " + rescued.status().ToString());
      return;
    }
    if (rescued->empty()) return;
    metrics->Rescued(static_cast<double>(rescued->size()));
    for (const store::RescuedJob& job : *rescued) {
      context.Log(LogLevel::kWarn, "Job " + job.id + " timed out and was lost by its worker (attempt " +
                                       std::to_string(job.attempt) + "); it is now " +
                                       std::string(JobStatusName(job.status)));
    }
    WakeAll();
  }

  void Retention() {
    store::DeleteFinishedJobsParams params;
    params.older_than = std::chrono::duration_cast<std::chrono::microseconds>(context.options.retention);
    for (int round = 0; round < kMaxRetentionRounds; ++round) {
      Result<long> deleted = store->DeleteFinishedJobs(params);
      if (!deleted.ok()) {
        context.Log(LogLevel::kWarn, "Job retention cleanup failed, " + deleted.status().ToString());
        return;
      }
      metrics->Deleted(static_cast<double>(*deleted));
      if (*deleted < params.limit) return;
    }
  }

  void Reconcile() {
    Result<long> written = store->ReconcileJobSets();
    if (!written.ok()) {
      context.Log(LogLevel::kWarn, "Reconciling jobs written by SQL failed, " + written.status().ToString());
      return;
    }
    if (*written == 0) return;
    context.Log(LogLevel::kInfo, "Reconciled " + std::to_string(*written) +
                                     " rows of the job queue's working sets with jobs written by SQL");
    WakeAll();
  }

  void MaintenanceLoop(std::stop_token stop) {
    Clock& clock = *context.clock;
    const auto& o = context.options;
    SteadyTime now = clock.SteadyNow();
    SteadyTime config_at = now + o.config_refresh_interval;  // Open() read it already
    SteadyTime rescue_at = now;                              // the first rescue runs at once
    SteadyTime retention_at = now + kStartupSweepDelay;
    SteadyTime reconcile_at = now + kStartupSweepDelay;
    // The listener's first connection asks for a pass too: it waits as well.
    SteadyTime reconcile_not_before = now + kStartupSweepDelay;
    while (!stop.stop_requested()) {
      now = clock.SteadyNow();
      if (std::optional<std::chrono::nanoseconds> step = MeasureDatabaseClock()) {
        // Every live node reads the clock on each pass, at most a config refresh or a rescue interval away.
        const std::chrono::milliseconds hold =
            2 * std::max(o.rescue_interval, std::chrono::milliseconds(1000));
        OnClockStep(*step, hold);
        if (o.rescue_interval.count() > 0) rescue_at = std::max(rescue_at, now + hold);
      }
      if (config_dirty.exchange(false) || now >= config_at) {
        RefreshConfig();
        config_at = now + std::max(o.config_refresh_interval, std::chrono::milliseconds(1));
      }
      const bool rescue_due = o.rescue_interval.count() > 0 && now >= rescue_at;
      if (cancels_dirty.exchange(false) || rescue_due) {
        // One read of the attempts held serves both: the cancel requests for them, and the rescuer's spares
        // (an attempt claimed after this read has a fresh lease, which no rescue can take).
        std::vector<std::string> held = HeldTokens();
        ReadCancelRequests(held);
        if (rescue_due) {
          Rescue(std::move(held));
          rescue_at = now + o.rescue_interval;
        }
      }
      if (o.retention_interval.count() > 0 && now >= retention_at) {
        Retention();
        retention_at = now + o.retention_interval;
      }
      const bool reconcile_due = o.reconcile_interval.count() > 0 && now >= reconcile_at;
      if (reconcile_due || (now >= reconcile_not_before && reconcile_dirty.load())) {
        reconcile_dirty.store(false);  // before the pass: a change notified during it asks for another
        const SteadyTime began = clock.SteadyNow();
        Reconcile();
        // A pass reads every job, so passes asked for by notifications are spaced by nine times the last
        // one's duration (at most a tenth of the time) and at least kReconcileSpacing: a script of many
        // statements costs a few passes, not one each (docs/jobs.md "Jobs written by SQL").
        const SteadyTime ended = clock.SteadyNow();
        reconcile_at = ended + o.reconcile_interval;
        reconcile_not_before = ended + std::max<SteadyTime::duration>(kReconcileSpacing, 9 * (ended - began));
      }
      SteadyTime wake_at = config_at;
      if (o.rescue_interval.count() > 0) wake_at = std::min(wake_at, rescue_at);
      if (o.retention_interval.count() > 0) wake_at = std::min(wake_at, retention_at);
      if (o.reconcile_interval.count() > 0) wake_at = std::min(wake_at, reconcile_at);
      if (reconcile_dirty.load()) wake_at = std::min(wake_at, reconcile_not_before);
      clock.WaitUntil(wake_at, stop, &maintenance_wake);
    }
  }

  void ListenLoop(std::stop_token stop) {
    runtime::ListenUntilStopped(
        context, *store,
        {std::string(store::kJobsChannel), std::string(store::kConfigChannel),
         std::string(store::kJobCancelChannel), std::string(store::kJobsChangedChannel)},
        "job notifications",
        [&] {
          // Something may have been enqueued, the config changed, a running job's cancel been asked for, or
          // plain SQL changed jobs, while not listening.
          WakeAll();
          config_dirty.store(true);
          cancels_dirty.store(true);
          reconcile_dirty.store(true);
          maintenance_wake.Notify();
        },
        [&](const store::Notification& note) {
          if (note.channel == store::kJobsChannel) {
            Wake(note.payload);
          } else if (note.channel == store::kJobCancelChannel) {
            StopRunning(note.payload);
          } else if (note.channel == store::kConfigChannel) {
            config_dirty.store(true);
            maintenance_wake.Notify();
          } else if (note.channel == store::kJobsChangedChannel) {
            reconcile_dirty.store(true);
            maintenance_wake.Notify();
          }
        },
        stop);
  }
};

JobQueue::JobQueue(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

JobQueue::~JobQueue() { Shutdown(); }

Result<std::unique_ptr<JobQueue>> JobQueue::Open(JobQueueOptions options) {
  const std::string url = options.database_url;
  const PostgresPooling pooling = options.pooling;
  return runtime::JobQueueOpener::Open(std::move(options), [url, pooling](const Clock& clock) {
    store::StoreOptions so;
    so.ns = "octop";
    so.pooling = pooling;
    so.clock = &clock;
    so.pool_size = 8;  // producers, completer, maintenance and API calls at once
    return store::OpenJobStore(url, so);
  });
}

Result<std::unique_ptr<JobQueue>> runtime::JobQueueOpener::Open(JobQueueOptions options,
                                                                const JobStoreFactory& factory) {
  if (options.clock == nullptr) options.clock = &Clock::Real();
  if (!options.logger) options.logger = runtime::DefaultLogger();
  if (options.worker_id.empty()) options.worker_id = DefaultWorkerId();
  if (options.wake_claim_interval.count() < 0 ||
      options.wake_claim_interval > std::chrono::milliseconds(100)) {
    return InvalidArgumentError("wake_claim_interval must be between 0 and 100 ms, got " +
                                std::to_string(options.wake_claim_interval.count()) + " us");
  }
  if (options.prefetch < 0 || options.prefetch > 1000) {
    return InvalidArgumentError("prefetch must be between 0 and 1000, got " +
                                std::to_string(options.prefetch));
  }
  if (options.prefetch > 0 && options.prefetch_ttl.count() <= 0) {
    return InvalidArgumentError("prefetch_ttl must be longer than zero when prefetch is on");
  }
  auto impl = std::make_unique<JobQueue::Impl>(std::move(options));
  runtime::JobQueueContext& ctx = impl->context;
  const JobQueueOptions& o = ctx.options;
  OCTOP_ASSIGN_OR_RETURN(impl->store, factory(*o.clock));
  OCTOP_RETURN_IF_ERROR(impl->store->Migrate());
  impl->metrics = std::make_unique<runtime::JobMetrics>(o.metrics_registry);
  ctx.clock = o.clock;
  ctx.logger = o.logger;
  ctx.shutdown = impl->stopper.get_token();
  ctx.db_clock.emplace(*o.clock);
  ctx.store = impl->store.get();
  ctx.metrics = impl->metrics.get();
  ctx.worker_id = o.worker_id;
  ctx.poll_interval_ms = o.default_poll_interval.count();
  ctx.default_timeout_ms = o.default_timeout.count();
  JobQueue::Impl* raw = impl.get();
  impl->completer =
      std::make_unique<runtime::JobCompleter>(ctx, [raw](const std::string& queue) { raw->Wake(queue); });
  impl->RefreshConfig();
  impl->MeasureDatabaseClock();  // the first reading: a step is measured against it
  return std::unique_ptr<JobQueue>(new JobQueue(std::move(impl)));
}

Status JobQueue::WithTransaction(const std::function<Status(Transaction&)>& fn) {
  return impl_->store->WithTransaction(fn);
}

Result<EnqueueResult> JobQueue::Enqueue(const JobSpec& spec) {
  OCTOP_ASSIGN_OR_RETURN(std::vector<EnqueueResult> results, EnqueueMany({spec}));
  return results.front();
}

Result<std::vector<EnqueueResult>> JobQueue::EnqueueMany(const std::vector<JobSpec>& specs) {
  if (specs.empty()) return std::vector<EnqueueResult>{};
  OCTOP_ASSIGN_OR_RETURN(std::vector<EnqueueResult> enqueued, impl_->store->EnqueueJobs(specs));
  std::set<std::string_view> queues;
  for (std::size_t i = 0; i < enqueued.size() && i < specs.size(); ++i) {
    if (!enqueued[i].existing) {
      impl_->metrics->Enqueued(specs[i].queue, specs[i].kind);
      queues.insert(specs[i].queue);
    }
  }
  // The notification reaches other nodes; this node's own producers need not wait for its round trip.
  for (std::string_view q : queues) impl_->Wake(q);
  return enqueued;
}

Result<EnqueueResult> JobQueue::EnqueueTx(Transaction& tx, const JobSpec& spec) {
  OCTOP_ASSIGN_OR_RETURN(std::vector<EnqueueResult> enqueued, tx.EnqueueJobs({spec}));
  if (enqueued.empty()) return InternalError("EnqueueJobs returned no result");
  if (!enqueued.front().existing) impl_->metrics->Enqueued(spec.queue, spec.kind);
  return std::move(enqueued.front());
}

void JobQueue::WakeAll() { impl_->WakeAll(); }

Status JobQueue::RegisterHandler(std::string kind, JobHandler handler, JobHandlerOptions options) {
  if (kind.empty() || kind.size() > store::kMaxJobNameBytes) {
    return InvalidArgumentError("Invalid job kind '" + kind + "': expected 1 to 255 bytes");
  }
  if (!handler) return InvalidArgumentError("The handler of job kind '" + kind + "' is empty");
  if (options.timeout.has_value() && options.timeout->count() <= 0) {
    return InvalidArgumentError("The timeout of job kind '" + kind + "' must be longer than zero");
  }
  impl_->metrics->AddKnownKind(kind);
  impl_->context.handlers.Set(std::move(kind), std::move(handler), options);
  impl_->WakeAll();
  return Status::Ok();
}

Status JobQueue::AddWorkers(std::string queue, int concurrency) {
  if (queue.empty() || queue.size() > store::kMaxJobNameBytes) {
    return InvalidArgumentError("Invalid queue name '" + queue + "': expected 1 to 255 bytes");
  }
  if (concurrency < 1 || concurrency > kMaxConcurrency) {
    return InvalidArgumentError("The concurrency of queue '" + queue + "' must be between 1 and " +
                                std::to_string(kMaxConcurrency) + ", got " + std::to_string(concurrency));
  }
  std::lock_guard lock(impl_->mu);
  if (impl_->shut_down) return FailedPreconditionError("The job queue is shut down");
  impl_->metrics->AddKnownQueue(queue);
  auto it = impl_->workers.find(queue);
  if (it != impl_->workers.end()) {
    it->second->Grow(concurrency);
    return Status::Ok();
  }
  auto worker =
      std::make_unique<runtime::JobQueueWorker>(impl_->context, *impl_->completer, queue, concurrency);
  worker->SetPaused(impl_->paused.count(queue) > 0);
  if (impl_->started) worker->Start();
  impl_->workers.emplace(std::move(queue), std::move(worker));
  return Status::Ok();
}

Status JobQueue::Start() {
  std::lock_guard lock(impl_->mu);
  if (impl_->shut_down) return FailedPreconditionError("The job queue is shut down");
  if (impl_->started) return Status::Ok();
  impl_->started = true;
  impl_->completer->Start();
  for (auto& [name, worker] : impl_->workers) worker->Start();
  Impl* impl = impl_.get();
  impl_->listener = std::thread([impl] { impl->ListenLoop(impl->stopper.get_token()); });
  impl_->maintenance = std::thread([impl] { impl->MaintenanceLoop(impl->stopper.get_token()); });
  return Status::Ok();
}

void JobQueue::Shutdown() {
  std::vector<runtime::JobQueueWorker*> workers;
  std::thread listener;
  std::thread maintenance;
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->shut_down) return;
    impl_->shut_down = true;
    for (auto& [name, worker] : impl_->workers) workers.push_back(worker.get());
    listener = std::move(impl_->listener);
    maintenance = std::move(impl_->maintenance);
  }
  impl_->stopper.request_stop();
  // Workers stop one after the other, but their grace periods overlap: each waits only for what still runs.
  std::vector<std::thread> stoppers;
  for (runtime::JobQueueWorker* worker : workers) {
    stoppers.emplace_back(
        [worker, grace = impl_->context.options.shutdown_grace] { worker->Shutdown(grace); });
  }
  for (std::thread& t : stoppers) t.join();
  if (listener.joinable()) listener.join();
  if (maintenance.joinable()) maintenance.join();
  impl_->completer->Join();
}

Result<JobInfo> JobQueue::GetJob(std::string_view id) { return impl_->store->GetJob(id); }

// The store checks limit and offset (store/preconditions.cc).
Result<std::vector<JobInfo>> JobQueue::ListJobs(const JobFilter& filter) {
  return impl_->store->ListJobs(filter);
}

Result<JobSummary> JobQueue::Summarize() {
  JobSummary out;
  OCTOP_ASSIGN_OR_RETURN(out.counts, impl_->store->SummarizeJobs());
  OCTOP_ASSIGN_OR_RETURN(out.latest_failed,
                         impl_->store->ListFailedJobs({.queue = std::nullopt, .limit = kLatestFailedShown}));
  OCTOP_ASSIGN_OR_RETURN(std::vector<QueueInfo> queues, impl_->store->ListQueues());
  for (const QueueInfo& q : queues) {
    if (q.paused) out.paused_queues.push_back(q.name);
  }
  return out;
}

Result<JobStats> JobQueue::Stats(const JobStatsFilter& filter) {
  return impl_->store->ComputeJobStats(filter);
}

Status JobQueue::RetryJob(std::string_view id) {
  OCTOP_RETURN_IF_ERROR(impl_->store->RetryJob({std::string(id)}));
  impl_->WakeAll();
  return Status::Ok();
}

Status JobQueue::CancelJob(std::string_view id) {
  Result<store::CancelJobResult> result = impl_->store->CancelJob({std::string(id)});
  if (!result.ok()) return result.status();
  // Running: if it runs here, stop it now rather than when the notification comes back.
  if (*result == store::CancelJobResult::kStopRequested) impl_->StopRunning(id);
  return Status::Ok();
}

Status JobQueue::PauseQueue(std::string_view queue) {
  OCTOP_RETURN_IF_ERROR(impl_->store->SetQueuePaused(queue, true));
  std::lock_guard lock(impl_->mu);
  impl_->paused.insert(std::string(queue));
  if (auto it = impl_->workers.find(queue); it != impl_->workers.end()) it->second->SetPaused(true);
  return Status::Ok();
}

Status JobQueue::ResumeQueue(std::string_view queue) {
  OCTOP_RETURN_IF_ERROR(impl_->store->SetQueuePaused(queue, false));
  std::lock_guard lock(impl_->mu);
  impl_->paused.erase(std::string(queue));
  if (auto it = impl_->workers.find(queue); it != impl_->workers.end()) it->second->SetPaused(false);
  return Status::Ok();
}

Status JobQueue::SetConfig(std::string_view key, std::string_view json_value) {
  OCTOP_RETURN_IF_ERROR(impl_->store->SetConfig(key, json_value));
  impl_->config_dirty.store(true);
  impl_->maintenance_wake.Notify();
  return Status::Ok();
}

std::shared_ptr<prometheus::Registry> JobQueue::metrics_registry() const {
  return impl_->metrics->registry();
}

std::chrono::milliseconds JobQueue::poll_interval() const { return impl_->context.PollInterval(); }
std::chrono::milliseconds JobQueue::default_timeout() const { return impl_->context.DefaultTimeout(); }

}  // namespace octop
