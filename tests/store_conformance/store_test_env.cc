#include "store_test_env.h"

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <random>

#include <gtest/gtest.h>

namespace octop::store::testing {

namespace {

std::string Lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) c = '_';
  }
  return s;
}

// One temporary directory for all SQLite namespaces of this process, removed at exit. The path lives on the
// heap and is never freed: the atexit handler runs after static destructors of objects built before it was
// registered.
const std::filesystem::path& SqliteRoot() {
  static const std::filesystem::path* root = [] {
    std::random_device rd;
    auto* dir = new std::filesystem::path(std::filesystem::temp_directory_path() /
                                          ("octop-store-test-" + std::to_string(rd())));
    std::filesystem::create_directories(*dir);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(SqliteRoot(), ec);
    });
    return dir;
  }();
  return *root;
}

}  // namespace

std::string FreshNamespace() {
  static std::atomic<int> counter{0};
  std::string name = "t";
  if (const auto* info = ::testing::UnitTest::GetInstance()->current_test_info()) {
    name += "_" + Lower(info->name()).substr(0, 30);
  }
  std::random_device rd;
  name += "_" + std::to_string(rd() % 100000) + "_" + std::to_string(counter++);
  return name;
}

std::string UrlOfDatabase(const std::string& url, const std::string& database) {
  const std::size_t query = url.find('?');
  const std::size_t slash = url.rfind('/', query == std::string::npos ? url.size() : query);
  return url.substr(0, slash + 1) + database + (query == std::string::npos ? "" : url.substr(query));
}

namespace {

Status NotConfigured() {
  return UnavailableError("OCTOP_REQUIRE_PG=1 but OCTOP_TEST_PG_URL or OCTOP_TEST_PGBOUNCER_URL is not set");
}

StoreOptions InNamespace(const StoreOptions& options, const std::string& ns_key,
                         const PostgresPooling& pooling) {
  StoreOptions o = options;
  o.ns = ns_key;
  o.pooling = pooling;
  return o;
}

}  // namespace

Result<std::unique_ptr<TaskStore>> Backend::open(const std::string& ns_key,
                                                 const StoreOptions& options) const {
  if (url.empty()) return NotConfigured();
  return OpenTaskStore(url, InNamespace(options, ns_key, pooling));
}

Result<std::unique_ptr<JobStore>> Backend::open_jobs(const std::string& ns_key,
                                                     const StoreOptions& options) const {
  if (url.empty()) return NotConfigured();
  return OpenJobStore(url, InNamespace(options, ns_key, pooling));
}

Result<std::unique_ptr<NamespaceAdmin>> Backend::open_admin(const std::string& ns_key,
                                                            const StoreOptions& options) const {
  if (url.empty()) return NotConfigured();
  return OpenNamespaceAdmin(url, InNamespace(options, ns_key, pooling));
}

std::vector<Backend> AllBackends() {
  std::vector<Backend> backends;
  backends.push_back({"sqlite", "sqlite:" + SqliteRoot().string()});
  const char* url = std::getenv("OCTOP_TEST_PG_URL");
  const char* require = std::getenv("OCTOP_REQUIRE_PG");
  const bool required = require != nullptr && std::string(require) == "1";
  const bool direct = url != nullptr && *url != '\0';
  if (direct || required) backends.push_back({"postgres", direct ? url : ""});
  const char* bouncer = std::getenv("OCTOP_TEST_PGBOUNCER_URL");
  const bool pooled = bouncer != nullptr && *bouncer != '\0' && direct;  // LISTEN needs the direct URL
  if (pooled || required) {
    backends.push_back({"pgbouncer",
                        pooled ? bouncer : "",
                        {.prepared_statements = false, .listen_url = pooled ? url : ""}});
  }
  return backends;
}

}  // namespace octop::store::testing
