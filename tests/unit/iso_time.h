// UTC instants written as ISO 8601 for the cron tests: "2026-03-08T07:00:00Z" (milliseconds optional) to a
// WallTime, and back with or without milliseconds.
//
// Thread-safety: pure functions.
#ifndef OCTOP_TESTS_UNIT_ISO_TIME_H_
#define OCTOP_TESTS_UNIT_ISO_TIME_H_

#include <chrono>
#include <sstream>
#include <string>

#include <date/date.h>
#include <gtest/gtest.h>

#include <octop/clock.h>

namespace octop {

inline WallTime At(const std::string& iso) {
  std::istringstream in(iso);
  date::sys_time<std::chrono::milliseconds> t;
  in >> date::parse("%FT%TZ", t);
  EXPECT_FALSE(in.fail()) << iso;
  return WallTime(t.time_since_epoch());
}

// "2037-10-26T00:15:00.000Z"
inline std::string Iso(WallTime t) {
  return date::format("%FT%TZ", std::chrono::time_point_cast<std::chrono::milliseconds>(t));
}

// "2037-10-26T00:15:00Z"
inline std::string IsoSeconds(WallTime t) {
  return date::format("%FT%TZ", std::chrono::time_point_cast<std::chrono::seconds>(t));
}

}  // namespace octop

#endif  // OCTOP_TESTS_UNIT_ISO_TIME_H_
