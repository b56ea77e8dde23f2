// SqliteNamespace: what an SQLite task store and job store share -- one database file (or a private
// in-memory database) with its connection pool, its notification hub, the database's now and the migration
// lines -- and SqliteStoreBase, the part of the Store interface both implement the same way on it.
//
// Thread-safety: safe to use from many threads at once (every operation leases its own connection).
#ifndef OCTOP_STORE_SQLITE_SQLITE_NAMESPACE_H_
#define OCTOP_STORE_SQLITE_SQLITE_NAMESPACE_H_

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <octop/clock.h>
#include <octop/status.h>

#include "store/sqlite/connection.h"
#include "store/sqlite/connection_pool.h"
#include "store/sqlite/hub.h"
#include "store/sqlite/migrations.h"
#include "store/store.h"

namespace octop::store::sqlite {

class SqliteNamespace {
 public:
  static constexpr std::string_view kBackend = "sqlite";

  // `location` is a directory (the namespace's file is <location>/<ns>.sqlite, created if missing) or
  // ":memory:". Opens the first connection, so that an unusable file is reported here.
  static Result<std::unique_ptr<SqliteNamespace>> Open(const std::string& location,
                                                       const StoreOptions& options);

  SqliteNamespace(std::string path, bool in_memory, const std::string& hub_key, const StoreOptions& options);

  // Runs `fn` (returning a Status or a Result) on a leased connection; the pool's Status when no connection
  // can be had.
  template <typename Fn>
  auto Guard(Fn&& fn) -> decltype(fn(std::declval<Connection&>())) {
    Result<ConnectionPool::Lease> lease = pool_.Acquire();
    if (!lease.ok()) return lease.status();
    return fn(**lease);
  }

  // The database's now as text: the test clock's override, or SQLite's own clock.
  Result<std::string> Now(Connection& conn) const;
  // The earlier of the database's now (as written) and `bound`, as text that compares with stored times.
  static std::string Earlier(const std::string& now, const std::optional<WallTime>& bound);
  static Result<WallTime> ParseNow(const std::string& now);

  Hub& hub() const { return *hub_; }
  const std::string& path() const { return pool_.path(); }
  bool in_memory() const { return pool_.in_memory(); }

  Result<WallTime> DatabaseNow();
  Status CheckWritable();
  Result<std::unique_ptr<Listener>> Listen(std::vector<std::string> channels);
  Status MigrateTo(MigrationLine line, int version);
  Result<std::vector<std::string>> AppliedMigrations(MigrationLine line);

 private:
  const Clock* clock_;
  ConnectionPool pool_;
  std::shared_ptr<Hub> hub_;
};

// A JSON array of texts for `IN (SELECT value FROM json_each(:ids))`. Texts that are not valid UTF-8 cannot
// be stored, so they are left out rather than mangled into something that might match another.
std::string TextsJson(const std::vector<std::string>& texts);

// Store's part of a task or job store (`Interface`) on a SqliteNamespace.
template <typename Interface>
using SqliteStoreBase = NamespaceStore<Interface, SqliteNamespace>;

}  // namespace octop::store::sqlite

#endif  // OCTOP_STORE_SQLITE_SQLITE_NAMESPACE_H_
