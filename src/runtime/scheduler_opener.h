// SchedulerOpener: creates a Scheduler whose plugins open their stores through a factory the caller supplies
// instead of the options' database_url -- fresh namespaces per test, a store with faults injected, a
// benchmark's role. Internal: the public API names no store type.
//
// Thread-safety: Create may be called from any thread; the factory is called on the thread that first asks
// for a plugin (Scheduler::ForPlugin), once per plugin, and must be safe for that.
#ifndef OCTOP_RUNTIME_SCHEDULER_OPENER_H_
#define OCTOP_RUNTIME_SCHEDULER_OPENER_H_

#include <functional>
#include <memory>
#include <string>

#include <octop/clock.h>
#include <octop/scheduler.h>
#include <octop/status.h>

#include "store/task_store.h"

namespace octop::runtime {

// Opens the store of one plugin (namespace = plugin id) with the scheduler's clock (the database "now"
// override of tests).
using StoreFactory = std::function<Result<std::unique_ptr<store::TaskStore>>(const std::string& plugin_id,
                                                                             const Clock& clock)>;

struct SchedulerOpener {
  // An empty factory opens the options' database_url, as Scheduler(options) does.
  static std::unique_ptr<Scheduler> Create(SchedulerOptions options, StoreFactory factory);
};

}  // namespace octop::runtime

#endif  // OCTOP_RUNTIME_SCHEDULER_OPENER_H_
