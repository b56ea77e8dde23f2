#include "store/postgres/pg_namespace.h"

#include <string>
#include <utility>

#include "postgres_queries.h"
#include "store/job_rules.h"
#include "store/postgres/pg_listener.h"
#include "store/postgres/pg_timestamp.h"
#include "store/postgres/postgres_store.h"

namespace octop::store::postgres {

namespace {

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

// Another session created the same database, schema or table first (duplicate_database, duplicate_schema,
// duplicate_table; concurrent CREATEs collide on the catalog's unique indexes as 23505).
bool IsDuplicateDatabase(const Status& status) {
  return HasSqlState(status, "42P04") || IsUniqueViolation(status);
}

// Where a store's tables are: the connection string to use and the schema in it.
struct Placement {
  std::string conninfo;
  std::string schema;
  std::optional<std::string> database;  // a plugin's own database (PluginDivision::kDatabase)
  std::string listen_conninfo;          // what LISTEN connects to (PostgresPooling::listen_url)
};

Result<Placement> Place(const std::string& conninfo, const StoreOptions& options) {
  OCTOP_RETURN_IF_ERROR(ValidateNamespace(options.ns));
  const std::string& listen_url = options.pooling.listen_url.empty() ? conninfo : options.pooling.listen_url;
  if (!options.plugin_division) return Placement{conninfo, options.ns, std::nullopt, listen_url};
  const PluginDivision& division = *options.plugin_division;
  if (division.mode == PluginDivision::Mode::kSchema) {
    const std::string schema = division.schema_prefix + options.ns;
    OCTOP_RETURN_IF_ERROR(ValidateNamespace(schema));
    return Placement{conninfo, schema, std::nullopt, listen_url};
  }
  const std::string database = division.prefix + options.ns;
  if (database.size() > kMaxNamespaceBytes) {
    return InvalidArgumentError("plugin database '" + database +
                                "' is longer than 63 bytes: shorten the plugin id or the prefix");
  }
  OCTOP_ASSIGN_OR_RETURN(std::string plugin_conninfo, ConninfoWithDatabase(conninfo, database));
  OCTOP_ASSIGN_OR_RETURN(std::string plugin_listen, ConninfoWithDatabase(listen_url, database));
  // Backstage never qualifies its table names, so in a plugin's database they resolve through the role's
  // search_path; octop names `public` explicitly and checks at open that the two agree
  // (EnsurePluginDatabase).
  return Placement{std::move(plugin_conninfo), "public", database, std::move(plugin_listen)};
}

// Creates the plugin's database when it is missing, as Backstage's ensureExists does, unless the plugin's
// tasks live in a schema of the URL's database: starting a second task table beside them would run every
// global task twice across the two layouts, so that is refused until the operator picks one.
Status EnsurePluginDatabase(const std::string& conninfo, const std::string& plugin_id,
                            const Placement& placed) {
  OCTOP_ASSIGN_OR_RETURN(std::unique_ptr<PgConnection> admin, PgConnection::Open(conninfo));
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
  Status created = admin->Exec(Substitute(sql::kCreateDatabase, QuoteIdentifier(*placed.database)));
  if (!created.ok() && !IsDuplicateDatabase(created)) {
    return Status(created.code(), "cannot create database \"" + *placed.database + "\" for plugin '" +
                                      plugin_id + "' (create it, or grant CREATEDB): " + created.message());
  }
  return Status::Ok();
}

}  // namespace

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

Result<std::optional<WallTime>> OptTime(const PgResult& r, int row, int col) {
  if (r.IsNull(row, col)) return std::optional<WallTime>();
  OCTOP_ASSIGN_OR_RETURN(WallTime t, ParseTimestamp(r.Text(row, col)));
  return std::optional<WallTime>(t);
}

long Count(const PgResult& r, int row, int col) { return std::stol(r.Text(row, col)); }

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

bool HasSqlState(const Status& status, std::string_view state) {
  return status.message().find("SQLSTATE " + std::string(state)) != std::string::npos;
}

bool IsUniqueViolation(const Status& status) { return HasSqlState(status, "23505"); }

PgNamespace::PgNamespace(std::string conninfo, std::string listen_conninfo, std::string schema,
                         const StoreOptions& options, std::string backstage_application_name)
    : conninfo_(std::move(conninfo)),
      listen_conninfo_(std::move(listen_conninfo)),
      backstage_application_name_(std::move(backstage_application_name)),
      schema_(std::move(schema)),
      quoted_schema_(QuoteIdentifier(schema_)),
      clock_(options.clock != nullptr ? options.clock : &Clock::Real()),
      pool_(conninfo_, options.pool_size, options.pooling.prepared_statements),
      db_now_(Make("DatabaseNow", sql::kDatabaseNow)),
      writable_(Make("Writable", sql::kWritable)) {}

Result<std::unique_ptr<PgNamespace>> PgNamespace::Open(const std::string& conninfo,
                                                       const StoreOptions& options) {
  OCTOP_RETURN_IF_ERROR(ParseConninfo(conninfo).status());
  if (!options.pooling.listen_url.empty()) {
    if (Status s = ParseConninfo(options.pooling.listen_url).status(); !s.ok())
      return Status(s.code(), "the listen URL: " + s.message());
  }
  OCTOP_ASSIGN_OR_RETURN(Placement placed, Place(conninfo, options));
  if (placed.database) OCTOP_RETURN_IF_ERROR(EnsurePluginDatabase(conninfo, options.ns, placed));
  // Backstage's default application_name for its connections to a plugin's database (backend-defaults).
  auto ns = std::make_unique<PgNamespace>(
      placed.conninfo, placed.listen_conninfo, placed.schema, options,
      options.plugin_division ? "backstage_plugin_" + options.ns : std::string());
  OCTOP_RETURN_IF_ERROR(ns->Connect());
  if (placed.database) OCTOP_RETURN_IF_ERROR(ns->CheckSearchPath(*placed.database));
  return ns;
}

Status PgNamespace::Connect() {
  OCTOP_ASSIGN_OR_RETURN(ConnectionPool::Lease lease, pool_.Acquire());
  (void)lease;
  return Status::Ok();
}

// In a plugin's own database: the schema unqualified names resolve to for this role must be `public`, where
// octop keeps the tables, or a Backstage backend on the same database would use another table.
Status PgNamespace::CheckSearchPath(const std::string& database) {
  OCTOP_ASSIGN_OR_RETURN(ConnectionPool::Lease conn, pool_.Acquire());
  OCTOP_ASSIGN_OR_RETURN(PgResult r, conn->ExecParams(std::string(sql::kCurrentSchema), {}));
  if (r.IsNull(0, 0) || r.Text(0, 0) == schema_) return Status::Ok();
  return FailedPreconditionError(
      "in database \"" + database + "\" this role's search_path resolves to schema \"" + r.Text(0, 0) +
      "\", where a Backstage backend would keep its tables, but octop keeps them in \"" + schema_ +
      "\": drop or rename that schema, or set the role's search_path to public");
}

Statement PgNamespace::Make(std::string_view name, std::string_view text) const {
  return {"octop_" + std::string(name), Substitute(text, quoted_schema_)};
}

std::optional<std::string> PgNamespace::TimeParam(const std::optional<WallTime>& t) {
  if (!t) return std::nullopt;
  return FormatTimestamp(*t);
}

Result<PgResult> PgNamespace::Run(const Statement& statement, const PgParams& params) {
  OCTOP_ASSIGN_OR_RETURN(ConnectionPool::Lease conn, pool_.Acquire());
  return conn->ExecPrepared(statement.name, statement.text, params, statement.binary_result);
}

Result<PgResult> PgNamespace::RunWithSettings(const Statement& settings, const Statement& statement,
                                              const PgParams& params) {
  OCTOP_ASSIGN_OR_RETURN(ConnectionPool::Lease conn, pool_.Acquire());
  return conn->ExecPreparedWithSettings(settings.name, settings.text, statement.name, statement.text, params,
                                        statement.binary_result);
}

Result<PgResult> PgNamespace::RunPipeline(const std::vector<Call>& calls) {
  std::vector<PgConnection::PipelinedCall> pipelined;
  pipelined.reserve(calls.size());
  for (const Call& call : calls)
    pipelined.push_back(
        {&call.statement->name, &call.statement->text, call.params, call.statement->binary_result});
  OCTOP_ASSIGN_OR_RETURN(ConnectionPool::Lease conn, pool_.Acquire());
  return conn->ExecPreparedPipeline(pipelined);
}

Result<WallTime> PgNamespace::DatabaseNow() {
  OCTOP_ASSIGN_OR_RETURN(PgResult r, Run(db_now_, {NowParam()}));
  return ParseTimestamp(r.Text(0, 0));
}

Status PgNamespace::CheckWritable() {
  OCTOP_ASSIGN_OR_RETURN(PgResult r, Run(writable_, {}));
  if (r.Text(0, 0) == "t")
    return UnavailableError("PostgreSQL server is a standby (in recovery): it takes no writes");
  if (r.Text(0, 1) == "on")
    return UnavailableError("PostgreSQL session is read-only (transaction_read_only)");
  return Status::Ok();
}

Result<std::unique_ptr<Listener>> PgNamespace::Listen(std::vector<std::string> channels) {
  OCTOP_ASSIGN_OR_RETURN(std::unique_ptr<PgListener> listener,
                         PgListener::Open(listen_conninfo_, schema_, std::move(channels)));
  return std::unique_ptr<Listener>(std::move(listener));
}

Result<int> PgNamespace::CountBackstageSessions() {
  if (backstage_application_name_.empty()) return 0;
  OCTOP_ASSIGN_OR_RETURN(ConnectionPool::Lease conn, pool_.Acquire());
  return BackstageSessions(*conn);
}

Result<int> PgNamespace::BackstageSessions(PgConnection& conn) {
  OCTOP_ASSIGN_OR_RETURN(
      PgResult r, conn.ExecParams(std::string(sql::kBackstageSessions), {backstage_application_name_}));
  return static_cast<int>(Count(r, 0, 0));
}

}  // namespace octop::store::postgres

namespace octop::store {

Status ValidatePostgresNamespace(std::string_view ns, const std::optional<PluginDivision>& division) {
  StoreOptions options;
  options.ns = std::string(ns);
  options.plugin_division = division;
  // "postgresql://" parses (all defaults), so only the names are checked here.
  return postgres::Place("postgresql://", options).status();
}

}  // namespace octop::store
