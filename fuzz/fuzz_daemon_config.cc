// Fuzzes octopd's YAML config reader: any bytes either give a config or an InvalidArgument naming the source;
// never a crash, an exception or another error code.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "daemon/daemon_config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view yaml(reinterpret_cast<const char*>(data), size);
  octop::Result<octop::daemon::DaemonConfig> config = octop::daemon::ParseDaemonConfig(yaml, "fuzz.yaml");
  if (!config.ok()) {
    if (config.status().code() != octop::StatusCode::kInvalidArgument) std::abort();
    if (config.status().message().rfind("fuzz.yaml: ", 0) != 0) std::abort();
  }
  return 0;
}
