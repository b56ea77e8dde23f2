// NamespaceAdmin on SQLite (test support, store/namespace_admin.h): the catalog through pragma functions, the
// migrations through the same code the stores run.
#include <memory>
#include <string>

#include "sqlite_admin_queries.h"
#include "store/namespace_admin.h"
#include "store/sqlite/sqlite_namespace.h"
#include "store/task_store.h"

namespace octop::store::sqlite {

namespace {

namespace admin_sql = ::octop::store::sqlite::admin_sql;

class SqliteAdmin final : public NamespaceAdmin {
 public:
  explicit SqliteAdmin(std::unique_ptr<SqliteNamespace> ns) : ns_(std::move(ns)) {}

  Status MigrateTo(MigrationLine line, int version) override { return ns_->MigrateTo(line, version); }

  Result<std::vector<std::string>> AppliedMigrations(MigrationLine line) override {
    return ns_->AppliedMigrations(line);
  }

  Result<std::vector<ColumnInfo>> DescribeTable(std::string_view table) override {
    return ns_->Guard([&](Connection& conn) -> Result<std::vector<ColumnInfo>> {
      std::vector<ColumnInfo> columns;
      Stmt row(conn, admin_sql::kDescribeTable);
      row.Bind(":table", table);
      while (row.Step()) columns.push_back({row.Text(0), row.Text(1), row.Int(2) != 0, row.Int(3) != 0});
      OCTOP_RETURN_IF_ERROR(row.status());
      return columns;
    });
  }

  Result<std::vector<IndexInfo>> DescribeIndexes(std::string_view table) override {
    return ns_->Guard([&](Connection& conn) -> Result<std::vector<IndexInfo>> {
      std::vector<IndexInfo> indexes;
      {
        Stmt row(conn, admin_sql::kListIndexes);
        row.Bind(":table", table);
        while (row.Step()) indexes.push_back({row.Text(0), {}, row.Int(1) != 0, row.Int(2) != 0});
        OCTOP_RETURN_IF_ERROR(row.status());
      }
      for (IndexInfo& index : indexes) {
        Stmt column(conn, admin_sql::kIndexColumns);
        column.Bind(":index", index.name);
        while (column.Step()) {
          if (!column.IsNull(0)) index.columns.push_back(column.Text(0));
        }
        OCTOP_RETURN_IF_ERROR(column.status());
      }
      return indexes;
    });
  }

  Result<std::vector<std::string>> ListTables() override {
    return ns_->Guard([&](Connection& conn) -> Result<std::vector<std::string>> {
      std::vector<std::string> tables;
      Stmt row(conn, admin_sql::kListTables);
      while (row.Step()) tables.push_back(row.Text(0));
      OCTOP_RETURN_IF_ERROR(row.status());
      return tables;
    });
  }

  Result<std::vector<ConfigEntry>> ListConfig() override {
    return ns_->Guard([&](Connection& conn) -> Result<std::vector<ConfigEntry>> {
      Stmt row(conn, admin_sql::kListConfig);
      std::vector<ConfigEntry> entries;
      while (row.Step()) entries.push_back({row.Text(0), row.Text(1), row.Time(2).value_or(WallTime{})});
      OCTOP_RETURN_IF_ERROR(row.status());
      return entries;
    });
  }

  Status DeleteTask(std::string_view id) override {
    return ns_->Guard([&](Connection& conn) -> Status {
      Stmt del(conn, admin_sql::kDeleteTask);
      OCTOP_RETURN_IF_ERROR(del.Bind(":id", id).Run());
      return del.Changes() == 1 ? Status::Ok() : NoSuchTask(id);
    });
  }

 private:
  std::unique_ptr<SqliteNamespace> ns_;
};

}  // namespace

}  // namespace octop::store::sqlite

namespace octop::store {

Result<std::unique_ptr<NamespaceAdmin>> OpenSqliteAdmin(const std::string& location,
                                                        const StoreOptions& options) {
  if (location == ":memory:") {
    return FailedPreconditionError(
        "an in-memory SQLite database is private to its store: no admin can open it");
  }
  OCTOP_ASSIGN_OR_RETURN(std::unique_ptr<sqlite::SqliteNamespace> ns,
                         sqlite::SqliteNamespace::Open(location, options));
  return std::unique_ptr<NamespaceAdmin>(std::make_unique<sqlite::SqliteAdmin>(std::move(ns)));
}

}  // namespace octop::store
