#include "store/sqlite/migrations.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "sqlite_queries.h"
#include "store/job_store.h"
#include "store/task_store.h"

namespace octop::store::sqlite {

namespace {

constexpr std::array kTaskScripts = {sql::kMigration1Init, sql::kMigration2NullableNextRun,
                                     sql::kMigration3LastRun};
constexpr std::array kJobScripts = {sql::kMigration4Jobs,       sql::kMigration5Config,
                                    sql::kMigration6JobQueue,   sql::kMigration7JobSets,
                                    sql::kMigration8LeaseIds,   sql::kMigration9JobCancels,
                                    sql::kMigration10SqlWrites, sql::kMigration11SqlChanges};
// Every migration a store header names needs its SQLite script here, in the same position.
static_assert(kTaskScripts.size() == std::size(kTaskMigrationNames));
static_assert(kJobScripts.size() == std::size(kJobMigrationNames));

std::span<const std::string_view> Scripts(MigrationLine line) {
  if (line == MigrationLine::kTasks) return kTaskScripts;
  return kJobScripts;
}

Result<bool> HasTable(Connection& conn, std::string_view table) {
  Stmt tables(conn, sql::kBookkeepingTables);
  while (tables.Step()) {
    if (tables.Text(0) == table) return true;
  }
  OCTOP_RETURN_IF_ERROR(tables.status());
  return false;
}

}  // namespace

Result<std::vector<std::string>> AppliedMigrations(Connection& conn, MigrationLine line) {
  const bool tasks = line == MigrationLine::kTasks;
  std::vector<std::string> recorded;
  OCTOP_ASSIGN_OR_RETURN(
      bool kept, HasTable(conn, tasks ? "backstage_backend_tasks__knex_migrations" : "octop_migrations"));
  if (kept) {
    Stmt row(conn, tasks ? sql::kListKnexMigrations : sql::kListOctopMigrations);
    while (row.Step()) recorded.push_back(row.Text(0));
    OCTOP_RETURN_IF_ERROR(row.status());
  }
  std::vector<std::string> applied;
  for (std::string_view name : MigrationNames(line)) {
    if (std::find(recorded.begin(), recorded.end(), name) != recorded.end()) applied.emplace_back(name);
  }
  return applied;
}

Status ApplyMigrations(Connection& conn, MigrationLine line, int version, const std::string& now) {
  const bool tasks = line == MigrationLine::kTasks;
  // One writer at a time: a concurrent migrator (another store or process) waits here, then finds the work
  // done and records nothing twice.
  ImmediateTransaction tx(conn);
  OCTOP_RETURN_IF_ERROR(tx.Begin());
  OCTOP_RETURN_IF_ERROR(conn.Exec(tasks ? sql::kCreateKnexBookkeeping : sql::kCreateOctopBookkeeping));
  OCTOP_ASSIGN_OR_RETURN(const std::vector<std::string> applied, AppliedMigrations(conn, line));
  std::optional<std::int64_t> batch;
  for (std::size_t i = 0; i < static_cast<std::size_t>(version); ++i) {
    const std::string_view name = MigrationNames(line)[i];
    if (std::find(applied.begin(), applied.end(), name) != applied.end()) continue;
    OCTOP_RETURN_IF_ERROR(conn.Exec(Scripts(line)[i]));
    if (tasks) {
      if (!batch) {
        Stmt next(conn, sql::kNextKnexBatch);
        batch = next.Step() ? next.Int(0) : 1;
        OCTOP_RETURN_IF_ERROR(next.status());
      }
      OCTOP_RETURN_IF_ERROR(Stmt(conn, sql::kRecordKnexMigration)
                                .Bind(":name", name)
                                .Bind(":batch", *batch)
                                .Bind(":now", now)
                                .Run());
    } else {
      // octop_migrations.version keeps the numbers of the single line the two grew out of (Backstage's three
      // came first), so rows written before and after the split read alike.
      OCTOP_RETURN_IF_ERROR(
          Stmt(conn, sql::kRecordOctopMigration)
              .Bind(":version", static_cast<std::int64_t>(i + 1 + std::size(kTaskMigrationNames)))
              .Bind(":name", name)
              .Bind(":now", now)
              .Run());
    }
  }
  return tx.Commit();
}

}  // namespace octop::store::sqlite
