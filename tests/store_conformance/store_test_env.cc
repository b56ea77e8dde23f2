#include "store_test_env.h"

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <random>

#include <gtest/gtest.h>

#include "store/postgres/postgres_store.h"
#include "store/sqlite/sqlite_store.h"

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

std::vector<Backend> AllBackends() {
  std::vector<Backend> backends;
  backends.push_back({"sqlite", [](const std::string& ns_key, const StoreOptions& options) {
                        StoreOptions o = options;
                        o.ns = ns_key;
                        return OpenSqliteStore(SqliteRoot().string(), o);
                      }});
  const char* url = std::getenv("OCTOP_TEST_PG_URL");
  const char* require = std::getenv("OCTOP_REQUIRE_PG");
  if (url != nullptr && *url != '\0') {
    std::string conninfo = url;
    backends.push_back({"postgres", [conninfo](const std::string& ns_key, const StoreOptions& options) {
                          StoreOptions o = options;
                          o.ns = ns_key;
                          return OpenPostgresStore(conninfo, o);
                        }});
  } else if (require != nullptr && std::string(require) == "1") {
    backends.push_back(
        {"postgres", [](const std::string&, const StoreOptions&) -> Result<std::unique_ptr<Store>> {
           return UnavailableError("OCTOP_REQUIRE_PG=1 but OCTOP_TEST_PG_URL is not set");
         }});
  }
  return backends;
}

}  // namespace octop::store::testing
