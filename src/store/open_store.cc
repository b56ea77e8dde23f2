#include "store/postgres/postgres_store.h"
#include "store/preconditions.h"
#include "store/sqlite/sqlite_store.h"
#include "store/store.h"

namespace octop::store {

namespace {

bool StartsAKey(const std::string& s, std::size_t pos) {
  return pos == 0 || s[pos - 1] == '?' || s[pos - 1] == '&' || s[pos - 1] == ' ' || s[pos - 1] == '\t';
}

}  // namespace

std::string RedactDatabaseUrl(std::string_view url) {
  std::string out(url);
  // postgresql://user:secret@host/db: the password sits between the first ':' of the authority and its '@'
  // (libpq requires a literal '@' in it to be percent-encoded).
  if (const auto scheme = out.find("://"); scheme != std::string::npos) {
    const std::size_t start = scheme + 3;
    const std::size_t end = std::min(out.find_first_of("/?#", start), out.size());
    const std::size_t at = out.rfind('@', end == 0 ? 0 : end - 1);
    if (at != std::string::npos && at >= start) {
      const std::size_t colon = out.find(':', start);
      if (colon < at) out.replace(colon + 1, at - colon - 1, "***");
    }
  }
  // ?password=secret in a URI, password=secret or password='a b' in a key=value string.
  constexpr std::string_view kKey = "password=";
  for (std::size_t pos = out.find(kKey); pos != std::string::npos; pos = out.find(kKey, pos + 1)) {
    if (!StartsAKey(out, pos)) continue;
    const std::size_t value = pos + kKey.size();
    std::size_t end = value;
    if (end < out.size() && out[end] == '\'') {
      for (++end; end < out.size() && out[end] != '\''; ++end) {
        if (out[end] == '\\') ++end;
      }
      end = std::min(end + 1, out.size());
    } else {
      end = std::min(out.find_first_of("& \t", value), out.size());
    }
    out.replace(value, end - value, "***");
  }
  return out;
}

Result<DatabaseLocation> ParseDatabaseUrl(const std::string& url) {
  constexpr std::string_view kSqlite = "sqlite:";
  if (url.starts_with("postgresql://") || url.starts_with("postgres://"))
    return DatabaseLocation{"postgres", url};
  if (url.starts_with(kSqlite)) {
    std::string location = url.substr(kSqlite.size());
    if (location.starts_with("//"))
      location = location.substr(2);  // sqlite:///var/lib/octop -> /var/lib/octop
    if (location.empty()) return InvalidArgumentError("sqlite URL '" + url + "' names no directory");
    return DatabaseLocation{"sqlite", std::move(location)};
  }
  return InvalidArgumentError("unknown database URL '" + RedactDatabaseUrl(url) +
                              "': expected sqlite:<directory>, sqlite::memory: or postgresql://...");
}

Result<std::unique_ptr<TaskStore>> OpenTaskStore(const std::string& url, const StoreOptions& options) {
  OCTOP_ASSIGN_OR_RETURN(DatabaseLocation at, ParseDatabaseUrl(url));
  Result<std::unique_ptr<TaskStore>> backend = at.backend == "postgres"
                                                   ? OpenPostgresTaskStore(at.location, options)
                                                   : OpenSqliteTaskStore(at.location, options);
  if (!backend.ok()) return backend.status();
  return WithTaskPreconditions(std::move(backend).value());
}

Result<std::unique_ptr<JobStore>> OpenJobStore(const std::string& url, const StoreOptions& options) {
  OCTOP_ASSIGN_OR_RETURN(DatabaseLocation at, ParseDatabaseUrl(url));
  if (options.plugin_division) {
    return InvalidArgumentError("the job queue's store is no plugin's: it takes no plugin division");
  }
  Result<std::unique_ptr<JobStore>> backend = at.backend == "postgres"
                                                  ? OpenPostgresJobStore(at.location, options)
                                                  : OpenSqliteJobStore(at.location, options);
  if (!backend.ok()) return backend.status();
  return WithJobPreconditions(std::move(backend).value());
}

Status ValidateStoreNamespace(const std::string& url, const std::string& ns,
                              const std::optional<PluginDivision>& division) {
  OCTOP_ASSIGN_OR_RETURN(DatabaseLocation at, ParseDatabaseUrl(url));
  if (at.backend == "postgres") return ValidatePostgresNamespace(ns, division);
  if (at.location == ":memory:") return Status::Ok();
  return ValidateSqliteNamespace(ns);
}

}  // namespace octop::store
