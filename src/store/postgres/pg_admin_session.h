// PgAdminSession: a plain, unpooled PostgreSQL session that runs ad-hoc statements and returns rows as text,
// for tooling and tests that must look behind a Store (pg_stat_activity, pg_terminate_backend, catalog
// checks) without depending on libpq's headers.
//
// Ownership: owns its connection. Thread-safety: one thread at a time.
#ifndef OCTOP_STORE_POSTGRES_PG_ADMIN_SESSION_H_
#define OCTOP_STORE_POSTGRES_PG_ADMIN_SESSION_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <octop/status.h>

namespace octop::store::postgres {

class PgConnection;

class PgAdminSession {
 public:
  using Row = std::vector<std::optional<std::string>>;  // nullopt = SQL NULL

  static Result<std::unique_ptr<PgAdminSession>> Open(const std::string& conninfo);
  ~PgAdminSession();

  // One statement, parameters bound ($1, $2, ... in text form).
  Result<std::vector<Row>> Query(const std::string& sql,
                                 const std::vector<std::optional<std::string>>& params = {});
  // Many statements, no parameters, no rows back (the simple query protocol: a dump's text).
  Status RunScript(const std::string& sql);

 private:
  explicit PgAdminSession(std::unique_ptr<PgConnection> conn);
  std::unique_ptr<PgConnection> conn_;
};

}  // namespace octop::store::postgres

#endif  // OCTOP_STORE_POSTGRES_PG_ADMIN_SESSION_H_
