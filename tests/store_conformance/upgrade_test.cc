// Upgrades in place: databases that an earlier release's octopd made (tests/upgrade/fixtures, dumped by
// scripts/make-upgrade-fixture.sh) are loaded as they were, opened and migrated by this build, and must keep
// every task, job, queue pause and config row, and go on working (docs/store.md, "Upgrades").
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <sqlite3.h>

#include "conformance_fixture.h"
#include "store/job_store.h"
#include "store/postgres/pg_admin_session.h"
#include "store/task_store.h"
#include "store_test_env.h"

namespace octop::store::testing {
namespace {

namespace fs = std::filesystem;

// Each release whose databases must upgrade: a directory of tests/upgrade/fixtures.
const char* const kReleases[] = {"0.8-dcbb9f8"};
constexpr const char* kPlugin = "upgrade";

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

fs::path FixtureDir(const std::string& release) { return fs::path(OCTOP_UPGRADE_FIXTURES) / release; }

// What every release's fixture holds (scripts/make-upgrade-fixture.sh), checked through this build's store,
// then used: the stores must go on working on the upgraded tables.
void ExpectReleaseDataAndUseIt(TaskStore& tasks, JobStore& jobs) {
  OCTOP_ASSERT_OK(tasks.Migrate());
  OCTOP_ASSERT_OK(jobs.Migrate());
  // A release's namespaces held both lines; each store finds its own applied and adds nothing.
  auto task_version = tasks.SchemaVersion();
  OCTOP_ASSERT_OK(task_version.status());
  EXPECT_EQ(*task_version, kLatestTaskSchemaVersion);
  auto job_version = jobs.SchemaVersion();
  OCTOP_ASSERT_OK(job_version.status());
  EXPECT_EQ(*job_version, kLatestJobSchemaVersion);

  auto rows = tasks.ListTasks({});
  OCTOP_ASSERT_OK(rows.status());
  std::map<std::string, TaskRow> by_id;
  for (auto& row : *rows) by_id[row.id] = row;
  ASSERT_EQ(by_id.size(), 3u);
  EXPECT_NE(by_id["nightly"].settings_json.find("\"0 3 * * *\""), std::string::npos);
  EXPECT_TRUE(by_id["nightly"].next_run_start_at.has_value());
  EXPECT_FALSE(by_id["on-demand"].next_run_start_at.has_value()) << "a manual task";
  EXPECT_TRUE(by_id["on-demand"].last_run_ended_at.has_value());
  EXPECT_FALSE(by_id["on-demand"].last_run_error_json.has_value());
  ASSERT_TRUE(by_id["failing"].last_run_error_json.has_value());
  EXPECT_NE(by_id["failing"].last_run_error_json->find("exited"), std::string::npos);
  // The upgraded task table still triggers, claims and releases.
  OCTOP_ASSERT_OK(tasks.TriggerTask({"on-demand"}));
  auto claimed = tasks.TryClaimTask({"on-demand", "ticket-1", std::chrono::minutes(1)});
  OCTOP_ASSERT_OK(claimed.status());
  ASSERT_TRUE(claimed->has_value());
  auto released = tasks.TryReleaseTask({"on-demand", "ticket-1", NullTime{}, std::nullopt});
  OCTOP_ASSERT_OK(released.status());
  EXPECT_TRUE(*released);

  auto listed = jobs.ListJobs({.limit = 100});
  OCTOP_ASSERT_OK(listed.status());
  std::map<std::string, JobInfo> by_payload;  // payloads are {"n": 1..4}, normalised by jsonb on PostgreSQL
  for (auto& job : *listed) {
    std::string n = job.payload.substr(job.payload.find_first_of("1234"), 1);
    by_payload[n] = job;
  }
  ASSERT_EQ(by_payload.size(), 4u);
  EXPECT_EQ(by_payload["1"].status, JobStatus::kSuccess);
  EXPECT_EQ(by_payload["1"].attempt, 1);
  EXPECT_TRUE(by_payload["1"].completed_at.has_value());
  EXPECT_EQ(by_payload["2"].status, JobStatus::kFrozen);
  EXPECT_EQ(by_payload["2"].max_retries, 0);
  ASSERT_TRUE(by_payload["2"].last_error.has_value());
  EXPECT_EQ(by_payload["3"].status, JobStatus::kPending);
  EXPECT_EQ(by_payload["3"].unique_key, "later");
  EXPECT_EQ(by_payload["4"].queue, "held");

  // The unique key still holds: the live job is returned, nothing is added.
  auto again = jobs.EnqueueJobs({{.kind = "ok", .unique_key = "later"}});
  OCTOP_ASSERT_OK(again.status());
  EXPECT_TRUE((*again)[0].existing);
  EXPECT_EQ((*again)[0].id, by_payload["3"].id);
  // The pause and the config row survive.
  auto queues = jobs.ListQueues();
  OCTOP_ASSERT_OK(queues.status());
  bool held_paused = false;
  for (const auto& q : *queues) held_paused |= q.name == "held" && q.paused;
  EXPECT_TRUE(held_paused);
  auto poll = jobs.GetConfig("jobs.poll_interval_ms");
  OCTOP_ASSERT_OK(poll.status());
  EXPECT_EQ(poll->value_or(""), "750");
  // The frozen job retries and is claimed; a new job runs to success.
  OCTOP_ASSERT_OK(jobs.RetryJob({by_payload["2"].id}));
  auto fresh = jobs.EnqueueJobs({{.kind = "ok"}});
  OCTOP_ASSERT_OK(fresh.status());
  auto claimed_jobs = jobs.ClaimJobs({.limit = 10, .worker_id = "upgrade-test"});
  OCTOP_ASSERT_OK(claimed_jobs.status());
  ASSERT_EQ(claimed_jobs->size(), 2u) << "the retried job and the new one; nothing due in 2099";
  std::vector<JobCompletion> done;
  for (const auto& job : *claimed_jobs) done.push_back({job.id, *job.attempt_token});
  auto applied = jobs.CompleteJobs(done);
  OCTOP_ASSERT_OK(applied.status());
  EXPECT_EQ(*applied, (std::vector<bool>{true, true}));
}

TEST(UpgradeFromRelease, SqliteDatabasesKeepEveryRowAndWork) {
  for (const std::string release : kReleases) {
    SCOPED_TRACE(release);
    const fs::path dir = fs::temp_directory_path() / ("octop-upgrade-" + FreshNamespace());
    fs::create_directories(dir);
    for (const auto& dump : fs::directory_iterator(FixtureDir(release) / "sqlite")) {
      sqlite3* db = nullptr;
      const fs::path file = dir / (dump.path().stem().string() + ".sqlite");
      ASSERT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
      char* error = nullptr;
      const int rc = sqlite3_exec(db, ReadFile(dump.path()).c_str(), nullptr, nullptr, &error);
      const std::string message = error != nullptr ? error : "";
      sqlite3_free(error);
      sqlite3_close(db);
      ASSERT_EQ(rc, SQLITE_OK) << dump.path() << ": " << message;
    }
    const std::string url = "sqlite:" + dir.string();
    auto tasks = OpenTaskStore(url, {.ns = kPlugin, .plugin_division = PluginDivision{}});
    OCTOP_ASSERT_OK(tasks.status());
    auto jobs = OpenJobStore(url, {.ns = "octop"});
    OCTOP_ASSERT_OK(jobs.status());
    ExpectReleaseDataAndUseIt(**tasks, **jobs);
    tasks->reset();
    jobs->reset();
    fs::remove_all(dir);
  }
}

// A pg_dump script without psql's meta-commands (\restrict and the like), which only psql understands.
std::string WithoutMetaCommands(const std::string& dump) {
  std::istringstream in(dump);
  std::string line, out;
  while (std::getline(in, line)) {
    if (!line.starts_with('\\')) out += line + "\n";
  }
  return out;
}

TEST(UpgradeFromRelease, PostgresDatabasesKeepEveryRowAndWork) {
  const char* base = std::getenv("OCTOP_TEST_PG_URL");
  if (base == nullptr || *base == '\0') {
    const char* require = std::getenv("OCTOP_REQUIRE_PG");
    if (require != nullptr && std::string(require) == "1") FAIL() << "OCTOP_REQUIRE_PG=1 but no server";
    GTEST_SKIP() << "OCTOP_TEST_PG_URL is not set";
  }
  auto admin = postgres::PgAdminSession::Open(base);
  OCTOP_ASSERT_OK(admin.status());
  for (const std::string release : kReleases) {
    SCOPED_TRACE(release);
    // The release's layout: schema octop in the URL's database, the plugin in a database of its own
    // (pluginDivisionMode: database). Fresh databases keep this test apart from every other.
    const std::string prefix = "u" + std::to_string(std::random_device{}() % 100000000u) + "_";
    const std::string main_db = prefix + "main";
    const std::string plugin_db = prefix + kPlugin;
    for (const std::string& db : {main_db, plugin_db}) {
      OCTOP_ASSERT_OK((*admin)->Query("CREATE DATABASE " + db).status());
    }
    const std::string main_url = UrlOfDatabase(base, main_db);
    const std::pair<std::string, std::string> loads[] = {
        {main_url, "octop.sql"}, {UrlOfDatabase(base, plugin_db), "backstage_plugin_upgrade.sql"}};
    for (const auto& [url, file] : loads) {
      auto session = postgres::PgAdminSession::Open(url);
      OCTOP_ASSERT_OK(session.status());
      // A dump of schema public creates it itself.
      if (url != main_url) OCTOP_ASSERT_OK((*session)->RunScript("DROP SCHEMA public CASCADE"));
      OCTOP_ASSERT_OK(
          (*session)->RunScript(WithoutMetaCommands(ReadFile(FixtureDir(release) / "postgres" / file))));
    }
    {
      auto tasks =
          OpenTaskStore(main_url, {.ns = kPlugin, .plugin_division = PluginDivision{.prefix = prefix}});
      OCTOP_ASSERT_OK(tasks.status());
      auto jobs = OpenJobStore(main_url, {.ns = "octop"});
      OCTOP_ASSERT_OK(jobs.status());
      ExpectReleaseDataAndUseIt(**tasks, **jobs);
    }
    for (const std::string& db : {main_db, plugin_db}) {
      OCTOP_ASSERT_OK((*admin)->Query("DROP DATABASE " + db + " WITH (FORCE)").status());
    }
  }
}

}  // namespace
}  // namespace octop::store::testing
