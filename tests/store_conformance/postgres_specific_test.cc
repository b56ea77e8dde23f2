// What only the PostgreSQL backend has: the connection pool under contention, reconnecting after the server
// kills our backends, LISTEN/NOTIFY across Store objects and after the listening backend dies, schemas as
// namespaces.
//
// Needs a server: OCTOP_TEST_PG_URL (make test starts one). Without it every test is skipped, unless
// OCTOP_REQUIRE_PG=1, which turns the skip into a failure.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <octop/error_json.h>
#include <octop/testing/fake_clock.h>

#include "store/job_store.h"
#include "store/namespace_admin.h"
#include "store/postgres/pg_admin_session.h"
#include "store/postgres/pg_connection.h"
#include "store/postgres/pg_timestamp.h"
#include "store/postgres/postgres_store.h"
#include "store/task_store.h"
#include "store_test_env.h"

namespace octop::store {
namespace {

using postgres::PgAdminSession;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::UrlOfDatabase;

constexpr char kSettings[] = R"({"version":2,"cadence":"PT1M","timeoutAfterDuration":"PT1M"})";

std::string EnvOrEmpty(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

class PostgresSpecificTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_url_ = EnvOrEmpty("OCTOP_TEST_PG_URL");
    if (base_url_.empty()) {
      if (EnvOrEmpty("OCTOP_REQUIRE_PG") == "1")
        FAIL() << "OCTOP_REQUIRE_PG=1 but OCTOP_TEST_PG_URL is not set";
      GTEST_SKIP() << "OCTOP_TEST_PG_URL is not set";
    }
    ns_ = testing::FreshNamespace();
    // A per-test application_name tells this test's backends apart in pg_stat_activity.
    std::random_device rd;
    app_ = "octop_pgtest_" + std::to_string(rd());
    url_ = base_url_ + (base_url_.find('?') == std::string::npos ? "?" : "&") + "application_name=" + app_;
    auto admin = PgAdminSession::Open(base_url_);
    ASSERT_TRUE(admin.ok()) << admin.status().ToString();
    admin_ = std::move(admin).value();
  }

  // A migrated task store (or job store) on namespace `ns`.
  std::unique_ptr<TaskStore> Open(const std::string& ns, int pool_size = 4,
                                  const Clock* clock = &Clock::Real()) {
    return Migrated(OpenTaskStore(url_, Options(ns, pool_size, clock)));
  }
  std::unique_ptr<JobStore> OpenJobs(const std::string& ns, int pool_size = 4,
                                     const Clock* clock = &Clock::Real()) {
    return Migrated(OpenJobStore(url_, Options(ns, pool_size, clock)));
  }
  static StoreOptions Options(const std::string& ns, int pool_size, const Clock* clock) {
    StoreOptions options;
    options.ns = ns;
    options.pool_size = pool_size;
    options.clock = clock;
    return options;
  }
  template <typename S>
  static std::unique_ptr<S> Migrated(Result<std::unique_ptr<S>> store) {
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    if (!store.ok()) return nullptr;
    EXPECT_TRUE((*store)->Migrate().ok());
    return std::move(store).value();
  }

  std::vector<std::string> BackendPids(const std::string& extra_condition = "") {
    auto rows = admin_->Query(
        "SELECT pid::text FROM pg_stat_activity WHERE application_name = $1 " + extra_condition, {app_});
    EXPECT_TRUE(rows.ok()) << rows.status().ToString();
    std::vector<std::string> pids;
    if (rows.ok()) {
      for (const auto& row : *rows) pids.push_back(row[0].value_or(""));
    }
    return pids;
  }

  // Terminates the backends and waits (with a deadline) until the server has removed them.
  void TerminateBackends(const std::string& extra_condition = "") {
    std::vector<std::string> pids = BackendPids(extra_condition);
    ASSERT_FALSE(pids.empty());
    for (const std::string& pid : pids) {
      auto r = admin_->Query("SELECT pg_terminate_backend($1::int)", {pid});
      ASSERT_TRUE(r.ok()) << r.status().ToString();
    }
    auto deadline = std::chrono::steady_clock::now() + seconds(10);
    while (true) {
      auto r = admin_->Query("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY ($1::int[])",
                             {"{" + Join(pids) + "}"});
      ASSERT_TRUE(r.ok());
      if ((*r)[0][0] == "0") break;
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "backends did not exit";
      std::this_thread::yield();
    }
  }

  static std::string Join(const std::vector<std::string>& v) {
    std::string out;
    for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
    return out;
  }

  static UpsertTaskParams DueTask(const std::string& id) { return {id, kSettings, DbNowPlus{}, DbNowPlus{}}; }

  // Waits for notifications until one with `payload` arrives or `deadline` passes; returns all it saw.
  static std::vector<Notification> WaitFor(Listener& listener, const std::string& payload,
                                           milliseconds budget = milliseconds(5000)) {
    std::vector<Notification> seen;
    auto deadline = std::chrono::steady_clock::now() + budget;
    while (std::chrono::steady_clock::now() < deadline) {
      auto got = listener.Wait(milliseconds(200), {});
      if (!got.ok()) continue;
      for (auto& n : *got) seen.push_back(n);
      for (auto& n : seen) {
        if (n.payload == payload) return seen;
      }
    }
    return seen;
  }

  // A store of this test's namespace listening on `channel`: the store must outlive the listener's use.
  struct Listening {
    std::unique_ptr<Store> store;
    std::unique_ptr<Listener> listener;
  };
  Listening ListenOn(std::string_view channel) {
    Listening out;
    out.store = Open(ns_);
    if (out.store == nullptr) return out;
    auto listener = out.store->Listen({std::string(channel)});
    EXPECT_TRUE(listener.ok()) << listener.status().ToString();
    if (listener.ok()) out.listener = std::move(listener).value();
    return out;
  }

  std::string base_url_, url_, app_, ns_;
  std::unique_ptr<PgAdminSession> admin_;
};

TEST_F(PostgresSpecificTest, PoolServesMoreThreadsThanConnections) {
  constexpr int kPool = 2, kThreads = 8, kOps = 40;
  auto store = Open(ns_, kPool);
  ASSERT_NE(store, nullptr);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kOps; ++i) {
        std::string id = "task-" + std::to_string(t) + "-" + std::to_string(i);
        if (!store->UpsertTask(DueTask(id)).ok()) ++failures;
        auto polled = store->PollTasks({{id}});
        if (!polled.ok() || polled->tasks.size() != 1 || !polled->tasks[0].ready) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_LE(BackendPids().size(), static_cast<std::size_t>(kPool));
  auto rows = store->ListTasks({});
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->size(), static_cast<std::size_t>(kThreads * kOps));
}

TEST_F(PostgresSpecificTest, ExactlyOneOfManyClaimersWinsThroughASmallPool) {
  auto store = Open(ns_, 3);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->UpsertTask(DueTask("contended")).ok());
  constexpr int kThreads = 12;
  std::atomic<int> wins{0}, errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto claimed = store->TryClaimTask({"contended", "ticket-" + std::to_string(t), seconds(60)});
      if (!claimed.ok()) {
        ++errors;
      } else if (claimed->has_value()) {
        ++wins;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(wins.load(), 1);
}

TEST_F(PostgresSpecificTest, ReconnectsAfterItsBackendsAreTerminated) {
  auto store = Open(ns_, 3);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->UpsertTask(DueTask("survivor")).ok());
  // Open all three pooled connections.
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) threads.emplace_back([&] { (void)store->ListTasks({}); });
  for (auto& th : threads) th.join();
  ASSERT_FALSE(BackendPids().empty());

  TerminateBackends();

  auto failed = store->ListTasks({});
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kUnavailable) << failed.status().ToString();
  // The failed call dropped every idle connection (they were all dead), so the next call gets a fresh one.
  auto rows = store->ListTasks({});
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].id, "survivor");
  EXPECT_TRUE(store->TriggerTask({"survivor"}).ok());
}

TEST_F(PostgresSpecificTest, ListenerHearsTriggersFromAnotherStoreOfTheSameNamespaceOnly) {
  auto listening = Open(ns_);
  auto triggering = Open(ns_);
  std::string other_ns = testing::FreshNamespace();
  auto other = Open(other_ns);
  ASSERT_NE(listening, nullptr);
  ASSERT_NE(triggering, nullptr);
  ASSERT_NE(other, nullptr);
  ASSERT_TRUE(triggering->UpsertTask(DueTask("mine")).ok());
  ASSERT_TRUE(other->UpsertTask(DueTask("theirs")).ok());
  auto listener = listening->Listen({std::string(kTasksChannel)});
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();

  // Commit order is delivery order: a leak of the other namespace's trigger would arrive before ours.
  ASSERT_TRUE(other->TriggerTask({"theirs"}).ok());
  ASSERT_TRUE(triggering->TriggerTask({"mine"}).ok());
  std::vector<Notification> seen = WaitFor(**listener, "mine");
  ASSERT_FALSE(seen.empty());
  for (const auto& n : seen) {
    EXPECT_EQ(n.channel, kTasksChannel);
    EXPECT_EQ(n.payload, "mine");
  }
}

// A claim and an enqueue's wake-up commit with synchronous_commit off for their own transaction only
// (docs/jobs.md "Durability of claims"). The pooled session must keep its setting, or every later completion
// on that connection would stop waiting for its WAL flush; and the wake-up must still reach other stores.
TEST_F(PostgresSpecificTest, AsynchronousClaimsAndWakeUpsLeaveTheSessionDurabilitySettingAlone) {
  StoreOptions options;
  options.ns = ns_;
  options.pool_size = 1;  // every call below runs on the same session
  auto opened = OpenJobStore(url_ + "&options=-c%20synchronous_commit%3Don", options);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::unique_ptr<JobStore> store = std::move(opened).value();
  ASSERT_TRUE(store->Migrate().ok());
  Listening listening = ListenOn(kJobsChannel);
  ASSERT_NE(listening.listener, nullptr);
  auto setting = [&] {
    std::string value;
    Status s = store->WithTransaction([&](Transaction& tx) -> Status {
      OCTOP_ASSIGN_OR_RETURN(SqlRows rows, tx.Execute("SELECT current_setting('synchronous_commit')", {}));
      if (!rows.rows.empty()) value = rows.rows[0][0].value_or("");
      return Status::Ok();
    });
    EXPECT_TRUE(s.ok()) << s.ToString();
    return value;
  };
  ASSERT_EQ(setting(), "on");

  ASSERT_TRUE(store->EnqueueJobs({{.kind = "k", .queue = "wake"}}).ok());
  EXPECT_EQ(setting(), "on");
  std::vector<Notification> seen = WaitFor(*listening.listener, "wake");
  EXPECT_TRUE(
      std::any_of(seen.begin(), seen.end(), [](const Notification& n) { return n.payload == "wake"; }));

  auto claimed = store->ClaimJobs({.queue = "wake", .limit = 1});
  ASSERT_TRUE(claimed.ok()) << claimed.status().ToString();
  ASSERT_EQ(claimed->size(), 1u);
  EXPECT_EQ(setting(), "on");
  auto completed = store->CompleteJobs({{.id = claimed->front().id,
                                         .attempt_token = claimed->front().attempt_token.value_or(""),
                                         .outcome = JobOutcome::kSuccess}});
  ASSERT_TRUE(completed.ok()) << completed.status().ToString();
  EXPECT_EQ(*completed, std::vector<bool>{true});
  EXPECT_EQ(setting(), "on");
  // The planner settings the claim and the completion run under end with their transactions too.
  std::string plans;
  ASSERT_TRUE(store
                  ->WithTransaction([&](Transaction& tx) -> Status {
                    OCTOP_ASSIGN_OR_RETURN(SqlRows rows,
                                           tx.Execute("SELECT current_setting('enable_seqscan') || "
                                                      "current_setting('enable_bitmapscan')",
                                                      {}));
                    if (!rows.rows.empty()) plans = rows.rows[0][0].value_or("");
                    return Status::Ok();
                  })
                  .ok());
  EXPECT_EQ(plans, "onon");
}

// A completion batch that finishes every job of a claim deletes the claim's lease; one that finishes part of
// it leaves the lease to the rescuer. Both completion statements: a batch of plain successes
// (CompleteSucceededJobs) and one with any other outcome or an error text (CompleteJobs).
TEST_F(PostgresSpecificTest, ACompletionBatchThatFinishesAClaimDeletesItsLease) {
  std::unique_ptr<JobStore> store = OpenJobs(ns_, /*pool_size=*/1);  // one session: its prepared statements
  ASSERT_NE(store, nullptr);
  auto prepared = [&](const std::string& name) {
    bool found = false;
    Status s = store->WithTransaction([&](Transaction& tx) -> Status {
      OCTOP_ASSIGN_OR_RETURN(
          SqlRows rows, tx.Execute("SELECT count(*) FROM pg_prepared_statements WHERE name = $1", {name}));
      found = rows.rows.at(0).at(0) == "1";
      return Status::Ok();
    });
    EXPECT_TRUE(s.ok()) << s.ToString();
    return found;
  };
  auto leases = [&] {
    long n = -1;
    Status s = store->WithTransaction([&](Transaction& tx) -> Status {
      OCTOP_ASSIGN_OR_RETURN(SqlRows rows, tx.Execute("SELECT count(*) FROM octop_job_leases", {}));
      n = std::stol(rows.rows.at(0).at(0).value_or("-1"));
      return Status::Ok();
    });
    EXPECT_TRUE(s.ok()) << s.ToString();
    return n;
  };
  auto done = [](const JobInfo& job, JobOutcome outcome = JobOutcome::kSuccess,
                 std::optional<std::string> error = std::nullopt) {
    return JobCompletion{.id = job.id,
                         .attempt_token = job.attempt_token.value_or(""),
                         .outcome = outcome,
                         .error = std::move(error)};
  };
  for (const bool plain : {true, false}) {
    SCOPED_TRACE(plain ? "successes only" : "with an error text");
    std::vector<JobSpec> specs(3, JobSpec{.kind = "k"});
    specs[0].unique_key = std::string(plain ? "plain" : "mixed");
    ASSERT_TRUE(store->EnqueueJobs(specs).ok());
    auto claimed = store->ClaimJobs({.queue = "default", .limit = 3, .timeout = std::chrono::minutes(5)});
    ASSERT_TRUE(claimed.ok()) << claimed.status().ToString();
    ASSERT_EQ(claimed->size(), 3u);
    EXPECT_EQ(leases(), 1);
    const std::optional<std::string> error = plain ? std::nullopt : std::optional<std::string>("note");
    // Part of the claim, plus a stale token: the lease stays.
    JobCompletion stale = done((*claimed)[2]);
    stale.attempt_token = "not-the-token";
    auto first = store->CompleteJobs({done((*claimed)[0], JobOutcome::kSuccess, error), stale});
    ASSERT_TRUE(first.ok()) << first.status().ToString();
    EXPECT_EQ(*first, (std::vector<bool>{true, false}));
    EXPECT_EQ(leases(), 1);
    // Prepared on first use: the plain round runs first and prepares only the statement for successes.
    EXPECT_TRUE(prepared(plain ? "octop_CompleteSucceededJobs" : "octop_CompleteJobs"));
    if (plain) {
      EXPECT_FALSE(prepared("octop_CompleteJobs")) << "plain successes took the general statement";
    }
    // The rest in a second batch: its count is not the lease's, so the lease still stays.
    auto second =
        store->CompleteJobs({done((*claimed)[1]), done((*claimed)[2], JobOutcome::kSuccess, error)});
    ASSERT_TRUE(second.ok()) << second.status().ToString();
    EXPECT_EQ(*second, (std::vector<bool>{true, true}));
    EXPECT_EQ(leases(), 1);
    for (std::size_t i = 0; i < claimed->size(); ++i) {
      auto row = store->GetJob((*claimed)[i].id);
      ASSERT_TRUE(row.ok()) << row.status().ToString();
      EXPECT_EQ(row->status, JobStatus::kSuccess);
      EXPECT_EQ(row->last_error, i == 1 ? std::nullopt : error);
      EXPECT_TRUE(row->completed_at.has_value());
      EXPECT_FALSE(row->expires_at.has_value());
    }
    // The key went with its job: a new job may take it.
    auto again = store->EnqueueJobs({specs[0]});
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_FALSE(again->front().existing);
    // A claim finished by one batch loses its lease.
    auto whole = store->ClaimJobs({.queue = "default", .limit = 3, .timeout = std::chrono::minutes(5)});
    ASSERT_TRUE(whole.ok()) << whole.status().ToString();
    ASSERT_EQ(whole->size(), 1u);
    EXPECT_EQ(leases(), 2);
    auto finished = store->CompleteJobs({done(whole->front(), JobOutcome::kSuccess, error)});
    ASSERT_TRUE(finished.ok()) << finished.status().ToString();
    EXPECT_EQ(*finished, std::vector<bool>{true});
    EXPECT_EQ(leases(), 1);
    ASSERT_TRUE(store
                    ->WithTransaction([](Transaction& tx) {
                      return tx.Execute("DELETE FROM octop_job_leases", {}).status();
                    })
                    .ok());
  }
}

// A lease's job ids are stored out of line without a compression attempt (octop_0005_lease_ids;
// docs/store.md §8.5): a claim of 300 jobs (4.8 kB of ids, past the 2 kB at which PostgreSQL compresses or
// moves a row's wide values) writes its lease uncompressed in the TOAST table, and the completion that
// finishes the claim reads the ids' count from it and deletes it.
TEST_F(PostgresSpecificTest, ALeaseOfAManyJobClaimIsStoredUncompressedOutOfLine) {
  std::unique_ptr<JobStore> store = OpenJobs(ns_, /*pool_size=*/1);
  ASSERT_NE(store, nullptr);
  auto scalar = [&](const std::string& query) {
    std::optional<std::string> value;
    Status s = store->WithTransaction([&](Transaction& tx) -> Status {
      OCTOP_ASSIGN_OR_RETURN(SqlRows rows, tx.Execute(query, {}));
      if (rows.rows.size() == 1) value = rows.rows.at(0).at(0);
      return Status::Ok();
    });
    EXPECT_TRUE(s.ok()) << s.ToString();
    return value.value_or("<none>");
  };
  EXPECT_EQ(scalar("SELECT attstorage FROM pg_attribute WHERE attrelid = 'octop_job_leases'::regclass "
                   "AND attname = 'job_ids'"),
            "e");
  constexpr std::size_t kJobs = 300;
  ASSERT_TRUE(store->EnqueueJobs(std::vector<JobSpec>(kJobs, JobSpec{.kind = "k"})).ok());
  auto claimed = store->ClaimJobs({.queue = "default", .limit = 1000, .timeout = std::chrono::minutes(5)});
  ASSERT_TRUE(claimed.ok()) << claimed.status().ToString();
  ASSERT_EQ(claimed->size(), kJobs);
  // NULL compression method: stored as it is; a stored size below the array's 16 bytes an id would mean it
  // was compressed.
  EXPECT_EQ(
      scalar("SELECT coalesce(pg_column_compression(job_ids), 'none') || ' ' || cardinality(job_ids) || ' ' "
             "|| (pg_column_size(job_ids) >= 16 * cardinality(job_ids)) FROM octop_job_leases"),
      "none 300 true");
  const std::string toast =
      scalar("SELECT reltoastrelid::regclass FROM pg_class WHERE oid = 'octop_job_leases'::regclass");
  EXPECT_NE(scalar("SELECT count(*) FROM " + toast), "0") << "the ids were kept in the row";
  std::vector<JobCompletion> completions;
  for (const JobInfo& job : *claimed) {
    completions.push_back({.id = job.id, .attempt_token = job.attempt_token.value_or("")});
  }
  auto applied = store->CompleteJobs(completions);
  ASSERT_TRUE(applied.ok()) << applied.status().ToString();
  EXPECT_EQ(std::count(applied->begin(), applied->end(), true), static_cast<long>(kJobs));
  EXPECT_EQ(scalar("SELECT count(*) FROM octop_job_leases"), "0");
}

// PgConnection::ExecPreparedWithSettings: the settings statement and the prepared one run in one transaction
// (pipeline mode), the settings are in force for the statement and gone after it; a failure of either is
// reported and leaves a usable session with no transaction open.
TEST_F(PostgresSpecificTest, SettingsRunInTheStatementsTransactionAndEndWithIt) {
  auto opened = postgres::PgConnection::Open(url_);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  postgres::PgConnection& conn = **opened;
  const std::string settings_name = "settings", settings = "SELECT set_config('enable_seqscan', 'off', true)";
  const std::string probe = "SELECT current_setting('enable_seqscan'), $1::text, txid_current_if_assigned()";
  auto r = conn.ExecPreparedWithSettings("settings", settings, "probe", probe, {std::string("x")});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->Text(0, 0), "off");
  EXPECT_EQ(r->Text(0, 1), "x");
  auto after = conn.ExecParams("SELECT current_setting('enable_seqscan')", {});
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(after->Text(0, 0), "on") << "a transaction-local setting outlived the pipeline";
  EXPECT_FALSE(conn.in_transaction());

  // One transaction: a write before a failing statement does not stay.
  ASSERT_TRUE(conn.Exec("CREATE TEMP TABLE pipeline_probe (n int)").ok());
  auto failed = conn.ExecPreparedWithSettings("insert", "INSERT INTO pipeline_probe VALUES (1)", "divide",
                                              "SELECT 1 / $1::int", {std::string("0")});
  EXPECT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("division by zero"), std::string::npos)
      << failed.status().ToString();
  auto count = conn.ExecParams("SELECT count(*) FROM pipeline_probe", {});
  ASSERT_TRUE(count.ok()) << count.status().ToString();
  EXPECT_EQ(count->Text(0, 0), "0");

  // Failing settings: the statement does not run, and the failure is the settings'.
  auto bad =
      conn.ExecPreparedWithSettings("bad settings", "SELECT set_config('no_such.setting', 'x', true), 1 / 0",
                                    "probe", probe, {std::string("y")});
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("division by zero"), std::string::npos) << bad.status().ToString();
  EXPECT_FALSE(conn.broken());
  EXPECT_FALSE(conn.in_transaction());
  auto again = conn.ExecPreparedWithSettings("settings", settings, "probe", probe, {std::string("z")});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->Text(0, 1), "z");

  // Three calls, each with its parameters: a snapshot per call (the third sees the second's row); one
  // transaction (a failing middle call undoes the first call's write, and the third does not run).
  const std::string insert_name = "insert n", insert = "INSERT INTO pipeline_probe VALUES ($1::int)";
  const std::string read_name = "read n", read = "SELECT count(*) FROM pipeline_probe";
  const postgres::PgParams two{std::string("2")}, none{}, zero{std::string("0")};
  auto three = conn.ExecPreparedPipeline(
      {{&settings_name, &settings, nullptr}, {&insert_name, &insert, &two}, {&read_name, &read, &none}});
  ASSERT_TRUE(three.ok()) << three.status().ToString();
  EXPECT_EQ(three->Text(0, 0), "1");
  EXPECT_FALSE(conn.in_transaction());
  const std::string divide_name = "divide", divide = "SELECT 1 / $1::int";
  auto stopped = conn.ExecPreparedPipeline(
      {{&insert_name, &insert, &two}, {&divide_name, &divide, &zero}, {&insert_name, &insert, &two}});
  EXPECT_FALSE(stopped.ok());
  EXPECT_NE(stopped.status().message().find("division by zero"), std::string::npos)
      << stopped.status().ToString();
  EXPECT_FALSE(conn.broken());
  auto kept = conn.ExecParams("SELECT count(*) FROM pipeline_probe", {});
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_EQ(kept->Text(0, 0), "1");
}

TEST_F(PostgresSpecificTest, EnqueueWakeUpsAreSentAfterTheCallReturnedEvenWhenTheStoreIsClosedAtOnce) {
  Listening listening = ListenOn(kJobsChannel);
  ASSERT_NE(listening.listener, nullptr);
  {
    auto producer = OpenJobs(ns_, 1);
    ASSERT_NE(producer, nullptr);
    ASSERT_TRUE(producer->EnqueueJobs({{.kind = "k", .queue = "last-words"}}).ok());
    // Closed before its wake-up thread had any reason to have sent: the destructor sends it.
  }
  std::vector<Notification> seen = WaitFor(*listening.listener, "last-words");
  EXPECT_TRUE(
      std::any_of(seen.begin(), seen.end(), [](const Notification& n) { return n.payload == "last-words"; }));
}

TEST_F(PostgresSpecificTest, ManyThreadsEnqueueingThroughOneStoreEachWakeTheirQueue) {
  Listening listening = ListenOn(kJobsChannel);
  ASSERT_NE(listening.listener, nullptr);
  auto producer = OpenJobs(ns_, 2);
  ASSERT_NE(producer, nullptr);
  constexpr int kThreads = 6;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        if (!producer->EnqueueJobs({{.kind = "k", .queue = "q" + std::to_string(t)}}).ok()) failures++;
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  // Every queue is woken at least once after its last enqueue (merged wake-ups may be fewer than enqueues).
  std::set<std::string> heard;
  const auto deadline = std::chrono::steady_clock::now() + seconds(10);
  while (heard.size() < kThreads && std::chrono::steady_clock::now() < deadline) {
    auto got = listening.listener->Wait(milliseconds(200), {});
    if (!got.ok()) continue;
    for (const Notification& n : *got) heard.insert(n.payload);
  }
  EXPECT_EQ(heard, (std::set<std::string>{"q0", "q1", "q2", "q3", "q4", "q5"}));
}

TEST_F(PostgresSpecificTest, ListenerReconnectsAfterItsBackendIsTerminated) {
  auto store = Open(ns_);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->UpsertTask(DueTask("wake-me")).ok());
  auto listener = store->Listen({std::string(kTasksChannel)});
  ASSERT_TRUE(listener.ok());

  TerminateBackends("AND query LIKE 'LISTEN%'");

  // The dead socket is readable at once, so this returns well before its timeout.
  auto broken = (*listener)->Wait(seconds(10), {});
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.status().code(), StatusCode::kUnavailable);

  // The next Wait reconnects and LISTENs again before it blocks, so a trigger sent after it started is heard.
  // The first short Wait re-establishes the subscription; only then is the trigger sent.
  auto reconnected = (*listener)->Wait(milliseconds(1), {});
  ASSERT_TRUE(reconnected.ok()) << reconnected.status().ToString();
  ASSERT_TRUE(store->TriggerTask({"wake-me"}).ok());
  std::vector<Notification> seen = WaitFor(**listener, "wake-me");
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].payload, "wake-me");
}

TEST_F(PostgresSpecificTest, WaitEndsPromptlyWhenStopIsRequested) {
  auto store = Open(ns_);
  ASSERT_NE(store, nullptr);
  auto listener = store->Listen({std::string(kTasksChannel)});
  ASSERT_TRUE(listener.ok());
  std::stop_source stop;
  std::atomic<bool> returned{false};
  std::thread waiter([&] {
    auto got = (*listener)->Wait(seconds(60), stop.get_token());
    EXPECT_TRUE(got.ok());
    returned = true;
  });
  auto started = std::chrono::steady_clock::now();
  stop.request_stop();
  waiter.join();
  EXPECT_TRUE(returned.load());
  EXPECT_LT(std::chrono::steady_clock::now() - started, seconds(5));
}

TEST_F(PostgresSpecificTest, CheckWritableSaysWhenTheSessionTakesNoWrites) {
  auto store = Open(ns_);
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(store->CheckWritable().ok());
  // Sessions that are read-only, as on a standby or under default_transaction_read_only: reads answer, the
  // readiness probe must not.
  StoreOptions options;
  options.ns = ns_;
  const std::string sep = url_.find('?') == std::string::npos ? "?" : "&";
  auto read_only = OpenTaskStore(url_ + sep + "options=-c%20default_transaction_read_only%3Don", options);
  ASSERT_TRUE(read_only.ok()) << read_only.status().ToString();
  EXPECT_TRUE((*read_only)->DatabaseNow().ok());
  const Status status = (*read_only)->CheckWritable();
  EXPECT_EQ(status.code(), StatusCode::kUnavailable) << status.ToString();
  EXPECT_NE(status.message().find("read-only"), std::string::npos) << status.ToString();
}

TEST_F(PostgresSpecificTest, SameTaskIdInTwoSchemasIsTwoTasks) {
  auto a = Open(ns_);
  std::string other_ns = testing::FreshNamespace();
  auto b = Open(other_ns);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(a->UpsertTask(DueTask("shared-id")).ok());
  ASSERT_TRUE(b->UpsertTask({"shared-id", R"({"version":2,"cadence":"manual","timeoutAfterDuration":"PT5M"})",
                             NullTime{}, NullTime{}})
                  .ok());
  auto claimed = a->TryClaimTask({"shared-id", "ticket-a", seconds(60)});
  ASSERT_TRUE(claimed.ok());
  EXPECT_TRUE(claimed->has_value());

  auto in_b = b->ListTasks({});
  ASSERT_TRUE(in_b.ok());
  ASSERT_EQ(in_b->size(), 1u);
  EXPECT_FALSE((*in_b)[0].current_run_ticket.has_value());
  EXPECT_FALSE((*in_b)[0].next_run_start_at.has_value());
  EXPECT_NE((*in_b)[0].settings_json.find("manual"), std::string::npos);
  EXPECT_EQ(b->CancelTask({"shared-id", SerializeErrorMessage("Task was cancelled")}).code(),
            StatusCode::kConflict);
  EXPECT_TRUE(a->CancelTask({"shared-id", SerializeErrorMessage("Task was cancelled")}).ok());
}

TEST_F(PostgresSpecificTest, OddSchemaNamesAreQuotedNotSpliced) {
  const std::string weird = "Weird-Name \"q\" x'; DROP SCHEMA public; -- \xC3\xBC";
  auto store = Open(weird);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->UpsertTask(DueTask("t1")).ok());
  auto rows = store->ListTasks({});
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 1u);
  auto schema = admin_->Query("SELECT count(*) FROM pg_namespace WHERE nspname = $1", {weird});
  ASSERT_TRUE(schema.ok());
  EXPECT_EQ((*schema)[0][0], "1");
  auto pub = admin_->Query("SELECT count(*) FROM pg_namespace WHERE nspname = 'public'");
  ASSERT_TRUE(pub.ok());
  EXPECT_EQ((*pub)[0][0], "1");
  auto listener = store->Listen({std::string(kTasksChannel)});
  ASSERT_TRUE(listener.ok());
  ASSERT_TRUE(store->TriggerTask({"t1"}).ok());
  EXPECT_FALSE(WaitFor(**listener, "t1").empty());
  auto dropped =
      admin_->Query("DROP SCHEMA \"Weird-Name \"\"q\"\" x'; DROP SCHEMA public; -- \xC3\xBC\" CASCADE");
  EXPECT_TRUE(dropped.ok()) << dropped.status().ToString();
}

TEST_F(PostgresSpecificTest, UnsafeSchemaNamesAreRejected) {
  for (const std::string& bad : {std::string(""), std::string(64, 'a'), std::string("pg_mine"),
                                 std::string("a/b"), std::string("line\nbreak")}) {
    StoreOptions options;
    options.ns = bad;
    auto store = OpenTaskStore(url_, options);
    ASSERT_FALSE(store.ok()) << "accepted '" << bad << "'";
    EXPECT_EQ(store.status().code(), StatusCode::kInvalidArgument);
  }
  StoreOptions longest;
  longest.ns = std::string(63, 'a');
  EXPECT_TRUE(OpenTaskStore(url_, longest).ok());
}

TEST_F(PostgresSpecificTest, ConcurrentMigrateFromManyNodesAppliesEachMigrationOnce) {
  constexpr int kNodes = 6;
  std::vector<std::unique_ptr<TaskStore>> nodes;
  for (int i = 0; i < kNodes; ++i) {
    StoreOptions options;
    options.ns = ns_;
    auto store = OpenTaskStore(url_, options);
    ASSERT_TRUE(store.ok());
    nodes.push_back(std::move(store).value());
  }
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (auto& node : nodes) {
    threads.emplace_back([&failures, &node] {
      if (!node->Migrate().ok()) ++failures;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  auto version = nodes[0]->SchemaVersion();
  ASSERT_TRUE(version.ok());
  EXPECT_EQ(*version, kLatestTaskSchemaVersion);
  auto knex = admin_->Query("SELECT count(*), count(DISTINCT name) FROM " + std::string("\"") + ns_ +
                            "\".backstage_backend_tasks__knex_migrations");
  ASSERT_TRUE(knex.ok()) << knex.status().ToString();
  EXPECT_EQ((*knex)[0][0], "3");
  EXPECT_EQ((*knex)[0][1], "3");
  auto lock = admin_->Query("SELECT count(*), max(is_locked) FROM \"" + ns_ +
                            "\".backstage_backend_tasks__knex_migrations_lock");
  ASSERT_TRUE(lock.ok());
  EXPECT_EQ((*lock)[0][0], "1");
  EXPECT_EQ((*lock)[0][1], "0");
}

TEST_F(PostgresSpecificTest, TimestampsRoundTripWithMicrosecondsAndFollowTheFakeClock) {
  octop::testing::FakeClock clock(octop::testing::FakeClock::DefaultStart() +
                                  std::chrono::microseconds(123457));
  auto store = Open(ns_, 2, &clock);
  ASSERT_NE(store, nullptr);
  WallTime at = octop::testing::FakeClock::DefaultStart() + std::chrono::hours(24 * 365 * 30) +
                std::chrono::microseconds(654321);
  ASSERT_TRUE(store->UpsertTask({"abs", kSettings, AbsoluteTime{at}, AbsoluteTime{at}}).ok());
  auto now = store->DatabaseNow();
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(*now, clock.WallNow());
  auto rows = store->ListTasks({{{"abs"}}});
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].next_run_start_at, at);
}

// A binary timestamptz (big-endian microseconds since 2000-01-01 UTC) as ReadBinaryTimestamp reads it; no
// server.
Result<WallTime> FromBinary(std::int64_t since_2000) {
  char bytes[8];
  for (int i = 0; i < 8; ++i) {
    bytes[i] = static_cast<char>((static_cast<std::uint64_t>(since_2000) >> (56 - 8 * i)) & 0xff);
  }
  return postgres::ReadBinaryTimestamp(bytes);
}

TEST(PgBinaryTimestamp, ReadsMicrosecondsAroundPostgresEpochAndRefusesWhatAWallTimeCannotHold) {
  const WallTime epoch_2000 = WallTime(seconds(946684800));
  EXPECT_EQ(FromBinary(0).value(), epoch_2000);
  EXPECT_EQ(FromBinary(-1).value(), epoch_2000 - std::chrono::microseconds(1));
  EXPECT_EQ(FromBinary(1'234'567).value(), epoch_2000 + std::chrono::microseconds(1'234'567));
  // The last microseconds a WallTime holds either way, and one beyond.
  const auto max_us =
      std::chrono::duration_cast<std::chrono::microseconds>(WallTime::duration::max()).count() -
      946684800000000;
  const auto min_us =
      std::chrono::duration_cast<std::chrono::microseconds>(WallTime::duration::min()).count() -
      946684800000000;
  EXPECT_TRUE(FromBinary(max_us).ok());
  EXPECT_TRUE(FromBinary(min_us).ok());
  EXPECT_EQ(FromBinary(max_us + 1).status().code(), StatusCode::kInternal);
  EXPECT_EQ(FromBinary(min_us - 1).status().code(), StatusCode::kInternal);
  // 'infinity' and '-infinity' on the wire.
  EXPECT_EQ(FromBinary(std::numeric_limits<std::int64_t>::max()).status().code(), StatusCode::kInternal);
  EXPECT_EQ(FromBinary(std::numeric_limits<std::int64_t>::min()).status().code(), StatusCode::kInternal);
}

// Job rows come back in binary format (docs/store.md §8.3 ClaimJobs): every timestamp keeps its microseconds,
// one before PostgreSQL's epoch (2000) included, and signed integers their sign, through a claim, GetJob and
// ListJobs alike; a value octop cannot hold, or a column whose type was changed, is an error for that read.
TEST_F(PostgresSpecificTest, JobRowsReadInBinaryKeepEveryMicrosecondAndRefuseWhatTheyCannotHold) {
  octop::testing::FakeClock clock(octop::testing::FakeClock::DefaultStart() +
                                  std::chrono::microseconds(123457));
  std::unique_ptr<JobStore> store = OpenJobs(ns_, 2, &clock);
  ASSERT_NE(store, nullptr);
  const WallTime before_2000 = WallTime(std::chrono::seconds(946684799)) + std::chrono::microseconds(999999);
  auto enqueued = store->EnqueueJobs({JobSpec{.kind = "k",
                                              .payload = R"({"n": -1})",
                                              .priority = -7,
                                              .scheduled_at = before_2000,
                                              .max_retries = 5},
                                      JobSpec{.kind = "later", .priority = 2147483647}});
  ASSERT_TRUE(enqueued.ok()) << enqueued.status().ToString();
  auto claimed = store->ClaimJobs(
      {.queue = "default", .limit = 1, .timeout = std::chrono::microseconds(90'000'001), .worker_id = "w"});
  ASSERT_TRUE(claimed.ok()) << claimed.status().ToString();
  ASSERT_EQ(claimed->size(), 1u);
  const JobInfo& job = claimed->front();
  EXPECT_EQ(job.id, (*enqueued)[0].id);
  EXPECT_EQ(job.payload, R"({"n": -1})");
  EXPECT_EQ(job.priority, -7);
  EXPECT_EQ(job.scheduled_at, before_2000);
  EXPECT_EQ(job.status, JobStatus::kRunning);
  EXPECT_EQ(job.attempt, 1);
  EXPECT_EQ(job.max_retries, 5);
  EXPECT_EQ(job.created_at, clock.WallNow());
  EXPECT_EQ(job.started_at, clock.WallNow());
  EXPECT_EQ(job.completed_at, std::nullopt);
  EXPECT_EQ(job.expires_at, clock.WallNow() + std::chrono::microseconds(90'000'001));
  EXPECT_EQ(job.unique_key, std::nullopt);
  EXPECT_EQ(job.worker_id, "w");
  auto got = store->GetJob(job.id);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->scheduled_at, before_2000);
  EXPECT_EQ(got->expires_at, job.expires_at);
  EXPECT_EQ(got->attempt_token, job.attempt_token);
  auto listed = store->ListJobs({.kind = "later"});
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ(listed->front().priority, 2147483647);
  EXPECT_EQ(listed->front().scheduled_at, clock.WallNow());
  auto with_budget = store->ListJobs({.kind = "k", .payload_budget = 0});
  ASSERT_TRUE(with_budget.ok()) << with_budget.status().ToString();
  ASSERT_EQ(with_budget->size(), 1u);
  EXPECT_EQ(with_budget->front().omitted_payload_bytes, 9);

  // 'infinity' (what a DBA may write to park a job) is beyond what a WallTime holds: that read fails, the
  // others do not.
  const std::string later = (*enqueued)[1].id;
  Status parked = store->WithTransaction([&](Transaction& tx) -> Status {
    return tx.Execute("UPDATE octop_jobs SET scheduled_at = 'infinity' WHERE id = $1::uuid", {later})
        .status();
  });
  ASSERT_TRUE(parked.ok()) << parked.ToString();
  auto infinite = store->GetJob(later);
  ASSERT_FALSE(infinite.ok());
  EXPECT_EQ(infinite.status().code(), StatusCode::kInternal);
  EXPECT_NE(infinite.status().message().find("timestamp out of range"), std::string::npos)
      << infinite.status().ToString();
  EXPECT_TRUE(store->GetJob(job.id).ok());

  // A column whose type was changed is not read as if it were the old one (its view goes first).
  Status altered = store->WithTransaction([&](Transaction& tx) -> Status {
    OCTOP_RETURN_IF_ERROR(tx.Execute("DROP VIEW octop_failed_jobs", {}).status());
    return tx.Execute("ALTER TABLE octop_jobs ALTER COLUMN priority TYPE bigint", {}).status();
  });
  ASSERT_TRUE(altered.ok()) << altered.ToString();
  std::unique_ptr<JobStore> reopened = OpenJobs(ns_, 1, &clock);
  ASSERT_NE(reopened, nullptr);
  auto misread = reopened->GetJob(job.id);
  ASSERT_FALSE(misread.ok());
  EXPECT_EQ(misread.status().code(), StatusCode::kInternal);
  EXPECT_NE(misread.status().message().find("not of the types"), std::string::npos)
      << misread.status().ToString();
}

TEST_F(PostgresSpecificTest, PollsThousandsOfIdsInOneStatement) {
  auto store = Open(ns_, 1);
  ASSERT_NE(store, nullptr);
  std::vector<std::string> ids;
  for (int i = 0; i < 3000; ++i) ids.push_back("id \"" + std::to_string(i) + "\\,{}");
  for (int i = 0; i < 3000; i += 100)
    ASSERT_TRUE(store->UpsertTask(DueTask(ids[static_cast<std::size_t>(i)])).ok());
  auto polled = store->PollTasks({ids});
  ASSERT_TRUE(polled.ok()) << polled.status().ToString();
  ASSERT_EQ(polled->tasks.size(), 30u);
  for (const auto& t : polled->tasks) EXPECT_TRUE(t.ready) << t.id;
}

// ---- Plugin placement as Backstage's backend.database decides it (docs/store.md)

// A plugin id short enough for a database name, fresh per call.
std::string ShortPluginId() {
  std::random_device rd;
  return "pd" + std::to_string(rd() % 100000000u);
}

TEST_F(PostgresSpecificTest, ADatabasePerPluginIsCreatedOnceAndHoldsTheTablesInPublic) {
  const std::string plugin = ShortPluginId();
  StoreOptions options;
  options.ns = plugin;
  options.plugin_division = PluginDivision{};
  // Four nodes open the plugin at once: one creates its database, the others find it.
  std::vector<Result<std::unique_ptr<TaskStore>>> opened;
  for (int i = 0; i < 4; ++i) opened.emplace_back(InternalError("not run"));
  std::vector<std::thread> threads;
  for (auto& slot : opened) threads.emplace_back([&] { slot = OpenTaskStore(url_, options); });
  for (auto& t : threads) t.join();
  for (auto& store : opened) {
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE((*store)->Migrate().ok());
  }
  ASSERT_TRUE((*opened[0])->UpsertTask(DueTask("in-plugin-db")).ok());
  auto seen = (*opened[3])->ListTasks({});
  ASSERT_TRUE(seen.ok());
  EXPECT_EQ(seen->size(), 1u);

  const std::string database = "backstage_plugin_" + plugin;
  auto exists = admin_->Query("SELECT count(*) FROM pg_database WHERE datname = $1", {database});
  ASSERT_TRUE(exists.ok());
  EXPECT_EQ((*exists)[0][0], "1");
  // Nothing of the plugin's in the URL's database.
  auto here = admin_->Query("SELECT count(*) FROM pg_namespace WHERE nspname = $1", {plugin});
  ASSERT_TRUE(here.ok());
  EXPECT_EQ((*here)[0][0], "0");
  auto in_plugin_db = PgAdminSession::Open(UrlOfDatabase(base_url_, database));
  ASSERT_TRUE(in_plugin_db.ok()) << in_plugin_db.status().ToString();
  auto rows = (*in_plugin_db)->Query("SELECT id FROM public.backstage_backend_tasks__tasks");
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0][0], "in-plugin-db");
  auto lock =
      (*in_plugin_db)
          ->Query("SELECT count(*), max(is_locked) FROM backstage_backend_tasks__knex_migrations_lock");
  ASSERT_TRUE(lock.ok());
  EXPECT_EQ((*lock)[0][0], "1");
  EXPECT_EQ((*lock)[0][1], "0");
}

TEST_F(PostgresSpecificTest, ASchemaPerPluginTakesTheSchemaPrefix) {
  const std::string plugin = ShortPluginId();
  StoreOptions options;
  options.ns = plugin;
  options.plugin_division = PluginDivision{.mode = PluginDivision::Mode::kSchema, .schema_prefix = "bs_"};
  auto store = OpenTaskStore(url_, options);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_TRUE((*store)->Migrate().ok());
  ASSERT_TRUE((*store)->UpsertTask(DueTask("in-schema")).ok());
  auto rows = admin_->Query("SELECT id FROM \"bs_" + plugin + "\".backstage_backend_tasks__tasks");
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ(ValidatePostgresNamespace(std::string(61, 'a'), options.plugin_division).code(),
            StatusCode::kInvalidArgument);  // bs_ + 61 bytes is over 63
}

TEST_F(PostgresSpecificTest, TasksKeptInASchemaAreNotSplitByADatabasePerPlugin) {
  const std::string plugin = ShortPluginId();
  auto old_layout = Open(plugin);  // a schema named after the plugin, as octop kept it before
  ASSERT_NE(old_layout, nullptr);
  StoreOptions options;
  options.ns = plugin;
  options.plugin_division = PluginDivision{};
  auto store = OpenTaskStore(url_, options);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(store.status().message().find("pluginDivisionMode: schema"), std::string::npos)
      << store.status().message();
  auto created =
      admin_->Query("SELECT count(*) FROM pg_database WHERE datname = $1", {"backstage_plugin_" + plugin});
  ASSERT_TRUE(created.ok());
  EXPECT_EQ((*created)[0][0], "0");
  options.plugin_division->mode = PluginDivision::Mode::kSchema;
  EXPECT_TRUE(OpenTaskStore(url_, options).ok());
}

TEST_F(PostgresSpecificTest, ASearchPathThatWouldSendBackstageElsewhereIsRefused) {
  const std::string plugin = ShortPluginId();
  StoreOptions options;
  options.ns = plugin;
  options.plugin_division = PluginDivision{};
  ASSERT_TRUE(OpenTaskStore(url_, options).ok());
  // A schema named like the connecting role: Backstage's unqualified names would resolve there.
  auto in_plugin_db = PgAdminSession::Open(UrlOfDatabase(base_url_, "backstage_plugin_" + plugin));
  ASSERT_TRUE(in_plugin_db.ok());
  auto role = (*in_plugin_db)->Query("SELECT current_user");
  ASSERT_TRUE(role.ok());
  ASSERT_TRUE((*in_plugin_db)->Query("CREATE SCHEMA \"" + *(*role)[0][0] + "\"").ok());
  auto store = OpenTaskStore(url_, options);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(store.status().message().find("search_path"), std::string::npos) << store.status().message();
}

TEST_F(PostgresSpecificTest, BackstageSessionsOnAPluginsDatabaseAreCounted) {
  const std::string plugin = ShortPluginId();
  StoreOptions options;
  options.ns = plugin;
  options.plugin_division = PluginDivision{};
  auto store = OpenTaskStore(url_, options);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto none = (*store)->CountBackstageSessions();
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, 0);
  // A session named as a Backstage backend names its connections to this plugin's database.
  auto backstage = PgAdminSession::Open(UrlOfDatabase(base_url_, "backstage_plugin_" + plugin) +
                                        "?application_name=backstage_plugin_" + plugin);
  ASSERT_TRUE(backstage.ok()) << backstage.status().ToString();
  auto one = (*store)->CountBackstageSessions();
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(*one, 1);
  // A namespace that is no plugin's (the job queue's, a test's): nothing to count.
  auto queue = Open(ns_);
  ASSERT_NE(queue, nullptr);
  EXPECT_EQ(*queue->CountBackstageSessions(), 0);
}

// Through PgBouncer in transaction mode, the named prepared statements a connection keeps land on server
// sessions other connections then use: what docs/configuration.md "Behind PgBouncer" says, measured on the
// real pooler, and the failure names the setting that avoids it. With it off, the same calls work.
TEST_F(PostgresSpecificTest, BehindPgBouncerInTransactionModePreparedStatementsFailAndPointToTheSetting) {
  const std::string bouncer = EnvOrEmpty("OCTOP_TEST_PGBOUNCER_URL");
  if (bouncer.empty()) {
    if (EnvOrEmpty("OCTOP_REQUIRE_PG") == "1")
      FAIL() << "OCTOP_REQUIRE_PG=1 but OCTOP_TEST_PGBOUNCER_URL is not set";
    GTEST_SKIP() << "OCTOP_TEST_PGBOUNCER_URL is not set";
  }
  ASSERT_NE(OpenJobs(ns_), nullptr);  // migrated directly
  auto through = [&](bool prepared) {
    StoreOptions options = Options(ns_, /*pool_size=*/1, &Clock::Real());
    options.pooling.prepared_statements = prepared;
    auto store = OpenJobStore(bouncer, options);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(store).value() : nullptr;
  };
  // Two clients, one connection each, taking turns: each prepares its statements on whichever server session
  // its transaction gets, and the sessions pass from one client to the other.
  std::unique_ptr<JobStore> a = through(true), b = through(true);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  std::string failure;
  for (int i = 0; i < 50 && failure.empty(); ++i) {
    for (JobStore* store : {a.get(), b.get()}) {
      auto config = store->GetConfig("jobs.poll_interval_ms");
      if (!config.ok() && failure.empty()) failure = config.status().message();
    }
  }
  ASSERT_FALSE(failure.empty()) << "named prepared statements survived 100 transactions through PgBouncer";
  // "already exists" where the other client prepared it first, "does not exist" where no client did.
  EXPECT_TRUE(failure.find("SQLSTATE 42P05") != std::string::npos ||
              failure.find("SQLSTATE 26000") != std::string::npos)
      << failure;
  EXPECT_NE(failure.find("Behind PgBouncer"), std::string::npos) << failure;

  std::unique_ptr<JobStore> c = through(false), d = through(false);
  ASSERT_NE(c, nullptr);
  ASSERT_NE(d, nullptr);
  for (int i = 0; i < 50; ++i) {
    for (JobStore* store : {c.get(), d.get()}) {
      auto config = store->GetConfig("jobs.poll_interval_ms");
      ASSERT_TRUE(config.ok()) << config.status().ToString();
    }
  }
}

// A stop request and the end of the attempt it names, racing (docs/store.md §8.4): CancelJob writes a request
// only while it holds the job row's lock, and the failing completion and the rescuer lock the rows in a
// statement of their own before the one that reads the requests. Each test holds the job row in a session of
// its own, so that the statements are made to wait where the race would otherwise be.
class CancelRaceTest : public PostgresSpecificTest {
 protected:
  void SetUp() override {
    PostgresSpecificTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    store_ = OpenJobs(ns_, /*pool_size=*/4, &clock_);
    ASSERT_NE(store_, nullptr);
    JobSpec spec{.kind = "k"};
    spec.max_retries = 5;
    auto enqueued = store_->EnqueueJobs({spec});
    ASSERT_TRUE(enqueued.ok()) << enqueued.status().ToString();
    auto claimed = store_->ClaimJobs({.queue = "default", .limit = 1, .timeout = seconds(10)});
    ASSERT_TRUE(claimed.ok()) << claimed.status().ToString();
    ASSERT_EQ(claimed->size(), 1u);
    job_ = claimed->front();
    auto holder = PgAdminSession::Open(base_url_);
    ASSERT_TRUE(holder.ok()) << holder.status().ToString();
    holder_ = std::move(holder).value();
  }

  std::string Table(const std::string& name) const { return "\"" + ns_ + "\"." + name; }

  // The holder's transaction: the job row locked, as CancelJob and a completion lock it.
  void HoldTheJobRow() {
    ASSERT_TRUE(holder_->Query("BEGIN").ok());
    auto locked =
        holder_->Query("SELECT 1 FROM " + Table("octop_jobs") + " WHERE id = $1 FOR UPDATE", {job_.id});
    ASSERT_TRUE(locked.ok()) << locked.status().ToString();
    ASSERT_EQ(locked->size(), 1u);
  }

  // HoldTheJobRow, and the request to stop the claimed attempt written in that transaction: a cancel between
  // its lock and its commit.
  void HoldTheJobRowAndRequestAStop() {
    HoldTheJobRow();
    auto requested = holder_->Query("INSERT INTO " + Table("octop_job_cancels") +
                                        " (job_id, attempt_token, requested_at) VALUES ($1, $2, now())",
                                    {job_.id, job_.attempt_token.value_or("")});
    ASSERT_TRUE(requested.ok()) << requested.status().ToString();
  }

  // Waits (with a deadline) until `n` of the store's sessions wait for a lock; false at the deadline, or at
  // once once `gave_up` is set.
  bool WaitForLockWaiters(int n, const std::atomic<bool>* gave_up = nullptr) {
    for (auto deadline = std::chrono::steady_clock::now() + seconds(20);
         std::chrono::steady_clock::now() < deadline && (gave_up == nullptr || !gave_up->load());) {
      auto rows = admin_->Query(
          "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'",
          {app_});
      if (rows.ok() && (*rows)[0][0] == std::to_string(n)) return true;
      std::this_thread::sleep_for(milliseconds(10));
    }
    return false;
  }

  // The claimed attempt's failure, due again in a second.
  JobCompletion Failed() const {
    return JobCompletion{.id = job_.id,
                         .attempt_token = job_.attempt_token.value_or(""),
                         .outcome = JobOutcome::kRetry,
                         .error = std::string("boom"),
                         .retry_delay = seconds(1)};
  }

  JobInfo Job() {
    auto row = store_->GetJob(job_.id);
    EXPECT_TRUE(row.ok()) << row.status().ToString();
    return row.ok() ? *row : JobInfo{};
  }

  octop::testing::FakeClock clock_;
  std::unique_ptr<JobStore> store_;
  JobInfo job_;
  std::unique_ptr<PgAdminSession> holder_;
};

TEST_F(CancelRaceTest, AStopRequestCommittedWhileTheFailingCompletionWaitsIsHonoured) {
  HoldTheJobRowAndRequestAStop();
  Result<std::vector<bool>> completed = std::vector<bool>{};
  std::thread completer([&] { completed = store_->CompleteJobs({Failed()}); });
  EXPECT_TRUE(WaitForLockWaiters(1));
  ASSERT_TRUE(holder_->Query("COMMIT").ok());
  completer.join();
  ASSERT_TRUE(completed.ok()) << completed.status().ToString();
  EXPECT_EQ(*completed, std::vector<bool>{true});
  const JobInfo job = Job();
  EXPECT_EQ(job.status, JobStatus::kFrozen);
  EXPECT_EQ(job.last_error, std::optional<std::string>(std::string(kJobCancelledError)));
  clock_.Advance(seconds(2));  // past the retry it did not get
  auto again = store_->ClaimJobs({.queue = "default", .limit = 1, .timeout = seconds(10)});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->empty());
}

TEST_F(CancelRaceTest, ACancelQueuedBehindTheFailingCompletionFreezesTheJobItHandedBack) {
  HoldTheJobRow();
  Result<std::vector<bool>> completed = std::vector<bool>{};
  std::thread completer([&] { completed = store_->CompleteJobs({Failed()}); });
  ASSERT_TRUE(WaitForLockWaiters(1));
  std::atomic<bool> cancel_returned{false};
  Result<CancelJobResult> cancelled = CancelJobResult::kCancelled;
  std::thread canceller([&] {
    cancelled = store_->CancelJob({job_.id});
    cancel_returned = true;
  });
  // The cancel waits for the row too (the old store wrote its request at once and missed the race).
  EXPECT_TRUE(WaitForLockWaiters(2, &cancel_returned));
  ASSERT_TRUE(holder_->Query("COMMIT").ok());
  completer.join();
  canceller.join();
  ASSERT_TRUE(completed.ok()) << completed.status().ToString();
  EXPECT_EQ(*completed, std::vector<bool>{true});
  // Whichever of the two took the row first, the job ends frozen: handed back and then cancelled while
  // waiting, or its stop requested and the failure turned into the cancel.
  ASSERT_TRUE(cancelled.ok()) << cancelled.status().ToString();
  const JobInfo job = Job();
  EXPECT_EQ(job.status, JobStatus::kFrozen);
  EXPECT_EQ(job.last_error, std::optional<std::string>(std::string(kJobCancelledError)));
}

TEST_F(CancelRaceTest, AStopRequestCommittedWhileTheRescuerWaitsIsHonoured) {
  HoldTheJobRowAndRequestAStop();
  clock_.Advance(seconds(11));  // the claim's 10 s lease has expired
  Result<std::vector<RescuedJob>> rescued = std::vector<RescuedJob>{};
  std::thread rescuer([&] { rescued = store_->RescueExpiredJobs({}); });
  EXPECT_TRUE(WaitForLockWaiters(1));
  ASSERT_TRUE(holder_->Query("COMMIT").ok());
  rescuer.join();
  ASSERT_TRUE(rescued.ok()) << rescued.status().ToString();
  ASSERT_EQ(rescued->size(), 1u);
  EXPECT_EQ(rescued->front().status, JobStatus::kFrozen);
  EXPECT_EQ(Job().last_error, std::optional<std::string>(std::string(kJobCancelledError)));
}

TEST_F(PostgresSpecificTest, MigrateWaitsForAKnexMigratorHoldingItsLock) {
  // Two of Backstage's three steps applied, the third still to do.
  StoreOptions early;
  early.ns = ns_;
  auto first = OpenNamespaceAdmin(url_, early);
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE((*first)->MigrateTo(MigrationLine::kTasks, 2).ok());
  const std::string q = "\"" + ns_ + "\"";
  auto knex = PgAdminSession::Open(base_url_);
  ASSERT_TRUE(knex.ok());
  ASSERT_TRUE((*knex)->Query("BEGIN").ok());
  auto taken = (*knex)->Query("UPDATE " + q +
                              ".backstage_backend_tasks__knex_migrations_lock SET is_locked = 1 "
                              "WHERE is_locked = 0 RETURNING 1");
  ASSERT_TRUE(taken.ok());
  ASSERT_EQ(taken->size(), 1u);
  StoreOptions options;
  options.ns = ns_;
  options.pool_size = 1;
  auto second = OpenTaskStore(url_, options);
  ASSERT_TRUE(second.ok());
  std::atomic<bool> done{false};
  Status migrated;
  std::thread migrator([&] {
    migrated = (*second)->Migrate();
    done = true;
  });
  // The migrator is blocked on knex's lock row (a lock wait in pg_stat_activity), not finished.
  bool waiting = false;
  for (auto deadline = std::chrono::steady_clock::now() + seconds(20);
       !waiting && std::chrono::steady_clock::now() < deadline;) {
    auto rows = admin_->Query(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'",
        {app_});
    waiting = rows.ok() && (*rows)[0][0] == "1";
    if (!waiting) std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_TRUE(waiting);
  EXPECT_FALSE(done.load());
  ASSERT_TRUE((*knex)
                  ->Query("UPDATE " + q + ".backstage_backend_tasks__knex_migrations_lock SET is_locked = 0")
                  .ok());
  ASSERT_TRUE((*knex)->Query("COMMIT").ok());
  migrator.join();
  EXPECT_TRUE(migrated.ok()) << migrated.ToString();
  auto lock = admin_->Query("SELECT count(*), max(is_locked) FROM " + q +
                            ".backstage_backend_tasks__knex_migrations_lock");
  ASSERT_TRUE(lock.ok());
  EXPECT_EQ((*lock)[0][0], "1");
  EXPECT_EQ((*lock)[0][1], "0");
}

}  // namespace
}  // namespace octop::store
