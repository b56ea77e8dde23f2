// NewJobId / NewJobIds (store/job_rules.h): canonical lower-case version-7 UUIDs that begin with the given
// time in Unix milliseconds, all distinct, whatever the batch size (one read of the random source per batch).
#include <chrono>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "store/job_rules.h"

namespace octop::store {
namespace {

using std::chrono::milliseconds;

// 2026-12-04 19:30:00.123 UTC: 0x01A24288EF3B ms since the epoch.
const WallTime kAt = WallTime{} + milliseconds(1796412600123);
constexpr const char* kAtPrefix = "01a24288-ef3b-7";

void ExpectVersion7At(const std::string& id, const std::string& prefix) {
  ASSERT_TRUE(IsJobId(id)) << id;
  EXPECT_EQ(id.substr(0, prefix.size()), prefix) << "time, then the version nibble";
  EXPECT_NE(std::string("89ab").find(id[19]), std::string::npos) << id;  // RFC 9562 variant
}

TEST(JobIds, EveryBatchSizeGivesDistinctVersion7IdsOfItsTime) {
  std::set<std::string> seen;
  std::size_t made = 0;
  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{2}, std::size_t{17},
                              std::size_t{1000}, std::size_t{5000}}) {
    const std::vector<std::string> ids = NewJobIds(n, kAt);
    ASSERT_EQ(ids.size(), n);
    for (const std::string& id : ids) ExpectVersion7At(id, kAtPrefix);
    seen.insert(ids.begin(), ids.end());
    made += n;
  }
  for (int i = 0; i < 100; ++i) {
    const std::string id = NewJobId(kAt);
    ExpectVersion7At(id, kAtPrefix);
    seen.insert(id);
    ++made;
  }
  EXPECT_EQ(seen.size(), made) << "the same millisecond still gives distinct ids";
}

TEST(JobIds, LaterMillisecondsSortAfterEarlierOnes) {
  // What puts the jobs enqueued together next to each other in the primary key.
  std::string previous;
  for (const milliseconds step : {milliseconds(0), milliseconds(1), milliseconds(255), milliseconds(256),
                                  milliseconds(std::int64_t{1} << 40)}) {
    const std::string id = NewJobId(kAt + step);
    if (step > milliseconds(0)) {
      EXPECT_LT(previous, id) << "+" << step.count() << " ms";
    }
    previous = id;
  }
  // The default is the wall clock: an id made now carries a time between two readings of it (the first 13
  // characters are the 48 bits of milliseconds).
  const WallTime before = std::chrono::system_clock::now();
  const std::string now = NewJobId();
  const WallTime after = std::chrono::system_clock::now();
  EXPECT_LE(NewJobId(before).substr(0, 13), now.substr(0, 13));
  EXPECT_LE(now.substr(0, 13), NewJobId(after).substr(0, 13));
  ExpectVersion7At(NewJobId(WallTime{}), "00000000-0000-7");
}

}  // namespace
}  // namespace octop::store
