#include "store/postgres/pg_admin_session.h"

#include <utility>

#include "store/postgres/pg_connection.h"

namespace octop::store::postgres {

Result<std::unique_ptr<PgAdminSession>> PgAdminSession::Open(const std::string& conninfo) {
  OCTOP_ASSIGN_OR_RETURN(std::unique_ptr<PgConnection> conn, PgConnection::Open(conninfo));
  return std::unique_ptr<PgAdminSession>(new PgAdminSession(std::move(conn)));
}

PgAdminSession::PgAdminSession(std::unique_ptr<PgConnection> conn) : conn_(std::move(conn)) {}
PgAdminSession::~PgAdminSession() = default;

Result<std::vector<PgAdminSession::Row>> PgAdminSession::Query(
    const std::string& sql, const std::vector<std::optional<std::string>>& params) {
  OCTOP_ASSIGN_OR_RETURN(PgResult r, conn_->ExecParams(sql, params));
  std::vector<Row> rows;
  for (int i = 0; i < r.rows(); ++i) {
    Row row;
    for (int c = 0; c < PQnfields(r.raw()); ++c) row.push_back(r.OptText(i, c));
    rows.push_back(std::move(row));
  }
  return rows;
}

Status PgAdminSession::RunScript(const std::string& sql) { return conn_->Exec(sql); }

}  // namespace octop::store::postgres
