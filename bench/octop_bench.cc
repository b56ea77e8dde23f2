// octop_bench: octop's figures (docs/performance.md), measured end to end through the public API
// (octop/queue.h, octop/scheduler.h) on the real clock, against PostgreSQL (--pg-url) and/or the embedded
// SQLite backend
// (--sqlite-dir). Every figure is appended to --out as one JSON line in the shape of the benchmark result
// contract (docs/performance.md), and a short table of what was measured goes to stdout.
//
// Suites: queue (throughput_preinserted, throughput_enqueue_drain at concurrency 1, 10, 32), sustained
// (PostgreSQL: enqueue+drain of 200,000 jobs into an empty table and into one holding 1,000,000 finished
// jobs, with the tables' sizes), latency (enqueue->start p50/p95/p99), scheduler (trigger->start through the
// REST API and cron fire lateness) and idle (statements per second of one idle node with 10, 1,000 and 10,000
// registered global tasks, from pg_stat_statements, and memory per registered task). --quick shrinks every
// size for a smoke test.
//
// Not Google Benchmark: each figure is one long run against a live database server (a drain of 20,000 jobs, a
// 20 s idle window), not a loop of short repeatable iterations, so its fixture/iteration model does not fit.
//
// Every figure gets fresh tables: a new PostgreSQL schema (dropped afterwards) or a new SQLite directory.
// Producers of the queue figures are separate JobQueue instances (own connections, never started), so workers
// are woken the way another node's enqueue wakes them: through the database notification.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <httplib.h>
#include <libpq-fe.h>
#include <nlohmann/json.hpp>
#include <prometheus/registry.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <octop/queue.h>
#include <octop/scheduler.h>

#include "http/api_server.h"
#include "runtime/job_queue_opener.h"
#include "runtime/scheduler_opener.h"
#include "store/job_store.h"
#include "store/task_store.h"

namespace octop::bench {
namespace {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

struct Sizes {
  int jobs = 20000;
  int sustained_jobs = 200000;
  int history_rows = 1000000;
  int latency_samples = 500;
  int trigger_samples = 200;
  int cron_fires = 60;
  std::chrono::seconds idle_window{20};
  std::chrono::seconds idle_settle{5};
  std::vector<int> idle_tasks{10, 1000, 10000};
};

Sizes QuickSizes() {
  Sizes s;
  // Sized so that --quick --suite all stays near a minute on the 2-core machine.
  s.jobs = 1000;
  s.sustained_jobs = 2000;
  s.history_rows = 10000;
  s.latency_samples = 100;
  s.trigger_samples = 50;
  s.cron_fires = 5;
  s.idle_window = 5s;  // at least one 5 s readiness poll falls inside
  s.idle_settle = 1s;
  s.idle_tasks = {10, 1000, 10000};
  return s;
}

constexpr int kProducers = 8;
constexpr int kLatencyConcurrency = 10;
constexpr int kWarmupSamples = 10;
constexpr auto kFigureDeadline = 5min;
const char* const kKind = "noop";
const char* const kIdleRole = "octop_bench_idle";
// Marks the harness's own statements, which a figure's server time leaves out.
const char* const kHarnessMark = "/* octop_bench */";

// ---- Output

class Sink {
 public:
  explicit Sink(const std::string& path) {
    if (!path.empty()) {
      out_.open(path, std::ios::app);
      if (!out_) throw std::runtime_error("cannot open --out " + path);
    }
  }

  void Add(const std::string& backend, const std::string& metric, nlohmann::json params, double value,
           const std::string& unit) {
    nlohmann::json line = {{"system", "octop"}, {"backend", backend}, {"metric", metric},
                           {"params", params},  {"value", value},     {"unit", unit}};
    if (out_.is_open()) {
      out_ << line.dump() << "\n";
      out_.flush();
    }
    rows_.push_back({backend, metric, params.dump(), value, unit});
    std::printf("  %-8s %-26s %-44s %12.2f %s\n", backend.c_str(), metric.c_str(), params.dump().c_str(),
                value, unit.c_str());
    std::fflush(stdout);
  }

  void PrintTable() const {
    std::printf("\n%-8s  %-26s  %-44s  %12s  %s\n", "backend", "metric", "params", "value", "unit");
    std::printf("%s\n", std::string(108, '-').c_str());
    for (const Row& r : rows_) {
      std::printf("%-8s  %-26s  %-44s  %12.2f  %s\n", r.backend.c_str(), r.metric.c_str(), r.params.c_str(),
                  r.value, r.unit.c_str());
    }
  }

 private:
  struct Row {
    std::string backend, metric, params;
    double value;
    std::string unit;
  };
  std::ofstream out_;
  std::vector<Row> rows_;
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  // Nearest rank: the smallest sample with at least p of the samples at or below it.
  const double rank = p * static_cast<double>(v.size());
  std::size_t index = static_cast<std::size_t>(std::ceil(rank));
  index = std::clamp<std::size_t>(index, 1, v.size());
  return v[index - 1];
}

double Millis(Steady::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

void Check(const Status& s, const std::string& what) {
  if (!s.ok()) throw std::runtime_error(what + ": " + s.ToString());
}

template <typename T>
T Take(Result<T> r, const std::string& what) {
  if (!r.ok()) throw std::runtime_error(what + ": " + r.status().ToString());
  return std::move(r).value();
}

// ---- PostgreSQL administration (schemas, the idle role, pg_stat_statements) through plain libpq

class PgAdmin {
 public:
  explicit PgAdmin(const std::string& url) : conn_(PQconnectdb(url.c_str())) {
    if (PQstatus(conn_) != CONNECTION_OK) {
      const std::string error = PQerrorMessage(conn_);
      PQfinish(conn_);
      throw std::runtime_error("cannot connect to " + url + ": " + error);
    }
    Query("SET client_min_messages TO warning");  // no NOTICE for dropping a schema that is not there
  }
  ~PgAdmin() { PQfinish(conn_); }
  PgAdmin(const PgAdmin&) = delete;
  PgAdmin& operator=(const PgAdmin&) = delete;

  // Runs `sql`; returns the first column of the first row ("" when none).
  std::string Query(const std::string& sql) {
    PGresult* r = PQexec(conn_, sql.c_str());
    const ExecStatusType status = PQresultStatus(r);
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
      const std::string error = PQresultErrorMessage(r);
      PQclear(r);
      throw std::runtime_error("SQL failed (" + sql + "): " + error);
    }
    std::string value;
    if (status == PGRES_TUPLES_OK && PQntuples(r) > 0 && PQnfields(r) > 0) value = PQgetvalue(r, 0, 0);
    PQclear(r);
    return value;
  }

  void DropSchema(const std::string& schema) { Query("DROP SCHEMA IF EXISTS \"" + schema + "\" CASCADE"); }

 private:
  PGconn* conn_;
};

// `url` with its user replaced by `user` (postgresql://user@host:port/db).
std::string WithUser(const std::string& url, const std::string& user) {
  const std::size_t scheme = url.find("://");
  if (scheme == std::string::npos) throw std::runtime_error("--pg-url must be postgresql://...: " + url);
  const std::size_t start = scheme + 3;
  const std::size_t slash = url.find('/', start);
  const std::size_t at = url.find('@', start);
  if (at != std::string::npos && (slash == std::string::npos || at < slash)) {
    return url.substr(0, start) + user + url.substr(at);
  }
  return url.substr(0, start) + user + "@" + url.substr(start);
}

// ---- Backends: where a figure's fresh tables live

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // A fresh location for one figure; every store of the figure opens the same one.
  virtual void NewFigure(const std::string& label) = 0;
  virtual void EndFigure() = 0;
  virtual Result<std::unique_ptr<store::JobStore>> OpenFigureStore(const Clock& clock, int pool_size) = 0;
  // The URL a Scheduler takes, and its store factory for the figure's location.
  virtual std::string url() const = 0;
  virtual runtime::StoreFactory SchedulerStores() = 0;
  // The server's statement statistics (pg_stat_statements), for a figure's server time per job: cleared
  // before a figure, read after it. Backends without a server have none.
  virtual void ResetServerStats() {}
  virtual std::optional<double> ServerExecMs() { return std::nullopt; }
};

class PgBackend final : public Backend {
 public:
  explicit PgBackend(std::string url) : url_(std::move(url)), admin_(url_) {
    try {
      admin_.Query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements");
      statements_ = true;
    } catch (const std::exception& e) {
      std::cerr << "octop_bench: no pg_stat_statements, so no server time per job: " << e.what() << "\n";
    }
  }
  std::string name() const override { return "postgres"; }
  void ResetServerStats() override {
    if (statements_) admin_.Query(std::string("SELECT pg_stat_statements_reset() ") + kHarnessMark);
  }
  // Execution time of every statement run in this database since the reset (top-level statements, as
  // pg_stat_statements tracks by default), without the harness's own and without transaction control:
  // a COMMIT's time is its wait for the WAL flush, which a statement committed implicitly does not count
  // either (docs/performance.md, "Figure definitions").
  std::optional<double> ServerExecMs() override {
    if (!statements_) return std::nullopt;
    return std::stod(admin_.Query(
        std::string("SELECT coalesce(sum(total_exec_time), 0) FROM pg_stat_statements "
                    "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                    "AND query NOT LIKE '%") +
        kHarnessMark + "%' AND query !~* '^\\s*(begin|commit|rollback|start transaction|end)\\M'"));
  }
  void NewFigure(const std::string& label) override {
    schema_ = "bench_" + label + "_" + std::to_string(::getpid()) + "_" + std::to_string(++counter_);
    admin_.DropSchema(schema_);
  }
  void EndFigure() override { admin_.DropSchema(schema_); }
  Result<std::unique_ptr<store::JobStore>> OpenFigureStore(const Clock& clock, int pool_size) override {
    store::StoreOptions options;
    options.ns = schema_;
    options.clock = &clock;
    options.pool_size = pool_size;
    options.pooling = pooling_;
    return store::OpenJobStore(store_url_.empty() ? url_ : store_url_, options);
  }
  // The job stores go through a pooler in transaction mode at `url` (--through-pooler), with the settings
  // that takes (docs/configuration.md, "Behind PgBouncer"): unnamed statements, LISTEN on the direct URL.
  void ThroughPooler(std::string url) {
    store_url_ = std::move(url);
    pooling_ = {.prepared_statements = false, .listen_url = url_};
  }
  std::string url() const override { return url_; }
  runtime::StoreFactory SchedulerStores() override { return SchedulerStoresAs(url_); }
  // A Scheduler store factory connecting as another user (the idle figures count that user's statements).
  runtime::StoreFactory SchedulerStoresAs(const std::string& url) {
    const std::string schema = schema_;
    return [url, schema](const std::string& plugin_id, const Clock& clock) {
      store::StoreOptions options;
      options.ns = schema + "_" + plugin_id;
      options.clock = &clock;
      return store::OpenTaskStore(url, options);
    };
  }
  std::string schema() const { return schema_; }
  PgAdmin& admin() { return admin_; }

 private:
  std::string url_;
  std::string store_url_;  // empty: url_
  PostgresPooling pooling_;
  PgAdmin admin_;
  bool statements_ = false;
  std::string schema_;
  int counter_ = 0;
};

class SqliteBackend final : public Backend {
 public:
  explicit SqliteBackend(std::filesystem::path root) : root_(std::move(root)) {
    std::filesystem::create_directories(root_);
  }
  std::string name() const override { return "sqlite"; }
  void NewFigure(const std::string& label) override {
    dir_ = root_ / (label + "-" + std::to_string(::getpid()) + "-" + std::to_string(++counter_));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void EndFigure() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  Result<std::unique_ptr<store::JobStore>> OpenFigureStore(const Clock& clock, int pool_size) override {
    store::StoreOptions options;
    options.ns = "octop";
    options.clock = &clock;
    options.pool_size = pool_size;
    return store::OpenJobStore(url(), options);
  }
  std::string url() const override { return "sqlite:" + dir_.string(); }
  runtime::StoreFactory SchedulerStores() override {
    return {};
  }  // the default: one file per plugin in url()

 private:
  std::filesystem::path root_;
  std::filesystem::path dir_;
  int counter_ = 0;
};

// ---- Queue helpers

// Completions durably written by a queue: octop_jobs_completed_total counts a batch after its commit.
double CompletedCount(const JobQueue& queue) {
  double total = 0;
  for (const prometheus::MetricFamily& family : queue.metrics_registry()->Collect()) {
    if (family.name != "octop_jobs_completed_total") continue;
    for (const prometheus::ClientMetric& metric : family.metric) total += metric.counter.value;
  }
  return total;
}

// The worker queue's claims so far (octop_jobs_claim_duration_seconds, octop_jobs_claimed_total): how many,
// how long the producer spent inside them, and the jobs they brought.
struct ClaimTotals {
  double claims = 0;
  double seconds = 0;
  double jobs = 0;
};

ClaimTotals Claims(const JobQueue& queue) {
  ClaimTotals totals;
  for (const prometheus::MetricFamily& family : queue.metrics_registry()->Collect()) {
    for (const prometheus::ClientMetric& metric : family.metric) {
      if (family.name == "octop_jobs_claim_duration_seconds") {
        totals.claims += static_cast<double>(metric.histogram.sample_count);
        totals.seconds += metric.histogram.sample_sum;
      } else if (family.name == "octop_jobs_claimed_total") {
        totals.jobs += metric.counter.value;
      }
    }
  }
  return totals;
}

// Waits (polling the in-process counter, no database load) until `queue` has written `target` completions.
// Returns the instant it saw them.
Steady::time_point WaitForCompletions(const JobQueue& queue, double target) {
  const auto deadline = Steady::now() + kFigureDeadline;
  while (CompletedCount(queue) < target) {
    if (Steady::now() > deadline) throw std::runtime_error("jobs did not complete within the deadline");
    std::this_thread::sleep_for(200us);
  }
  return Steady::now();
}

// The worker queues' JobQueueOptions::prefetch (--prefetch) and wake_claim_interval (--wake-claim-us).
int g_prefetch = 0;
std::chrono::microseconds g_wake_claim_interval = JobQueueOptions{}.wake_claim_interval;

std::unique_ptr<JobQueue> OpenQueue(Backend& backend, int pool_size = 8) {
  JobQueueOptions options;
  options.prefetch = g_prefetch;
  options.wake_claim_interval = g_wake_claim_interval;
  options.database_url = backend.url();
  // A benchmark must not pay for jobs it did not ask for: no retention sweep in the middle of a drain.
  options.retention_interval = 0ms;
  return Take(runtime::JobQueueOpener::Open(options,
                                            [&backend, pool_size](const Clock& clock) {
                                              return backend.OpenFigureStore(clock, pool_size);
                                            }),
              "JobQueue::Open");
}

// CPU time spent while a figure runs, to set against the 2 cores' budget (docs/performance.md, "Where the
// time goes"): the whole machine's (every process: PostgreSQL, its WAL writer, this process; /proc/stat, busy
// ticks only) and this process's alone (getrusage).
struct CpuSample {
  double machine_s = 0;
  double self_s = 0;
  // This process's context switches, voluntary and not: a thread waiting or woken.
  double self_switches = 0;
};

CpuSample SampleCpu() {
  CpuSample sample;
  std::ifstream stat("/proc/stat");
  std::string cpu;
  long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0;
  stat >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq;
  sample.machine_s =
      static_cast<double>(user + nice + system + irq + softirq) / static_cast<double>(::sysconf(_SC_CLK_TCK));
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  const auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  sample.self_s = seconds(usage.ru_utime) + seconds(usage.ru_stime);
  sample.self_switches = static_cast<double>(usage.ru_nvcsw + usage.ru_nivcsw);
  return sample;
}

CpuSample Since(const CpuSample& from) {
  const CpuSample now = SampleCpu();
  return {now.machine_s - from.machine_s, now.self_s - from.self_s, now.self_switches - from.self_switches};
}

// What a throughput figure cost: CPU, and the server's statement execution time (when the backend has a
// server). Started just before t0, ended just after t1.
struct FigureCost {
  CpuSample cpu;
  std::optional<double> server_exec_ms;
};

FigureCost StartCost(Backend& backend) {
  backend.ResetServerStats();
  return {SampleCpu(), std::nullopt};
}

FigureCost CostSince(Backend& backend, const FigureCost& start) {
  const CpuSample cpu = Since(start.cpu);
  return {cpu, backend.ServerExecMs()};
}

void AddCost(Backend& backend, Sink& sink, const std::string& figure, int concurrency, int jobs,
             const FigureCost& used) {
  const nlohmann::json params = {{"figure", figure}, {"concurrency", concurrency}, {"jobs", jobs}};
  sink.Add(backend.name(), "cpu_us_per_job", params, used.cpu.machine_s * 1e6 / jobs, "us");
  sink.Add(backend.name(), "client_cpu_us_per_job", params, used.cpu.self_s * 1e6 / jobs, "us");
  sink.Add(backend.name(), "client_switches_per_job", params, used.cpu.self_switches / jobs, "switches");
  if (used.server_exec_ms) {
    sink.Add(backend.name(), "server_exec_us_per_job", params, *used.server_exec_ms * 1e3 / jobs, "us");
  }
}

// The claim cycle of a figure whose worker queue was opened for it: the share of the span [t0, t1] its
// producer spent inside claims, the jobs a claim brought on average, and a claim's round trip per job it
// brought.
void AddClaims(Backend& backend, Sink& sink, const std::string& figure, int concurrency, int jobs,
               const ClaimTotals& claims, double span_seconds) {
  if (claims.claims == 0 || claims.jobs == 0) return;
  const nlohmann::json params = {{"figure", figure}, {"concurrency", concurrency}, {"jobs", jobs}};
  sink.Add(backend.name(), "claim_share", params, claims.seconds / span_seconds, "ratio");
  sink.Add(backend.name(), "jobs_per_claim", params, claims.jobs / claims.claims, "jobs");
  sink.Add(backend.name(), "claim_us_per_job", params, claims.seconds * 1e6 / claims.jobs, "us");
}

void Preinsert(JobQueue& producer, int jobs) {
  constexpr int kBatch = 1000;
  for (int done = 0; done < jobs; done += kBatch) {
    std::vector<JobSpec> specs(static_cast<std::size_t>(std::min(kBatch, jobs - done)));
    for (JobSpec& spec : specs) spec.kind = kKind;
    Take(producer.EnqueueMany(specs), "EnqueueMany");
  }
}

void ThroughputPreinserted(Backend& backend, Sink& sink, int concurrency, int jobs) {
  backend.NewFigure("pre" + std::to_string(concurrency));
  {
    auto producer = OpenQueue(backend, 1);
    Preinsert(*producer, jobs);
    auto worker = OpenQueue(backend);
    Check(worker->RegisterHandler(kKind, [](const JobContext&) { return JobResult::Done(); }),
          "RegisterHandler");
    Check(worker->AddWorkers("default", concurrency), "AddWorkers");
    const FigureCost cost0 = StartCost(backend);
    const auto t0 = Steady::now();
    Check(worker->Start(), "Start");
    const auto t1 = WaitForCompletions(*worker, jobs);
    const ClaimTotals claims = Claims(*worker);  // in process, before the cost's query: no claim after t1
    const FigureCost used = CostSince(backend, cost0);
    const double seconds = std::chrono::duration<double>(t1 - t0).count();
    sink.Add(backend.name(), "throughput_preinserted", {{"concurrency", concurrency}, {"jobs", jobs}},
             jobs / seconds, "jobs/s");
    AddCost(backend, sink, "preinserted", concurrency, jobs, used);
    AddClaims(backend, sink, "preinserted", concurrency, jobs, claims, seconds);
    worker->Shutdown();
  }
  backend.EndFigure();
}

// Enqueue+drain in the current figure: `concurrency` workers started, then kProducers threads enqueue `jobs`
// one at a time; jobs/s from the first enqueue to the last completion. `before_start` runs once the workers'
// queue has migrated the figure's namespace, before anything is enqueued.
double EnqueueDrain(Backend& backend, int concurrency, int jobs,
                    const std::function<void()>& before_start = {}, FigureCost* cost_used = nullptr) {
  auto worker = OpenQueue(backend);
  if (before_start) before_start();
  Check(worker->RegisterHandler(kKind, [](const JobContext&) { return JobResult::Done(); }),
        "RegisterHandler");
  Check(worker->AddWorkers("default", concurrency), "AddWorkers");
  Check(worker->Start(), "Start");
  // One producer queue shared by the producer threads, with a connection each, as the peers' harnesses do
  // (one client object, a pool of `producers` connections, that many concurrent enqueue loops).
  auto producer = OpenQueue(backend, kProducers);

  std::mutex mu;
  std::condition_variable cv;
  bool go = false;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int p = 0; p < kProducers; ++p) {
    const int count = jobs / kProducers + (p < jobs % kProducers ? 1 : 0);
    threads.emplace_back([&, count] {
      {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return go; });
      }
      JobSpec spec;
      spec.kind = kKind;
      for (int i = 0; i < count; ++i) {
        if (!producer->Enqueue(spec).ok()) failures.fetch_add(1);
      }
    });
  }
  const FigureCost cost0 = cost_used != nullptr ? StartCost(backend) : FigureCost{};
  const auto t0 = Steady::now();
  {
    std::lock_guard lock(mu);
    go = true;
  }
  cv.notify_all();
  for (std::thread& t : threads) t.join();
  if (failures.load() > 0) throw std::runtime_error(std::to_string(failures.load()) + " enqueues failed");
  const auto t1 = WaitForCompletions(*worker, jobs);
  if (cost_used != nullptr) *cost_used = CostSince(backend, cost0);
  worker->Shutdown();
  return jobs / std::chrono::duration<double>(t1 - t0).count();
}

void ThroughputEnqueueDrain(Backend& backend, Sink& sink, int concurrency, int jobs) {
  backend.NewFigure("drain" + std::to_string(concurrency));
  FigureCost used;
  const double rate = EnqueueDrain(backend, concurrency, jobs, {}, &used);
  sink.Add(backend.name(), "throughput_enqueue_drain",
           {{"concurrency", concurrency}, {"jobs", jobs}, {"producers", kProducers}}, rate, "jobs/s");
  AddCost(backend, sink, "enqueue_drain", concurrency, jobs, used);
  backend.EndFigure();
}

// The sustained figure (docs/performance.md): enqueue+drain of `jobs` at concurrency 10 into an empty table,
// then into one that already holds `history` finished jobs, and the job tables' sizes after each. The history
// is inserted by SQL (a million enqueues would take minutes) with the columns a finished job has, then VACUUM
// ANALYZE, as autovacuum would have left a table that grew over days.
void Sustained(PgBackend& backend, Sink& sink, int jobs, int history) {
  constexpr int kConcurrency = 10;
  for (const int rows : {0, history}) {
    backend.NewFigure("sustain" + std::to_string(rows));
    const std::string schema = "\"" + backend.schema() + "\"";
    const double rate = EnqueueDrain(backend, kConcurrency, jobs, [&] {
      if (rows == 0) return;
      backend.admin().Query(
          "INSERT INTO " + schema +
          ".octop_jobs (id, queue, kind, payload, priority, scheduled_at, status, attempt, "
          "max_retries, attempt_token, created_at, started_at, completed_at, worker_id) "
          "SELECT gen_random_uuid(), 'default', 'noop', '{}', 0, t, 'success', 1, 3, "
          "gen_random_uuid()::text, t, t, t, 'history' FROM (SELECT now() - interval '1 day' + "
          "i * interval '1 ms' AS t FROM generate_series(1, " +
          std::to_string(rows) + ") i) g");
      backend.admin().Query("VACUUM ANALYZE " + schema + ".octop_jobs");
    });
    sink.Add(backend.name(), "throughput_sustained",
             {{"concurrency", kConcurrency}, {"jobs", jobs}, {"producers", kProducers}, {"history", rows}},
             rate, "jobs/s");
    const auto size = [&](const std::string& function, const std::string& table) {
      return std::stod(backend.admin().Query("SELECT " + function + "('" + schema + "." + table + "')"));
    };
    sink.Add(backend.name(), "jobs_table_bytes", {{"history", rows}, {"jobs", jobs}},
             size("pg_table_size", "octop_jobs"), "bytes");
    sink.Add(backend.name(), "jobs_index_bytes", {{"history", rows}, {"jobs", jobs}},
             size("pg_indexes_size", "octop_jobs"), "bytes");
    double sets = 0;
    for (const char* table : {"octop_waiting_jobs", "octop_job_keys", "octop_job_leases"}) {
      sets += size("pg_total_relation_size", table);
    }
    sink.Add(backend.name(), "job_sets_bytes", {{"history", rows}, {"jobs", jobs}}, sets, "bytes");
    backend.EndFigure();
  }
}

void Latency(Backend& backend, Sink& sink, int samples) {
  backend.NewFigure("latency");
  {
    std::mutex mu;
    std::condition_variable cv;
    std::optional<Steady::time_point> started;  // guarded by mu
    auto worker = OpenQueue(backend);
    Check(worker->RegisterHandler(kKind,
                                  [&](const JobContext&) {
                                    const auto now = Steady::now();
                                    {
                                      std::lock_guard lock(mu);
                                      started = now;
                                    }
                                    cv.notify_all();
                                    return JobResult::Done();
                                  }),
          "RegisterHandler");
    Check(worker->AddWorkers("default", kLatencyConcurrency), "AddWorkers");
    Check(worker->Start(), "Start");
    auto producer = OpenQueue(backend, 1);
    JobSpec spec;
    spec.kind = kKind;
    std::vector<double> ms;
    for (int i = 0; i < samples + kWarmupSamples; ++i) {
      {
        std::lock_guard lock(mu);
        started.reset();
      }
      const auto t0 = Steady::now();
      Take(producer->Enqueue(spec), "Enqueue");
      Steady::time_point t1;
      {
        std::unique_lock lock(mu);
        if (!cv.wait_for(lock, 30s, [&] { return started.has_value(); })) {
          throw std::runtime_error("a job did not start within 30 s");
        }
        t1 = *started;
      }
      if (i >= kWarmupSamples) ms.push_back(Millis(t1 - t0));
      // Idle again: the completion is written before the next enqueue, so each sample sees an idle worker.
      WaitForCompletions(*worker, i + 1);
    }
    const nlohmann::json params = {{"jobs", samples}};
    sink.Add(backend.name(), "latency_p50", params, Percentile(ms, 0.50), "ms");
    sink.Add(backend.name(), "latency_p95", params, Percentile(ms, 0.95), "ms");
    sink.Add(backend.name(), "latency_p99", params, Percentile(ms, 0.99), "ms");
    worker->Shutdown();
  }
  backend.EndFigure();
}

// ---- Scheduler figures

TaskDefinition GlobalTask(std::string id, TaskFrequency frequency, TaskFunction fn) {
  TaskDefinition task;
  task.id = std::move(id);
  task.frequency = std::move(frequency);
  task.timeout = Duration::FromMilliseconds(60000);
  task.scope = TaskScope::kGlobal;
  task.fn = std::move(fn);
  return task;
}

// A scheduler on the backend's figure stores.
std::unique_ptr<Scheduler> SchedulerFor(Backend& backend) {
  SchedulerOptions options;
  options.database_url = backend.url();
  return runtime::SchedulerOpener::Create(options, backend.SchedulerStores());
}

void TriggerStart(Backend& backend, Sink& sink, int samples) {
  backend.NewFigure("trigger");
  {
    std::mutex mu;
    std::condition_variable cv;
    std::optional<Steady::time_point> entered;  // guarded by mu
    std::unique_ptr<Scheduler> scheduler = SchedulerFor(backend);
    PluginScheduler& plugin = scheduler->ForPlugin("bench");
    Check(plugin.ScheduleTask(GlobalTask("manual", ManualTrigger{},
                                         [&](std::stop_token) {
                                           const auto now = Steady::now();
                                           {
                                             std::lock_guard lock(mu);
                                             entered = now;
                                           }
                                           cv.notify_all();
                                         })),
          "ScheduleTask");
    http::ApiServerOptions server_options;
    server_options.port = 0;
    http::ApiServer server(*scheduler, server_options);
    Check(server.Start(), "ApiServer::Start");
    httplib::Client client("127.0.0.1", server.port());
    const std::string path = "/api/bench/.backstage/scheduler/v1/tasks/manual/trigger";
    std::vector<double> ms;
    const auto deadline = Steady::now() + kFigureDeadline;
    for (int i = 0; i < samples + kWarmupSamples;) {
      if (Steady::now() > deadline) throw std::runtime_error("trigger figure ran past its deadline");
      {
        std::lock_guard lock(mu);
        entered.reset();
      }
      const auto t0 = Steady::now();
      httplib::Result response = client.Post(path);
      if (!response)
        throw std::runtime_error("trigger request failed: " + httplib::to_string(response.error()));
      if (response->status == 409) {
        // The previous run's release is not committed yet: not a sample, try again shortly.
        std::this_thread::sleep_for(2ms);
        continue;
      }
      if (response->status != 200) {
        throw std::runtime_error("trigger returned " + std::to_string(response->status) + ": " +
                                 response->body);
      }
      Steady::time_point t1;
      {
        std::unique_lock lock(mu);
        if (!cv.wait_for(lock, 30s, [&] { return entered.has_value(); })) {
          throw std::runtime_error("a triggered run did not start within 30 s");
        }
        t1 = *entered;
      }
      if (i >= kWarmupSamples) ms.push_back(Millis(t1 - t0));
      ++i;
      // Let the run end and its release commit before the next trigger (a trigger of a running task is 409).
      std::this_thread::sleep_for(20ms);
    }
    sink.Add(backend.name(), "trigger_start_p50", {{"triggers", samples}}, Percentile(ms, 0.50), "ms");
    sink.Add(backend.name(), "trigger_start_p99", {{"triggers", samples}}, Percentile(ms, 0.99), "ms");
    server.Stop();
    scheduler->Shutdown();
  }
  backend.EndFigure();
}

void CronLateness(Backend& backend, Sink& sink, int fires) {
  backend.NewFigure("cron");
  {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<double> lateness_ms;  // guarded by mu
    std::unique_ptr<Scheduler> scheduler = SchedulerFor(backend);
    PluginScheduler& plugin = scheduler->ForPlugin("bench");
    // The first fire may follow the registration by less than a second; it is not counted.
    int seen = 0;
    Check(plugin.ScheduleTask(GlobalTask("every-second", CronFrequency{"* * * * * *", "UTC"},
                                         [&](std::stop_token) {
                                           const auto now = std::chrono::system_clock::now();
                                           // The fire time is the whole second; an entry a hair before it
                                           // (clock jitter) counts as early.
                                           auto fire = std::chrono::floor<std::chrono::seconds>(now);
                                           if (now - fire > 500ms) fire += 1s;
                                           const double late =
                                               std::chrono::duration<double, std::milli>(now - fire).count();
                                           {
                                             std::lock_guard lock(mu);
                                             if (seen++ > 0) lateness_ms.push_back(late);
                                           }
                                           cv.notify_all();
                                         })),
          "ScheduleTask");
    {
      std::unique_lock lock(mu);
      const auto wait = std::chrono::seconds(fires + 30);
      if (!cv.wait_for(lock, wait, [&] { return static_cast<int>(lateness_ms.size()) >= fires; })) {
        throw std::runtime_error("the cron task fired only " + std::to_string(lateness_ms.size()) + " times");
      }
    }
    scheduler->Shutdown();
    std::vector<double> samples;
    {
      std::lock_guard lock(mu);
      samples = lateness_ms;
    }
    sink.Add(backend.name(), "cron_lateness_p50", {{"fires", samples.size()}}, Percentile(samples, 0.50),
             "ms");
    sink.Add(backend.name(), "cron_lateness_p99", {{"fires", samples.size()}}, Percentile(samples, 0.99),
             "ms");
  }
  backend.EndFigure();
}

long RssBytes() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0;
  long resident = 0;
  statm >> pages >> resident;
  return resident * ::sysconf(_SC_PAGESIZE);
}

// Statements one node (the idle role) has run in this database so far.
double IdleRoleCalls(PgAdmin& admin) {
  const std::string calls = admin.Query(
      "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE userid = (SELECT oid FROM pg_roles WHERE "
      "rolname = '" +
      std::string(kIdleRole) +
      "') AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())");
  return std::stod(calls.empty() ? "0" : calls);
}

void IdleLoad(PgBackend& backend, Sink& sink, const Sizes& sizes) {
  PgAdmin& admin = backend.admin();
  admin.Query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements");
  admin.Query(std::string("DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '") + kIdleRole +
              "') THEN CREATE ROLE " + kIdleRole + " LOGIN; END IF; END $$");
  admin.Query(std::string("DO $$ BEGIN EXECUTE format('GRANT CREATE ON DATABASE %I TO ") + kIdleRole +
              "', current_database()); END $$");
  const std::string node_url = WithUser(backend.url(), kIdleRole);
  for (const int tasks : sizes.idle_tasks) {
    backend.NewFigure("idle" + std::to_string(tasks));
    {
      SchedulerOptions options;
      options.database_url = node_url;
      std::unique_ptr<Scheduler> scheduler =
          runtime::SchedulerOpener::Create(options, backend.SchedulerStoresAs(node_url));
      PluginScheduler& plugin = scheduler->ForPlugin("bench");
      Check(plugin.ScheduleTask(GlobalTask("warmup", ManualTrigger{}, [](std::stop_token) {})), "warmup");
      // Registration is not measured: spread over threads so the commits group on a durable server. The same
      // threads count for every size, so malloc's per-thread arenas exist before the measured 10,000.
      constexpr int kThreads = 8;
      const long rss_before = RssBytes();
      std::atomic<int> next{0};
      std::atomic<int> failures{0};
      std::vector<std::thread> threads;
      for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&] {
          for (int i = next.fetch_add(1); i < tasks; i = next.fetch_add(1)) {
            // Never due in the window: half manual, half a yearly cron.
            TaskFrequency frequency = i % 2 == 0 ? TaskFrequency(ManualTrigger{})
                                                 : TaskFrequency(CronFrequency{"0 3 1 1 *", "UTC"});
            if (!plugin
                     .ScheduleTask(GlobalTask("task-" + std::to_string(i), frequency, [](std::stop_token) {}))
                     .ok()) {
              failures.fetch_add(1);
            }
          }
        });
      }
      for (std::thread& t : threads) t.join();
      if (failures.load() > 0)
        throw std::runtime_error(std::to_string(failures.load()) + " registrations failed");
      std::this_thread::sleep_for(sizes.idle_settle);
      const long rss_after = RssBytes();
      const double before = IdleRoleCalls(admin);
      const auto t0 = Steady::now();
      std::this_thread::sleep_for(sizes.idle_window);
      const double after = IdleRoleCalls(admin);
      const double seconds = std::chrono::duration<double>(Steady::now() - t0).count();
      sink.Add(backend.name(), "idle_statements_per_s", {{"tasks", tasks}}, (after - before) / seconds,
               "stmt/s");
      if (tasks == 10000) {
        sink.Add(backend.name(), "memory_per_task", {{"tasks", tasks}},
                 static_cast<double>(rss_after - rss_before) / tasks, "bytes");
      }
      scheduler->Shutdown();
    }
    backend.EndFigure();
  }
}

// ---- main

struct Args {
  std::string pg_url;
  std::string pooler_url;
  std::string sqlite_dir;
  std::string suite = "all";
  std::string out;
  bool quick = false;
  std::vector<int> concurrency{1, 10, 32};
  int prefetch = 500;
  long wake_claim_us = 1000;
};

bool Runs(const Args& args, const std::string& suite) { return args.suite == "all" || args.suite == suite; }

void RunQueueSuites(Backend& backend, Sink& sink, const Args& args, const Sizes& sizes) {
  if (Runs(args, "queue")) {
    for (const int c : args.concurrency) ThroughputPreinserted(backend, sink, c, sizes.jobs);
    for (const int c : args.concurrency) ThroughputEnqueueDrain(backend, sink, c, sizes.jobs);
  }
  if (Runs(args, "latency")) Latency(backend, sink, sizes.latency_samples);
}

int Main(int argc, char** argv) {
  Args args;
  CLI::App app("octop_bench: octop's figures of docs/performance.md as JSON lines");
  app.add_option("--pg-url", args.pg_url, "PostgreSQL URL (durable settings, pg_stat_statements loaded)");
  app.add_option(
      "--through-pooler", args.pooler_url,
      "the job stores connect through this pooler in transaction mode (unnamed statements, LISTEN on "
      "--pg-url); not part of make bench");
  app.add_option("--sqlite-dir", args.sqlite_dir,
                 "directory for the SQLite figures (a fresh file per figure)");
  app.add_option("--suite", args.suite, "queue|sustained|latency|scheduler|idle|all")
      ->check(CLI::IsMember({"queue", "sustained", "latency", "scheduler", "idle", "all"}));
  app.add_option("--out", args.out, "append the JSON lines to this file");
  app.add_flag("--quick", args.quick, "small sizes, for a smoke test");
  app.add_option("--concurrency", args.concurrency,
                 "the queue suite's worker concurrencies (default 1 10 32)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--prefetch", args.prefetch, "JobQueueOptions::prefetch of the workers (default 500)")
      ->check(CLI::Range(0, 1000));
  app.add_option("--wake-claim-us", args.wake_claim_us,
                 "JobQueueOptions::wake_claim_interval of the workers, microseconds (default 1000)")
      ->check(CLI::Range(0, 100000));
  CLI11_PARSE(app, argc, argv);
  if (args.pg_url.empty() && args.sqlite_dir.empty()) {
    std::cerr << "octop_bench: give --pg-url and/or --sqlite-dir\n";
    return 2;
  }
  const Sizes sizes = args.quick ? QuickSizes() : Sizes{};
  g_prefetch = args.prefetch;
  g_wake_claim_interval = std::chrono::microseconds(args.wake_claim_us);
  // The benchmark's own output is the table; octop's info lines would interleave with it.
  spdlog::set_level(spdlog::level::warn);
  Sink sink(args.out);
  const auto start = Steady::now();
  std::unique_ptr<PgBackend> pg;
  if (!args.pg_url.empty()) pg = std::make_unique<PgBackend>(args.pg_url);
  if (pg && !args.pooler_url.empty()) pg->ThroughPooler(args.pooler_url);
  std::unique_ptr<SqliteBackend> sqlite;
  if (!args.sqlite_dir.empty()) sqlite = std::make_unique<SqliteBackend>(args.sqlite_dir);

  if (pg) RunQueueSuites(*pg, sink, args, sizes);
  if (pg && Runs(args, "sustained")) Sustained(*pg, sink, sizes.sustained_jobs, sizes.history_rows);
  if (sqlite) RunQueueSuites(*sqlite, sink, args, sizes);
  // The scheduler figures are about the cluster backend; SQLite only when it is the only one given.
  Backend* scheduler_backend = pg ? static_cast<Backend*>(pg.get()) : sqlite.get();
  if (Runs(args, "scheduler")) {
    TriggerStart(*scheduler_backend, sink, sizes.trigger_samples);
    CronLateness(*scheduler_backend, sink, sizes.cron_fires);
  }
  if (Runs(args, "idle")) {
    if (pg) {
      IdleLoad(*pg, sink, sizes);
    } else {
      std::cerr << "octop_bench: the idle suite needs --pg-url (pg_stat_statements); skipped\n";
    }
  }
  sink.PrintTable();
  std::printf("\noctop_bench: %.0f s\n", std::chrono::duration<double>(Steady::now() - start).count());
  return 0;
}

}  // namespace
}  // namespace octop::bench

int main(int argc, char** argv) {
  try {
    return octop::bench::Main(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "octop_bench: " << e.what() << "\n";
    return 1;
  }
}
