// NamespaceAdmin: test support. What the conformance, upgrade and least-privilege tests inspect and do to a
// store's namespace that octop itself never does: migrate part of a line, list the applied migrations,
// describe tables and indexes from the catalog, read the config table whole, delete a task row.
//
// It lives beside the backends because it is SQL, but in a library of its own (octop_store_admin) that only
// tests link: the runtime's stores do not carry it.
//
// An admin opens its own connections to the namespace a store with the same URL and options would use (so it
// cannot reach "sqlite::memory:", whose database is private to its store).
//
// Thread-safety: one thread at a time.
#ifndef OCTOP_STORE_NAMESPACE_ADMIN_H_
#define OCTOP_STORE_NAMESPACE_ADMIN_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <octop/clock.h>
#include <octop/status.h>

#include "store/store.h"

namespace octop::store {

// One column of a table, as the database's catalog reports it. `type` is the backend's own spelling of the
// declared type (SQLite: as declared, standard names upper-cased, e.g. "varchar(255)", "TEXT"; PostgreSQL:
// format_type(), e.g. "character varying(255)").
struct ColumnInfo {
  std::string name;
  std::string type;
  bool not_null = false;
  bool primary_key = false;
  friend bool operator==(const ColumnInfo&, const ColumnInfo&) = default;
};

// One index of a table (primary-key indexes included where the catalog lists them).
struct IndexInfo {
  std::string name;
  std::vector<std::string> columns;  // in index order; expression parts are left out
  bool unique = false;
  bool partial = false;  // has a WHERE clause
};

struct ConfigEntry {
  std::string key;
  std::string value_json;  // PostgreSQL returns jsonb's normalised text
  WallTime updated_at;
};

class NamespaceAdmin {
 public:
  virtual ~NamespaceAdmin() = default;

  // Applies the line's pending migrations up to `version` (1..latest of the line) and no further; never goes
  // down. Takes the same locks as Store::Migrate.
  virtual Status MigrateTo(MigrationLine line, int version) = 0;
  // The names of the line's applied migrations, in the line's order.
  virtual Result<std::vector<std::string>> AppliedMigrations(MigrationLine line) = 0;
  // The columns of `table` in this namespace, in table order; empty when the table does not exist.
  virtual Result<std::vector<ColumnInfo>> DescribeTable(std::string_view table) = 0;
  // The indexes of `table` in this namespace, sorted by name; empty when the table does not exist.
  virtual Result<std::vector<IndexInfo>> DescribeIndexes(std::string_view table) = 0;
  // The names of the tables (views excluded) in this namespace, sorted.
  virtual Result<std::vector<std::string>> ListTables() = 0;
  // Every row of octop_config, by key.
  virtual Result<std::vector<ConfigEntry>> ListConfig() = 0;
  // Deletes a task row. NotFound "Task <id> does not exist".
  virtual Status DeleteTask(std::string_view id) = 0;
};

// Opens an admin on the namespace OpenTaskStore/OpenJobStore(url, options) would use.
Result<std::unique_ptr<NamespaceAdmin>> OpenNamespaceAdmin(const std::string& url,
                                                           const StoreOptions& options = {});

}  // namespace octop::store

#endif  // OCTOP_STORE_NAMESPACE_ADMIN_H_
