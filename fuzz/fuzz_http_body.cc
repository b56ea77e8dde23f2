// Fuzzes the HTTP request bodies octopd parses: the job queue's POST /api/octop/v1/jobs body
// (JobSpecFromJson) and the ISO 8601 instants in it (ParseIsoInstant). Any bytes must give either a spec that
// obeys the documented limits (its payload the body's own) or InvalidArgument -- never another code, an
// exception or a crash -- and a parsed instant must print and parse back to itself.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "http/job_routes.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  octop::Result<octop::JobSpec> spec = octop::http::JobSpecFromJson(body);
  if (!spec.ok()) {
    if (spec.status().code() != octop::StatusCode::kInvalidArgument) std::abort();
  } else {
    if (spec->kind.empty() || spec->kind.size() > 255 || spec->queue.empty() || spec->queue.size() > 255) {
      std::abort();
    }
    if (spec->max_retries < 0) std::abort();
    // The payload is the body's own text for it: it parses to what the body's parse holds there.
    const nlohmann::json payload = nlohmann::json::parse(spec->payload, nullptr, false);
    if (payload.is_discarded()) std::abort();
    const nlohmann::json parsed = nlohmann::json::parse(body, nullptr, false);
    if (payload != parsed.value("payload", nlohmann::json::object())) std::abort();
  }
  if (std::optional<octop::WallTime> at = octop::http::ParseIsoInstant(body)) {
    std::optional<octop::WallTime> again = octop::http::ParseIsoInstant(octop::http::FormatUtcIso(*at));
    // FormatUtcIso keeps milliseconds: the round trip may only drop what is finer.
    if (!again.has_value() || *again > *at || *at - *again >= std::chrono::milliseconds(1)) std::abort();
  }
  return 0;
}
