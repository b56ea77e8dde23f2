// NamespaceAdmin on PostgreSQL (test support, store/namespace_admin.h): the catalog through pg_catalog, the
// migrations through the same code the stores run.
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "postgres_admin_queries.h"
#include "store/namespace_admin.h"
#include "store/postgres/pg_namespace.h"
#include "store/postgres/pg_timestamp.h"
#include "store/task_store.h"

namespace octop::store::postgres {

namespace {

class PostgresAdmin final : public NamespaceAdmin {
 public:
  explicit PostgresAdmin(std::unique_ptr<PgNamespace> ns) : ns_(std::move(ns)) {}

  Status MigrateTo(MigrationLine line, int version) override { return ns_->MigrateTo(line, version); }

  Result<std::vector<std::string>> AppliedMigrations(MigrationLine line) override {
    return ns_->AppliedMigrations(line);
  }

  Result<std::vector<ColumnInfo>> DescribeTable(std::string_view table) override {
    OCTOP_ASSIGN_OR_RETURN(PgResult r, Exec(admin_sql::kDescribeTable, {ns_->schema(), std::string(table)}));
    std::vector<ColumnInfo> columns;
    for (int i = 0; i < r.rows(); ++i)
      columns.push_back({r.Text(i, 0), r.Text(i, 1), r.Bool(i, 2), r.Bool(i, 3)});
    return columns;
  }

  Result<std::vector<IndexInfo>> DescribeIndexes(std::string_view table) override {
    OCTOP_ASSIGN_OR_RETURN(PgResult r,
                           Exec(admin_sql::kDescribeIndexes, {ns_->schema(), std::string(table)}));
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

  Result<std::vector<std::string>> ListTables() override {
    OCTOP_ASSIGN_OR_RETURN(PgResult r, Exec(admin_sql::kListTables, {ns_->schema()}));
    std::vector<std::string> tables;
    for (int i = 0; i < r.rows(); ++i) tables.push_back(r.Text(i, 0));
    return tables;
  }

  Result<std::vector<ConfigEntry>> ListConfig() override {
    OCTOP_ASSIGN_OR_RETURN(PgResult r, Exec(admin_sql::kListConfig, {}));
    std::vector<ConfigEntry> entries;
    for (int i = 0; i < r.rows(); ++i) {
      ConfigEntry entry{r.Text(i, 0), r.Text(i, 1), {}};
      OCTOP_ASSIGN_OR_RETURN(entry.updated_at, ParseTimestamp(r.Text(i, 2)));
      entries.push_back(std::move(entry));
    }
    return entries;
  }

  Status DeleteTask(std::string_view id) override {
    OCTOP_ASSIGN_OR_RETURN(PgResult r, Exec(admin_sql::kDeleteTask, {std::string(id)}));
    if (r.AffectedRows() == 0) return NoSuchTask(id);
    return Status::Ok();
  }

 private:
  Result<PgResult> Exec(std::string_view text, const PgParams& params) {
    OCTOP_ASSIGN_OR_RETURN(ConnectionPool::Lease conn, ns_->pool().Acquire());
    return conn->ExecParams(Substitute(text, ns_->quoted_schema()), params);
  }

  std::unique_ptr<PgNamespace> ns_;
};

}  // namespace

}  // namespace octop::store::postgres

namespace octop::store {

Result<std::unique_ptr<NamespaceAdmin>> OpenPostgresAdmin(const std::string& conninfo,
                                                          const StoreOptions& options) {
  OCTOP_ASSIGN_OR_RETURN(std::unique_ptr<postgres::PgNamespace> ns,
                         postgres::PgNamespace::Open(conninfo, options));
  return std::unique_ptr<NamespaceAdmin>(std::make_unique<postgres::PostgresAdmin>(std::move(ns)));
}

}  // namespace octop::store
