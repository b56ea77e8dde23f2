// Migrations: two lines (a task namespace's, a job namespace's), each versioned, recorded, idempotent, safe
// to run concurrently, and upgradable from every earlier version; a namespace holds only its line's tables.
#include <algorithm>
#include <atomic>
#include <set>
#include <thread>

#include "conformance_fixture.h"
#include "store/sqlite/sqlite_time.h"

namespace octop::store::testing {
namespace {

// A task row as a release before migration 3 (or a Backstage backend of that age) wrote it. UpsertTask is not
// used for this: octop registers tasks only in a schema it has migrated to the latest version, and its upsert
// reads a column migration 3 adds.
Status InsertOldRow(JobStore& store, const std::string& id, const std::string& settings, WallTime next) {
  // SQLite's text form of a time, which PostgreSQL reads as a timestamptz in the session's UTC too.
  const std::string text = sqlite::FormatTime(next);
  return store.WithTransaction([&](Transaction& tx) -> Status {
    return tx
        .Execute(
            "INSERT INTO backstage_backend_tasks__tasks (id, settings_json, next_run_start_at) "
            "VALUES ($1, $2, $3)",
            {id, settings, text})
        .status();
  });
}

using std::chrono::minutes;

std::vector<std::string> AllNames() {
  return {std::begin(kTaskMigrationNames), std::end(kTaskMigrationNames)};
}
std::vector<std::string> AllJobNames() {
  return {std::begin(kJobMigrationNames), std::end(kJobMigrationNames)};
}

TEST_P(StoreMigrations, EmptyNamespaceIsAtVersionZero) {
  auto version = store_->SchemaVersion();
  OCTOP_ASSERT_OK(version);
  EXPECT_EQ(*version, 0);
  auto job_version = jobs_->SchemaVersion();
  OCTOP_ASSERT_OK(job_version);
  EXPECT_EQ(*job_version, 0);
  for (MigrationLine line : {MigrationLine::kTasks, MigrationLine::kJobs}) {
    auto applied = admin().AppliedMigrations(line);
    OCTOP_ASSERT_OK(applied);
    EXPECT_TRUE(applied->empty());
  }
}

TEST_P(StoreMigrations, MigrateAppliesEveryMigrationInOrder) {
  OCTOP_ASSERT_OK(store_->Migrate());
  auto version = store_->SchemaVersion();
  OCTOP_ASSERT_OK(version);
  EXPECT_EQ(*version, kLatestTaskSchemaVersion);
  auto applied = admin().AppliedMigrations(MigrationLine::kTasks);
  OCTOP_ASSERT_OK(applied);
  EXPECT_EQ(*applied, AllNames());
  auto none = admin().AppliedMigrations(MigrationLine::kJobs);
  OCTOP_ASSERT_OK(none);
  EXPECT_TRUE(none->empty()) << "a task store migrates its own line only";

  OCTOP_ASSERT_OK(jobs_->Migrate());
  auto job_version = jobs_->SchemaVersion();
  OCTOP_ASSERT_OK(job_version);
  EXPECT_EQ(*job_version, kLatestJobSchemaVersion);
  auto job_applied = admin().AppliedMigrations(MigrationLine::kJobs);
  OCTOP_ASSERT_OK(job_applied);
  EXPECT_EQ(*job_applied, AllJobNames());
}

// A plugin's namespace holds Backstage's table and knex's bookkeeping, and nothing of the job queue's.
TEST_P(StoreMigrations, ATaskNamespaceHoldsOnlyBackstagesTables) {
  OCTOP_ASSERT_OK(store_->Migrate());
  auto tables = admin().ListTables();
  OCTOP_ASSERT_OK(tables);
  std::vector<std::string> expected = {"backstage_backend_tasks__knex_migrations",
                                       "backstage_backend_tasks__knex_migrations_lock",
                                       "backstage_backend_tasks__tasks"};
  EXPECT_EQ(*tables, expected);
}

// The job queue's namespace holds the queue's tables and octop's bookkeeping, and no task table.
TEST_P(StoreMigrations, AJobNamespaceHoldsOnlyTheQueuesTables) {
  OCTOP_ASSERT_OK(jobs_->Migrate());
  auto tables = admin().ListTables();
  OCTOP_ASSERT_OK(tables);
  std::vector<std::string> expected = {"octop_config", "octop_job_cancels", "octop_jobs", "octop_migrations",
                                       "octop_queues"};
  if (GetParam().is_postgres()) {
    expected = {"octop_config", "octop_job_cancels", "octop_job_keys", "octop_job_leases",
                "octop_jobs",   "octop_migrations",  "octop_queues",   "octop_waiting_jobs"};
  }
  EXPECT_EQ(*tables, expected);
}

TEST_P(StoreMigrations, MigrateIsIdempotentAndKeepsRows) {
  OCTOP_ASSERT_OK(store_->Migrate());
  OCTOP_ASSERT_OK(store_->UpsertTask({.id = "kept",
                                      .settings_json = std::string(kDurationSettings),
                                      .start_at = DbNowPlus{},
                                      .next_start_at = DbNowPlus{}}));
  OCTOP_ASSERT_OK(store_->Migrate());
  OCTOP_ASSERT_OK(store_->Migrate());
  auto applied = admin().AppliedMigrations(MigrationLine::kTasks);
  OCTOP_ASSERT_OK(applied);
  EXPECT_EQ(*applied, AllNames());
  auto rows = store_->ListTasks({});
  OCTOP_ASSERT_OK(rows);
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ(rows->front().id, "kept");
}

// Task stores and job stores migrating one namespace at once (the shape of a database made before the two
// lines were split, where every namespace had both).
TEST_P(StoreMigrations, ConcurrentMigrateFromManyStoresAppliesEachOnce) {
  constexpr int kNodes = 8;
  std::vector<std::unique_ptr<Store>> nodes;
  for (int i = 0; i < kNodes; ++i) {
    if (i % 2 == 0) {
      nodes.push_back(OpenNode());
    } else {
      nodes.push_back(OpenJobNode());
    }
    ASSERT_NE(nodes.back(), nullptr);
  }
  std::atomic<int> failures{0};
  std::vector<std::string> errors(kNodes);
  {
    std::vector<std::jthread> threads;
    for (int i = 0; i < kNodes; ++i) {
      threads.emplace_back([&, i] {
        const Status s = nodes[static_cast<std::size_t>(i)]->Migrate();
        if (!s.ok()) {
          ++failures;
          errors[static_cast<std::size_t>(i)] = s.ToString();
        }
      });
    }
  }
  EXPECT_EQ(failures.load(), 0) << errors[0] << errors[1] << errors[2];
  auto applied = admin().AppliedMigrations(MigrationLine::kTasks);
  OCTOP_ASSERT_OK(applied);
  EXPECT_EQ(*applied, AllNames());
  auto job_applied = admin().AppliedMigrations(MigrationLine::kJobs);
  OCTOP_ASSERT_OK(job_applied);
  EXPECT_EQ(*job_applied, AllJobNames());
  auto version = store_->SchemaVersion();
  OCTOP_ASSERT_OK(version);
  EXPECT_EQ(*version, kLatestTaskSchemaVersion);
}

TEST_P(StoreMigrations, MigrateToStopsAtTheVersionAndNeverGoesDown) {
  OCTOP_ASSERT_OK(admin().MigrateTo(MigrationLine::kTasks, 1));
  auto version = store_->SchemaVersion();
  OCTOP_ASSERT_OK(version);
  EXPECT_EQ(*version, 1);
  auto columns = admin().DescribeTable("backstage_backend_tasks__tasks");
  OCTOP_ASSERT_OK(columns);
  ASSERT_EQ(columns->size(), 6u) << "the init migration has no last_run columns";
  EXPECT_EQ((*columns)[2].name, "next_run_start_at");
  EXPECT_TRUE((*columns)[2].not_null) << "next_run_start_at is NOT NULL before migration 2";

  OCTOP_ASSERT_OK(admin().MigrateTo(MigrationLine::kTasks, 2));
  columns = admin().DescribeTable("backstage_backend_tasks__tasks");
  OCTOP_ASSERT_OK(columns);
  ASSERT_EQ(columns->size(), 6u);
  EXPECT_FALSE((*columns)[2].not_null);

  OCTOP_ASSERT_OK(admin().MigrateTo(MigrationLine::kTasks, 3));
  OCTOP_ASSERT_OK(admin().MigrateTo(MigrationLine::kTasks, 1));
  version = store_->SchemaVersion();
  OCTOP_ASSERT_OK(version);
  EXPECT_EQ(*version, 3);
  auto jobs = admin().DescribeTable("octop_jobs");
  OCTOP_ASSERT_OK(jobs);
  EXPECT_TRUE(jobs->empty()) << "octop_jobs belongs to the job line";

  OCTOP_ASSERT_OK(admin().MigrateTo(MigrationLine::kJobs, 1));
  jobs = admin().DescribeTable("octop_jobs");
  OCTOP_ASSERT_OK(jobs);
  EXPECT_FALSE(jobs->empty());
  auto config = admin().DescribeTable("octop_config");
  OCTOP_ASSERT_OK(config);
  EXPECT_TRUE(config->empty()) << "octop_config belongs to the job line's second migration";
  auto job_version = jobs_->SchemaVersion();
  OCTOP_ASSERT_OK(job_version);
  EXPECT_EQ(*job_version, 1);
}

TEST_P(StoreMigrations, MigrateToRejectsVersionsOutOfRange) {
  EXPECT_EQ(admin().MigrateTo(MigrationLine::kTasks, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(admin().MigrateTo(MigrationLine::kTasks, kLatestTaskSchemaVersion + 1).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(admin().MigrateTo(MigrationLine::kJobs, kLatestJobSchemaVersion + 1).code(),
            StatusCode::kInvalidArgument);
  auto version = store_->SchemaVersion();
  OCTOP_ASSERT_OK(version);
  EXPECT_EQ(*version, 0);
}

// The upgrade path of a real deployment: the first schema with rows (one of them mid-run), then every
// migration.
TEST_P(StoreMigrations, UpgradeFromTheFirstSchemaKeepsRowsAndAddsColumns) {
  OCTOP_ASSERT_OK(admin().MigrateTo(MigrationLine::kTasks, 1));
  OCTOP_ASSERT_OK(InsertOldRow(*jobs_, "idle", std::string(kDurationSettings), t0() + minutes(5)));
  OCTOP_ASSERT_OK(InsertOldRow(*jobs_, "busy", std::string(kCronSettings), t0()));
  auto claimed = store_->TryClaimTask({.id = "busy", .ticket = "t-1", .timeout = minutes(1)});
  OCTOP_ASSERT_OK(claimed);
  ASSERT_TRUE(claimed->has_value());
  EXPECT_FALSE(jobs_
                   ->WithTransaction([](Transaction& tx) -> Status {
                     return tx
                         .Execute(
                             "INSERT INTO backstage_backend_tasks__tasks (id, settings_json) VALUES ($1, $2)",
                             {std::string("manual"), std::string(kManualSettings)})
                         .status();
                   })
                   .ok())
      << "next_run_start_at is NOT NULL in the first schema";

  OCTOP_ASSERT_OK(store_->Migrate());
  auto version = store_->SchemaVersion();
  OCTOP_ASSERT_OK(version);
  EXPECT_EQ(*version, kLatestTaskSchemaVersion);

  auto rows = store_->ListTasks({});
  OCTOP_ASSERT_OK(rows);
  ASSERT_EQ(rows->size(), 2u);
  const TaskRow& busy = (*rows)[0];
  const TaskRow& idle = (*rows)[1];
  EXPECT_EQ(busy.id, "busy");
  EXPECT_EQ(busy.settings_json, kCronSettings);
  EXPECT_EQ(busy.current_run_ticket, "t-1");
  EXPECT_EQ(Show(busy.current_run_started_at), Show(t0()));
  EXPECT_EQ(Show(busy.current_run_expires_at), Show(t0() + minutes(1)));
  EXPECT_EQ(busy.last_run_error_json, std::nullopt);
  EXPECT_EQ(Show(busy.last_run_ended_at), "NULL");
  EXPECT_EQ(idle.id, "idle");
  EXPECT_EQ(Show(idle.next_run_start_at), Show(t0() + minutes(5)));

  // The new columns work on the old rows, and NULL next runs are now allowed.
  auto released = store_->TryReleaseTask({.id = "busy",
                                          .ticket = "t-1",
                                          .next_run = NullTime{},
                                          .error_json = R"({"name":"Error","message":"failed"})"});
  OCTOP_ASSERT_OK(released);
  EXPECT_TRUE(*released);
  auto after = store_->ListTasks({.ids = std::vector<std::string>{"busy"}});
  OCTOP_ASSERT_OK(after);
  ASSERT_EQ(after->size(), 1u);
  EXPECT_EQ(after->front().last_run_error_json, R"({"name":"Error","message":"failed"})");
  EXPECT_EQ(Show(after->front().last_run_ended_at), Show(t0()));
  OCTOP_EXPECT_OK(store_->UpsertTask({.id = "manual",
                                      .settings_json = std::string(kManualSettings),
                                      .start_at = NullTime{},
                                      .next_start_at = NullTime{}}));
}

TEST_P(StoreMigrations, UpgradeFromEveryEarlierVersion) {
  for (int from = 1; from < kLatestTaskSchemaVersion; ++from) {
    SCOPED_TRACE("from version " + std::to_string(from));
    StoreOptions options;
    options.clock = &clock_;
    const std::string ns = ns_ + "_v" + std::to_string(from);
    auto node = OpenNode(options, ns);
    ASSERT_NE(node, nullptr);
    auto admin = GetParam().open_admin(ns, options);
    OCTOP_ASSERT_OK(admin);
    OCTOP_ASSERT_OK((*admin)->MigrateTo(MigrationLine::kTasks, from));
    if (from < 3) {
      auto sql = OpenJobNode(options, ns);
      ASSERT_NE(sql, nullptr);
      OCTOP_ASSERT_OK(InsertOldRow(*sql, "row", std::string(kDurationSettings), t0()));
    } else {
      OCTOP_ASSERT_OK(node->UpsertTask({.id = "row",
                                        .settings_json = std::string(kDurationSettings),
                                        .start_at = AbsoluteTime{t0()},
                                        .next_start_at = AbsoluteTime{t0()}}));
    }
    OCTOP_ASSERT_OK(node->Migrate());
    auto version = node->SchemaVersion();
    OCTOP_ASSERT_OK(version);
    EXPECT_EQ(*version, kLatestTaskSchemaVersion);
    auto rows = node->ListTasks({});
    OCTOP_ASSERT_OK(rows);
    ASSERT_EQ(rows->size(), 1u);
    EXPECT_EQ(Show(rows->front().next_run_start_at), Show(t0()));
  }
}

TEST_P(StoreMigrations, UpgradeTheJobLineFromEveryEarlierVersion) {
  for (int from = 1; from < kLatestJobSchemaVersion; ++from) {
    SCOPED_TRACE("from version " + std::to_string(from));
    StoreOptions options;
    options.clock = &clock_;
    const std::string ns = ns_ + "_j" + std::to_string(from);
    auto node = OpenJobNode(options, ns);
    ASSERT_NE(node, nullptr);
    auto admin = GetParam().open_admin(ns, options);
    OCTOP_ASSERT_OK(admin);
    OCTOP_ASSERT_OK((*admin)->MigrateTo(MigrationLine::kJobs, from));
    OCTOP_ASSERT_OK(node->Migrate());
    auto version = node->SchemaVersion();
    OCTOP_ASSERT_OK(version);
    EXPECT_EQ(*version, kLatestJobSchemaVersion);
    auto enqueued = node->EnqueueJobs({JobSpec{.kind = "k", .payload = "{}"}});
    OCTOP_ASSERT_OK(enqueued);
    auto claimed = node->ClaimJobs({.limit = 10});
    OCTOP_ASSERT_OK(claimed);
    EXPECT_EQ(claimed->size(), 1u);
  }
}

// octop_0004_job_sets moves the live jobs' working state (docs/store.md, "Jobs: the layout"): every kind of
// live job written in the layout before it must work after the job line's migrations -- due and future
// waiting jobs, a failed job waiting for its retry, a running job whose lease expired and one whose lease
// holds, keys held by live jobs.
TEST_P(StoreMigrations, UpgradeToTheJobSetsKeepsEveryLiveJobWorking) {
  static_assert(kJobMigrationNames[3] == "octop_0004_job_sets");
  const int previous = 3;
  OCTOP_ASSERT_OK(admin().MigrateTo(MigrationLine::kJobs, previous));
  const auto at = [](WallTime t) { return sqlite::FormatTime(t); };
  struct OldJob {
    std::string id, status;
    int attempt;
    WallTime scheduled;
    std::optional<std::string> token, expires, key;
  };
  const std::vector<OldJob> old = {
      {"00000000-0000-4000-8000-000000000001", "pending", 0, t0() - minutes(1), {}, {}, "k-due"},
      {"00000000-0000-4000-8000-000000000002", "pending", 0, t0() + minutes(60), {}, {}, {}},
      {"00000000-0000-4000-8000-000000000003", "failed", 1, t0() - minutes(1), {}, {}, {}},
      {"00000000-0000-4000-8000-000000000004", "running", 1, t0() - minutes(9), "tok-stuck",
       at(t0() - minutes(1)), "k-stuck"},
      {"00000000-0000-4000-8000-000000000005",
       "running",
       1,
       t0() - minutes(9),
       "tok-busy",
       at(t0() + minutes(10)),
       {}},
      {"00000000-0000-4000-8000-000000000006", "success", 1, t0() - minutes(9), "tok-old", {}, "k-done"},
  };
  OCTOP_ASSERT_OK(jobs_->WithTransaction([&](Transaction& tx) -> Status {
    for (const OldJob& j : old) {
      const std::optional<std::string> started =
          j.attempt > 0 ? std::optional(at(t0() - minutes(5))) : std::nullopt;
      const std::optional<std::string> completed =
          j.status == "success" ? std::optional(at(t0() - minutes(4))) : std::nullopt;
      OCTOP_RETURN_IF_ERROR(
          tx.Execute(
                "INSERT INTO octop_jobs (id, queue, kind, payload, priority, scheduled_at, status, attempt, "
                "max_retries, attempt_token, created_at, started_at, completed_at, expires_at, unique_key) "
                "VALUES ($1, 'default', 'k', '{}', 0, $2, $3, $4, 3, $5, $6, $7, $8, $9, $10)",
                {j.id, at(j.scheduled), j.status, std::to_string(j.attempt), j.token, at(t0() - minutes(10)),
                 started, completed, j.expires, j.key})
              .status());
    }
    return Status::Ok();
  }));
  OCTOP_ASSERT_OK(jobs_->Migrate());
  auto version = jobs_->SchemaVersion();
  OCTOP_ASSERT_OK(version);
  EXPECT_EQ(*version, kLatestJobSchemaVersion);

  // The due waiting jobs are claimed, nothing else.
  auto claimed = jobs_->ClaimJobs({.limit = 10, .worker_id = "after-upgrade"});
  OCTOP_ASSERT_OK(claimed);
  std::vector<std::string> ids;
  for (const JobInfo& job : *claimed) ids.push_back(job.id);
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (std::vector<std::string>{old[0].id, old[2].id}));
  // Keys of live jobs are still held (the running one's too); a finished job's key is free.
  auto again =
      jobs_->EnqueueJobs({{.kind = "k", .unique_key = "k-stuck"},
                          {.kind = "k", .unique_key = "k-due"},
                          {.kind = "k", .scheduled_at = t0() + minutes(60), .unique_key = "k-done"}});
  OCTOP_ASSERT_OK(again);
  EXPECT_TRUE((*again)[0].existing);
  EXPECT_EQ((*again)[0].id, old[3].id);
  EXPECT_TRUE((*again)[1].existing);
  EXPECT_EQ((*again)[1].id, old[0].id);
  EXPECT_FALSE((*again)[2].existing);
  // The running job under a live lease completes with its token; its lease renews first.
  auto renewed = jobs_->RenewJobLeases({.tokens = {"tok-busy"}, .lease = minutes(20)});
  OCTOP_ASSERT_OK(renewed);
  EXPECT_EQ(*renewed, 1);
  auto applied = jobs_->CompleteJobs({{old[4].id, "tok-busy"}});
  OCTOP_ASSERT_OK(applied);
  EXPECT_EQ(*applied, std::vector<bool>{true});
  // The expired one is rescued (a failed attempt with retries left) and runs again after its backoff.
  auto rescued = jobs_->RescueExpiredJobs({});
  OCTOP_ASSERT_OK(rescued);
  ASSERT_EQ(rescued->size(), 1u);
  EXPECT_EQ(rescued->front().id, old[3].id);
  EXPECT_EQ(rescued->front().status, JobStatus::kFailed);
  clock_.Advance(minutes(5));
  auto retried = jobs_->ClaimJobs({.limit = 10});
  OCTOP_ASSERT_OK(retried);
  ASSERT_EQ(retried->size(), 1u);
  EXPECT_EQ(retried->front().id, old[3].id);
  EXPECT_EQ(retried->front().attempt, 2);
  // Finishing a keyed job gives its key up.
  const auto due =
      std::find_if(claimed->begin(), claimed->end(), [&](const JobInfo& j) { return j.id == old[0].id; });
  ASSERT_NE(due, claimed->end());
  auto done = jobs_->CompleteJobs({{due->id, *due->attempt_token}});
  OCTOP_ASSERT_OK(done);
  EXPECT_EQ(*done, std::vector<bool>{true});
  auto fresh = jobs_->EnqueueJobs({{.kind = "k", .unique_key = "k-due"}});
  OCTOP_ASSERT_OK(fresh);
  EXPECT_FALSE((*fresh)[0].existing);
}

// octop_0007_sql_writes: jobs that plain SQL wrote before it (on PostgreSQL: a pending job with no waiting
// row, a live keyed job with no key row, so never claimed and its key not held) are repaired by the upgrade.
TEST_P(StoreMigrations, UpgradeRegistersTheJobsPlainSqlWroteBeforeIt) {
  static_assert(kJobMigrationNames[6] == "octop_0007_sql_writes");
  OCTOP_ASSERT_OK(admin().MigrateTo(MigrationLine::kJobs, 6));
  const auto at = [](WallTime t) { return sqlite::FormatTime(t); };
  const std::string a = "00000000-0000-7000-8000-0000000000a1";
  const std::string b = "00000000-0000-7000-8000-0000000000b2";
  OCTOP_ASSERT_OK(jobs_->WithTransaction([&](Transaction& tx) -> Status {
    for (const auto& [id, key] : {std::pair<std::string, std::optional<std::string>>{a, std::nullopt},
                                  std::pair<std::string, std::optional<std::string>>{b, "sql-k"}}) {
      OCTOP_RETURN_IF_ERROR(
          tx.Execute(
                "INSERT INTO octop_jobs (id, queue, kind, payload, priority, scheduled_at, status, attempt, "
                "max_retries, created_at, unique_key) VALUES ($1, 'default', 'k', '{}', 0, $2, 'pending', 0, "
                "3, $2, $3)",
                {id, at(t0() - minutes(1)), key})
              .status());
    }
    return Status::Ok();
  }));
  OCTOP_ASSERT_OK(jobs_->Migrate());
  auto again = jobs_->EnqueueJobs({{.kind = "k", .unique_key = "sql-k"}});
  OCTOP_ASSERT_OK(again);
  EXPECT_TRUE((*again)[0].existing);
  EXPECT_EQ((*again)[0].id, b);
  auto claimed = jobs_->ClaimJobs({.limit = 10, .worker_id = "after-upgrade"});
  OCTOP_ASSERT_OK(claimed);
  std::vector<std::string> ids;
  for (const JobInfo& job : *claimed) ids.push_back(job.id);
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (std::vector<std::string>{a, b}));
}

}  // namespace
}  // namespace octop::store::testing
