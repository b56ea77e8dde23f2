// The backends the conformance suite runs on, each able to open a fresh, empty namespace per test.
//
// SQLite always; PostgreSQL when OCTOP_TEST_PG_URL names a server (make test starts one); the same server
// through PgBouncer in transaction mode when OCTOP_TEST_PGBOUNCER_URL names one (make test starts it too),
// with the pooling settings that mode needs (no prepared statements, LISTEN on a direct connection). With
// OCTOP_REQUIRE_PG=1 and no URL, the PostgreSQL instantiations fail instead of being left out, so CI cannot
// silently skip them.
#ifndef OCTOP_TESTS_STORE_CONFORMANCE_STORE_TEST_ENV_H_
#define OCTOP_TESTS_STORE_CONFORMANCE_STORE_TEST_ENV_H_

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "store/job_store.h"
#include "store/namespace_admin.h"
#include "store/task_store.h"

namespace octop::store::testing {

struct Backend {
  std::string name;  // "sqlite", "postgres" or "pgbouncer": the test-name suffix
  // What OpenTaskStore/OpenJobStore take; empty when the backend is required but not configured.
  std::string url;
  // Applied to every store this backend opens (StoreOptions::pooling).
  PostgresPooling pooling;

  // PostgreSQL, directly or through PgBouncer: the tables and indexes are PostgreSQL's.
  bool is_postgres() const { return name != "sqlite"; }

  // Open a store (or an admin) on namespace `ns_key`, as OpenTaskStore/OpenJobStore/OpenNamespaceAdmin
  // would. Every call with the same `ns_key` (within one test) opens the same namespace, so a test can have
  // several stores -- several "nodes" -- on one table.
  Result<std::unique_ptr<TaskStore>> open(const std::string& ns_key, const StoreOptions& options) const;
  Result<std::unique_ptr<JobStore>> open_jobs(const std::string& ns_key, const StoreOptions& options) const;
  Result<std::unique_ptr<NamespaceAdmin>> open_admin(const std::string& ns_key,
                                                     const StoreOptions& options) const;
};

// Lets gtest print a backend parameter by its name instead of dumping its bytes.
inline void PrintTo(const Backend& backend, std::ostream* os) { *os << backend.name; }

std::vector<Backend> AllBackends();

// A unique name per test (test suite + test name + backend + a random suffix), valid as a schema or file
// name.
std::string FreshNamespace();

// A test server's URL (postgresql://user@host:port/db[?...]) naming another database, the query kept (a URI,
// so callers may append parameters).
std::string UrlOfDatabase(const std::string& url, const std::string& database);

}  // namespace octop::store::testing

#endif  // OCTOP_TESTS_STORE_CONFORMANCE_STORE_TEST_ENV_H_
