// The SQLite backend: the embedded default. See store/task_store.h and store/job_store.h for the contracts.
//
// Thread-safety: the functions may be called from any thread; the stores they open are as store/store.h says.
#ifndef OCTOP_STORE_SQLITE_SQLITE_STORE_H_
#define OCTOP_STORE_SQLITE_SQLITE_STORE_H_

#include <memory>
#include <string>

#include "store/job_store.h"
#include "store/task_store.h"

namespace octop::store {

// `location` is a directory (the namespace's file is <location>/<ns>.sqlite, the directory is created if
// missing) or ":memory:" (a private in-memory database, shared by the store's connections). These open the
// backend alone: OpenTaskStore/OpenJobStore put the preconditions in front of it.
Result<std::unique_ptr<TaskStore>> OpenSqliteTaskStore(const std::string& location,
                                                       const StoreOptions& options);
Result<std::unique_ptr<JobStore>> OpenSqliteJobStore(const std::string& location,
                                                     const StoreOptions& options);
// kInvalidArgument when `ns` cannot name a store file (what opening checks first).
Status ValidateSqliteNamespace(const std::string& ns);

}  // namespace octop::store

#endif  // OCTOP_STORE_SQLITE_SQLITE_STORE_H_
