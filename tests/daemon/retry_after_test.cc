// A webhook job handler's Retry-After, read at a fixed now: seconds or an HTTP date, clamped to
// 0..kMaxJobRetryAfter whatever its size or year (a hostile value once overflowed, or parked a job until
// 2058).
#include <gtest/gtest.h>

#include <octop/queue.h>

#include "daemon/daemon.h"

namespace octop::daemon {
namespace {

using namespace std::chrono_literals;

// 2026-10-21T07:28:00Z
const WallTime kNow = WallTime{} + std::chrono::seconds(1792567680);

TEST(ParseRetryAfter, ReadsSecondsAndDates) {
  EXPECT_EQ(ParseRetryAfter("120", kNow), std::chrono::milliseconds(120s));
  EXPECT_EQ(ParseRetryAfter("0", kNow), std::chrono::milliseconds(0));
  EXPECT_EQ(ParseRetryAfter("Wed, 21 Oct 2026 07:29:30 GMT", kNow), std::chrono::milliseconds(90s));
  EXPECT_EQ(ParseRetryAfter("Wed, 21 Oct 2026 07:00:00 GMT", kNow), std::chrono::milliseconds(0));  // past
  EXPECT_EQ(ParseRetryAfter("", kNow), std::nullopt);
  EXPECT_EQ(ParseRetryAfter("soon", kNow), std::nullopt);
  EXPECT_EQ(ParseRetryAfter("-5", kNow), std::nullopt);
}

TEST(ParseRetryAfter, HugeValuesAreClampedNotOverflowed) {
  EXPECT_EQ(ParseRetryAfter("999999999", kNow), kMaxJobRetryAfter);
  EXPECT_EQ(ParseRetryAfter(std::string(400, '9'), kNow), kMaxJobRetryAfter);
  EXPECT_EQ(ParseRetryAfter("000000000000000000000042", kNow), std::chrono::milliseconds(42s));
  EXPECT_EQ(ParseRetryAfter("Fri, 31 Dec 9999 23:59:59 GMT", kNow), kMaxJobRetryAfter);
  EXPECT_EQ(ParseRetryAfter("Thu, 01 Jan 1970 00:00:00 GMT", kNow), std::chrono::milliseconds(0));
}

}  // namespace
}  // namespace octop::daemon
