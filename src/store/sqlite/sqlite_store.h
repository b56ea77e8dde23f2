// The SQLite backend of Store: the embedded default. See store/store.h for the contract.
#ifndef OCTOP_STORE_SQLITE_SQLITE_STORE_H_
#define OCTOP_STORE_SQLITE_SQLITE_STORE_H_

#include <memory>
#include <string>

#include "store/store.h"

namespace octop::store {

// `location` is a directory (the namespace's file is <location>/<ns>.sqlite, the directory is created if
// missing) or ":memory:" (a private in-memory database, shared by the store's connections).
Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& location, const StoreOptions& options);
// kInvalidArgument when `ns` cannot name a store file (what OpenSqliteStore checks first).
Status ValidateSqliteNamespace(const std::string& ns);

}  // namespace octop::store

#endif  // OCTOP_STORE_SQLITE_SQLITE_STORE_H_
