// The fixture of the scheduler integration tests: one test = fresh namespaces on one backend (SQLite always,
// PostgreSQL when OCTOP_TEST_PG_URL is set; see tests/store_conformance/store_test_env.h), any number of
// Scheduler "nodes" on them, a direct Store to inspect and tamper with rows, and a FlakyStore wrapper to
// simulate an outage.
//
// Thread-safety: the fixture is used by the test thread; FlakyStore may be called from any thread.
#ifndef OCTOP_TESTS_INTEGRATION_SCHEDULER_TEST_ENV_H_
#define OCTOP_TESTS_INTEGRATION_SCHEDULER_TEST_ENV_H_

#include <atomic>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <octop/scheduler.h>
#include <octop/testing/fake_clock.h>

#include "runtime/scheduler_opener.h"
#include "runtime_test_support.h"
#include "store/task_store.h"
#include "store_test_env.h"

namespace octop::runtime_testing {

// What a test can make a FlakyStore do.
struct StoreFaults {
  std::atomic<bool> down{false};            // every call fails with kUnavailable (a database outage)
  std::atomic<bool> newer_settings{false};  // polls report settings of a version this build cannot parse
  std::atomic<long> statements{0};          // calls that reach the database (every method but Listen)
};

// Forwards to a real task store, with the faults the test switches on.
class FlakyStore final : public store::TaskStoreWrapper {
 public:
  FlakyStore(std::unique_ptr<store::TaskStore> inner, std::shared_ptr<StoreFaults> faults)
      : TaskStoreWrapper(std::move(inner)), faults_(std::move(faults)) {}
  Status Migrate() override { return Down() ? Outage() : target().Migrate(); }
  Result<int> SchemaVersion() override { return Down() ? Outage() : target().SchemaVersion(); }
  Result<WallTime> DatabaseNow() override { return Down() ? Outage() : target().DatabaseNow(); }
  Status CheckWritable() override { return Down() ? Outage() : target().CheckWritable(); }
  Result<int> CountBackstageSessions() override {
    return Down() ? Outage() : target().CountBackstageSessions();
  }
  Status UpsertTask(const store::UpsertTaskParams& p) override {
    return Down() ? Outage() : target().UpsertTask(p);
  }
  Result<store::PollTasksResult> PollTasks(const store::PollTasksParams& p) override {
    polls_++;
    if (Down()) return Outage();
    auto polled = target().PollTasks(p);
    if (polled.ok() && faults_->newer_settings.load()) {
      for (auto& task : polled->tasks) task.settings_json = R"({"version":3,"schedule":{"every":"PT1M"}})";
    }
    return polled;
  }
  Result<std::optional<store::ClaimedRun>> TryClaimTask(const store::ClaimTaskParams& p) override {
    return Down() ? Outage() : target().TryClaimTask(p);
  }
  Result<bool> CheckTaskTicket(const store::CheckTaskTicketParams& p) override {
    return Down() ? Outage() : target().CheckTaskTicket(p);
  }
  Result<bool> TryReleaseTask(const store::ReleaseTaskParams& p) override {
    return Down() ? Outage() : target().TryReleaseTask(p);
  }
  Status TriggerTask(const store::TriggerTaskParams& p) override {
    return Down() ? Outage() : target().TriggerTask(p);
  }
  Status CancelTask(const store::CancelTaskParams& p) override {
    return Down() ? Outage() : target().CancelTask(p);
  }
  Result<bool> CapTaskNextRun(const store::CapTaskNextRunParams& p) override {
    return Down() ? Outage() : target().CapTaskNextRun(p);
  }
  Result<std::vector<std::string>> SweepExpiredTaskRuns(const store::SweepExpiredTaskRunsParams& p) override {
    return Down() ? Outage() : target().SweepExpiredTaskRuns(p);
  }
  Result<std::vector<store::TaskRow>> ListTasks(const store::ListTasksParams& p) override {
    return Down() ? Outage() : target().ListTasks(p);
  }
  static int polls() { return polls_.load(); }

 private:
  bool Down() const {
    faults_->statements++;
    return faults_->down.load();
  }
  static Status Outage() { return UnavailableError("simulated database outage"); }
  std::shared_ptr<StoreFaults> faults_;
  static inline std::atomic<int> polls_{0};
};

class SchedulerTestBase : public ::testing::TestWithParam<store::testing::Backend> {
 protected:
  static constexpr const char* kPlugin = "test";

  void SetUp() override { ns_prefix_ = store::testing::FreshNamespace(); }
  void TearDown() override {
    for (auto& node : nodes_) node->Shutdown();
    nodes_.clear();
  }

  const store::testing::Backend& backend() const { return GetParam(); }
  std::string Namespace(const std::string& plugin_id) const { return ns_prefix_ + "_" + plugin_id; }

  // A scheduler node on this test's namespaces. `clock` may be the fake clock or the real one.
  Scheduler& AddNode(Clock* clock, LogCapture* logs,
                     std::chrono::milliseconds janitor = std::chrono::minutes(1)) {
    SchedulerOptions options;
    options.clock = clock;
    options.logger = logs != nullptr ? logs->AsLogger() : Logger([](LogLevel, std::string_view) {});
    options.janitor_interval = janitor;
    auto backend_copy = backend();
    auto faults = faults_;
    std::string prefix = ns_prefix_;
    runtime::StoreFactory stores = [backend_copy, prefix, faults](
                                       const std::string& plugin_id,
                                       const Clock& c) -> Result<std::unique_ptr<store::TaskStore>> {
      store::StoreOptions o;
      o.clock = &c;
      OCTOP_ASSIGN_OR_RETURN(std::unique_ptr<store::TaskStore> inner,
                             backend_copy.open(prefix + "_" + plugin_id, o));
      return std::unique_ptr<store::TaskStore>(std::make_unique<FlakyStore>(std::move(inner), faults));
    };
    nodes_.push_back(runtime::SchedulerOpener::Create(options, stores));
    return *nodes_.back();
  }

  // A store of our own on the plugin's namespace, for reading and changing rows behind the scheduler's back.
  store::TaskStore& Direct(const Clock& clock, const std::string& plugin_id = kPlugin) {
    store::StoreOptions o;
    o.clock = &clock;
    auto opened = backend().open(Namespace(plugin_id), o);
    EXPECT_TRUE(opened.ok()) << opened.status().ToString();
    EXPECT_TRUE((*opened)->Migrate().ok());
    directs_.push_back(std::move(opened).value());
    return *directs_.back();
  }

  // Deletes a task row behind the scheduler's back (test support: no store deletes rows).
  Status DeleteRow(const std::string& id, const std::string& plugin_id = kPlugin) {
    OCTOP_ASSIGN_OR_RETURN(std::unique_ptr<store::NamespaceAdmin> admin,
                           backend().open_admin(Namespace(plugin_id), store::StoreOptions{}));
    return admin->DeleteTask(id);
  }

  std::optional<store::TaskRow> Row(store::TaskStore& store, const std::string& id) {
    auto rows = store.ListTasks({std::vector<std::string>{id}});
    EXPECT_TRUE(rows.ok()) << rows.status().ToString();
    if (!rows.ok() || rows->empty()) return std::nullopt;
    return rows->front();
  }

  static std::optional<TaskStateEntry> StateOf(PluginScheduler& plugin, const std::string& id) {
    auto states = plugin.GetTaskStates();
    if (!states.ok()) return std::nullopt;
    for (auto& e : *states) {
      if (e.task_id == id) return e;
    }
    return std::nullopt;
  }

  static TaskDefinition Global(std::string id, TaskFrequency frequency, TaskFunction fn) {
    TaskDefinition task;
    task.id = std::move(id);
    task.frequency = std::move(frequency);
    task.timeout = Iso("PT1M");
    task.fn = std::move(fn);
    return task;
  }

  // Objects a task function uses (gates, counters, records) must outlive the nodes, which are only shut down
  // in TearDown, after the test body's locals are gone: tests create them here.
  template <typename T, typename... Args>
  T& Make(Args&&... args) {
    auto object = std::make_shared<T>(std::forward<Args>(args)...);
    kept_.push_back(object);
    return *object;
  }

  std::shared_ptr<StoreFaults> faults_ = std::make_shared<StoreFaults>();
  std::vector<std::shared_ptr<void>> kept_;
  std::string ns_prefix_;
  LogCapture logs_;  // outlives the nodes, which log until they are shut down
  std::vector<std::unique_ptr<store::TaskStore>> directs_;
  std::vector<std::unique_ptr<Scheduler>> nodes_;  // destroyed before directs_
};

inline std::string BackendName(const ::testing::TestParamInfo<store::testing::Backend>& info) {
  return info.param.name;
}

}  // namespace octop::runtime_testing

#endif  // OCTOP_TESTS_INTEGRATION_SCHEDULER_TEST_ENV_H_
