// Fuzzes TaskSettingsV2::FromJson: any bytes either fail with InvalidArgument or give settings that validate,
// serialize, and parse back to the same value.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <octop/task_settings.h>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view json(reinterpret_cast<const char*>(data), size);
  octop::Result<octop::TaskSettingsV2> settings = octop::TaskSettingsV2::FromJson(json);
  if (!settings.ok()) {
    if (settings.status().code() != octop::StatusCode::kInvalidArgument) std::abort();
    return 0;
  }
  if (!settings->Validate().ok()) std::abort();
  octop::Result<octop::TaskSettingsV2> again = octop::TaskSettingsV2::FromJson(settings->ToJson());
  if (!again.ok() || !(*again == *settings)) std::abort();
  return 0;
}
