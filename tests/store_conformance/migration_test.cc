// Migrations: versioned, recorded, idempotent, safe to run concurrently, and upgradable from every earlier
// version.
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
Status InsertOldRow(Store& store, const std::string& id, const std::string& settings, WallTime next) {
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

std::vector<std::string> AllNames() { return {std::begin(kMigrationNames), std::end(kMigrationNames)}; }

TEST_P(StoreMigrations, EmptyNamespaceIsAtVersionZero) {
  auto version = store_->SchemaVersion();
  OCTOP_ASSERT_OK(version);
  EXPECT_EQ(*version, 0);
  auto applied = store_->AppliedMigrations();
  OCTOP_ASSERT_OK(applied);
  EXPECT_TRUE(applied->empty());
}

TEST_P(StoreMigrations, MigrateAppliesEveryMigrationInOrder) {
  OCTOP_ASSERT_OK(store_->Migrate());
  auto version = store_->SchemaVersion();
  OCTOP_ASSERT_OK(version);
  EXPECT_EQ(*version, kLatestSchemaVersion);
  auto applied = store_->AppliedMigrations();
  OCTOP_ASSERT_OK(applied);
  EXPECT_EQ(*applied, AllNames());
}

TEST_P(StoreMigrations, MigrateIsIdempotentAndKeepsRows) {
  OCTOP_ASSERT_OK(store_->Migrate());
  OCTOP_ASSERT_OK(store_->UpsertTask({.id = "kept",
                                      .settings_json = std::string(kDurationSettings),
                                      .start_at = DbNowPlus{},
                                      .next_start_at = DbNowPlus{}}));
  OCTOP_ASSERT_OK(store_->Migrate());
  OCTOP_ASSERT_OK(store_->Migrate());
  auto applied = store_->AppliedMigrations();
  OCTOP_ASSERT_OK(applied);
  EXPECT_EQ(*applied, AllNames());
  auto rows = store_->ListTasks({});
  OCTOP_ASSERT_OK(rows);
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ(rows->front().id, "kept");
}

TEST_P(StoreMigrations, ConcurrentMigrateFromManyStoresAppliesEachOnce) {
  constexpr int kNodes = 8;
  std::vector<std::unique_ptr<Store>> nodes;
  for (int i = 0; i < kNodes; ++i) {
    nodes.push_back(OpenNode());
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
  auto applied = store_->AppliedMigrations();
  OCTOP_ASSERT_OK(applied);
  EXPECT_EQ(*applied, AllNames());
  auto version = store_->SchemaVersion();
  OCTOP_ASSERT_OK(version);
  EXPECT_EQ(*version, kLatestSchemaVersion);
}

TEST_P(StoreMigrations, MigrateToStopsAtTheVersionAndNeverGoesDown) {
  OCTOP_ASSERT_OK(store_->MigrateTo(1));
  auto version = store_->SchemaVersion();
  OCTOP_ASSERT_OK(version);
  EXPECT_EQ(*version, 1);
  auto columns = store_->DescribeTable("backstage_backend_tasks__tasks");
  OCTOP_ASSERT_OK(columns);
  ASSERT_EQ(columns->size(), 6u) << "the init migration has no last_run columns";
  EXPECT_EQ((*columns)[2].name, "next_run_start_at");
  EXPECT_TRUE((*columns)[2].not_null) << "next_run_start_at is NOT NULL before migration 2";

  OCTOP_ASSERT_OK(store_->MigrateTo(2));
  columns = store_->DescribeTable("backstage_backend_tasks__tasks");
  OCTOP_ASSERT_OK(columns);
  ASSERT_EQ(columns->size(), 6u);
  EXPECT_FALSE((*columns)[2].not_null);

  OCTOP_ASSERT_OK(store_->MigrateTo(3));
  OCTOP_ASSERT_OK(store_->MigrateTo(1));
  version = store_->SchemaVersion();
  OCTOP_ASSERT_OK(version);
  EXPECT_EQ(*version, 3);
  auto jobs = store_->DescribeTable("octop_jobs");
  OCTOP_ASSERT_OK(jobs);
  EXPECT_TRUE(jobs->empty()) << "octop_jobs belongs to migration 4";
}

TEST_P(StoreMigrations, MigrateToRejectsVersionsOutOfRange) {
  EXPECT_EQ(store_->MigrateTo(0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->MigrateTo(kLatestSchemaVersion + 1).code(), StatusCode::kInvalidArgument);
  auto version = store_->SchemaVersion();
  OCTOP_ASSERT_OK(version);
  EXPECT_EQ(*version, 0);
}

// The upgrade path of a real deployment: the first schema with rows (one of them mid-run), then every
// migration.
TEST_P(StoreMigrations, UpgradeFromTheFirstSchemaKeepsRowsAndAddsColumns) {
  OCTOP_ASSERT_OK(store_->MigrateTo(1));
  OCTOP_ASSERT_OK(InsertOldRow(*store_, "idle", std::string(kDurationSettings), t0() + minutes(5)));
  OCTOP_ASSERT_OK(InsertOldRow(*store_, "busy", std::string(kCronSettings), t0()));
  auto claimed = store_->TryClaimTask({.id = "busy", .ticket = "t-1", .timeout = minutes(1)});
  OCTOP_ASSERT_OK(claimed);
  ASSERT_TRUE(claimed->has_value());
  EXPECT_FALSE(store_
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
  EXPECT_EQ(*version, kLatestSchemaVersion);

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
  for (int from = 1; from < kLatestSchemaVersion; ++from) {
    SCOPED_TRACE("from version " + std::to_string(from));
    StoreOptions options;
    options.clock = &clock_;
    auto node = OpenNode(options, ns_ + "_v" + std::to_string(from));
    ASSERT_NE(node, nullptr);
    OCTOP_ASSERT_OK(node->MigrateTo(from));
    if (from < 3) {
      OCTOP_ASSERT_OK(InsertOldRow(*node, "row", std::string(kDurationSettings), t0()));
    } else {
      OCTOP_ASSERT_OK(node->UpsertTask({.id = "row",
                                        .settings_json = std::string(kDurationSettings),
                                        .start_at = AbsoluteTime{t0()},
                                        .next_start_at = AbsoluteTime{t0()}}));
    }
    OCTOP_ASSERT_OK(node->Migrate());
    auto version = node->SchemaVersion();
    OCTOP_ASSERT_OK(version);
    EXPECT_EQ(*version, kLatestSchemaVersion);
    auto rows = node->ListTasks({});
    OCTOP_ASSERT_OK(rows);
    ASSERT_EQ(rows->size(), 1u);
    EXPECT_EQ(Show(rows->front().next_run_start_at), Show(t0()));
  }
}

}  // namespace
}  // namespace octop::store::testing
