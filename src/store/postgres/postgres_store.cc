// PostgresStore: the Store contract on PostgreSQL through libpq (see store/store.h and docs/store.md).
//
// Every operation is one prepared statement (tasks.sql) run on a pooled connection, except Migrate (one
// transaction of several). The schema, validated and quoted, is the only text substituted into SQL, once,
// when the store is built; every value is a bound parameter. Time comparisons use COALESCE($1, now()) with $1
// the clock's DatabaseNowOverride (NULL in production).
#include "store/postgres/postgres_store.h"

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include <libpq-fe.h>
#include <nlohmann/json.hpp>

#include <octop/task_settings.h>

#include "postgres_queries.h"
#include "store/job_rules.h"
#include "store/postgres/connection_pool.h"
#include "store/postgres/pg_connection.h"
#include "store/postgres/pg_listener.h"
#include "store/postgres/pg_timestamp.h"
#include "store/postgres/wakeup_sender.h"

namespace octop::store {

namespace {

using postgres::ConnectionPool;
using postgres::FormatInterval;
using postgres::FormatTimestamp;
using postgres::ParseTimestamp;
using postgres::PgParams;
using postgres::PgResult;
namespace sql = postgres::sql;

constexpr std::size_t kMaxNamespaceBytes =
    63;  // NAMEDATALEN - 1: longer identifiers are truncated by the server

Status ValidateNamespace(std::string_view ns) {
  if (ns.empty() || ns.size() > kMaxNamespaceBytes) {
    return InvalidArgumentError("namespace '" + std::string(ns) +
                                "' must be 1 to 63 bytes (a PostgreSQL schema name)");
  }
  for (char c : ns) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f || c == '/') {
      return InvalidArgumentError("namespace '" + std::string(ns) + "' contains a control character or '/'");
    }
  }
  if (ns.starts_with("pg_")) {
    return InvalidArgumentError("namespace '" + std::string(ns) +
                                "': the prefix pg_ is reserved for system schemas");
  }
  return Status::Ok();
}

// A text[] literal: every element double-quoted, with backslash and double quote escaped.
std::string TextArrayLiteral(const std::vector<std::string>& values) {
  std::string out = "{";
  bool first = true;
  for (const std::string& v : values) {
    if (!IsStorableText(v)) continue;
    if (!first) out += ',';
    first = false;
    out += '"';
    for (char c : v) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  out += '}';
  return out;
}

void AppendTimeSpec(PgParams& params, const TimeSpec& spec) {
  struct Visitor {
    PgParams& p;
    void operator()(const NullTime&) const {
      p.emplace_back("0");
      p.emplace_back(std::nullopt);
      p.emplace_back(std::nullopt);
    }
    void operator()(const DbNowPlus& s) const {
      p.emplace_back("1");
      p.emplace_back(std::nullopt);
      p.emplace_back(FormatInterval(s.offset));
    }
    void operator()(const AbsoluteTime& s) const {
      p.emplace_back("2");
      p.emplace_back(FormatTimestamp(s.at));
      p.emplace_back(std::nullopt);
    }
    void operator()(const FixedRateAfter& s) const {
      p.emplace_back("3");
      p.emplace_back(std::nullopt);
      p.emplace_back(FormatInterval(s.period));
    }
  };
  std::visit(Visitor{params}, spec);
}

Result<std::optional<WallTime>> OptTime(const PgResult& r, int row, int col) {
  if (r.IsNull(row, col)) return std::optional<WallTime>();
  OCTOP_ASSIGN_OR_RETURN(WallTime t, ParseTimestamp(r.Text(row, col)));
  return std::optional<WallTime>(t);
}

long Count(const PgResult& r, int row, int col) { return std::stol(r.Text(row, col)); }

// A statement of this store: its prepared-statement name and its text with the schema substituted.
struct Statement {
  std::string name;
  std::string text;
};

std::string Substitute(std::string_view text, const std::string& quoted_schema) {
  std::string out;
  out.reserve(text.size() + 64);
  constexpr std::string_view kPlaceholder = "{ns}";
  std::size_t pos = 0;
  while (true) {
    std::size_t at = text.find(kPlaceholder, pos);
    if (at == std::string_view::npos) break;
    out.append(text.substr(pos, at - pos));
    out.append(quoted_schema);
    pos = at + kPlaceholder.size();
  }
  out.append(text.substr(pos));
  return out;
}

struct MigrationStep {
  std::string_view name;
  std::string_view ddl;
  bool knex;  // recorded in knex's table (else octop_migrations)
};

constexpr std::array<MigrationStep, 6> kMigrations = {{
    {kMigrationNames[0], sql::kMigration1Init, true},
    {kMigrationNames[1], sql::kMigration2NullableNextRun, true},
    {kMigrationNames[2], sql::kMigration3LastRun, true},
    {kMigrationNames[3], sql::kMigration4Jobs, false},
    {kMigrationNames[4], sql::kMigration5Config, false},
    {kMigrationNames[5], sql::kMigration6JobQueue, false},
}};
static_assert(kMigrations.size() == static_cast<std::size_t>(kLatestSchemaVersion));

// ---- Jobs -------------------------------------------------------------------------------------------------

// An array literal ({"a",NULL,"b"}) for a text-typed array parameter: every element quoted and escaped, so
// the server parses it into exactly these values whatever they contain (the value is still a bound
// parameter).
std::string ArrayLiteral(const std::vector<std::optional<std::string>>& values) {
  std::string out = "{";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    if (!values[i]) {
      out += "NULL";
      continue;
    }
    out += '"';
    for (char c : *values[i]) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  out += '}';
  return out;
}

Result<JobInfo> ReadJob(const PgResult& r, int i) {
  JobInfo job;
  job.id = r.Text(i, 0);
  job.queue = r.Text(i, 1);
  job.kind = r.Text(i, 2);
  job.payload = r.Text(i, 3);
  job.priority = std::stoi(r.Text(i, 4));
  OCTOP_ASSIGN_OR_RETURN(job.scheduled_at, ParseTimestamp(r.Text(i, 5)));
  const auto status = ParseJobStatus(r.Text(i, 6));
  if (!status) return InternalError("PostgreSQL: unknown job status '" + r.Text(i, 6) + "'");
  job.status = *status;
  job.attempt = std::stoi(r.Text(i, 7));
  job.max_retries = std::stoi(r.Text(i, 8));
  job.attempt_token = r.OptText(i, 9);
  job.last_error = r.OptText(i, 10);
  OCTOP_ASSIGN_OR_RETURN(job.created_at, ParseTimestamp(r.Text(i, 11)));
  OCTOP_ASSIGN_OR_RETURN(job.started_at, OptTime(r, i, 12));
  OCTOP_ASSIGN_OR_RETURN(job.completed_at, OptTime(r, i, 13));
  OCTOP_ASSIGN_OR_RETURN(job.expires_at, OptTime(r, i, 14));
  job.unique_key = r.OptText(i, 15);
  job.worker_id = r.OptText(i, 16);
  return job;
}

Result<std::vector<JobInfo>> ReadJobs(const PgResult& r) {
  std::vector<JobInfo> jobs;
  jobs.reserve(static_cast<std::size_t>(r.rows()));
  for (int i = 0; i < r.rows(); ++i) {
    OCTOP_ASSIGN_OR_RETURN(JobInfo job, ReadJob(r, i));
    jobs.push_back(std::move(job));
  }
  return jobs;
}

std::string OutcomeCode(JobOutcome outcome) {
  switch (outcome) {
    case JobOutcome::kSuccess:
      return "0";
    case JobOutcome::kRetry:
    case JobOutcome::kFail:
      return "1";
    case JobOutcome::kCancel:
      return "2";
    case JobOutcome::kRelease:
      return "3";
  }
  return "";
}

// Whether a failure carries SQLSTATE `state` (PgConnection puts it in the message).
bool HasSqlState(const Status& status, std::string_view state) {
  return status.message().find("SQLSTATE " + std::string(state)) != std::string::npos;
}

bool IsUniqueViolation(const Status& status) { return HasSqlState(status, "23505"); }

// Another session created the same database, schema or table first (duplicate_database, duplicate_schema,
// duplicate_table; concurrent CREATEs collide on the catalog's unique indexes as 23505).
bool IsDuplicateObject(const Status& status) {
  return HasSqlState(status, "42P04") || HasSqlState(status, "42P06") || HasSqlState(status, "42P07") ||
         IsUniqueViolation(status);
}

// How many times an enqueue re-inserts items whose live duplicate finished between its insert and its lookup.
constexpr int kEnqueueAttempts = 8;

class PostgresStore final : public Store {
 public:
  // `backstage_application_name`: what a Backstage backend names its sessions to this plugin's tables
  // (empty for a store that is not a plugin's).
  PostgresStore(std::string conninfo, const StoreOptions& options, std::string backstage_application_name)
      : conninfo_(std::move(conninfo)),
        backstage_application_name_(std::move(backstage_application_name)),
        schema_(options.ns),
        quoted_schema_(postgres::QuoteIdentifier(options.ns)),
        clock_(options.clock != nullptr ? options.clock : &Clock::Real()),
        pool_(conninfo_, options.pool_size),
        db_now_(Make("DatabaseNow", sql::kDatabaseNow)),
        upsert_(Make("UpsertTask", sql::kUpsertTask)),
        poll_(Make("PollTasks", sql::kPollTasks)),
        claim_(Make("TryClaimTask", sql::kTryClaimTask)),
        check_(Make("CheckTaskTicket", sql::kCheckTaskTicket)),
        extend_lease_(Make("ExtendTaskLease", sql::kExtendTaskLease)),
        release_(Make("TryReleaseTask", sql::kTryReleaseTask)),
        trigger_(Make("TriggerTask", sql::kTriggerTask)),
        cancel_(Make("CancelTask", sql::kCancelTask)),
        cap_next_run_(Make("CapTaskNextRun", sql::kCapTaskNextRun)),
        writable_(Make("Writable", sql::kWritable)),
        sweep_(Make("SweepExpiredTaskRuns", sql::kSweepExpiredTaskRuns)),
        list_all_(Make("ListAllTasks", sql::kListAllTasks)),
        list_ids_(Make("ListTasksByIds", sql::kListTasksByIds)),
        delete_(Make("DeleteTask", sql::kDeleteTask)),
        enqueue_jobs_(Make("EnqueueJobs", sql::kEnqueueJobs)),
        find_live_keys_(Make("FindLiveJobsByKeys", sql::kFindLiveJobsByKeys)),
        claim_jobs_(Make("ClaimJobs", sql::kClaimJobs)),
        complete_jobs_(Make("CompleteJobs", sql::kCompleteJobs)),
        rescue_jobs_(Make("RescueExpiredJobs", sql::kRescueExpiredJobs)),
        renew_job_leases_(Make("RenewJobLeases", sql::kRenewJobLeases)),
        retry_job_(Make("RetryJob", sql::kRetryJob)),
        cancel_job_(Make("CancelJob", sql::kCancelJob)),
        get_job_(Make("GetJob", sql::kGetJob)),
        list_jobs_(Make("ListJobs", sql::kListJobs)),
        list_failed_jobs_(Make("ListFailedJobs", sql::kListFailedJobs)),
        job_summary_(Make("JobSummary", sql::kJobSummary)),
        job_stats_(Make("JobStats", sql::kJobStats)),
        next_job_due_(Make("NextJobDueAt", sql::kNextJobDueAt)),
        set_queue_paused_(Make("SetQueuePaused", sql::kSetQueuePaused)),
        list_queues_(Make("ListQueues", sql::kListQueues)),
        delete_finished_(Make("DeleteFinishedJobs", sql::kDeleteFinishedJobs)),
        get_config_(Make("GetConfig", sql::kGetConfig)),
        set_config_(Make("SetConfig", sql::kSetConfig)),
        list_config_(Make("ListConfig", sql::kListConfig)),
        notify_job_queues_(Make("NotifyJobQueues", sql::kNotifyJobQueues)),
        wakeups_([this](const std::vector<std::string>& queues) { SendWakeups(queues); }) {}

  // Opens the first connection so that an unreachable server is reported by OpenStore.
  Status Connect() {
    OCTOP_ASSIGN_OR_RETURN(ConnectionPool::Lease lease, pool_.Acquire());
    (void)lease;
    return Status::Ok();
  }

  std::string_view backend() const override { return "postgres"; }

  Result<int> CountBackstageSessions() override {
    if (backstage_application_name_.empty()) return 0;
    OCTOP_ASSIGN_OR_RETURN(ConnectionPool::Lease conn, pool_.Acquire());
    return BackstageSessions(*conn);
  }

  // Sessions named as a Backstage backend names its connections to this plugin's tables, on `conn`'s
  // database.
  Result<int> BackstageSessions(postgres::PgConnection& conn) {
    OCTOP_ASSIGN_OR_RETURN(
        PgResult r, conn.ExecParams(std::string(sql::kBackstageSessions), {backstage_application_name_}));
    return static_cast<int>(Count(r, 0, 0));
  }

  // In a plugin's own database: the schema unqualified names resolve to for this role must be `public`, where
  // octop keeps the tables, or a Backstage backend on the same database would use another table.
  Status CheckSearchPath(const std::string& database) {
    OCTOP_ASSIGN_OR_RETURN(ConnectionPool::Lease conn, pool_.Acquire());
    OCTOP_ASSIGN_OR_RETURN(PgResult r, conn->ExecParams(std::string(sql::kCurrentSchema), {}));
    if (r.IsNull(0, 0) || r.Text(0, 0) == schema_) return Status::Ok();
    return FailedPreconditionError(
        "in database \"" + database + "\" this role's search_path resolves to schema \"" + r.Text(0, 0) +
        "\", where a Backstage backend would keep its tables, but octop keeps them in \"" + schema_ +
        "\": drop or rename that schema, or set the role's search_path to public");
  }

  Status Migrate() override { return MigrateTo(kLatestSchemaVersion); }

  Status MigrateTo(int version) override {
    if (version < 1 || version > kLatestSchemaVersion) {
      return InvalidArgumentError("schema version " + std::to_string(version) + " is not between 1 and " +
                                  std::to_string(kLatestSchemaVersion));
    }
    // Already there: no DDL, no lock. So a least-privilege runtime role (DML only; docs/reliability.md) can
    // start on a schema that the owner role migrated.
    if (Result<int> current = SchemaVersion(); current.ok() && *current >= version) return Status::Ok();
    Status migrated = ApplyMigrations(version);
    if (!migrated.ok() && HasSqlState(migrated, "42501")) {
      Result<int> current = SchemaVersion();
      return FailedPreconditionError(
          "schema " + quoted_schema_ + " is at version " + (current.ok() ? std::to_string(*current) : "?") +
          " of " + std::to_string(version) +
          " and this database role may not migrate it: run `octop migrate` as the schema's owner role (" +
          migrated.message() + ")");
    }
    return migrated;
  }

  // Migrating beside other octop nodes and Backstage backends (docs/store.md, "PostgreSQL: migrations beside
  // knex"): a node that loses a race to create a schema or table (another session created it first) tries
  // again, and then finds it.
  Status ApplyMigrations(int version) {
    constexpr int kAttempts = 5;
    for (int attempt = 1;; ++attempt) {
      Status applied = ApplyMigrationsOnce(version);
      // A lost creation race, or a deadlock between two nodes' DDL: the next attempt finds what was made.
      const bool race_lost = IsDuplicateObject(applied) || HasSqlState(applied, "40P01");
      if (applied.ok() || attempt == kAttempts || !race_lost) return applied;
    }
  }

  // Waits outside the database for another process (a knex migrator); real time even under a fake clock.
  static void Pause(std::chrono::milliseconds how_long) {
    Clock::Real().WaitUntil(Clock::Real().SteadyNow() + how_long, std::stop_token());
  }

  Status ApplyMigrationsOnce(int version) {
    OCTOP_ASSIGN_OR_RETURN(ConnectionPool::Lease conn, pool_.Acquire());
    OCTOP_RETURN_IF_ERROR(CreateBookkeeping(*conn));
    // knex's migrator takes its lock with an UPDATE that must change exactly one row: take it the same way,
    // so a Backstage backend migrating this schema and this node run one after the other. A lock committed as
    // taken (a migrator outside a transaction, or one that died) is waited for, then reported.
    const SteadyTime deadline = Clock::Real().SteadyNow() + std::chrono::seconds(30);
    while (true) {
      OCTOP_RETURN_IF_ERROR(conn->Exec("BEGIN"));
      Result<bool> applied = ApplyStepsLocked(*conn, version);
      if (applied.ok() && *applied) return conn->Exec("COMMIT");
      (void)conn->Exec("ROLLBACK");
      if (!applied.ok()) return applied.status();
      if (Clock::Real().SteadyNow() >= deadline) {
        return FailedPreconditionError("knex's migration lock in " + quoted_schema_ +
                                       ".backstage_backend_tasks__knex_migrations_lock stayed taken for 30 "
                                       "s; if no Backstage backend is "
                                       "migrating, free it (`knex migrate:unlock`, or set is_locked = 0)");
      }
      Pause(std::chrono::milliseconds(100));
    }
  }

  // In its own short transaction, so that the window in which a knex migrator could see no table and then
  // fail to create it is as short as one round trip.
  Status CreateBookkeeping(postgres::PgConnection& conn) {
    const SteadyTime deadline = Clock::Real().SteadyNow() + std::chrono::seconds(10);
    while (true) {
      OCTOP_RETURN_IF_ERROR(conn.Exec("BEGIN"));
      Result<bool> done = CreateBookkeepingLocked(conn, Clock::Real().SteadyNow() < deadline);
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
  Result<bool> CreateBookkeepingLocked(postgres::PgConnection& conn, bool may_wait) {
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
    if (!present.contains("octop_migrations")) ddl += sql::kCreateOctopMigrations;
    if (!ddl.empty()) OCTOP_RETURN_IF_ERROR(conn.Exec(Substitute(ddl, quoted_schema_)));
    return true;
  }

  // Inside the transaction. False when knex's lock is committed as taken (the caller waits and retries).
  Result<bool> ApplyStepsLocked(postgres::PgConnection& conn, int version) {
    OCTOP_ASSIGN_OR_RETURN(PgResult locked,
                           conn.ExecParams(std::string(sql::kAdvisoryLock), {"octop-migrate:" + schema_}));
    (void)locked;
    OCTOP_ASSIGN_OR_RETURN(PgResult knex_lock,
                           conn.ExecParams(Substitute(sql::kTakeKnexLock, quoted_schema_), {}));
    if (knex_lock.AffectedRows() == 0) return false;
    OCTOP_ASSIGN_OR_RETURN(std::vector<std::string> applied, ReadApplied(conn));
    for (int i = 0; i < version; ++i) {
      const MigrationStep& step = kMigrations[static_cast<std::size_t>(i)];
      if (std::find(applied.begin(), applied.end(), step.name) != applied.end()) continue;
      OCTOP_RETURN_IF_ERROR(conn.Exec(Substitute(step.ddl, quoted_schema_)));
      Result<PgResult> recorded =
          step.knex ? conn.ExecParams(Substitute(sql::kRecordKnexMigration, quoted_schema_),
                                      {std::string(step.name), NowParam()})
                    : conn.ExecParams(Substitute(sql::kRecordOctopMigration, quoted_schema_),
                                      {std::to_string(i + 1), std::string(step.name), NowParam()});
      if (!recorded.ok()) return recorded.status();
    }
    OCTOP_ASSIGN_OR_RETURN(PgResult freed,
                           conn.ExecParams(Substitute(sql::kFreeKnexLock, quoted_schema_), {}));
    (void)freed;
    return true;
  }

  Result<int> SchemaVersion() override {
    OCTOP_ASSIGN_OR_RETURN(std::vector<std::string> applied, AppliedMigrations());
    int count = 0;
    for (const MigrationStep& step : kMigrations) {
      if (std::find(applied.begin(), applied.end(), step.name) != applied.end()) ++count;
    }
    return count;
  }

  Result<std::vector<std::string>> AppliedMigrations() override {
    OCTOP_ASSIGN_OR_RETURN(ConnectionPool::Lease conn, pool_.Acquire());
    return ReadApplied(*conn);
  }

  Result<std::vector<ColumnInfo>> DescribeTable(std::string_view table) override {
    OCTOP_ASSIGN_OR_RETURN(ConnectionPool::Lease conn, pool_.Acquire());
    OCTOP_ASSIGN_OR_RETURN(PgResult r,
                           conn->ExecParams(std::string(sql::kDescribeTable), {schema_, std::string(table)}));
    std::vector<ColumnInfo> columns;
    for (int i = 0; i < r.rows(); ++i) {
      columns.push_back({r.Text(i, 0), r.Text(i, 1), r.Bool(i, 2), r.Bool(i, 3)});
    }
    return columns;
  }

  Result<std::vector<IndexInfo>> DescribeIndexes(std::string_view table) override {
    OCTOP_ASSIGN_OR_RETURN(ConnectionPool::Lease conn, pool_.Acquire());
    OCTOP_ASSIGN_OR_RETURN(
        PgResult r, conn->ExecParams(std::string(sql::kDescribeIndexes), {schema_, std::string(table)}));
    std::vector<IndexInfo> indexes;
    for (int i = 0; i < r.rows(); ++i) {
      IndexInfo info{r.Text(i, 0), {}, r.Bool(i, 1), r.Bool(i, 2)};
      nlohmann::json columns = nlohmann::json::parse(r.Text(i, 3), nullptr, /*allow_exceptions=*/false);
      if (columns.is_array()) {
        for (const auto& c : columns) info.columns.push_back(c.get<std::string>());
      }
      indexes.push_back(std::move(info));
    }
    return indexes;
  }

  Result<WallTime> DatabaseNow() override {
    OCTOP_ASSIGN_OR_RETURN(PgResult r, Run(db_now_, {NowParam()}));
    return ParseTimestamp(r.Text(0, 0));
  }

  Status CheckWritable() override {
    OCTOP_ASSIGN_OR_RETURN(PgResult r, Run(writable_, {}));
    if (r.Text(0, 0) == "t")
      return UnavailableError("PostgreSQL server is a standby (in recovery): it takes no writes");
    if (r.Text(0, 1) == "on")
      return UnavailableError("PostgreSQL session is read-only (transaction_read_only)");
    return Status::Ok();
  }

  Status UpsertTask(const UpsertTaskParams& params) override {
    OCTOP_RETURN_IF_ERROR(ValidateTaskId(params.id));
    Result<TaskSettingsV2> settings = TaskSettingsV2::FromJson(params.settings_json);
    if (!settings.ok()) return settings.status();
    if (std::holds_alternative<FixedRateAfter>(params.start_at) ||
        std::holds_alternative<FixedRateAfter>(params.next_start_at)) {
      return InvalidArgumentError("UpsertTask: a fixed-rate time is only meaningful when releasing a run");
    }
    PgParams p = {NowParam(), params.id, params.settings_json};
    AppendTimeSpec(p, params.start_at);
    AppendTimeSpec(p, params.next_start_at);
    OCTOP_ASSIGN_OR_RETURN(PgResult r, Run(upsert_, p));
    (void)r;
    return Status::Ok();
  }

  Result<PollTasksResult> PollTasks(const PollTasksParams& params) override {
    OCTOP_ASSIGN_OR_RETURN(PgResult r, Run(poll_, {NowParam(), TextArrayLiteral(params.ids)}));
    PollTasksResult result;
    OCTOP_ASSIGN_OR_RETURN(result.db_now, ParseTimestamp(r.Text(0, 0)));
    for (int i = 0; i < r.rows(); ++i) {
      if (r.IsNull(i, 1)) continue;  // the LEFT JOIN's row when nothing matched
      PolledTask task;
      task.id = r.Text(i, 1);
      task.settings_json = r.Text(i, 2);
      task.ready = r.Bool(i, 3);
      task.running = r.Bool(i, 4);
      OCTOP_ASSIGN_OR_RETURN(task.next_run_start_at, OptTime(r, i, 5));
      OCTOP_ASSIGN_OR_RETURN(task.current_run_expires_at, OptTime(r, i, 6));
      result.tasks.push_back(std::move(task));
    }
    return result;
  }

  Result<std::optional<ClaimedRun>> TryClaimTask(const ClaimTaskParams& params) override {
    if (params.ticket.empty()) return InvalidArgumentError("TryClaimTask: the ticket must not be empty");
    if (!IsStorableText(params.id)) return std::optional<ClaimedRun>();
    if (!IsStorableText(params.ticket))
      return InvalidArgumentError("TryClaimTask: the ticket is not valid UTF-8");
    std::optional<std::string> timeout;
    if (params.timeout) timeout = FormatInterval(*params.timeout);
    OCTOP_ASSIGN_OR_RETURN(PgResult r, Run(claim_, {NowParam(), params.id, params.ticket, timeout}));
    if (r.rows() != 1) return std::optional<ClaimedRun>();
    ClaimedRun run;
    OCTOP_ASSIGN_OR_RETURN(run.started_at, ParseTimestamp(r.Text(0, 0)));
    OCTOP_ASSIGN_OR_RETURN(run.expires_at, OptTime(r, 0, 1));
    OCTOP_ASSIGN_OR_RETURN(run.due_at, OptTime(r, 0, 2));
    return std::optional<ClaimedRun>(run);
  }

  Result<bool> CheckTaskTicket(const CheckTaskTicketParams& params) override {
    if (!IsStorableText(params.id) || !IsStorableText(params.ticket)) return false;
    if (params.extend_lease) {
      OCTOP_ASSIGN_OR_RETURN(PgResult r, Run(extend_lease_, {NowParam(), params.id, params.ticket,
                                                             FormatInterval(*params.extend_lease)}));
      return r.rows() == 1;
    }
    OCTOP_ASSIGN_OR_RETURN(PgResult r, Run(check_, {params.id, params.ticket}));
    return r.rows() == 1;
  }

  Result<bool> TryReleaseTask(const ReleaseTaskParams& params) override {
    if (!IsStorableText(params.id) || !IsStorableText(params.ticket)) return false;
    if (params.error_json && !IsStorableText(*params.error_json)) {
      return InvalidArgumentError("TryReleaseTask: the error JSON is not valid UTF-8");
    }
    PgParams p = {NowParam(), params.id, params.ticket};
    AppendTimeSpec(p, params.next_run);
    p.push_back(params.error_json);
    OCTOP_ASSIGN_OR_RETURN(PgResult r, Run(release_, p));
    return r.AffectedRows() == 1;
  }

  Status TriggerTask(const TriggerTaskParams& params) override {
    if (!IsStorableText(params.id)) return NotFoundError("Task " + params.id + " does not exist");
    OCTOP_ASSIGN_OR_RETURN(PgResult r,
                           Run(trigger_, {NowParam(), params.id, postgres::PgNotifyPrefix(schema_)}));
    if (Count(r, 0, 0) == 0) return NotFoundError("Task " + params.id + " does not exist");
    if (Count(r, 0, 1) == 0) return ConflictError("Task " + params.id + " is currently running");
    return Status::Ok();
  }

  Status CancelTask(const CancelTaskParams& params) override {
    if (!IsStorableText(params.id)) return NotFoundError("Task " + params.id + " does not exist");
    if (!IsStorableText(params.error_json)) {
      return InvalidArgumentError("CancelTask: the error JSON is not valid UTF-8");
    }
    PgParams p = {NowParam(), params.id, params.error_json, params.next_run ? "1" : "0"};
    AppendTimeSpec(p, params.next_run.value_or(NullTime{}));
    OCTOP_ASSIGN_OR_RETURN(PgResult r, Run(cancel_, p));
    if (Count(r, 0, 0) == 0) return NotFoundError("Task " + params.id + " does not exist");
    if (Count(r, 0, 1) == 0) return ConflictError("Task " + params.id + " is not running");
    return Status::Ok();
  }

  Result<bool> CapTaskNextRun(const CapTaskNextRunParams& params) override {
    if (!IsStorableText(params.id)) return false;
    OCTOP_ASSIGN_OR_RETURN(PgResult r,
                           Run(cap_next_run_, {NowParam(), params.id, FormatInterval(params.within)}));
    return r.rows() == 1;
  }

  Result<std::vector<std::string>> SweepExpiredTaskRuns(const SweepExpiredTaskRunsParams& params) override {
    if (params.error_json && !IsStorableText(*params.error_json)) {
      return InvalidArgumentError("SweepExpiredTaskRuns: the error JSON is not valid UTF-8");
    }
    OCTOP_ASSIGN_OR_RETURN(PgResult r,
                           Run(sweep_, {NowParam(), params.error_json, TimeParam(params.expired_before)}));
    std::vector<std::string> ids;
    for (int i = 0; i < r.rows(); ++i) ids.push_back(r.Text(i, 0));
    std::sort(ids.begin(), ids.end());
    return ids;
  }

  Result<std::vector<TaskRow>> ListTasks(const ListTasksParams& params) override {
    Result<PgResult> result =
        params.ids ? Run(list_ids_, {TextArrayLiteral(*params.ids)}) : Run(list_all_, {});
    if (!result.ok()) return result.status();
    const PgResult& r = *result;
    std::vector<TaskRow> rows;
    rows.reserve(static_cast<std::size_t>(r.rows()));
    for (int i = 0; i < r.rows(); ++i) {
      TaskRow row;
      row.id = r.Text(i, 0);
      row.settings_json = r.Text(i, 1);
      OCTOP_ASSIGN_OR_RETURN(row.next_run_start_at, OptTime(r, i, 2));
      row.current_run_ticket = r.OptText(i, 3);
      OCTOP_ASSIGN_OR_RETURN(row.current_run_started_at, OptTime(r, i, 4));
      OCTOP_ASSIGN_OR_RETURN(row.current_run_expires_at, OptTime(r, i, 5));
      row.last_run_error_json = r.OptText(i, 6);
      OCTOP_ASSIGN_OR_RETURN(row.last_run_ended_at, OptTime(r, i, 7));
      rows.push_back(std::move(row));
    }
    return rows;
  }

  Status DeleteTask(const DeleteTaskParams& params) override {
    if (!IsStorableText(params.id)) return NotFoundError("Task " + params.id + " does not exist");
    OCTOP_ASSIGN_OR_RETURN(PgResult r, Run(delete_, {params.id}));
    if (r.AffectedRows() == 0) return NotFoundError("Task " + params.id + " does not exist");
    return Status::Ok();
  }

  Result<std::unique_ptr<Listener>> Listen(std::vector<std::string> channels) override {
    OCTOP_ASSIGN_OR_RETURN(std::unique_ptr<postgres::PgListener> listener,
                           postgres::PgListener::Open(conninfo_, schema_, std::move(channels)));
    return std::unique_ptr<Listener>(std::move(listener));
  }

  // ---- Jobs (jobs.sql) ----

  Result<std::vector<EnqueueResult>> EnqueueJobs(const std::vector<JobSpec>& jobs) override {
    OCTOP_RETURN_IF_ERROR(ValidateEnqueueBatch(jobs));
    OCTOP_ASSIGN_OR_RETURN(ConnectionPool::Lease conn, pool_.Acquire());
    const bool keyed =
        std::any_of(jobs.begin(), jobs.end(), [](const auto& j) { return j.unique_key.has_value(); });
    // Without unique keys the batch is one statement, hence one transaction. With them the lookups of skipped
    // items and any re-insert must commit with it.
    if (keyed) OCTOP_RETURN_IF_ERROR(conn->Exec("BEGIN"));
    OCTOP_ASSIGN_OR_RETURN(std::vector<EnqueueResult> out, EnqueueOn(*conn, jobs, /*notify=*/false));
    if (keyed) OCTOP_RETURN_IF_ERROR(conn->Exec("COMMIT"));
    // The wake-up goes in a transaction of its own after the commit (jobs.sql NotifyJobQueues says why), sent
    // by wakeups_ after this returns. Its failure is not the enqueue's: the jobs are committed, and polling
    // finds them.
    std::set<std::string> queues;
    for (const JobSpec& job : jobs) queues.insert(job.queue);
    wakeups_.Request(queues);
    return out;
  }

  Status WithTransaction(const std::function<Status(Transaction&)>& fn) override {
    OCTOP_ASSIGN_OR_RETURN(ConnectionPool::Lease conn, pool_.Acquire());
    OCTOP_RETURN_IF_ERROR(conn->Exec("BEGIN"));
    // The caller's SQL names the namespace's tables unqualified.
    OCTOP_RETURN_IF_ERROR(conn->Exec("SET LOCAL search_path TO " + quoted_schema_ + ", public"));
    PgTransaction txn(*this, *conn);
    Status result = fn(txn);
    if (result.ok() && txn.failure()) result = *txn.failure();
    if (result.ok() && conn->raw() != nullptr && PQtransactionStatus(conn->raw()) != PQTRANS_INTRANS) {
      result = FailedPreconditionError("the transaction is no longer open (a statement ended or aborted it)");
    }
    if (!result.ok()) {
      (void)conn->Exec("ROLLBACK");  // if this fails the pool closes the connection, which rolls back too
      return result;
    }
    return conn->Exec("COMMIT");
  }

  Result<std::vector<JobInfo>> ClaimJobs(const ClaimJobsParams& params) override {
    OCTOP_RETURN_IF_ERROR(ValidateJobName("queue", params.queue));
    if (params.limit < 1 || params.limit > 1000) {
      return InvalidArgumentError("ClaimJobs: limit must be 1..1000, got " + std::to_string(params.limit));
    }
    if (params.timeout.count() < 0) return InvalidArgumentError("ClaimJobs: timeout must be >= 0");
    if (!IsStorableText(params.worker_id))
      return InvalidArgumentError("ClaimJobs: worker_id is not valid UTF-8");
    std::optional<std::string> kinds;
    if (!params.kinds.empty()) kinds = TextArrayLiteral(params.kinds);
    OCTOP_ASSIGN_OR_RETURN(PgResult r,
                           Run(claim_jobs_, {NowParam(), params.queue, std::to_string(params.limit), kinds,
                                             FormatInterval(params.timeout), params.worker_id}));
    OCTOP_ASSIGN_OR_RETURN(std::vector<JobInfo> jobs, ReadJobs(r));
    std::sort(jobs.begin(), jobs.end(), [](const JobInfo& a, const JobInfo& b) {
      return std::tie(a.priority, a.scheduled_at, a.id) < std::tie(b.priority, b.scheduled_at, b.id);
    });
    return jobs;
  }

  Result<std::vector<bool>> CompleteJobs(const std::vector<JobCompletion>& completions) override {
    std::vector<bool> applied(completions.size(), false);
    std::vector<std::optional<std::string>> ids, tokens, outcomes, errors, delays;
    std::vector<std::size_t> positions;  // input index of each array element
    for (std::size_t i = 0; i < completions.size(); ++i) {
      const JobCompletion& c = completions[i];
      const std::string outcome = OutcomeCode(c.outcome);
      if (outcome.empty()) return InvalidArgumentError("CompleteJobs: unknown outcome for job " + c.id);
      // An id that is not a UUID, or a token that cannot be text, matches no row: not applied.
      if (!IsJobId(c.id) || !IsStorableText(c.attempt_token)) continue;
      ids.emplace_back(c.id);
      tokens.emplace_back(c.attempt_token);
      outcomes.emplace_back(outcome);
      errors.emplace_back(c.error ? std::optional<std::string>(TruncateJobError(*c.error)) : std::nullopt);
      delays.emplace_back(FormatInterval(std::max(c.retry_delay, std::chrono::microseconds(0))));
      positions.push_back(i);
    }
    if (positions.empty()) return applied;
    OCTOP_ASSIGN_OR_RETURN(PgResult r, Run(complete_jobs_, {NowParam(), ArrayLiteral(ids),
                                                            ArrayLiteral(tokens), ArrayLiteral(outcomes),
                                                            ArrayLiteral(errors), ArrayLiteral(delays)}));
    for (int i = 0; i < r.rows(); ++i) {
      const long ord = Count(r, i, 0);
      if (ord >= 1 && static_cast<std::size_t>(ord) <= positions.size()) {
        applied[positions[static_cast<std::size_t>(ord - 1)]] = true;
      }
    }
    return applied;
  }

  Result<std::vector<RescuedJob>> RescueExpiredJobs(const RescueExpiredJobsParams& params) override {
    OCTOP_ASSIGN_OR_RETURN(
        PgResult r,
        Run(rescue_jobs_, {NowParam(), FormatInterval(params.backoff_base),
                           FormatInterval(params.backoff_max), std::string(kJobTimedOutError),
                           TextArrayLiteral(params.spare_tokens), TimeParam(params.expired_before)}));
    std::vector<RescuedJob> rescued;
    for (int i = 0; i < r.rows(); ++i) {
      rescued.push_back(
          {r.Text(i, 0), ParseJobStatus(r.Text(i, 1)).value_or(JobStatus::kFailed), std::stoi(r.Text(i, 2))});
    }
    std::sort(rescued.begin(), rescued.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
    return rescued;
  }

  Result<long> RenewJobLeases(const RenewJobLeasesParams& params) override {
    if (params.tokens.empty()) return 0L;
    OCTOP_ASSIGN_OR_RETURN(PgResult r, Run(renew_job_leases_, {NowParam(), TextArrayLiteral(params.tokens),
                                                               FormatInterval(params.lease)}));
    return static_cast<long>(r.AffectedRows());
  }

  Status RetryJob(const RetryJobParams& params) override {
    if (!IsJobId(params.id)) return NoSuchJob(params.id);
    Result<PgResult> result = Run(retry_job_, {NowParam(), params.id, postgres::PgNotifyPrefix(schema_)});
    if (!result.ok()) {
      if (IsUniqueViolation(result.status())) {
        return ConflictError("Job " + params.id +
                             " cannot be retried: another live job holds its unique key");
      }
      return result.status();
    }
    const PgResult& r = *result;
    if (r.IsNull(0, 0)) return NoSuchJob(params.id);
    if (Count(r, 0, 1) == 0) {
      return ConflictError("Job " + params.id + " is " + r.Text(0, 0) +
                           ", only failed or frozen jobs can be retried");
    }
    return Status::Ok();
  }

  Status CancelJob(const CancelJobParams& params) override {
    if (!IsJobId(params.id)) return NoSuchJob(params.id);
    OCTOP_ASSIGN_OR_RETURN(PgResult r,
                           Run(cancel_job_, {NowParam(), params.id, std::string(kJobCancelledError)}));
    if (r.IsNull(0, 0)) return NoSuchJob(params.id);
    if (Count(r, 0, 1) == 1) return Status::Ok();
    if (r.Text(0, 0) == "running") return ConflictError("Job " + params.id + " is currently running");
    return ConflictError("Job " + params.id + " has already finished");
  }

  Result<JobInfo> GetJob(std::string_view id) override {
    if (!IsJobId(id)) return NoSuchJob(id);
    OCTOP_ASSIGN_OR_RETURN(PgResult r, Run(get_job_, {std::string(id)}));
    if (r.rows() == 0) return NoSuchJob(id);
    return ReadJob(r, 0);
  }

  Result<std::vector<JobInfo>> ListJobs(const JobFilter& params) override {
    if (params.limit < 1 || params.limit > 1000) {
      return InvalidArgumentError("ListJobs: limit must be 1..1000, got " + std::to_string(params.limit));
    }
    if (params.offset < 0) return InvalidArgumentError("ListJobs: offset must be >= 0");
    if ((params.queue && !IsStorableText(*params.queue)) || (params.kind && !IsStorableText(*params.kind))) {
      return std::vector<JobInfo>();
    }
    std::optional<std::string> status;
    if (params.status) status = std::string(JobStatusName(*params.status));
    OCTOP_ASSIGN_OR_RETURN(
        PgResult r,
        Run(list_jobs_,
            {status, params.queue, params.kind, std::to_string(params.limit), std::to_string(params.offset),
             params.payload_budget ? std::optional<std::string>(
                                         std::to_string(std::max<std::int64_t>(0, *params.payload_budget)))
                                   : std::nullopt}));
    OCTOP_ASSIGN_OR_RETURN(std::vector<JobInfo> jobs, ReadJobs(r));
    for (int i = 0; i < r.rows(); ++i) {
      if (r.IsNull(i, 3)) jobs[static_cast<std::size_t>(i)].omitted_payload_bytes = Count(r, i, 17);
    }
    return jobs;
  }

  Result<std::vector<JobInfo>> ListFailedJobs(const ListFailedJobsParams& params) override {
    if (params.limit < 1 || params.limit > 1000) {
      return InvalidArgumentError("ListFailedJobs: limit must be 1..1000, got " +
                                  std::to_string(params.limit));
    }
    if (params.queue && !IsStorableText(*params.queue)) return std::vector<JobInfo>();
    OCTOP_ASSIGN_OR_RETURN(PgResult r, Run(list_failed_jobs_, {params.queue, std::to_string(params.limit)}));
    return ReadJobs(r);
  }

  Result<std::vector<JobStatusCount>> SummarizeJobs() override {
    OCTOP_ASSIGN_OR_RETURN(PgResult r, Run(job_summary_, {NowParam()}));
    std::vector<JobStatusCount> counts;
    for (int i = 0; i < r.rows(); ++i) {
      if (r.IsNull(i, 1)) continue;  // the LEFT JOIN's row when there are no jobs
      JobStatusCount line;
      line.queue = r.Text(i, 1);
      const auto status = ParseJobStatus(r.Text(i, 2));
      if (!status) return InternalError("PostgreSQL: unknown job status '" + r.Text(i, 2) + "'");
      line.status = *status;
      line.count = Count(r, i, 3);
      OCTOP_ASSIGN_OR_RETURN(line.oldest_scheduled_at, OptTime(r, i, 4));
      if (!r.IsNull(i, 5)) line.average_delay = std::chrono::microseconds(std::stoll(r.Text(i, 5)));
      counts.push_back(std::move(line));
    }
    std::sort(counts.begin(), counts.end(), [](const auto& a, const auto& b) {
      return std::tie(a.queue, a.status) < std::tie(b.queue, b.status);
    });
    return counts;
  }

  Result<JobStats> ComputeJobStats(const JobStatsFilter& params) override {
    OCTOP_ASSIGN_OR_RETURN(WallTime now, DatabaseNow());
    OCTOP_ASSIGN_OR_RETURN(JobStats stats, JobStatsGrid(params, now));
    if ((params.queue && !IsStorableText(*params.queue)) || (params.kind && !IsStorableText(*params.kind))) {
      return stats;  // no stored job has such a name
    }
    OCTOP_ASSIGN_OR_RETURN(
        PgResult r, Run(job_stats_, {FormatTimestamp(stats.from), FormatTimestamp(stats.to),
                                     std::to_string(params.bucket.count()), params.queue, params.kind}));
    const auto us = [&](int i, int col) -> std::optional<std::chrono::microseconds> {
      if (r.IsNull(i, col)) return std::nullopt;
      return std::chrono::microseconds(std::stoll(r.Text(i, col)));
    };
    for (int i = 0; i < r.rows(); ++i) {
      const long long index = std::stoll(r.Text(i, 0));
      if (index < 0 || index >= static_cast<long long>(stats.buckets.size())) continue;
      JobStatsBucket& b = stats.buckets[static_cast<std::size_t>(index)];
      b.succeeded = Count(r, i, 1);
      b.frozen = Count(r, i, 2);
      b.avg_latency = us(i, 3);
      b.max_latency = us(i, 4);
      b.avg_run = us(i, 5);
    }
    return stats;
  }

  Result<std::optional<WallTime>> NextJobDueAt(std::string_view queue) override {
    if (!IsStorableText(queue)) return std::optional<WallTime>();
    OCTOP_ASSIGN_OR_RETURN(PgResult r, Run(next_job_due_, {std::string(queue)}));
    return OptTime(r, 0, 0);
  }

  Status SetQueuePaused(std::string_view queue, bool paused) override {
    OCTOP_RETURN_IF_ERROR(ValidateJobName("queue", queue));
    OCTOP_ASSIGN_OR_RETURN(PgResult r,
                           Run(set_queue_paused_, {NowParam(), std::string(queue), paused ? "true" : "false",
                                                   postgres::PgNotifyPrefix(schema_)}));
    (void)r;
    return Status::Ok();
  }

  Result<std::vector<QueueInfo>> ListQueues() override {
    OCTOP_ASSIGN_OR_RETURN(PgResult r, Run(list_queues_, {}));
    std::vector<QueueInfo> queues;
    for (int i = 0; i < r.rows(); ++i) queues.push_back({r.Text(i, 0), r.Bool(i, 1)});
    std::sort(queues.begin(), queues.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
    return queues;
  }

  Result<long> DeleteFinishedJobs(const DeleteFinishedJobsParams& params) override {
    if (params.older_than.count() < 0)
      return InvalidArgumentError("DeleteFinishedJobs: older_than must be >= 0");
    if (params.limit < 1) return InvalidArgumentError("DeleteFinishedJobs: limit must be >= 1");
    std::vector<std::string> statuses;
    for (JobStatus s : params.statuses) {
      if (s != JobStatus::kSuccess && s != JobStatus::kFrozen) {
        return InvalidArgumentError("DeleteFinishedJobs: only success and frozen jobs can be deleted, not " +
                                    std::string(JobStatusName(s)));
      }
      statuses.emplace_back(JobStatusName(s));
    }
    if (statuses.empty()) return 0L;
    OCTOP_ASSIGN_OR_RETURN(
        PgResult r, Run(delete_finished_, {NowParam(), TextArrayLiteral(statuses),
                                           FormatInterval(params.older_than), std::to_string(params.limit)}));
    return r.AffectedRows();
  }

  Result<std::optional<std::string>> GetConfig(std::string_view key) override {
    OCTOP_RETURN_IF_ERROR(ValidateJobName("config key", key));
    OCTOP_ASSIGN_OR_RETURN(PgResult r, Run(get_config_, {std::string(key)}));
    if (r.rows() == 0) return std::optional<std::string>();
    return std::optional<std::string>(r.Text(0, 0));
  }

  Status SetConfig(std::string_view key, std::string_view value_json) override {
    OCTOP_RETURN_IF_ERROR(ValidateJobName("config key", key));
    if (!IsStorableText(value_json) || !nlohmann::json::accept(value_json)) {
      return InvalidArgumentError("config value for " + std::string(key) + " is not valid JSON");
    }
    OCTOP_ASSIGN_OR_RETURN(PgResult r,
                           Run(set_config_, {NowParam(), std::string(key), std::string(value_json),
                                             postgres::PgNotifyPrefix(schema_)}));
    (void)r;
    return Status::Ok();
  }

  Result<std::vector<ConfigEntry>> ListConfig() override {
    OCTOP_ASSIGN_OR_RETURN(PgResult r, Run(list_config_, {}));
    std::vector<ConfigEntry> entries;
    for (int i = 0; i < r.rows(); ++i) {
      ConfigEntry entry{r.Text(i, 0), r.Text(i, 1), {}};
      OCTOP_ASSIGN_OR_RETURN(entry.updated_at, ParseTimestamp(r.Text(i, 2)));
      entries.push_back(std::move(entry));
    }
    return entries;
  }

  // Inserts a validated batch on `conn` (inside a transaction when any item has a unique key). Items skipped
  // by ON CONFLICT are looked up; one whose live duplicate finished in between is inserted again. `notify`:
  // the statement itself NOTIFYs (delivered when the enclosing transaction commits).
  Result<std::vector<EnqueueResult>> EnqueueOn(postgres::PgConnection& conn, const std::vector<JobSpec>& jobs,
                                               bool notify) {
    std::vector<EnqueueResult> out(jobs.size());
    for (EnqueueResult& job : out) job.id = NewJobId();
    std::vector<std::size_t> todo(jobs.size());
    for (std::size_t i = 0; i < todo.size(); ++i) todo[i] = i;
    std::optional<std::string> prefix;
    if (notify) prefix = postgres::PgNotifyPrefix(schema_);
    for (int attempt = 0; attempt < kEnqueueAttempts && !todo.empty(); ++attempt) {
      std::vector<std::optional<std::string>> ids, queues, kinds, payloads, priorities, ats, retries, keys;
      for (std::size_t i : todo) {
        const JobSpec& job = jobs[i];
        ids.emplace_back(out[i].id);
        queues.emplace_back(job.queue);
        kinds.emplace_back(job.kind);
        payloads.emplace_back(job.payload);
        priorities.emplace_back(std::to_string(job.priority));
        ats.emplace_back(job.scheduled_at ? std::optional(FormatTimestamp(*job.scheduled_at)) : std::nullopt);
        retries.emplace_back(std::to_string(job.max_retries));
        keys.emplace_back(job.unique_key);
      }
      OCTOP_ASSIGN_OR_RETURN(
          PgResult inserted,
          conn.ExecPrepared(enqueue_jobs_.name, enqueue_jobs_.text,
                            {NowParam(), ArrayLiteral(ids), ArrayLiteral(queues), ArrayLiteral(kinds),
                             ArrayLiteral(payloads), ArrayLiteral(priorities), ArrayLiteral(ats),
                             ArrayLiteral(retries), ArrayLiteral(keys), prefix}));
      std::set<std::string> done;
      for (int r = 0; r < inserted.rows(); ++r) done.insert(inserted.Text(r, 0));
      std::vector<std::size_t> skipped;
      for (std::size_t i : todo) {
        if (!done.contains(out[i].id)) skipped.push_back(i);
      }
      if (skipped.empty()) return out;
      std::vector<std::optional<std::string>> wanted;
      for (std::size_t i : skipped) wanted.emplace_back(jobs[i].unique_key);
      OCTOP_ASSIGN_OR_RETURN(PgResult live, conn.ExecPrepared(find_live_keys_.name, find_live_keys_.text,
                                                              {ArrayLiteral(wanted)}));
      std::map<std::string, std::string> holder;
      for (int r = 0; r < live.rows(); ++r) holder.emplace(live.Text(r, 0), live.Text(r, 1));
      todo.clear();
      for (std::size_t i : skipped) {
        auto it = jobs[i].unique_key ? holder.find(*jobs[i].unique_key) : holder.end();
        if (it == holder.end()) {
          todo.push_back(i);  // its holder finished meanwhile: insert it again
        } else {
          out[i] = {it->second, true};
        }
      }
    }
    if (!todo.empty()) return UnavailableError("EnqueueJobs: unique keys kept changing hands, try again");
    return out;
  }

  // Transaction on one pooled connection inside BEGIN (WithTransaction).
  class PgTransaction final : public Transaction {
   public:
    PgTransaction(PostgresStore& store, postgres::PgConnection& conn) : store_(store), conn_(conn) {}

    Result<SqlRows> Execute(std::string_view sql_text,
                            const std::vector<std::optional<std::string>>& params) override {
      if (failure_) return FailedPreconditionError("the transaction already failed: " + failure_->message());
      Result<PgResult> r = conn_.ExecParams(std::string(sql_text), params);
      if (!r.ok()) {
        failure_ = r.status();
        return r.status();
      }
      SqlRows out;
      const PGresult* raw = r->raw();
      const int columns = raw != nullptr ? PQnfields(raw) : 0;
      for (int c = 0; c < columns; ++c) out.columns.emplace_back(PQfname(raw, c));
      for (int i = 0; i < r->rows(); ++i) {
        std::vector<std::optional<std::string>> values;
        for (int c = 0; c < columns; ++c) values.push_back(r->OptText(i, c));
        out.rows.push_back(std::move(values));
      }
      out.affected_rows = r->AffectedRows();
      return out;
    }

    Result<std::vector<EnqueueResult>> EnqueueJobs(const std::vector<JobSpec>& jobs) override {
      OCTOP_RETURN_IF_ERROR(ValidateEnqueueBatch(jobs));
      if (failure_) return FailedPreconditionError("the transaction already failed: " + failure_->message());
      Result<std::vector<EnqueueResult>> out = store_.EnqueueOn(conn_, jobs, /*notify=*/true);
      if (!out.ok()) failure_ = out.status();
      return out;
    }

    std::string_view backend() const override { return "postgres"; }
    const std::optional<Status>& failure() const { return failure_; }

   private:
    PostgresStore& store_;
    postgres::PgConnection& conn_;
    std::optional<Status> failure_;
  };

 private:
  // On wakeups_'s thread: one NOTIFY per queue, all in one transaction on a pooled connection.
  void SendWakeups(const std::vector<std::string>& queues) {
    Result<ConnectionPool::Lease> conn = pool_.Acquire();
    if (!conn.ok()) return;
    (void)(*conn)->ExecPrepared(notify_job_queues_.name, notify_job_queues_.text,
                                {postgres::PgNotifyPrefix(schema_), TextArrayLiteral(queues)});
  }

  Statement Make(std::string_view name, std::string_view text) const {
    return {"octop_" + std::string(name), Substitute(text, quoted_schema_)};
  }

  std::optional<std::string> NowParam() const { return TimeParam(clock_->DatabaseNowOverride()); }
  static std::optional<std::string> TimeParam(const std::optional<WallTime>& t) {
    if (!t) return std::nullopt;
    return FormatTimestamp(*t);
  }

  Result<PgResult> Run(const Statement& statement, const PgParams& params) {
    OCTOP_ASSIGN_OR_RETURN(ConnectionPool::Lease conn, pool_.Acquire());
    return conn->ExecPrepared(statement.name, statement.text, params);
  }

  Result<std::vector<std::string>> ReadApplied(postgres::PgConnection& conn) {
    OCTOP_ASSIGN_OR_RETURN(PgResult tables, conn.ExecParams(std::string(sql::kBookkeepingTables), {schema_}));
    bool knex = false, octop = false;
    for (int i = 0; i < tables.rows(); ++i) {
      if (tables.Text(i, 0) == "octop_migrations") octop = true;
      if (tables.Text(i, 0) == "backstage_backend_tasks__knex_migrations") knex = true;
    }
    std::vector<std::string> names;
    if (knex) {
      OCTOP_ASSIGN_OR_RETURN(PgResult r,
                             conn.ExecParams(Substitute(sql::kListKnexMigrations, quoted_schema_), {}));
      for (int i = 0; i < r.rows(); ++i) names.push_back(r.Text(i, 0));
    }
    if (octop) {
      OCTOP_ASSIGN_OR_RETURN(PgResult r,
                             conn.ExecParams(Substitute(sql::kListOctopMigrations, quoted_schema_), {}));
      for (int i = 0; i < r.rows(); ++i) names.push_back(r.Text(i, 0));
    }
    return names;
  }

  const std::string conninfo_;
  const std::string backstage_application_name_;
  const std::string schema_;
  const std::string quoted_schema_;
  const Clock* clock_;
  ConnectionPool pool_;
  const Statement db_now_, upsert_, poll_, claim_, check_, extend_lease_, release_, trigger_, cancel_,
      cap_next_run_, writable_, sweep_, list_all_, list_ids_, delete_;
  const Statement enqueue_jobs_, find_live_keys_, claim_jobs_, complete_jobs_, rescue_jobs_,
      renew_job_leases_, retry_job_, cancel_job_, get_job_, list_jobs_, list_failed_jobs_, job_summary_,
      job_stats_, next_job_due_, set_queue_paused_, list_queues_, delete_finished_, get_config_, set_config_,
      list_config_;
  const Statement notify_job_queues_;
  // Last: destroyed first, so its pending wake-ups are sent while the pool is still there.
  postgres::WakeupSender wakeups_;
};

// Where a store's tables are: the connection string to use and the schema in it.
struct Placement {
  std::string conninfo;
  std::string schema;
  std::optional<std::string> database;  // a plugin's own database (PluginDivision::kDatabase)
};

Result<Placement> Place(const std::string& conninfo, const StoreOptions& options) {
  OCTOP_RETURN_IF_ERROR(ValidateNamespace(options.ns));
  if (!options.plugin_division) return Placement{conninfo, options.ns, std::nullopt};
  const PluginDivision& division = *options.plugin_division;
  if (division.mode == PluginDivision::Mode::kSchema) {
    const std::string schema = division.schema_prefix + options.ns;
    OCTOP_RETURN_IF_ERROR(ValidateNamespace(schema));
    return Placement{conninfo, schema, std::nullopt};
  }
  const std::string database = division.prefix + options.ns;
  if (database.size() > kMaxNamespaceBytes) {
    return InvalidArgumentError("plugin database '" + database +
                                "' is longer than 63 bytes: shorten the plugin id or the prefix");
  }
  OCTOP_ASSIGN_OR_RETURN(std::string plugin_conninfo, postgres::ConninfoWithDatabase(conninfo, database));
  // Backstage never qualifies its table names, so in a plugin's database they resolve through the role's
  // search_path; octop names `public` explicitly and checks at open that the two agree
  // (EnsurePluginDatabase).
  return Placement{std::move(plugin_conninfo), "public", database};
}

// Creates the plugin's database when it is missing, as Backstage's ensureExists does, unless the plugin's
// tasks live in a schema of the URL's database: starting a second task table beside them would run every
// global task twice across the two layouts, so that is refused until the operator picks one.
Status EnsurePluginDatabase(const std::string& conninfo, const std::string& plugin_id,
                            const Placement& placed) {
  OCTOP_ASSIGN_OR_RETURN(std::unique_ptr<postgres::PgConnection> admin,
                         postgres::PgConnection::Open(conninfo));
  OCTOP_ASSIGN_OR_RETURN(PgResult exists,
                         admin->ExecParams(std::string(sql::kDatabaseExists), {*placed.database}));
  if (exists.Bool(0, 0)) return Status::Ok();
  OCTOP_ASSIGN_OR_RETURN(PgResult old_layout, admin->ExecParams(std::string(sql::kTaskTableIn), {plugin_id}));
  if (old_layout.Bool(0, 0)) {
    return FailedPreconditionError(
        "the tasks of plugin '" + plugin_id + "' are in schema \"" + plugin_id +
        "\" of the URL's database (octop's layout before plugin databases, or Backstage with "
        "pluginDivisionMode: schema), but pluginDivisionMode is database, whose database \"" +
        *placed.database +
        "\" does not exist yet; set database.pluginDivisionMode: schema to keep them "
        "(docs/store.md, \"Sharing a database with Backstage\")");
  }
  Status created = admin->Exec(Substitute(sql::kCreateDatabase, postgres::QuoteIdentifier(*placed.database)));
  if (!created.ok() && !IsDuplicateObject(created)) {
    return Status(created.code(), "cannot create database \"" + *placed.database + "\" for plugin '" +
                                      plugin_id + "' (create it, or grant CREATEDB): " + created.message());
  }
  return Status::Ok();
}

}  // namespace

Status ValidatePostgresNamespace(std::string_view ns, const std::optional<PluginDivision>& division) {
  StoreOptions options;
  options.ns = std::string(ns);
  options.plugin_division = division;
  // "postgresql://" parses (all defaults), so only the names are checked here.
  return Place("postgresql://", options).status();
}

Result<std::unique_ptr<Store>> OpenPostgresStore(const std::string& conninfo, const StoreOptions& options) {
  OCTOP_RETURN_IF_ERROR(postgres::ParseConninfo(conninfo).status());
  OCTOP_ASSIGN_OR_RETURN(Placement placed, Place(conninfo, options));
  if (placed.database) OCTOP_RETURN_IF_ERROR(EnsurePluginDatabase(conninfo, options.ns, placed));
  StoreOptions placed_options = options;
  placed_options.ns = placed.schema;
  // Backstage's default application_name for its connections to a plugin's database (backend-defaults).
  auto store = std::make_unique<PostgresStore>(
      placed.conninfo, placed_options,
      options.plugin_division ? "backstage_plugin_" + options.ns : std::string());
  OCTOP_RETURN_IF_ERROR(store->Connect());
  if (placed.database) OCTOP_RETURN_IF_ERROR(store->CheckSearchPath(*placed.database));
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace octop::store
