// The C++ side of tools/cron-oracle: reads one case per line from stdin and answers one line per case on
// stdout, so a single process serves a whole run.
//
//   in:  <time zone> TAB <start, ms since the epoch> TAB <expression as a JSON string>
//   out: I TAB <reason>   the expression is rejected (reason = the package's message)
//        N TAB <ms>       the next occurrence strictly after the start
//        H                no occurrence within the search horizon
//        X TAB hang|error a search that would not terminate in the package, or another search failure
#include <chrono>
#include <cstdint>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include <octop/cron.h>

int main() {
  std::ios::sync_with_stdio(false);
  std::string line;
  while (std::getline(std::cin, line)) {
    const size_t tab1 = line.find('\t');
    const size_t tab2 = line.find('\t', tab1 + 1);
    if (tab1 == std::string::npos || tab2 == std::string::npos) {
      std::cout << "X\tmalformed input line\n";
      continue;
    }
    const std::string tz = line.substr(0, tab1);
    const int64_t start_ms = std::stoll(line.substr(tab1 + 1, tab2 - tab1 - 1));
    const std::string expression = nlohmann::json::parse(line.substr(tab2 + 1)).get<std::string>();
    auto parsed = octop::CronExpression::Parse(expression);
    if (!parsed.ok()) {
      const std::string message = parsed.status().message();
      const std::string prefix = "Invalid cron expression \"" + expression + "\": ";
      std::cout << "I\t" << (message.rfind(prefix, 0) == 0 ? message.substr(prefix.size()) : message) << "\n";
      continue;
    }
    const octop::WallTime after{std::chrono::milliseconds(start_ms)};
    auto next = parsed->Next(after, tz);
    if (next.ok()) {
      std::cout << "N\t"
                << std::chrono::duration_cast<std::chrono::milliseconds>(next->time_since_epoch()).count()
                << "\n";
    } else if (next.status().code() == octop::StatusCode::kNotFound) {
      std::cout << "H\n";
    } else {
      // Categories, not messages: the package's DST-helper errors are phrased differently.
      const bool hang = next.status().message().find("does not terminate") != std::string::npos;
      std::cout << "X\t" << (hang ? "hang" : "error") << "\n";
    }
  }
  return 0;
}
