// The PostgreSQL backend of Store: the cluster backend. See store/store.h for the contract.
#ifndef OCTOP_STORE_POSTGRES_POSTGRES_STORE_H_
#define OCTOP_STORE_POSTGRES_POSTGRES_STORE_H_

#include <memory>
#include <string>

#include "store/store.h"

namespace octop::store {

// `conninfo` is a libpq connection URI or keyword string. The namespace is a schema, created by Migrate().
Result<std::unique_ptr<Store>> OpenPostgresStore(const std::string& conninfo, const StoreOptions& options);
// kInvalidArgument when `ns` cannot name a schema (what OpenPostgresStore checks first).
Status ValidatePostgresNamespace(std::string_view ns);

}  // namespace octop::store

#endif  // OCTOP_STORE_POSTGRES_POSTGRES_STORE_H_
