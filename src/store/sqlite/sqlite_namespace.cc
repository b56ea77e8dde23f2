#include "store/sqlite/sqlite_namespace.h"

#include <algorithm>
#include <atomic>
#include <filesystem>

#include <nlohmann/json.hpp>
#include <sys/statvfs.h>

#include "core/js_text.h"
#include "sqlite_queries.h"
#include "store/sqlite/sqlite_store.h"
#include "store/sqlite/sqlite_time.h"

namespace octop::store::sqlite {

namespace {

// A namespace becomes a file name, so it is kept to characters that are safe in one.
Status ValidateNamespace(const std::string& ns) {
  const bool ok =
      !ns.empty() && ns.size() <= 128 && ns.front() != '.' && std::all_of(ns.begin(), ns.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
               c == '-' || c == '.';
      });
  if (ok) return Status::Ok();
  return InvalidArgumentError("namespace '" + ns +
                              "' cannot name an SQLite file: use letters, digits, '_', '-', '.'");
}

// A database file of 0 bytes with no write-ahead log beside it holds nothing; SQLite would open it as a new,
// empty database. When it is older than a first open takes (another node creating it at this moment), it was
// most likely truncated: starting on it would hide every task and job it held, so that is refused.
Status RefuseTruncatedFile(const std::filesystem::path& file) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(file, ec);
  if (ec || size != 0) return Status::Ok();
  const auto wal = std::filesystem::file_size(file.string() + "-wal", ec);
  if (!ec && wal > 0) return Status::Ok();
  const auto written = std::filesystem::last_write_time(file, ec);
  if (ec) return Status::Ok();
  // File ages are real time, whatever clock drives the store.
  const auto age = Clock::Real().WallNow() - std::chrono::file_clock::to_sys(written);
  if (age < std::chrono::seconds(10)) return Status::Ok();
  return FailedPreconditionError(
      "SQLite file '" + file.string() +
      "' is empty (0 bytes, no write-ahead log) but was not just created: it may "
      "have been truncated. Restore it from a backup, or delete it to start afresh");
}

}  // namespace

SqliteNamespace::SqliteNamespace(std::string path, bool in_memory, const std::string& hub_key,
                                 const StoreOptions& options)
    : clock_(options.clock != nullptr ? options.clock : &Clock::Real()),
      pool_(std::move(path), in_memory, in_memory ? 1 : std::max(1, options.pool_size), options.busy_timeout),
      hub_(Hub::For(hub_key)) {}

Result<std::unique_ptr<SqliteNamespace>> SqliteNamespace::Open(const std::string& location,
                                                               const StoreOptions& options) {
  if (sqlite3_threadsafe() == 0) return InternalError("libsqlite3 was built without thread support");
  std::unique_ptr<SqliteNamespace> ns;
  if (location == ":memory:") {
    static std::atomic<std::uint64_t> next_memory_db{0};
    ns = std::make_unique<SqliteNamespace>(":memory:", true, "memory:" + std::to_string(next_memory_db++),
                                           options);
  } else {
    OCTOP_RETURN_IF_ERROR(ValidateNamespace(options.ns));
    std::error_code ec;
    std::filesystem::create_directories(location, ec);
    if (ec) return UnavailableError("cannot create SQLite directory '" + location + "': " + ec.message());
    const std::filesystem::path file = std::filesystem::path(location) / (options.ns + ".sqlite");
    OCTOP_RETURN_IF_ERROR(RefuseTruncatedFile(file));
    std::filesystem::path canonical = std::filesystem::weakly_canonical(file, ec);
    if (ec) canonical = std::filesystem::absolute(file);
    ns = std::make_unique<SqliteNamespace>(file.string(), false, canonical.string(), options);
  }
  OCTOP_RETURN_IF_ERROR(ns->Guard([](Connection&) { return Status::Ok(); }));
  return ns;
}

Result<std::string> SqliteNamespace::Now(Connection& conn) const {
  if (const auto now = clock_->DatabaseNowOverride()) return FormatTime(*now);
  Stmt row(conn, sql::kDatabaseNow);
  if (!row.Step()) {
    OCTOP_RETURN_IF_ERROR(row.status());
    return InternalError("DatabaseNow returned no row");
  }
  return row.Text(0);
}

std::string SqliteNamespace::Earlier(const std::string& now, const std::optional<WallTime>& bound) {
  return bound ? std::min(now, FormatTime(*bound)) : now;
}

Result<WallTime> SqliteNamespace::ParseNow(const std::string& now) {
  const auto t = ParseTime(now);
  if (!t) return InternalError("unreadable database time '" + now + "'");
  return *t;
}

Result<WallTime> SqliteNamespace::DatabaseNow() {
  return Guard([&](Connection& conn) -> Result<WallTime> {
    OCTOP_ASSIGN_OR_RETURN(std::string now, Now(conn));
    return ParseNow(now);
  });
}

Status SqliteNamespace::CheckWritable() {
  if (!pool_.in_memory()) {
    // Below a megabyte a write may fail any moment; say so before it does.
    struct statvfs fs {};
    const std::string& file = pool_.path();
    const std::string dir = std::filesystem::path(file).parent_path().string();
    if (::statvfs(dir.empty() ? "." : dir.c_str(), &fs) == 0 &&
        static_cast<unsigned long long>(fs.f_bavail) * fs.f_frsize < 1024ULL * 1024) {
      return UnavailableError("SQLite database " + file + ": less than 1 MiB free on its file system");
    }
  }
  return Guard([&](Connection& conn) -> Status { return conn.Exec(sql::kWriteProbe); });
}

Result<std::unique_ptr<Listener>> SqliteNamespace::Listen(std::vector<std::string> channels) {
  return std::unique_ptr<Listener>(std::make_unique<HubListener>(hub_, hub_->Subscribe(std::move(channels))));
}

Status SqliteNamespace::MigrateTo(MigrationLine line, int version) {
  if (version < 1 || version > LatestSchemaVersion(line)) {
    return InvalidArgumentError("schema version " + std::to_string(version) + " is not between 1 and " +
                                std::to_string(LatestSchemaVersion(line)));
  }
  return Guard([&](Connection& conn) -> Status {
    OCTOP_ASSIGN_OR_RETURN(std::string now, Now(conn));
    return ApplyMigrations(conn, line, version, now);
  });
}

Result<std::vector<std::string>> SqliteNamespace::AppliedMigrations(MigrationLine line) {
  return Guard([&](Connection& conn) -> Result<std::vector<std::string>> {
    return sqlite::AppliedMigrations(conn, line);
  });
}

std::string TextsJson(const std::vector<std::string>& texts) {
  nlohmann::json array = nlohmann::json::array();
  for (const std::string& text : texts) {
    if (text::IsValidUtf8(text)) array.push_back(text);
  }
  return array.dump();
}

}  // namespace octop::store::sqlite

namespace octop::store {

Status ValidateSqliteNamespace(const std::string& ns) { return sqlite::ValidateNamespace(ns); }

}  // namespace octop::store
