// The least-privilege PostgreSQL setup of docs/reliability.md, checked end to end: an owner role
// runs the migrations the way `octop migrate` does (a store + Migrate per namespace), a runtime role gets
// USAGE on the schemas and SELECT/INSERT/UPDATE/DELETE on their tables (+ USAGE on sequences), and then the
// scheduler and the job queue run with the runtime role only: a global task runs, a job completes,
// LISTEN/NOTIFY works. The runtime role is shown unable to run DDL, and a schema older than the build is a
// clear FailedPrecondition for it, not a half-migrated schema. Also: hostile schema names are quoted.
//
// PostgreSQL only: skipped without OCTOP_TEST_PG_URL, failed instead when OCTOP_REQUIRE_PG=1. Roles and
// schemas have unique names per run and are dropped at the end.
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <octop/queue.h>
#include <octop/scheduler.h>

#include "runtime/job_queue_opener.h"
#include "runtime/scheduler_opener.h"
#include "runtime_test_support.h"
#include "store/job_store.h"
#include "store/namespace_admin.h"
#include "store/postgres/postgres_store.h"
#include "store/task_store.h"

namespace octop::fault_testing {
namespace {

using runtime_testing::CallCounter;
using runtime_testing::Eventually;

struct PgConnDeleter {
  void operator()(PGconn* c) const { PQfinish(c); }
};
using PgConn = std::unique_ptr<PGconn, PgConnDeleter>;

// Runs one statement; returns the SQLSTATE ("" on success).
std::string Exec(PGconn* conn, const std::string& sql) {
  PGresult* r = PQexec(conn, sql.c_str());
  std::string state;
  const ExecStatusType st = PQresultStatus(r);
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
    const char* code = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    state = code != nullptr ? code : "?????";
  }
  PQclear(r);
  return state;
}

std::string QuoteIdent(const std::string& name) {
  std::string out = "\"";
  for (char c : name) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

class LeastPrivilegeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* url = std::getenv("OCTOP_TEST_PG_URL");
    const char* require = std::getenv("OCTOP_REQUIRE_PG");
    if (url == nullptr || *url == '\0') {
      if (require != nullptr && std::string(require) == "1")
        FAIL() << "OCTOP_REQUIRE_PG=1 but no OCTOP_TEST_PG_URL";
      GTEST_SKIP() << "PostgreSQL only: set OCTOP_TEST_PG_URL";
    }
    admin_url_ = url;
    admin_.reset(PQconnectdb(admin_url_.c_str()));
    ASSERT_EQ(PQstatus(admin_.get()), CONNECTION_OK) << PQerrorMessage(admin_.get());
    host_ = PQhost(admin_.get());
    port_ = PQport(admin_.get());
    db_ = PQdb(admin_.get());
    std::random_device rd;
    suffix_ = std::to_string(rd() % 1000000);
    owner_ = "octop_owner_" + suffix_;
    runtime_ = "octop_runtime_" + suffix_;
    const std::string db = QuoteIdent(db_);
    ASSERT_EQ(Exec(admin_.get(), "CREATE ROLE " + owner_ + " LOGIN PASSWORD 'owner-pw'"), "");
    ASSERT_EQ(Exec(admin_.get(), "CREATE ROLE " + runtime_ + " LOGIN PASSWORD 'runtime-pw'"), "");
    roles_created_ = true;
    // GRANT and REVOKE rewrite the database's (and public's) catalog row: two tests of this suite doing it at
    // once (ctest -j) make one fail with "tuple concurrently updated" (XX000), so they take turns.
    ASSERT_EQ(Exec(admin_.get(), kLockAcls), "");
    // The owner may create schemas; the runtime role may only connect.
    const std::string granted_owner =
        Exec(admin_.get(), "GRANT CONNECT, CREATE ON DATABASE " + db + " TO " + owner_);
    const std::string granted_runtime =
        Exec(admin_.get(), "GRANT CONNECT ON DATABASE " + db + " TO " + runtime_);
    // PostgreSQL < 15 lets every role create in public: take that away from the runtime role's view.
    (void)Exec(admin_.get(), "REVOKE CREATE ON SCHEMA public FROM PUBLIC");
    ASSERT_EQ(Exec(admin_.get(), kUnlockAcls), "");
    ASSERT_EQ(granted_owner, "");
    ASSERT_EQ(granted_runtime, "");
  }

  void TearDown() override {
    if (!admin_) return;
    for (const std::string& s : schemas_)
      (void)Exec(admin_.get(), "DROP SCHEMA IF EXISTS " + QuoteIdent(s) + " CASCADE");
    if (roles_created_) {
      const std::string db = QuoteIdent(db_);
      (void)Exec(admin_.get(), kLockAcls);
      for (const std::string& role : {owner_, runtime_}) {
        (void)Exec(admin_.get(), "DROP OWNED BY " + role + " CASCADE");
        (void)Exec(admin_.get(), "REVOKE ALL ON DATABASE " + db + " FROM " + role);
        (void)Exec(admin_.get(), "DROP ROLE IF EXISTS " + role);
      }
      (void)Exec(admin_.get(), kUnlockAcls);
    }
  }

  // A session-level advisory lock that serialises this suite's database-wide GRANT/REVOKE/DROP OWNED.
  static constexpr const char* kLockAcls = "SELECT pg_advisory_lock(7003001)";
  static constexpr const char* kUnlockAcls = "SELECT pg_advisory_unlock(7003001)";

  std::string UrlFor(const std::string& role, const std::string& password) const {
    return "postgresql://" + role + ":" + password + "@" + host_ + ":" + port_ + "/" + db_;
  }
  std::string OwnerUrl() const { return UrlFor(owner_, "owner-pw"); }
  std::string RuntimeUrl() const { return UrlFor(runtime_, "runtime-pw"); }

  // What `octop migrate` does for one namespace, as the owner, followed by the documented grants.
  // `line`: a plugin's namespace (tasks) or the job queue's.
  void MigrateAndGrant(const std::string& ns, store::MigrationLine line, int version = kLatest) {
    schemas_.push_back(ns);
    Status migrated;
    if (version != kLatest) {
      auto admin = store::OpenNamespaceAdmin(OwnerUrl(), {.ns = ns});
      ASSERT_TRUE(admin.ok()) << admin.status().ToString();
      migrated = (*admin)->MigrateTo(line, version);
    } else if (line == store::MigrationLine::kTasks) {
      auto store = store::OpenTaskStore(OwnerUrl(), {.ns = ns});
      ASSERT_TRUE(store.ok()) << store.status().ToString();
      migrated = (*store)->Migrate();
    } else {
      auto store = store::OpenJobStore(OwnerUrl(), {.ns = ns});
      ASSERT_TRUE(store.ok()) << store.status().ToString();
      migrated = (*store)->Migrate();
    }
    ASSERT_TRUE(migrated.ok()) << migrated.ToString();
    PgConn owner(PQconnectdb(OwnerUrl().c_str()));
    ASSERT_EQ(PQstatus(owner.get()), CONNECTION_OK);
    const std::string s = QuoteIdent(ns);
    for (const std::string& grant :
         {"GRANT USAGE ON SCHEMA " + s + " TO " + runtime_,
          "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA " + s + " TO " + runtime_,
          "GRANT USAGE ON ALL SEQUENCES IN SCHEMA " + s + " TO " + runtime_}) {
      ASSERT_EQ(Exec(owner.get(), grant), "") << grant;
    }
  }

  static constexpr int kLatest = -1;
  PgConn admin_;
  std::string admin_url_, host_, port_, db_, suffix_, owner_, runtime_;
  bool roles_created_ = false;
  std::vector<std::string> schemas_;
};

TEST_F(LeastPrivilegeTest, TheRuntimeRoleRunsTasksJobsAndNotificationsWithoutDdlRights) {
  const std::string plugin_ns = "lp_" + suffix_ + "_demo";
  const std::string jobs_ns = "lp_" + suffix_ + "_octop";
  MigrateAndGrant(plugin_ns, store::MigrationLine::kTasks);
  MigrateAndGrant(jobs_ns, store::MigrationLine::kJobs);
  const std::string runtime_url = RuntimeUrl();

  // The scheduler, with the runtime role: its "migrate on first use" finds the schema current and runs no
  // DDL.
  auto counter = std::make_shared<CallCounter>();
  SchedulerOptions options;
  options.logger = [](LogLevel, std::string_view) {};
  runtime::StoreFactory stores = [runtime_url, plugin_ns](
                                     const std::string&,
                                     const Clock& c) -> Result<std::unique_ptr<store::TaskStore>> {
    return store::OpenTaskStore(runtime_url, {.ns = plugin_ns, .clock = &c});
  };
  std::unique_ptr<Scheduler> owned = runtime::SchedulerOpener::Create(options, stores);
  Scheduler& scheduler = *owned;
  PluginScheduler& plugin = scheduler.ForPlugin("demo");
  TaskDefinition task;
  task.id = "lp-task";
  task.frequency = ManualTrigger{};
  task.timeout = Duration::FromMilliseconds(60000);
  task.fn = [counter](std::stop_token) { counter->Hit(); };
  Status scheduled = plugin.ScheduleTask(task);
  ASSERT_TRUE(scheduled.ok()) << scheduled.ToString();

  // LISTEN/NOTIFY as the runtime role: a trigger notifies the tasks channel.
  auto listening = store::OpenTaskStore(runtime_url, {.ns = plugin_ns});
  ASSERT_TRUE(listening.ok());
  auto listener = (*listening)->Listen({std::string(store::kTasksChannel)});
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  ASSERT_TRUE(plugin.TriggerTask("lp-task").ok());
  ASSERT_TRUE(counter->WaitForCalls(1)) << "the global task ran with the runtime role";
  bool notified = false;
  for (int i = 0; i < 50 && !notified; ++i) {
    auto notes = (*listener)->Wait(std::chrono::milliseconds(200), std::stop_token());
    ASSERT_TRUE(notes.ok()) << notes.status().ToString();
    for (const auto& n : *notes)
      notified = notified || (n.channel == store::kTasksChannel && n.payload == "lp-task");
  }
  EXPECT_TRUE(notified);
  scheduler.Shutdown();

  // The job queue, with the runtime role.
  JobQueueOptions job_options;
  job_options.logger = [](LogLevel, std::string_view) {};
  auto queue = runtime::JobQueueOpener::Open(
      job_options, [runtime_url, jobs_ns](const Clock& c) -> Result<std::unique_ptr<store::JobStore>> {
        return store::OpenJobStore(runtime_url, {.ns = jobs_ns, .clock = &c});
      });
  ASSERT_TRUE(queue.ok()) << queue.status().ToString();
  auto done = std::make_shared<CallCounter>();
  ASSERT_TRUE((*queue)
                  ->RegisterHandler("lp",
                                    [done](const JobContext&) {
                                      done->Hit();
                                      return JobResult::Done();
                                    })
                  .ok());
  ASSERT_TRUE((*queue)->AddWorkers("default", 1).ok());
  ASSERT_TRUE((*queue)->Start().ok());
  JobSpec spec;
  spec.kind = "lp";
  auto job = (*queue)->Enqueue(spec);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  ASSERT_TRUE(Eventually([&] {
    auto info = (*queue)->GetJob(job->id);
    return info.ok() && info->status == JobStatus::kSuccess;
  }));
  EXPECT_EQ(done->calls(), 1);
  (*queue)->Shutdown();

  // And no DDL: every attempt is refused with insufficient_privilege (42501).
  PgConn rt(PQconnectdb(runtime_url.c_str()));
  ASSERT_EQ(PQstatus(rt.get()), CONNECTION_OK);
  const std::string s = QuoteIdent(plugin_ns);
  for (const std::string& ddl :
       {"CREATE TABLE " + s + ".intruder (a int)", "DROP TABLE " + s + ".backstage_backend_tasks__tasks",
        "ALTER TABLE " + s + ".backstage_backend_tasks__tasks ADD COLUMN x int",
        "CREATE INDEX ON " + s + ".backstage_backend_tasks__tasks (id)",
        "TRUNCATE " + s + ".backstage_backend_tasks__tasks", "CREATE SCHEMA lp_intruder_" + suffix_,
        "CREATE TABLE public.intruder_" + suffix_ + " (a int)"}) {
    EXPECT_EQ(Exec(rt.get(), ddl), "42501") << ddl;
  }
  // While DML works.
  EXPECT_EQ(Exec(rt.get(), "SELECT count(*) FROM " + s + ".backstage_backend_tasks__tasks"), "");
}

TEST_F(LeastPrivilegeTest, AnOlderSchemaIsAClearErrorForTheRuntimeRole) {
  const std::string ns = "lp_" + suffix_ + "_old";
  MigrateAndGrant(ns, store::MigrationLine::kTasks, 2);
  auto store = store::OpenTaskStore(RuntimeUrl(), {.ns = ns});
  ASSERT_TRUE(store.ok());
  Status migrated = (*store)->Migrate();
  EXPECT_EQ(migrated.code(), StatusCode::kFailedPrecondition) << migrated.ToString();
  EXPECT_NE(migrated.message().find("octop migrate"), std::string::npos) << migrated.ToString();
  EXPECT_NE(migrated.message().find("version 2 of"), std::string::npos) << migrated.ToString();
  auto version = (*store)->SchemaVersion();
  ASSERT_TRUE(version.ok());
  EXPECT_EQ(*version, 2) << "nothing was half-applied";
  // The owner upgrades it; then the runtime role starts.
  auto owner = store::OpenTaskStore(OwnerUrl(), {.ns = ns});
  ASSERT_TRUE(owner.ok());
  ASSERT_TRUE((*owner)->Migrate().ok());
  EXPECT_TRUE((*store)->Migrate().ok());
}

TEST_F(LeastPrivilegeTest, HostileSchemaNamesAreQuotedNotExecuted) {
  // Each name would break out of an unquoted identifier; as the owner, every operation must stay inside the
  // one schema of exactly that name.
  const std::vector<std::string> names = {"lp_" + suffix_ + "\"; DROP TABLE x; --",
                                          "lp_" + suffix_ + " a'b\\c", "LP_" + suffix_ + "_MiXeD.dot"};
  for (const std::string& ns : names) {
    schemas_.push_back(ns);
    auto store = store::OpenTaskStore(OwnerUrl(), {.ns = ns});
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE((*store)->Migrate().ok()) << ns;
    ASSERT_TRUE((*store)
                    ->UpsertTask({"t", R"({"version":2,"cadence":"manual","timeoutAfterDuration":"PT1M"})",
                                  store::NullTime{}, store::NullTime{}})
                    .ok());
    auto rows = (*store)->ListTasks({});
    ASSERT_TRUE(rows.ok());
    EXPECT_EQ(rows->size(), 1u);
    PGresult* r = PQexecParams(admin_.get(), "SELECT count(*) FROM pg_namespace WHERE nspname = $1", 1,
                               nullptr, std::vector<const char*>{ns.c_str()}.data(), nullptr, nullptr, 0);
    ASSERT_EQ(PQresultStatus(r), PGRES_TUPLES_OK);
    EXPECT_STREQ(PQgetvalue(r, 0, 0), "1") << "the schema has exactly the hostile name: " << ns;
    PQclear(r);
  }
}

}  // namespace
}  // namespace octop::fault_testing
