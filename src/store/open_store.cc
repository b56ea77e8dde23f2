#include "store/postgres/postgres_store.h"
#include "store/sqlite/sqlite_store.h"
#include "store/store.h"

namespace octop::store {

Result<std::unique_ptr<Store>> OpenStore(const std::string& url, const StoreOptions& options) {
  constexpr std::string_view kSqlite = "sqlite:";
  if (url.starts_with("postgresql://") || url.starts_with("postgres://"))
    return OpenPostgresStore(url, options);
  if (url.starts_with(kSqlite)) {
    std::string location = url.substr(kSqlite.size());
    if (location.starts_with("//"))
      location = location.substr(2);  // sqlite:///var/lib/octop -> /var/lib/octop
    if (location.empty()) return InvalidArgumentError("sqlite URL '" + url + "' names no directory");
    return OpenSqliteStore(location, options);
  }
  return InvalidArgumentError("unknown database URL '" + url +
                              "': expected sqlite:<directory>, sqlite::memory: or postgresql://...");
}

Status ValidateStoreNamespace(const std::string& url, const std::string& ns) {
  if (url.starts_with("postgresql://") || url.starts_with("postgres://"))
    return ValidatePostgresNamespace(ns);
  if (url == "sqlite::memory:") return Status::Ok();
  if (url.starts_with("sqlite:")) return ValidateSqliteNamespace(ns);
  return InvalidArgumentError("unknown database URL '" + url +
                              "': expected sqlite:<directory>, sqlite::memory: or postgresql://...");
}

}  // namespace octop::store
