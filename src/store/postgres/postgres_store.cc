// PostgresStore: the Store contract on PostgreSQL through libpq (see store/store.h and docs/store.md).
//
// Every operation is one prepared statement (tasks.sql) run on a pooled connection, except Migrate (one
// transaction of several). The schema, validated and quoted, is the only text substituted into SQL, once,
// when the store is built; every value is a bound parameter. Time comparisons use COALESCE($1, now()) with $1
// the clock's DatabaseNowOverride (NULL in production).
#include "store/postgres/postgres_store.h"

#include <array>
#include <string>
#include <utility>

#include <libpq-fe.h>
#include <nlohmann/json.hpp>

#include <octop/task_settings.h>

#include "postgres_queries.h"
#include "store/postgres/connection_pool.h"
#include "store/postgres/pg_connection.h"
#include "store/postgres/pg_listener.h"
#include "store/postgres/pg_timestamp.h"

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

// Whether `s` can be sent as a PostgreSQL text value at all (no NUL, well-formed UTF-8). Lookups by an id
// that cannot be stored simply find nothing, as on SQLite, instead of failing with a server encoding error.
bool IsStorableText(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    auto b = static_cast<unsigned char>(s[i]);
    if (b == 0) return false;
    std::size_t n = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (std::size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
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

constexpr std::array<MigrationStep, 5> kMigrations = {{
    {kMigrationNames[0], sql::kMigration1Init, true},
    {kMigrationNames[1], sql::kMigration2NullableNextRun, true},
    {kMigrationNames[2], sql::kMigration3LastRun, true},
    {kMigrationNames[3], sql::kMigration4Jobs, false},
    {kMigrationNames[4], sql::kMigration5Config, false},
}};
static_assert(kMigrations.size() == static_cast<std::size_t>(kLatestSchemaVersion));

class PostgresStore final : public Store {
 public:
  PostgresStore(std::string conninfo, const StoreOptions& options)
      : conninfo_(std::move(conninfo)),
        schema_(options.ns),
        quoted_schema_(postgres::QuoteIdentifier(options.ns)),
        clock_(options.clock != nullptr ? options.clock : &Clock::Real()),
        pool_(conninfo_, options.pool_size),
        db_now_(Make("DatabaseNow", sql::kDatabaseNow)),
        upsert_(Make("UpsertTask", sql::kUpsertTask)),
        poll_(Make("PollTasks", sql::kPollTasks)),
        claim_(Make("TryClaimTask", sql::kTryClaimTask)),
        check_(Make("CheckTaskTicket", sql::kCheckTaskTicket)),
        release_(Make("TryReleaseTask", sql::kTryReleaseTask)),
        trigger_(Make("TriggerTask", sql::kTriggerTask)),
        cancel_(Make("CancelTask", sql::kCancelTask)),
        sweep_(Make("SweepExpiredTaskRuns", sql::kSweepExpiredTaskRuns)),
        list_all_(Make("ListAllTasks", sql::kListAllTasks)),
        list_ids_(Make("ListTasksByIds", sql::kListTasksByIds)),
        delete_(Make("DeleteTask", sql::kDeleteTask)) {}

  // Opens the first connection so that an unreachable server is reported by OpenStore.
  Status Connect() {
    OCTOP_ASSIGN_OR_RETURN(ConnectionPool::Lease lease, pool_.Acquire());
    (void)lease;
    return Status::Ok();
  }

  std::string_view backend() const override { return "postgres"; }

  Status Migrate() override { return MigrateTo(kLatestSchemaVersion); }

  Status MigrateTo(int version) override {
    if (version < 1 || version > kLatestSchemaVersion) {
      return InvalidArgumentError("schema version " + std::to_string(version) + " is not between 1 and " +
                                  std::to_string(kLatestSchemaVersion));
    }
    OCTOP_ASSIGN_OR_RETURN(ConnectionPool::Lease conn, pool_.Acquire());
    OCTOP_RETURN_IF_ERROR(conn->Exec("BEGIN"));
    // Keyed by schema: nodes migrating the same namespace run one after the other; other namespaces are not
    // held up. Taken before CREATE SCHEMA IF NOT EXISTS, which itself races between sessions.
    OCTOP_ASSIGN_OR_RETURN(PgResult locked,
                           conn->ExecParams(std::string(sql::kAdvisoryLock), {"octop-migrate:" + schema_}));
    (void)locked;
    OCTOP_RETURN_IF_ERROR(conn->Exec(Substitute(sql::kCreateBookkeeping, quoted_schema_)));
    OCTOP_ASSIGN_OR_RETURN(std::vector<std::string> applied, ReadApplied(*conn));
    for (int i = 0; i < version; ++i) {
      const MigrationStep& step = kMigrations[static_cast<std::size_t>(i)];
      if (std::find(applied.begin(), applied.end(), step.name) != applied.end()) continue;
      OCTOP_RETURN_IF_ERROR(conn->Exec(Substitute(step.ddl, quoted_schema_)));
      Result<PgResult> recorded =
          step.knex ? conn->ExecParams(Substitute(sql::kRecordKnexMigration, quoted_schema_),
                                       {std::string(step.name), NowParam()})
                    : conn->ExecParams(Substitute(sql::kRecordOctopMigration, quoted_schema_),
                                       {std::to_string(i + 1), std::string(step.name), NowParam()});
      if (!recorded.ok()) return recorded.status();
    }
    return conn->Exec("COMMIT");
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
    return std::optional<ClaimedRun>(run);
  }

  Result<bool> CheckTaskTicket(const CheckTaskTicketParams& params) override {
    if (!IsStorableText(params.id) || !IsStorableText(params.ticket)) return false;
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
    OCTOP_ASSIGN_OR_RETURN(PgResult r, Run(cancel_, {NowParam(), params.id, params.error_json}));
    if (Count(r, 0, 0) == 0) return NotFoundError("Task " + params.id + " does not exist");
    if (Count(r, 0, 1) == 0) return ConflictError("Task " + params.id + " is not running");
    return Status::Ok();
  }

  Result<std::vector<std::string>> SweepExpiredTaskRuns(const SweepExpiredTaskRunsParams&) override {
    OCTOP_ASSIGN_OR_RETURN(PgResult r, Run(sweep_, {NowParam()}));
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

 private:
  Statement Make(std::string_view name, std::string_view text) const {
    return {"octop_" + std::string(name), Substitute(text, quoted_schema_)};
  }

  std::optional<std::string> NowParam() const {
    std::optional<WallTime> now = clock_->DatabaseNowOverride();
    if (!now) return std::nullopt;
    return FormatTimestamp(*now);
  }

  Result<PgResult> Run(const Statement& statement, const PgParams& params) {
    OCTOP_ASSIGN_OR_RETURN(ConnectionPool::Lease conn, pool_.Acquire());
    return conn->ExecPrepared(statement.name, statement.text, params);
  }

  Result<std::vector<std::string>> ReadApplied(postgres::PgConnection& conn) {
    OCTOP_ASSIGN_OR_RETURN(PgResult tables, conn.ExecParams(std::string(sql::kBookkeepingTables), {schema_}));
    bool knex = false, octop = false;
    for (int i = 0; i < tables.rows(); ++i) {
      (tables.Text(i, 0) == "octop_migrations" ? octop : knex) = true;
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
  const std::string schema_;
  const std::string quoted_schema_;
  const Clock* clock_;
  ConnectionPool pool_;
  const Statement db_now_, upsert_, poll_, claim_, check_, release_, trigger_, cancel_, sweep_, list_all_,
      list_ids_, delete_;
};

}  // namespace

Result<std::unique_ptr<Store>> OpenPostgresStore(const std::string& conninfo, const StoreOptions& options) {
  OCTOP_RETURN_IF_ERROR(ValidateNamespace(options.ns));
  char* error = nullptr;
  PQconninfoOption* parsed = PQconninfoParse(conninfo.c_str(), &error);
  if (parsed == nullptr) {
    std::string message = error != nullptr ? error : "out of memory";
    PQfreemem(error);
    while (!message.empty() && message.back() == '\n') message.pop_back();
    return InvalidArgumentError("invalid PostgreSQL connection string: " + message);
  }
  PQconninfoFree(parsed);
  auto store = std::make_unique<PostgresStore>(conninfo, options);
  OCTOP_RETURN_IF_ERROR(store->Connect());
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace octop::store
