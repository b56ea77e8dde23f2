// The schema every backend must create: Backstage's tasks table exactly, knex's bookkeeping, octop's own
// tables.
#include <algorithm>
#include <cctype>
#include <map>

#include "conformance_fixture.h"

namespace octop::store::testing {
namespace {

constexpr std::string_view kTasks = "backstage_backend_tasks__tasks";

// The catalog's spelling of each column type of Backstage's task table, per backend.
struct Types {
  std::string varchar255, text, datetime;
};
Types TypesOf(std::string_view backend) {
  if (backend == "postgres") return {"character varying(255)", "text", "timestamp with time zone"};
  return {"varchar(255)", "text", "datetime"};
}

// SQLite reports the standard type names in upper case (TEXT) and others as declared (varchar(255)).
std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

const ColumnInfo* Find(const std::vector<ColumnInfo>& columns, std::string_view name) {
  auto it = std::find_if(columns.begin(), columns.end(), [&](const ColumnInfo& c) { return c.name == name; });
  return it == columns.end() ? nullptr : &*it;
}

TEST_P(StoreConformance, TasksTableHasBackstageColumnsTypesNullabilityAndKey) {
  auto columns = admin().DescribeTable(kTasks);
  OCTOP_ASSERT_OK(columns);
  const Types t = TypesOf(store_->backend());
  const std::vector<ColumnInfo> expected = {
      {"id", t.varchar255, true, true},
      {"settings_json", t.text, true, false},
      {"next_run_start_at", t.datetime, false, false},
      {"current_run_ticket", t.text, false, false},
      {"current_run_started_at", t.datetime, false, false},
      {"current_run_expires_at", t.datetime, false, false},
      {"last_run_error_json", t.text, false, false},
      {"last_run_ended_at", t.datetime, false, false},
  };
  ASSERT_EQ(columns->size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ((*columns)[i].name, expected[i].name) << "column " << i;
    EXPECT_EQ(Lower((*columns)[i].type), expected[i].type) << expected[i].name;
    EXPECT_EQ((*columns)[i].not_null, expected[i].not_null) << expected[i].name;
    EXPECT_EQ((*columns)[i].primary_key, expected[i].primary_key) << expected[i].name;
  }
}

TEST_P(StoreConformance, KnexBookkeepingTablesExistWithBackstageNames) {
  auto migrations = admin().DescribeTable("backstage_backend_tasks__knex_migrations");
  OCTOP_ASSERT_OK(migrations);
  for (const char* name : {"id", "name", "batch", "migration_time"}) {
    EXPECT_NE(Find(*migrations, name), nullptr) << name;
  }
  auto lock = admin().DescribeTable("backstage_backend_tasks__knex_migrations_lock");
  OCTOP_ASSERT_OK(lock);
  EXPECT_NE(Find(*lock, "index"), nullptr);
  EXPECT_NE(Find(*lock, "is_locked"), nullptr);
  auto octop = admin().DescribeTable("octop_migrations");
  OCTOP_ASSERT_OK(octop);
  EXPECT_FALSE(octop->empty());
}

TEST_P(StoreConformance, JobsTableHasColumnsAndNullability) {
  auto columns = admin().DescribeTable("octop_jobs");
  OCTOP_ASSERT_OK(columns);
  const std::vector<std::string> names = {
      "id",         "queue",        "kind",        "payload",       "priority",   "scheduled_at",
      "status",     "attempt",      "max_retries", "attempt_token", "last_error", "created_at",
      "started_at", "completed_at", "expires_at",  "unique_key",    "worker_id"};
  ASSERT_EQ(columns->size(), names.size());
  for (std::size_t i = 0; i < names.size(); ++i) EXPECT_EQ((*columns)[i].name, names[i]);
  const std::map<std::string, bool> not_null = {
      {"id", true},          {"queue", true},          {"kind", true},        {"payload", true},
      {"priority", true},    {"scheduled_at", true},   {"status", true},      {"attempt", true},
      {"max_retries", true}, {"attempt_token", false}, {"last_error", false}, {"created_at", true},
      {"started_at", false}, {"completed_at", false},  {"expires_at", false}, {"unique_key", false},
      {"worker_id", false}};
  for (const ColumnInfo& c : *columns) {
    EXPECT_EQ(c.not_null, not_null.at(c.name)) << c.name;
    EXPECT_EQ(c.primary_key, c.name == "id") << c.name;
  }
}

// The layout of docs/store.md, "Jobs: the layout". On PostgreSQL octop_jobs is indexed only by columns no
// claim or completion changes, with no index predicate, so both can be HOT updates; what a claim, a unique
// key and the rescuer look up lives in tables of their own. SQLite keeps the partial indexes on octop_jobs.
TEST_P(StoreConformance, JobsLayoutKeepsClaimsAndCompletionsOffTheJobsIndexes) {
  auto indexes = admin().DescribeIndexes("octop_jobs");
  OCTOP_ASSERT_OK(indexes);
  const auto has = [](const std::vector<IndexInfo>& list, const std::vector<std::string>& columns,
                      bool unique, bool partial) {
    return std::any_of(list.begin(), list.end(), [&](const IndexInfo& i) {
      return i.columns == columns && i.unique == unique && i.partial == partial;
    });
  };
  if (GetParam().is_postgres()) {
    for (const IndexInfo& index : *indexes) {
      EXPECT_FALSE(index.partial) << index.name;
      EXPECT_TRUE(index.columns == std::vector<std::string>{"id"} ||
                  index.columns == std::vector<std::string>{"created_at"})
          << index.name << " indexes a column a claim or a completion may change";
    }
    auto waiting = admin().DescribeIndexes("octop_waiting_jobs");
    OCTOP_ASSERT_OK(waiting);
    EXPECT_TRUE(has(*waiting, {"queue", "priority", "scheduled_at", "id"}, false, false))
        << "the claim index";
    EXPECT_TRUE(has(*waiting, {"id"}, true, false));
    auto keys = admin().DescribeIndexes("octop_job_keys");
    OCTOP_ASSERT_OK(keys);
    EXPECT_TRUE(has(*keys, {"unique_key"}, true, false));
    auto leases = admin().DescribeIndexes("octop_job_leases");
    OCTOP_ASSERT_OK(leases);
    EXPECT_TRUE(has(*leases, {"attempt_token"}, true, false));
  } else {
    EXPECT_TRUE(has(*indexes, {"unique_key"}, true, true))
        << "partial UNIQUE index on unique_key over pending/running/failed jobs";
    EXPECT_TRUE(has(*indexes, {"queue", "priority", "scheduled_at", "id"}, false, true))
        << "partial claim index on (queue, priority, scheduled_at, id) over pending/failed jobs";
  }
}

TEST_P(StoreConformance, ConfigTableHasKeyValueUpdatedAt) {
  auto columns = admin().DescribeTable("octop_config");
  OCTOP_ASSERT_OK(columns);
  ASSERT_EQ(columns->size(), 3u);
  EXPECT_EQ((*columns)[0].name, "key");
  EXPECT_TRUE((*columns)[0].primary_key);
  EXPECT_TRUE((*columns)[0].not_null);
  EXPECT_EQ((*columns)[1].name, "value");
  EXPECT_TRUE((*columns)[1].not_null);
  EXPECT_EQ((*columns)[2].name, "updated_at");
}

TEST_P(StoreConformance, DescribingAMissingTableGivesNothing) {
  auto columns = admin().DescribeTable("no_such_table");
  OCTOP_ASSERT_OK(columns);
  EXPECT_TRUE(columns->empty());
  auto indexes = admin().DescribeIndexes("no_such_table");
  OCTOP_ASSERT_OK(indexes);
  EXPECT_TRUE(indexes->empty());
}

}  // namespace
}  // namespace octop::store::testing
