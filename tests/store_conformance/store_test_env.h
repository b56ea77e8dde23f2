// The backends the conformance suite runs on, each able to open a fresh, empty namespace per test.
//
// SQLite always; PostgreSQL when OCTOP_TEST_PG_URL names a server (make test starts one). With
// OCTOP_REQUIRE_PG=1 and no URL, the PostgreSQL instantiation fails instead of being left out, so CI cannot
// silently skip it.
#ifndef OCTOP_TESTS_STORE_CONFORMANCE_STORE_TEST_ENV_H_
#define OCTOP_TESTS_STORE_CONFORMANCE_STORE_TEST_ENV_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "store/store.h"

namespace octop::store::testing {

struct Backend {
  std::string name;  // "sqlite" or "postgres": the test-name suffix
  // Opens a Store on a namespace no other test uses. Every call with the same `ns_key` (within one test)
  // opens the same namespace, so a test can have several Store objects -- several "nodes" -- on one table.
  std::function<Result<std::unique_ptr<Store>>(const std::string& ns_key, const StoreOptions& options)> open;
};

std::vector<Backend> AllBackends();

// A unique name per test (test suite + test name + backend + a random suffix), valid as a schema or file
// name.
std::string FreshNamespace();

// A test server's URL (postgresql://user@host:port/db[?...]) naming another database, the query kept (a URI,
// so callers may append parameters).
std::string UrlOfDatabase(const std::string& url, const std::string& database);

}  // namespace octop::store::testing

#endif  // OCTOP_TESTS_STORE_CONFORMANCE_STORE_TEST_ENV_H_
