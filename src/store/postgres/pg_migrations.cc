// The two migration lines of the PostgreSQL backend (migrations.sql; docs/store.md, "PostgreSQL: migrations
// beside knex"):
// - a task namespace's: Backstage's knex migrations, recorded in knex's table under knex's migration lock, so
//   a Backstage backend migrating the same schema and this node run one after the other;
// - a job namespace's: octop's, recorded in octop_migrations.
// Both first take pg_advisory_xact_lock keyed by the schema, so octop nodes migrating at once queue up.
#include <algorithm>
#include <array>
#include <set>
#include <span>
#include <string>

#include "postgres_queries.h"
#include "store/job_store.h"
#include "store/postgres/pg_namespace.h"
#include "store/task_store.h"

namespace octop::store::postgres {

namespace {

constexpr std::array kTaskScripts = {sql::kMigration1Init, sql::kMigration2NullableNextRun,
                                     sql::kMigration3LastRun};
constexpr std::array kJobScripts = {sql::kMigration4Jobs,       sql::kMigration5Config,
                                    sql::kMigration6JobQueue,   sql::kMigration7JobSets,
                                    sql::kMigration8LeaseIds,   sql::kMigration9JobCancels,
                                    sql::kMigration10SqlWrites, sql::kMigration11SqlChanges};
// Every migration a store header names needs its PostgreSQL script here, in the same position.
static_assert(kTaskScripts.size() == std::size(kTaskMigrationNames));
static_assert(kJobScripts.size() == std::size(kJobMigrationNames));

std::span<const std::string_view> Scripts(MigrationLine line) {
  if (line == MigrationLine::kTasks) return kTaskScripts;
  return kJobScripts;
}

// Another session created the same schema or table first (duplicate_schema, duplicate_table; concurrent
// CREATEs collide on the catalog's unique indexes as 23505).
bool IsDuplicateObject(const Status& status) {
  return HasSqlState(status, "42P06") || HasSqlState(status, "42P07") || IsUniqueViolation(status);
}

// Waits outside the database for another process (a knex migrator); real time even under a fake clock.
void Pause(std::chrono::milliseconds how_long) {
  Clock::Real().WaitUntil(Clock::Real().SteadyNow() + how_long, std::stop_token());
}

}  // namespace

Status PgNamespace::MigrateTo(MigrationLine line, int version) {
  if (version < 1 || version > LatestSchemaVersion(line)) {
    return InvalidArgumentError("schema version " + std::to_string(version) + " is not between 1 and " +
                                std::to_string(LatestSchemaVersion(line)));
  }
  // Already there: no DDL, no lock. So a least-privilege runtime role (DML only; docs/reliability.md) can
  // start on a schema that the owner role migrated.
  const auto current = [&]() -> Result<int> {
    OCTOP_ASSIGN_OR_RETURN(std::vector<std::string> applied, AppliedMigrations(line));
    return static_cast<int>(applied.size());
  };
  if (Result<int> now = current(); now.ok() && *now >= version) return Status::Ok();
  Status migrated = ApplyMigrations(line, version);
  if (!migrated.ok() && HasSqlState(migrated, "42501")) {
    Result<int> now = current();
    return FailedPreconditionError(
        "schema " + quoted_schema_ + " is at version " + (now.ok() ? std::to_string(*now) : "?") + " of " +
        std::to_string(version) +
        " and this database role may not migrate it: run `octop migrate` as the schema's owner role (" +
        migrated.message() + ")");
  }
  return migrated;
}

// A node that loses a race to create a schema or table (another session created it first) tries again, and
// then finds it.
Status PgNamespace::ApplyMigrations(MigrationLine line, int version) {
  constexpr int kAttempts = 5;
  for (int attempt = 1;; ++attempt) {
    Status applied = ApplyMigrationsOnce(line, version);
    // A lost creation race, or a deadlock between two nodes' DDL: the next attempt finds what was made.
    const bool race_lost = IsDuplicateObject(applied) || HasSqlState(applied, "40P01");
    if (applied.ok() || attempt == kAttempts || !race_lost) return applied;
  }
}

Status PgNamespace::ApplyMigrationsOnce(MigrationLine line, int version) {
  OCTOP_ASSIGN_OR_RETURN(ConnectionPool::Lease conn, pool_.Acquire());
  if (line == MigrationLine::kJobs) {
    OCTOP_RETURN_IF_ERROR(conn->Exec("BEGIN"));
    Result<bool> applied = ApplyStepsLocked(*conn, line, version);
    if (applied.ok()) return conn->Exec("COMMIT");
    (void)conn->Exec("ROLLBACK");
    return applied.status();
  }
  OCTOP_RETURN_IF_ERROR(CreateKnexBookkeeping(*conn));
  // knex's migrator takes its lock with an UPDATE that must change exactly one row: take it the same way, so
  // a Backstage backend migrating this schema and this node run one after the other. A lock committed as
  // taken (a migrator outside a transaction, or one that died) is waited for, then reported.
  const SteadyTime deadline = Clock::Real().SteadyNow() + std::chrono::seconds(30);
  while (true) {
    OCTOP_RETURN_IF_ERROR(conn->Exec("BEGIN"));
    Result<bool> applied = ApplyStepsLocked(*conn, line, version);
    if (applied.ok() && *applied) return conn->Exec("COMMIT");
    (void)conn->Exec("ROLLBACK");
    if (!applied.ok()) return applied.status();
    if (Clock::Real().SteadyNow() >= deadline) {
      return FailedPreconditionError(
          "knex's migration lock in " + quoted_schema_ +
          ".backstage_backend_tasks__knex_migrations_lock stayed taken for 30 s; if "
          "no Backstage backend is migrating, free it (`knex migrate:unlock`, or set "
          "is_locked = 0)");
    }
    Pause(std::chrono::milliseconds(100));
  }
}

// In its own short transaction, so that the window in which a knex migrator could see no table and then fail
// to create it is as short as one round trip.
Status PgNamespace::CreateKnexBookkeeping(PgConnection& conn) {
  const SteadyTime deadline = Clock::Real().SteadyNow() + std::chrono::seconds(10);
  while (true) {
    OCTOP_RETURN_IF_ERROR(conn.Exec("BEGIN"));
    Result<bool> done = CreateKnexBookkeepingLocked(conn, Clock::Real().SteadyNow() < deadline);
    if (!done.ok()) {
      (void)conn.Exec("ROLLBACK");
      return done.status();
    }
    if (*done) break;
    // A Backstage backend is connected to this database and has not created knex's tables yet: it is about
    // to, and creating them under it would fail its start. Give it the moment it needs.
    (void)conn.Exec("ROLLBACK");
    Pause(std::chrono::milliseconds(50));
  }
  OCTOP_RETURN_IF_ERROR(conn.Exec("COMMIT"));
  // A lock table without its row: a knex migrator created it and is about to add the row (adding one too
  // would make two). Wait for it; after that the migrator is gone and the row is added here.
  for (int i = 0; i < 100; ++i) {
    OCTOP_ASSIGN_OR_RETURN(PgResult rows,
                           conn.ExecParams(Substitute(sql::kCountKnexLockRows, quoted_schema_), {}));
    if (Count(rows, 0, 0) > 0) return Status::Ok();
    Pause(std::chrono::milliseconds(100));
  }
  return conn.Exec(Substitute(sql::kInsertKnexLockRow, quoted_schema_));
}

// False (nothing created) while `may_wait` and a Backstage session for this plugin is connected but knex's
// tables are missing.
Result<bool> PgNamespace::CreateKnexBookkeepingLocked(PgConnection& conn, bool may_wait) {
  OCTOP_ASSIGN_OR_RETURN(PgResult locked,
                         conn.ExecParams(std::string(sql::kAdvisoryLock), {"octop-migrate:" + schema_}));
  (void)locked;
  OCTOP_RETURN_IF_ERROR(conn.Exec(Substitute(sql::kCreateSchema, quoted_schema_)));
  OCTOP_ASSIGN_OR_RETURN(PgResult tables, conn.ExecParams(std::string(sql::kBookkeepingTables), {schema_}));
  std::set<std::string> present;
  for (int i = 0; i < tables.rows(); ++i) present.insert(tables.Text(i, 0));
  const bool knex_missing = !present.contains("backstage_backend_tasks__knex_migrations") ||
                            !present.contains("backstage_backend_tasks__knex_migrations_lock");
  if (knex_missing && may_wait && !backstage_application_name_.empty()) {
    OCTOP_ASSIGN_OR_RETURN(int sessions, BackstageSessions(conn));
    if (sessions > 0) return false;
  }
  std::string ddl;
  if (!present.contains("backstage_backend_tasks__knex_migrations")) ddl += sql::kCreateKnexMigrations;
  if (!present.contains("backstage_backend_tasks__knex_migrations_lock")) ddl += sql::kCreateKnexLock;
  if (!ddl.empty()) OCTOP_RETURN_IF_ERROR(conn.Exec(Substitute(ddl, quoted_schema_)));
  return true;
}

// Inside the transaction. False when knex's lock is committed as taken (the caller waits and retries).
Result<bool> PgNamespace::ApplyStepsLocked(PgConnection& conn, MigrationLine line, int version) {
  const bool tasks = line == MigrationLine::kTasks;
  OCTOP_ASSIGN_OR_RETURN(PgResult locked,
                         conn.ExecParams(std::string(sql::kAdvisoryLock), {"octop-migrate:" + schema_}));
  (void)locked;
  if (tasks) {
    OCTOP_ASSIGN_OR_RETURN(PgResult knex_lock,
                           conn.ExecParams(Substitute(sql::kTakeKnexLock, quoted_schema_), {}));
    if (knex_lock.AffectedRows() == 0) return false;
  } else {
    OCTOP_RETURN_IF_ERROR(conn.Exec(Substitute(sql::kCreateSchema, quoted_schema_)));
    OCTOP_ASSIGN_OR_RETURN(PgResult tables, conn.ExecParams(std::string(sql::kBookkeepingTables), {schema_}));
    bool present = false;
    for (int i = 0; i < tables.rows(); ++i) present = present || tables.Text(i, 0) == "octop_migrations";
    if (!present) OCTOP_RETURN_IF_ERROR(conn.Exec(Substitute(sql::kCreateOctopMigrations, quoted_schema_)));
  }
  OCTOP_ASSIGN_OR_RETURN(std::vector<std::string> applied, ReadApplied(conn, line));
  for (int i = 0; i < version; ++i) {
    const std::string name(MigrationNames(line)[static_cast<std::size_t>(i)]);
    if (std::find(applied.begin(), applied.end(), name) != applied.end()) continue;
    OCTOP_RETURN_IF_ERROR(conn.Exec(Substitute(Scripts(line)[static_cast<std::size_t>(i)], quoted_schema_)));
    // octop_migrations.version keeps the numbers of the single line the two grew out of (Backstage's three
    // came first), so rows written before and after the split read alike.
    Result<PgResult> recorded =
        tasks ? conn.ExecParams(Substitute(sql::kRecordKnexMigration, quoted_schema_), {name, NowParam()})
              : conn.ExecParams(Substitute(sql::kRecordOctopMigration, quoted_schema_),
                                {std::to_string(i + 1 + static_cast<int>(std::size(kTaskMigrationNames))),
                                 name, NowParam()});
    if (!recorded.ok()) return recorded.status();
  }
  if (tasks) {
    OCTOP_ASSIGN_OR_RETURN(PgResult freed,
                           conn.ExecParams(Substitute(sql::kFreeKnexLock, quoted_schema_), {}));
    (void)freed;
  }
  return true;
}

Result<std::vector<std::string>> PgNamespace::AppliedMigrations(MigrationLine line) {
  OCTOP_ASSIGN_OR_RETURN(ConnectionPool::Lease conn, pool_.Acquire());
  return ReadApplied(*conn, line);
}

Result<std::vector<std::string>> PgNamespace::ReadApplied(PgConnection& conn, MigrationLine line) {
  const bool tasks = line == MigrationLine::kTasks;
  OCTOP_ASSIGN_OR_RETURN(PgResult tables, conn.ExecParams(std::string(sql::kBookkeepingTables), {schema_}));
  const std::string_view bookkeeping =
      tasks ? "backstage_backend_tasks__knex_migrations" : "octop_migrations";
  bool present = false;
  for (int i = 0; i < tables.rows(); ++i) present = present || tables.Text(i, 0) == bookkeeping;
  std::vector<std::string> recorded;
  if (present) {
    OCTOP_ASSIGN_OR_RETURN(
        PgResult r,
        conn.ExecParams(
            Substitute(tasks ? sql::kListKnexMigrations : sql::kListOctopMigrations, quoted_schema_), {}));
    for (int i = 0; i < r.rows(); ++i) recorded.push_back(r.Text(i, 0));
  }
  std::vector<std::string> applied;
  for (std::string_view name : MigrationNames(line)) {
    if (std::find(recorded.begin(), recorded.end(), name) != recorded.end()) applied.emplace_back(name);
  }
  return applied;
}

}  // namespace octop::store::postgres
