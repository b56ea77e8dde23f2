#include "store/postgres/pg_connection.h"

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include <endian.h>

#include "store/postgres/pg_timestamp.h"

namespace octop::store::postgres {

namespace {

std::string TrimMessage(const char* message) {
  std::string text = message != nullptr ? message : "";
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

bool IsConnectionClass(std::string_view sqlstate) {
  // 08: connection exception; 57P01/02/03: admin shutdown, crash shutdown, cannot connect now.
  return sqlstate.starts_with("08") || sqlstate == "57P01" || sqlstate == "57P02" || sqlstate == "57P03";
}

}  // namespace

long PgResult::AffectedRows() const {
  if (!result_) return 0;
  const char* n = PQcmdTuples(result_.get());
  return (n == nullptr || *n == '\0') ? 0 : std::strtol(n, nullptr, 10);
}

Result<std::int32_t> PgResult::Int4(int row, int col) const {
  if (IsNull(row, col) || PQgetlength(result_.get(), row, col) != 4)
    return InternalError("PostgreSQL: expected a 4-byte integer in column " + std::to_string(col));
  std::uint32_t v = 0;
  std::memcpy(&v, PQgetvalue(result_.get(), row, col), sizeof v);
  return static_cast<std::int32_t>(be32toh(v));
}

Result<WallTime> PgResult::Timestamp(int row, int col) const {
  if (IsNull(row, col) || PQgetlength(result_.get(), row, col) != 8)
    return InternalError("PostgreSQL: expected an 8-byte timestamp in column " + std::to_string(col));
  return ReadBinaryTimestamp(PQgetvalue(result_.get(), row, col));
}

Result<std::optional<WallTime>> PgResult::OptTimestamp(int row, int col) const {
  if (IsNull(row, col)) return std::optional<WallTime>();
  OCTOP_ASSIGN_OR_RETURN(WallTime t, Timestamp(row, col));
  return std::optional<WallTime>(t);
}

bool PgResult::BinaryColumnsAre(const std::vector<Oid>& types) const {
  const PGresult* r = result_.get();
  if (r == nullptr || PQnfields(r) != static_cast<int>(types.size())) return false;
  int col = 0;
  for (Oid type : types) {
    if (PQftype(r, col) != type || PQfformat(r, col) != 1) return false;
    ++col;
  }
  return true;
}

std::string QuoteIdentifier(std::string_view name) {
  std::string quoted = "\"";
  for (char c : name) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  quoted += '"';
  return quoted;
}

Result<ConninfoOptions> ParseConninfo(const std::string& conninfo) {
  char* error = nullptr;
  ConninfoOptions options(PQconninfoParse(conninfo.c_str(), &error));
  if (options == nullptr) {
    std::string message = error != nullptr ? TrimMessage(error) : "out of memory";
    PQfreemem(error);
    return InvalidArgumentError("invalid PostgreSQL connection string: " + message);
  }
  return options;
}

Result<std::string> ConninfoWithDatabase(const std::string& conninfo, const std::string& database) {
  OCTOP_ASSIGN_OR_RETURN(ConninfoOptions options, ParseConninfo(conninfo));
  auto append = [](std::string& out, std::string_view key, std::string_view value) {
    if (!out.empty()) out += ' ';
    out.append(key);
    out += "='";
    for (char c : value) {
      if (c == '\\' || c == '\'') out += '\\';
      out += c;
    }
    out += '\'';
  };
  std::string out;
  for (const PQconninfoOption* o = options.get(); o->keyword != nullptr; ++o) {
    if (o->val == nullptr || std::string_view(o->keyword) == "dbname") continue;
    append(out, o->keyword, o->val);
  }
  append(out, "dbname", database);
  return out;
}

Result<std::unique_ptr<PgConnection>> PgConnection::Open(const std::string& conninfo,
                                                         bool prepared_statements) {
  // Defaults come before "dbname" so that whatever the URL sets overrides them (expand_dbname semantics).
  const char* keywords[] = {"connect_timeout", "application_name", "client_encoding", "dbname", nullptr};
  const char* values[] = {"10", "octop", "UTF8", conninfo.c_str(), nullptr};
  PGconn* raw = PQconnectdbParams(keywords, values, /*expand_dbname=*/1);
  if (raw == nullptr) return UnavailableError("PostgreSQL: out of memory while connecting");
  std::unique_ptr<PgConnection> conn(new PgConnection(raw, prepared_statements));
  if (PQstatus(raw) != CONNECTION_OK) {
    return UnavailableError("PostgreSQL: cannot connect: " + TrimMessage(PQerrorMessage(raw)));
  }
  // Server notices ("schema already exists, skipping" from idempotent migrations, the FATAL of a terminated
  // backend) would go to stderr; the failures that matter reach callers as a Status instead.
  PQsetNoticeProcessor(
      raw, [](void*, const char*) {}, nullptr);
  // The URL may carry its own `options`, so the session settings are applied explicitly rather than through
  // them.
  OCTOP_RETURN_IF_ERROR(
      conn->Exec("SET TimeZone = 'UTC'; SET DateStyle = 'ISO, MDY'; SET IntervalStyle = 'postgres'"));
  return conn;
}

PgConnection::~PgConnection() { PQfinish(conn_); }

Status PgConnection::FailureStatus(const PGresult* result, std::string_view what) {
  const char* state = result != nullptr ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  std::string sqlstate = state != nullptr ? state : "";
  std::string message =
      TrimMessage(result != nullptr && *PQresultErrorMessage(result) != '\0' ? PQresultErrorMessage(result)
                                                                             : PQerrorMessage(conn_));
  std::string text = "PostgreSQL: " + std::string(what) + ": " + message;
  if (!sqlstate.empty()) text += " (SQLSTATE " + sqlstate + ")";
  // A prepared statement this connection made is missing, or one it never made exists: its statements run
  // on more than one server session, which a pooler in transaction mode does.
  if (prepare_ && (sqlstate == "26000" || sqlstate == "42P05")) {
    text +=
        "; is a pooler in transaction mode between octop and PostgreSQL? Turn prepared statements off: "
        "database.preparedStatements: false in octopd's config, PostgresPooling::prepared_statements in the "
        "library (docs/configuration.md, \"Behind PgBouncer\")";
  }
  if (IsConnectionClass(sqlstate) || PQstatus(conn_) != CONNECTION_OK ||
      (sqlstate.empty() && result == nullptr)) {
    broken_ = true;
    return UnavailableError(text);
  }
  if (sqlstate.empty()) {
    // A client-side failure without a server error (e.g. the socket died mid-read) leaves no SQLSTATE; libpq
    // then reports the connection as bad, handled above. Anything else is unexpected.
    return InternalError(text);
  }
  // Serialization failures, deadlocks, lock timeouts, too many connections: retrying may help.
  if (sqlstate.starts_with("40") || sqlstate.starts_with("53") || sqlstate == "55P03")
    return UnavailableError(text);
  if (sqlstate == "57014") return CancelledError(text);
  // No such table or schema: the namespace has not been migrated (yet).
  if (sqlstate == "42P01" || sqlstate == "3F000") return FailedPreconditionError(text);
  // Data exceptions (bad encoding, value too long, bad timestamp): the caller's input.
  if (sqlstate.starts_with("22")) return InvalidArgumentError(text);
  return InternalError(text);
}

Result<PgResult> PgConnection::Check(PGresult* result, std::string_view what) {
  PgResult owned(result);
  if (result != nullptr) {
    ExecStatusType st = PQresultStatus(result);
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return owned;
  }
  return FailureStatus(result, what);
}

Status PgConnection::Prepare(const std::string& name, const std::string& sql) {
  if (prepared_.contains(name)) return Status::Ok();
  OCTOP_ASSIGN_OR_RETURN(PgResult prepared,
                         Check(PQprepare(conn_, name.c_str(), sql.c_str(), 0, nullptr), "prepare " + name));
  (void)prepared;
  prepared_.insert(name);
  return Status::Ok();
}

std::vector<const char*> PgConnection::Values(const PgParams& params) {
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const auto& p : params) values.push_back(p ? p->c_str() : nullptr);
  return values;
}

Result<PgResult> PgConnection::ExecPreparedWithSettings(const std::string& settings_name,
                                                        const std::string& settings_sql,
                                                        const std::string& name, const std::string& sql,
                                                        const PgParams& params, bool binary_result) {
  return ExecPreparedPipeline(
      {{&settings_name, &settings_sql, nullptr}, {&name, &sql, &params, binary_result}});
}

Result<PgResult> PgConnection::ExecPreparedPipeline(const std::vector<PipelinedCall>& calls) {
  if (calls.empty()) return InvalidArgumentError("an empty pipeline");
  if (prepare_) {
    for (const PipelinedCall& call : calls) OCTOP_RETURN_IF_ERROR(Prepare(*call.name, *call.sql));
  }
  const std::string& name = *calls.back().name;
  std::vector<std::vector<const char*>> values;
  values.reserve(calls.size());
  for (const PipelinedCall& call : calls)
    values.push_back(call.params != nullptr ? Values(*call.params) : std::vector<const char*>{});
  if (PQenterPipelineMode(conn_) != 1) return FailureStatus(nullptr, "entering pipeline mode for " + name);
  bool sent = true;
  for (std::size_t i = 0; sent && i < calls.size(); ++i) {
    const int n = static_cast<int>(values[i].size());
    const char* const* v = values[i].empty() ? nullptr : values[i].data();
    const int format = calls[i].binary_result ? 1 : 0;
    sent = (prepare_ ? PQsendQueryPrepared(conn_, calls[i].name->c_str(), n, v, nullptr, nullptr, format)
                     : PQsendQueryParams(conn_, calls[i].sql->c_str(), n, nullptr, v, nullptr, nullptr,
                                         format)) == 1;
  }
  sent = sent && PQpipelineSync(conn_) == 1;
  // Every result up to the sync is read, whatever happened, so that the connection leaves pipeline mode
  // clean: one result (then a null) per query, then the sync's. After a failure the server skips the rest
  // (PGRES_PIPELINE_ABORTED).
  std::optional<Status> failure;
  std::optional<PgResult> last;
  for (std::size_t query = 0; sent && query < calls.size(); ++query) {
    PGresult* r = PQgetResult(conn_);
    if (r == nullptr) break;
    const ExecStatusType st = PQresultStatus(r);
    if (st == PGRES_PIPELINE_ABORTED) {
      PQclear(r);
    } else {
      const bool is_last = query + 1 == calls.size();
      Result<PgResult> checked = Check(r, is_last ? name : "the statement before " + name);
      if (!checked.ok() && !failure) failure = checked.status();
      if (checked.ok() && is_last) last = std::move(*checked);
    }
    while ((r = PQgetResult(conn_)) != nullptr) PQclear(r);  // the query's terminating null
  }
  if (sent) {
    while (PGresult* r = PQgetResult(conn_)) {
      const bool sync = PQresultStatus(r) == PGRES_PIPELINE_SYNC;
      PQclear(r);
      if (sync) break;
    }
  }
  if (PQexitPipelineMode(conn_) != 1 || !sent) {
    broken_ = true;  // a half-read pipeline: the connection cannot be trusted again
    return failure ? *failure : FailureStatus(nullptr, "pipeline for " + name);
  }
  if (failure) return *failure;
  if (!last) return FailureStatus(nullptr, name);
  return std::move(*last);
}

Result<PgResult> PgConnection::ExecPrepared(const std::string& name, const std::string& sql,
                                            const PgParams& params, bool binary_result) {
  if (!prepare_) return ExecParams(sql, params, binary_result);
  OCTOP_RETURN_IF_ERROR(Prepare(name, sql));
  const std::vector<const char*> values = Values(params);
  return Check(PQexecPrepared(conn_, name.c_str(), static_cast<int>(values.size()), values.data(), nullptr,
                              nullptr, binary_result ? 1 : 0),
               name);
}

Result<PgResult> PgConnection::ExecParams(const std::string& sql, const PgParams& params,
                                          bool binary_result) {
  const std::vector<const char*> values = Values(params);
  return Check(PQexecParams(conn_, sql.c_str(), static_cast<int>(values.size()), nullptr, values.data(),
                            nullptr, nullptr, binary_result ? 1 : 0),
               "query");
}

Status PgConnection::Exec(const std::string& sql) {
  Result<PgResult> result = Check(PQexec(conn_, sql.c_str()), "statement");
  return result.ok() ? Status::Ok() : result.status();
}

}  // namespace octop::store::postgres
