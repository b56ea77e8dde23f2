#include "store/namespace_admin.h"

namespace octop::store {

// Defined beside each backend (sqlite/sqlite_admin.cc, postgres/postgres_admin.cc).
Result<std::unique_ptr<NamespaceAdmin>> OpenSqliteAdmin(const std::string& location,
                                                        const StoreOptions& options);
Result<std::unique_ptr<NamespaceAdmin>> OpenPostgresAdmin(const std::string& conninfo,
                                                          const StoreOptions& options);

Result<std::unique_ptr<NamespaceAdmin>> OpenNamespaceAdmin(const std::string& url,
                                                           const StoreOptions& options) {
  OCTOP_ASSIGN_OR_RETURN(DatabaseLocation at, ParseDatabaseUrl(url));
  if (at.backend == "postgres") return OpenPostgresAdmin(at.location, options);
  return OpenSqliteAdmin(at.location, options);
}

}  // namespace octop::store
