// The faulty stores themselves: a before-statement fault writes nothing, an ambiguous fault writes and still
// fails, a rule runs out after its count, and the counters see every call.
#include "faulty_store.h"

#include <memory>

#include <gtest/gtest.h>

#include "store/sqlite/sqlite_store.h"

namespace octop::fault_testing {
namespace {

class FaultyStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store::StoreOptions options;
    options.ns = "faulty";
    auto inner = store::OpenSqliteTaskStore(":memory:", options);
    ASSERT_TRUE(inner.ok()) << inner.status().ToString();
    store_ = std::make_unique<FaultyTaskStore>(std::move(inner).value(), plan_);
    ASSERT_TRUE(store_->Migrate().ok());
  }

  store::UpsertTaskParams Task(const std::string& id) {
    return {id, R"({"version":2,"cadence":"manual","timeoutAfterDuration":"PT1M"})", store::NullTime{},
            store::NullTime{}};
  }
  long Rows() {
    auto rows = store_->target().ListTasks({});
    return rows.ok() ? static_cast<long>(rows->size()) : -1;
  }

  std::shared_ptr<FaultPlan> plan_ = std::make_shared<FaultPlan>();
  std::unique_ptr<FaultyTaskStore> store_;
};

TEST_F(FaultyStoreTest, BeforeStatementFailsWithoutWriting) {
  plan_->FailNext(StoreOp::kUpsertTask, 2);
  Status first = store_->UpsertTask(Task("a"));
  EXPECT_EQ(first.code(), StatusCode::kUnavailable);
  EXPECT_EQ(store_->UpsertTask(Task("a")).code(), StatusCode::kUnavailable);
  EXPECT_EQ(Rows(), 0);
  EXPECT_TRUE(store_->UpsertTask(Task("a")).ok()) << "the rule ran out after two faults";
  EXPECT_EQ(Rows(), 1);
  EXPECT_EQ(plan_->calls(StoreOp::kUpsertTask), 3);
  EXPECT_EQ(plan_->injected(StoreOp::kUpsertTask), 2);
  EXPECT_EQ(plan_->pending(StoreOp::kUpsertTask), 0);
}

TEST_F(FaultyStoreTest, AmbiguousCommitWritesAndStillFails) {
  plan_->FailNext(StoreOp::kUpsertTask, 1, FaultKind::kAmbiguousCommit);
  Status status = store_->UpsertTask(Task("a"));
  EXPECT_EQ(status.code(), StatusCode::kUnavailable);
  EXPECT_NE(status.message().find("after COMMIT"), std::string::npos) << status.ToString();
  EXPECT_EQ(Rows(), 1);
}

TEST_F(FaultyStoreTest, ForeverLastsUntilClearedAndOtherOperationsAreUntouched) {
  plan_->FailForever(StoreOp::kListTasks);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(store_->ListTasks({}).status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(store_->UpsertTask(Task("a")).ok());
  plan_->Clear(StoreOp::kListTasks);
  auto rows = store_->ListTasks({});
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->size(), 1u);
  EXPECT_EQ(plan_->injected(StoreOp::kListTasks), 5);
}

TEST_F(FaultyStoreTest, EveryOperationHasAName) {
  for (int i = 0; i < static_cast<int>(StoreOp::kCount); ++i) {
    EXPECT_NE(StoreOpName(static_cast<StoreOp>(i)), "?") << i;
  }
}

}  // namespace
}  // namespace octop::fault_testing
