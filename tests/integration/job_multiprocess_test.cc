// The job queue across processes: octop_job_worker nodes (tests/integration/job_worker_main.cc) on one
// database.
//
// NoJobLostOrRunTwice: 2 processes x 8 workers drain 20,000 jobs on PostgreSQL, 5,000 on SQLite
// (OCTOP_JOB_STRESS_JOBS overrides); every job must succeed exactly once and no job may run concurrently with
// itself. On SQLite the processes share the file through its write lock, with no cross-process notifications:
// they find work by polling (jobs.poll_interval_ms = 20 here).
// RescueAfterSigkill: the node running a job is SIGKILLed; the survivor re-runs the job after its timeout.
//
// Each run is appended by the worker to a log (start and end on CLOCK_MONOTONIC, comparable across
// processes).
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "job_test_env.h"  // BackendName
#include "runtime_test_support.h"
#include "store/job_store.h"
#include "store_test_env.h"

extern char** environ;  // NOLINT: POSIX

namespace octop::job_testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using runtime_testing::Eventually;

std::int64_t MonotonicNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

class WorkerProcess {
 public:
  explicit WorkerProcess(std::vector<std::string> argv) {
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    EXPECT_EQ(::posix_spawn(&pid_, args[0], nullptr, nullptr, args.data(), environ), 0);
  }
  ~WorkerProcess() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      Wait(10s);
    }
  }
  pid_t pid() const { return pid_; }
  void Signal(int sig) { ::kill(pid_, sig); }
  // The exit code (128 + signal when killed), nullopt on timeout.
  std::optional<int> Wait(std::chrono::milliseconds timeout) {
    std::optional<int> code;
    Eventually(
        [&] {
          int status = 0;
          if (::waitpid(pid_, &status, WNOHANG) != pid_) return false;
          reaped_ = true;
          code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
          return true;
        },
        timeout);
    return code;
  }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
};

struct RunRecord {
  std::string id;
  int attempt = 0;
  long pid = 0;
  std::int64_t start = 0;
  std::optional<std::int64_t> end;
};

// Reads the S/E lines of every log: one record per (id, attempt, pid, start).
std::vector<RunRecord> ReadRuns(const std::vector<fs::path>& logs) {
  std::map<std::tuple<std::string, int, long, std::int64_t>, RunRecord> runs;
  for (const fs::path& path : logs) {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string tag;
      RunRecord r;
      fields >> tag >> r.id >> r.attempt >> r.pid >> r.start;
      if (tag == "E") {
        std::int64_t end = 0;
        fields >> end;
        r.end = end;
      }
      auto& slot = runs[{r.id, r.attempt, r.pid, r.start}];
      if (slot.id.empty() || r.end) slot = r;
    }
  }
  std::vector<RunRecord> out;
  for (auto& [key, r] : runs) out.push_back(std::move(r));
  return out;
}

// The backends of the store suites (store_test_env.h): SQLite (a file of this test's own, which both worker
// processes open), PostgreSQL, and PostgreSQL through PgBouncer in transaction mode with its pooling
// settings.
class JobMultiProcessTest : public ::testing::TestWithParam<store::testing::Backend> {
 protected:
  void SetUp() override {
    if (GetParam().is_postgres() && GetParam().url.empty()) {
      FAIL() << "OCTOP_REQUIRE_PG=1 but OCTOP_TEST_PG_URL (or, for pgbouncer, OCTOP_TEST_PGBOUNCER_URL) is "
                "not set";
    }
    std::random_device rd;
    dir_ = fs::temp_directory_path() / ("octop-jobs-mp-" + std::to_string(rd()));
    fs::create_directories(dir_);
    url_ = GetParam().is_postgres() ? GetParam().url : "sqlite:" + (dir_ / "db").string();
    ns_ = store::testing::FreshNamespace();
    store::StoreOptions o;
    o.ns = ns_;
    o.pooling = GetParam().pooling;
    auto opened = store::OpenJobStore(url_, o);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    store_ = std::move(opened).value();
    ASSERT_TRUE(store_->Migrate().ok());
    // Cross-process wake-ups on SQLite are polls: make them frequent. (PostgreSQL has NOTIFY.)
    ASSERT_TRUE(store_->SetConfig("jobs.poll_interval_ms", "20").ok());
  }
  void TearDown() override {
    workers_.clear();
    store_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  WorkerProcess& Spawn(const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> argv{OCTOP_JOB_WORKER_BINARY,
                                  "--url",
                                  url_,
                                  "--ns",
                                  ns_,
                                  "--log",
                                  (dir_ / (name + ".log")).string(),
                                  "--ready",
                                  (dir_ / (name + ".ready")).string(),
                                  "--listen-db",
                                  GetParam().pooling.listen_url};  // empty: the store's own connections
    argv.insert(argv.end(), extra.begin(), extra.end());
    logs_.push_back(dir_ / (name + ".log"));
    workers_.push_back(std::make_unique<WorkerProcess>(argv));
    EXPECT_TRUE(Eventually([&] { return fs::exists(dir_ / (name + ".ready")); }, 30s))
        << name << " not ready";
    return *workers_.back();
  }

  long CountStatus(JobStatus status) {
    auto summary = store_->SummarizeJobs();
    if (!summary.ok()) return -1;
    long n = 0;
    for (const auto& row : *summary) {
      if (row.status == status) n += row.count;
    }
    return n;
  }

  fs::path dir_;
  std::string url_;
  std::string ns_;
  std::unique_ptr<store::JobStore> store_;
  std::vector<fs::path> logs_;
  std::vector<std::unique_ptr<WorkerProcess>> workers_;
};

TEST_P(JobMultiProcessTest, NoJobLostOrRunTwice) {
  // SQLite serialises every claim and completion of both processes on one write lock and wakes them only by
  // polling: 20,000 jobs take about a minute in a Debug build there, so it drains a quarter of them.
  long jobs = GetParam().name == "sqlite" ? 5000 : 20000;
  if (const char* n = std::getenv("OCTOP_JOB_STRESS_JOBS"); n != nullptr && *n != '\0') jobs = std::stol(n);
  WorkerProcess& a = Spawn("a", {"--concurrency", "8"});
  WorkerProcess& b = Spawn("b", {"--concurrency", "8"});

  // Enqueued while both nodes are already claiming.
  constexpr long kBatch = 1000;
  for (long done = 0; done < jobs; done += kBatch) {
    std::vector<JobSpec> batch;
    for (long i = done; i < std::min(jobs, done + kBatch); ++i) {
      JobSpec p;
      p.kind = "record";
      p.payload = "{\"i\":" + std::to_string(i) + "}";
      batch.push_back(std::move(p));
    }
    auto r = store_->EnqueueJobs(batch);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  const auto started = std::chrono::steady_clock::now();
  ASSERT_TRUE(Eventually([&] { return CountStatus(JobStatus::kSuccess) == jobs; }, 300s))
      << "succeeded: " << CountStatus(JobStatus::kSuccess) << " of " << jobs;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::cout << "[ figures  ] " << GetParam().name << ": " << jobs
            << " jobs drained by 2 processes x 8 workers in " << seconds << " s (after the enqueue)\n";
  a.Signal(SIGTERM);
  b.Signal(SIGTERM);
  EXPECT_EQ(a.Wait(30s), 0);
  EXPECT_EQ(b.Wait(30s), 0);

  EXPECT_EQ(CountStatus(JobStatus::kPending), 0);
  EXPECT_EQ(CountStatus(JobStatus::kRunning), 0);
  EXPECT_EQ(CountStatus(JobStatus::kFailed), 0);
  EXPECT_EQ(CountStatus(JobStatus::kFrozen), 0);

  std::map<std::string, std::vector<RunRecord>> by_job;
  std::map<long, long> by_pid;
  for (RunRecord& r : ReadRuns(logs_)) {
    by_pid[r.pid]++;
    by_job[r.id].push_back(std::move(r));
  }
  EXPECT_EQ(static_cast<long>(by_job.size()), jobs);
  long ran_twice = 0, overlapping = 0, unfinished = 0;
  for (auto& [id, runs] : by_job) {
    if (runs.size() != 1) ++ran_twice;
    std::sort(runs.begin(), runs.end(),
              [](const RunRecord& x, const RunRecord& y) { return x.start < y.start; });
    for (std::size_t i = 0; i < runs.size(); ++i) {
      if (!runs[i].end) ++unfinished;
      if (i + 1 < runs.size() && runs[i].end.value_or(INT64_MAX) > runs[i + 1].start) ++overlapping;
    }
  }
  EXPECT_EQ(ran_twice, 0);
  EXPECT_EQ(overlapping, 0);
  EXPECT_EQ(unfinished, 0);
  EXPECT_EQ(by_pid.size(), 2u) << "both processes should have run jobs";
  for (const auto& [pid, n] : by_pid) std::cout << "[ figures  ] pid " << pid << " ran " << n << " jobs\n";
}

TEST_P(JobMultiProcessTest, RescueAfterSigkill) {
  const std::vector<std::string> args{"--concurrency",        "2",  "--timeout-ms",         "1000",
                                      "--rescue-interval-ms", "50", "--rescue-grace-ms",    "0",
                                      "--retry-base-ms",      "50", "--block-first-attempt"};
  WorkerProcess& a = Spawn("a", args);
  WorkerProcess& b = Spawn("b", args);
  JobSpec p;
  p.kind = "record";
  auto enqueued = store_->EnqueueJobs({p});
  ASSERT_TRUE(enqueued.ok()) << enqueued.status().ToString();
  const std::string id = enqueued->front().id;

  // Whichever node started the first attempt is killed in the middle of it.
  std::optional<RunRecord> first;
  ASSERT_TRUE(Eventually(
      [&] {
        for (const RunRecord& r : ReadRuns(logs_)) {
          if (r.id == id && r.attempt == 1) first = r;
        }
        return first.has_value();
      },
      30s));
  WorkerProcess& victim = first->pid == a.pid() ? a : b;
  WorkerProcess& survivor = first->pid == a.pid() ? b : a;
  // The lease the guarantee is about: the first attempt's expiry as the database recorded it at the claim.
  auto running = store_->GetJob(id);
  ASSERT_TRUE(running.ok() && running->attempt == 1 && running->expires_at.has_value());
  const WallTime first_expiry = *running->expires_at;
  victim.Signal(SIGKILL);
  EXPECT_EQ(victim.Wait(10s), 128 + SIGKILL);
  const std::int64_t killed_at = MonotonicNs();

  ASSERT_TRUE(Eventually(
      [&] {
        auto job = store_->GetJob(id);
        return job.ok() && job->status == JobStatus::kSuccess;
      },
      30s));
  auto job = store_->GetJob(id);
  EXPECT_EQ(job->attempt, 2);
  std::optional<RunRecord> second;
  for (const RunRecord& r : ReadRuns(logs_)) {
    if (r.id == id && r.attempt == 2) second = r;
  }
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->pid, survivor.pid());
  EXPECT_TRUE(second->end.has_value());
  // Not before the first attempt's lease ran out: the survivor's claim (the database's time, like the expiry;
  // a handler enters its attempt some time after the claim, so handler times would not say this) came after
  // the expiry. It did not steal a live run.
  ASSERT_TRUE(job->started_at.has_value());
  EXPECT_GT(*job->started_at, first_expiry);
  EXPECT_GE(second->start, killed_at);
  std::cout << "[ figures  ] re-run " << (second->start - first->start) / 1000000
            << " ms after the first start\n";
  survivor.Signal(SIGTERM);
  EXPECT_EQ(survivor.Wait(30s), 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, JobMultiProcessTest, ::testing::ValuesIn(store::testing::AllBackends()),
                         BackendName);

}  // namespace
}  // namespace octop::job_testing
