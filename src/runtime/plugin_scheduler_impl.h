// PluginSchedulerImpl: the real PluginScheduler of one plugin (Backstage's PluginTaskSchedulerImpl).
//
// Validates definitions, keeps the registration order, routes trigger/cancel (a local task of this node
// first, then the database: docs/scheduler.md, "Trigger / cancel routing"), and owns the plugin's Store
// (opened and migrated once, on first need), its GlobalTaskWorker (started with the store) and its
// LocalTaskWorker.
//
// Thread-safety: all methods may be called from any thread. Lock order: mu_, then store_mu_, then a worker's
// lock.
#ifndef OCTOP_RUNTIME_PLUGIN_SCHEDULER_IMPL_H_
#define OCTOP_RUNTIME_PLUGIN_SCHEDULER_IMPL_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <octop/scheduler.h>

#include "runtime/global_task_worker.h"
#include "runtime/local_task_worker.h"
#include "runtime/scheduler_context.h"
#include "runtime/scheduler_opener.h"
#include "store/task_store.h"

namespace octop::runtime {

class PluginSchedulerImpl final : public PluginScheduler {
 public:
  PluginSchedulerImpl(const SchedulerContext& context, std::string plugin_id, StoreFactory store_factory);
  ~PluginSchedulerImpl() override;

  const std::string& plugin_id() const override { return plugin_id_; }
  Status ScheduleTask(TaskDefinition task) override;
  Status TriggerTask(std::string_view id) override;
  Status CancelTask(std::string_view id) override;
  std::vector<TaskDescriptor> GetScheduledTasks() const override;
  Result<std::vector<TaskStateEntry>> GetTaskStates() override;

  // Refuses new tasks and waits for every thread of this plugin. REQUIRES: the context's shutdown was
  // requested.
  void Join();

 private:
  // The plugin's store, opened, migrated and with its global worker started; retried on the next call on
  // failure.
  Result<store::TaskStore*> EnsureStore();
  GlobalTaskWorker* global_worker();

  const SchedulerContext& context_;
  const std::string plugin_id_;
  const StoreFactory store_factory_;
  LocalTaskWorker local_;

  mutable std::mutex mu_;
  std::vector<TaskDescriptor> descriptors_;  // guarded by mu_; registration order
  bool joined_ = false;                      // guarded by mu_

  std::mutex store_mu_;
  std::unique_ptr<store::TaskStore> store_;   // guarded by store_mu_ until set, then immutable
  std::unique_ptr<GlobalTaskWorker> global_;  // likewise
  std::atomic<GlobalTaskWorker*> global_ready_{nullptr};
  bool store_closed_ = false;  // guarded by store_mu_
};

}  // namespace octop::runtime

#endif  // OCTOP_RUNTIME_PLUGIN_SCHEDULER_IMPL_H_
