// The preconditions every store checks on its callers' input before a backend sees it: task ids, tickets and
// settings; job queue names, limits, outcomes and ids. Checked here once, so that the same bad input gets the
// same answer on SQLite and on PostgreSQL, and the backends take only what passed (docs/store.md, "Shape").
//
// OpenTaskStore and OpenJobStore put these decorators in front of every backend.
//
// Thread-safety: as the store they wrap.
#ifndef OCTOP_STORE_PRECONDITIONS_H_
#define OCTOP_STORE_PRECONDITIONS_H_

#include <memory>

#include "store/job_store.h"
#include "store/task_store.h"

namespace octop::store {

std::unique_ptr<TaskStore> WithTaskPreconditions(std::unique_ptr<TaskStore> backend);
std::unique_ptr<JobStore> WithJobPreconditions(std::unique_ptr<JobStore> backend);

}  // namespace octop::store

#endif  // OCTOP_STORE_PRECONDITIONS_H_
