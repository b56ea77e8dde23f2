// PgConnection: one libpq connection of the PostgreSQL backend, with its own cache of prepared statements,
// and PgResult, an owned PGresult.
//
// Every failure is turned into a Status here, and a connection-class failure (PQstatus bad, SQLSTATE 08*, or
// the server shutting the session down: 57P01/57P02/57P03) marks the connection broken, so its owner (the
// pool or a listener) throws it away and the next call opens a fresh one. The connection is set to
// TimeZone=UTC and DateStyle=ISO on open, so timestamptz values travel as "YYYY-MM-DD HH:MM:SS.ffffff+00"
// (see pg_timestamp.h), except in a result asked for in binary format (PipelinedCall::binary_result).
//
// Ownership: a PgConnection owns its PGconn and closes it in the destructor.
// Thread-safety: none; one thread at a time (the pool hands a connection to one caller).
#ifndef OCTOP_STORE_POSTGRES_PG_CONNECTION_H_
#define OCTOP_STORE_POSTGRES_PG_CONNECTION_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <libpq-fe.h>

#include <octop/clock.h>
#include <octop/status.h>

namespace octop::store::postgres {

// Bound parameters in text format; nullopt is SQL NULL.
using PgParams = std::vector<std::optional<std::string>>;

class PgResult {
 public:
  PgResult() = default;
  explicit PgResult(PGresult* result) : result_(result) {}

  int rows() const { return result_ ? PQntuples(result_.get()) : 0; }
  bool IsNull(int row, int col) const { return PQgetisnull(result_.get(), row, col) != 0; }
  std::string Text(int row, int col) const {
    return std::string(PQgetvalue(result_.get(), row, col),
                       static_cast<std::size_t>(PQgetlength(result_.get(), row, col)));
  }
  std::optional<std::string> OptText(int row, int col) const {
    if (IsNull(row, col)) return std::nullopt;
    return Text(row, col);
  }
  bool Bool(int row, int col) const {
    return !IsNull(row, col) && PQgetvalue(result_.get(), row, col)[0] == 't';
  }
  // Columns of a binary-format result (PipelinedCall::binary_result), whose types the caller has checked with
  // BinaryColumnsAre: an int4, and a timestamptz (ReadBinaryTimestamp); kInternal for a NULL or a value of
  // another size. A text column reads with Text.
  Result<std::int32_t> Int4(int row, int col) const;
  Result<WallTime> Timestamp(int row, int col) const;
  Result<std::optional<WallTime>> OptTimestamp(int row, int col) const;
  // True when the result has exactly these columns: these type OIDs, each in binary format.
  bool BinaryColumnsAre(const std::vector<Oid>& types) const;
  const PGresult* raw() const { return result_.get(); }
  // Rows changed by an INSERT/UPDATE/DELETE.
  long AffectedRows() const;

 private:
  struct Clear {
    void operator()(PGresult* r) const { PQclear(r); }
  };
  std::unique_ptr<PGresult, Clear> result_;
};

class PgConnection {
 public:
  // Connects (blocking) and applies the session settings. kUnavailable when the server cannot be reached.
  // prepared_statements = false: ExecPrepared and ExecPreparedPipeline send their statements unnamed, for a
  // pooler in transaction mode (PostgresPooling).
  static Result<std::unique_ptr<PgConnection>> Open(const std::string& conninfo,
                                                    bool prepared_statements = true);

  ~PgConnection();
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;

  // Runs the statement `sql` under the prepared name `name`, preparing it on this connection the first time
  // (unnamed, parsed and planned at each call, when the connection was opened without prepared statements).
  // The same name must always come with the same text.
  Result<PgResult> ExecPrepared(const std::string& name, const std::string& sql, const PgParams& params,
                                bool binary_result = false);
  // One statement of ExecPreparedPipeline: its prepared name, its text and its parameters (null: none).
  struct PipelinedCall {
    const std::string* name;
    const std::string* sql;
    const PgParams* params;
    bool binary_result = false;  // every column of the result in binary format (PgResult::Int4, Timestamp)
  };
  // Runs the prepared statements `calls` in order, each under its name and prepared the first time as
  // ExecPrepared does, in one round trip and one transaction (libpq pipeline mode: all run in the implicit
  // transaction that ends at the pipeline's sync; each takes its own snapshot, as any statement does under
  // READ COMMITTED). So transaction-local settings of an earlier call are in force while a later one is
  // planned and run, and gone after; row locks an earlier call takes are held until the end. Returns the last
  // call's result; if an earlier call fails, the first failure (the calls after it are not run).
  Result<PgResult> ExecPreparedPipeline(const std::vector<PipelinedCall>& calls);
  // ExecPreparedPipeline of `settings_sql` (no parameters, e.g. SELECT set_config(..., true)) and `sql`.
  Result<PgResult> ExecPreparedWithSettings(const std::string& settings_name, const std::string& settings_sql,
                                            const std::string& name, const std::string& sql,
                                            const PgParams& params, bool binary_result = false);
  // Runs one statement with bound parameters, unprepared (migrations, one-off catalog queries).
  Result<PgResult> ExecParams(const std::string& sql, const PgParams& params, bool binary_result = false);
  // Runs one or more statements without parameters (simple query protocol: DDL scripts, BEGIN/COMMIT).
  Status Exec(const std::string& sql);

  // True after a connection-class failure: the connection must not be reused.
  bool broken() const { return broken_ || PQstatus(conn_) != CONNECTION_OK; }
  // True when a transaction is open or failed (a caller left without COMMIT/ROLLBACK).
  bool in_transaction() const { return PQtransactionStatus(conn_) != PQTRANS_IDLE; }
  // The server process id (for tests that terminate backends).
  int backend_pid() const { return PQbackendPID(conn_); }
  PGconn* raw() { return conn_; }

  // Classifies a failed result (or a null one) and marks the connection broken when the failure is
  // connection-class.
  Status FailureStatus(const PGresult* result, std::string_view what);

 private:
  PgConnection(PGconn* conn, bool prepared_statements) : conn_(conn), prepare_(prepared_statements) {}
  Result<PgResult> Check(PGresult* result, std::string_view what);
  Status Prepare(const std::string& name, const std::string& sql);
  // The values of `params` as libpq takes them (nullptr for NULL), pointing into `params`.
  static std::vector<const char*> Values(const PgParams& params);

  PGconn* conn_;
  const bool prepare_;
  bool broken_ = false;
  std::set<std::string, std::less<>> prepared_;
};

// `name` quoted as a PostgreSQL identifier ("a""b").
std::string QuoteIdentifier(std::string_view name);

// `conninfo` (a URI or keyword string) as libpq reads it; kInvalidArgument with libpq's reason when it does
// not parse.
struct FreeConninfo {
  void operator()(PQconninfoOption* options) const { PQconninfoFree(options); }
};
using ConninfoOptions = std::unique_ptr<PQconninfoOption, FreeConninfo>;
Result<ConninfoOptions> ParseConninfo(const std::string& conninfo);

// `conninfo` (a URI or keyword string) rewritten as a keyword string that connects to `database` instead,
// every other setting kept: how a plugin's own database is reached with the user's URL
// (PluginDivision::kDatabase). kInvalidArgument when `conninfo` does not parse.
Result<std::string> ConninfoWithDatabase(const std::string& conninfo, const std::string& database);

}  // namespace octop::store::postgres

#endif  // OCTOP_STORE_POSTGRES_PG_CONNECTION_H_
