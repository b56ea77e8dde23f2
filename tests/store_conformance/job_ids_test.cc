// NewJobId / NewJobIds (store/job_rules.h): canonical lower-case version-4 UUIDs, all distinct, whatever the
// batch size (one read of the random source per batch).
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "store/job_rules.h"

namespace octop::store {
namespace {

void ExpectVersion4(const std::string& id) {
  ASSERT_TRUE(IsJobId(id)) << id;
  EXPECT_EQ(id[14], '4') << id;                                          // version nibble
  EXPECT_NE(std::string("89ab").find(id[19]), std::string::npos) << id;  // RFC 4122 variant
}

TEST(JobIds, EveryBatchSizeGivesDistinctVersion4Ids) {
  std::set<std::string> seen;
  std::size_t made = 0;
  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{2}, std::size_t{17},
                              std::size_t{1000}, std::size_t{5000}}) {
    const std::vector<std::string> ids = NewJobIds(n);
    ASSERT_EQ(ids.size(), n);
    for (const std::string& id : ids) ExpectVersion4(id);
    seen.insert(ids.begin(), ids.end());
    made += n;
  }
  for (int i = 0; i < 100; ++i) {
    const std::string id = NewJobId();
    ExpectVersion4(id);
    seen.insert(id);
    ++made;
  }
  EXPECT_EQ(seen.size(), made);
}

}  // namespace
}  // namespace octop::store
