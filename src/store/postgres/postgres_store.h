// The PostgreSQL backend: the cluster backend. See store/task_store.h and store/job_store.h for the
// contracts.
//
// Thread-safety: the functions may be called from any thread; the stores they open are as store/store.h says.
#ifndef OCTOP_STORE_POSTGRES_POSTGRES_STORE_H_
#define OCTOP_STORE_POSTGRES_POSTGRES_STORE_H_

#include <memory>
#include <optional>
#include <string>

#include "store/job_store.h"
#include "store/task_store.h"

namespace octop::store {

// `conninfo` is a libpq connection URI or keyword string. The namespace is a schema of that database, created
// by Migrate(); a plugin's namespace (options.plugin_division set) is placed as Backstage places it: its own
// database (created here when missing, tables in `public`) or a prefixed schema. kFailedPrecondition when a
// plugin's database would split its tasks from where they are kept today (docs/store.md). These open the
// backend alone: OpenTaskStore/OpenJobStore put the preconditions in front of it.
Result<std::unique_ptr<TaskStore>> OpenPostgresTaskStore(const std::string& conninfo,
                                                         const StoreOptions& options);
Result<std::unique_ptr<JobStore>> OpenPostgresJobStore(const std::string& conninfo,
                                                       const StoreOptions& options);
// kInvalidArgument when `ns` cannot name a schema, or with `division` the plugin's database or schema (what
// opening checks first).
Status ValidatePostgresNamespace(std::string_view ns,
                                 const std::optional<PluginDivision>& division = std::nullopt);

}  // namespace octop::store

#endif  // OCTOP_STORE_POSTGRES_POSTGRES_STORE_H_
