// PgNamespace: what a PostgreSQL task store and job store share -- the schema they live in (placed as
// Backstage places a plugin's, for a plugin's task store), the connection pool, the prepared statements'
// naming, the database's now, and the two migration lines (pg_migrations.cc) -- and PgStoreBase, the part
// of the Store interface both implement the same way on it.
//
// The schema, validated and quoted, is the only text substituted into SQL ({ns}), once, when a statement is
// made; every value is a bound parameter. Time comparisons use COALESCE($1, now()) with $1 the clock's
// DatabaseNowOverride (NULL in production).
//
// Thread-safety: safe to use from many threads at once (the pool leases a connection per operation).
#ifndef OCTOP_STORE_POSTGRES_PG_NAMESPACE_H_
#define OCTOP_STORE_POSTGRES_PG_NAMESPACE_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <octop/clock.h>
#include <octop/status.h>

#include "store/postgres/connection_pool.h"
#include "store/postgres/pg_connection.h"
#include "store/store.h"

namespace octop::store::postgres {

// A statement of a namespace: its prepared-statement name and its text with the schema substituted.
struct Statement {
  std::string name;
  std::string text;
  bool binary_result = false;  // its result in binary format (PgConnection::PipelinedCall)
};

// `text` with every {ns} replaced by `quoted_schema`.
std::string Substitute(std::string_view text, const std::string& quoted_schema);
// A text[] literal: every element double-quoted, with backslash and double quote escaped; elements that are
// not storable text (no row can hold them) are left out.
std::string TextArrayLiteral(const std::vector<std::string>& values);
Result<std::optional<WallTime>> OptTime(const PgResult& r, int row, int col);
long Count(const PgResult& r, int row, int col);
// Whether a failure carries SQLSTATE `state` (PgConnection puts it in the message).
bool HasSqlState(const Status& status, std::string_view state);
bool IsUniqueViolation(const Status& status);

class PgNamespace {
 public:
  static constexpr std::string_view kBackend = "postgres";

  // Places the namespace (a schema of the URL's database, or a plugin's database or prefixed schema) and
  // opens the first connection, so that an unreachable server is reported here. kFailedPrecondition when a
  // plugin's database would split its tasks from where they are kept today (docs/store.md).
  static Result<std::unique_ptr<PgNamespace>> Open(const std::string& conninfo, const StoreOptions& options);

  // `schema` is where the tables are; `backstage_application_name` what a Backstage backend names its
  // sessions to this plugin's tables (empty for a namespace that is not a plugin's).
  PgNamespace(std::string conninfo, std::string listen_conninfo, std::string schema,
              const StoreOptions& options, std::string backstage_application_name);

  const std::string& conninfo() const { return conninfo_; }
  const std::string& schema() const { return schema_; }
  const std::string& quoted_schema() const { return quoted_schema_; }
  ConnectionPool& pool() { return pool_; }

  Statement Make(std::string_view name, std::string_view text) const;
  // The clock's override of the database's now as a parameter (NULL in production: the server's now()).
  std::optional<std::string> NowParam() const { return TimeParam(clock_->DatabaseNowOverride()); }
  static std::optional<std::string> TimeParam(const std::optional<WallTime>& t);
  // Runs a statement of this namespace on a pooled connection.
  Result<PgResult> Run(const Statement& statement, const PgParams& params);
  // Run, after `settings` in the same transaction and round trip (PgConnection::ExecPreparedWithSettings).
  Result<PgResult> RunWithSettings(const Statement& settings, const Statement& statement,
                                   const PgParams& params);
  // One statement of RunPipeline and its parameters (null: none).
  struct Call {
    const Statement* statement;
    const PgParams* params;
  };
  // Runs `calls` in order in one transaction and round trip (PgConnection::ExecPreparedPipeline): the last
  // one's result.
  Result<PgResult> RunPipeline(const std::vector<Call>& calls);

  Result<WallTime> DatabaseNow();
  Status CheckWritable();
  Result<std::unique_ptr<Listener>> Listen(std::vector<std::string> channels);
  // Sessions named as a Backstage backend names its connections to this plugin's tables (0 when the
  // namespace is not a plugin's).
  Result<int> CountBackstageSessions();

  // The migration lines (pg_migrations.cc, docs/store.md "PostgreSQL: migrations beside knex").
  Status MigrateTo(MigrationLine line, int version);
  Result<std::vector<std::string>> AppliedMigrations(MigrationLine line);

 private:
  Status Connect();
  Status CheckSearchPath(const std::string& database);
  Result<int> BackstageSessions(PgConnection& conn);

  Status ApplyMigrations(MigrationLine line, int version);
  Status ApplyMigrationsOnce(MigrationLine line, int version);
  Status CreateKnexBookkeeping(PgConnection& conn);
  Result<bool> CreateKnexBookkeepingLocked(PgConnection& conn, bool may_wait);
  Result<bool> ApplyStepsLocked(PgConnection& conn, MigrationLine line, int version);
  Result<std::vector<std::string>> ReadApplied(PgConnection& conn, MigrationLine line);

  const std::string conninfo_;
  const std::string listen_conninfo_;  // LISTEN's own connection (PostgresPooling::listen_url)
  const std::string backstage_application_name_;
  const std::string schema_;
  const std::string quoted_schema_;
  const Clock* clock_;
  ConnectionPool pool_;
  const Statement db_now_, writable_;
};

// Store's part of a task or job store (`Interface`) on a PgNamespace, and the statement helpers both use.
template <typename Interface>
class PgStoreBase : public NamespaceStore<Interface, PgNamespace> {
 public:
  using NamespaceStore<Interface, PgNamespace>::NamespaceStore;

 protected:
  using NamespaceStore<Interface, PgNamespace>::ns;
  Statement Make(std::string_view name, std::string_view text) const { return ns().Make(name, text); }
  Result<PgResult> Run(const Statement& statement, const PgParams& params) {
    return ns().Run(statement, params);
  }
  std::optional<std::string> NowParam() const { return ns().NowParam(); }
};

}  // namespace octop::store::postgres

#endif  // OCTOP_STORE_POSTGRES_PG_NAMESPACE_H_
