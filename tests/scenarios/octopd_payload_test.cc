// A job's payload loses nothing between the client and the handler (docs/jobs.md, "Payloads"): the real
// octopd on SQLite and, when OCTOP_TEST_PG_URL is set, on PostgreSQL, fed numbers beyond a double's precision
// over HTTP and through the real octop CLI. The handler's stdin, GET of the job, the list and the CLI's
// --json output must carry every digit; a payload no backend can store is a 400 naming why, with nothing
// written. Every wait is on a condition with a deadline.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "../support/eventually.h"
#include "child_process.h"

namespace {

using octop::scenario::Child;
using octop::test_support::Eventually;

using namespace std::chrono_literals;
using Json = nlohmann::json;
namespace fs = std::filesystem;

// Numbers a double cannot hold, written as both backends print them back (PostgreSQL's jsonb keeps a
// number's digits and scale, and prints it without an exponent).
constexpr const char* kBig = "123456789012345678901234567890";
constexpr const char* kBelowInt64 = "-9223372036854775809";
constexpr const char* kFraction = "0.12345678901234567890123";
constexpr const char* kCents = "19.90";

class OctopdPayload : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::random_device rd;
    const std::string tag = std::to_string(rd());
    dir_ = fs::temp_directory_path() / ("octopd-payload-" + tag);
    fs::create_directories(dir_);
    std::string database = "sqlite:" + (dir_ / "data").string();
    if (GetParam() == "postgres") {
      const char* url = std::getenv("OCTOP_TEST_PG_URL");
      if (url == nullptr) GTEST_SKIP() << "needs OCTOP_TEST_PG_URL";
      database = std::string("{connection: '") + url + "', pluginDivisionMode: schema, schemaPrefix: pay" +
                 tag + "_}";
    }
    kind_ = "keep" + tag;  // one kind per test: a shared PostgreSQL job namespace holds other tests' jobs
    std::ofstream(dir_ / "octop.yaml")
        << "database: " << database << "\n"
        << "http:\n  listen: 127.0.0.1:0\n"
        << "jobs:\n"
           "  handlers:\n"
           "    - kind: "
        << kind_
        << "\n"
           "      command: [sh, -c, 'cat > "
        << dir_.string() << "/in.$OCTOP_JOB_ID.tmp && mv " << dir_.string() << "/in.$OCTOP_JOB_ID.tmp "
        << dir_.string() << "/in.$OCTOP_JOB_ID']\n";
    const std::optional<int> port =
        octop::scenario::StartOctopd(OCTOPD_PATH, (dir_ / "octop.yaml").string(), daemon_);
    ASSERT_TRUE(port.has_value()) << daemon_->output();
    port_ = *port;
  }
  void TearDown() override {
    daemon_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  httplib::Result Get(const std::string& path) {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(20, 0);
    return c.Get(path);
  }
  httplib::Result Post(const std::string& body) {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(20, 0);
    return c.Post("/api/octop/v1/jobs", body, "application/json");
  }
  // What the handler read on stdin, once it has run.
  std::string HandlerInput(const std::string& id) {
    const fs::path file = dir_ / ("in." + id);
    if (!Eventually([&] { return fs::exists(file); }, 30s)) return "(the handler did not run)";
    std::ifstream in(file);
    std::stringstream content;
    content << in.rdbuf();
    return content.str();
  }
  std::pair<int, std::string> Cli(std::vector<std::string> args) {
    std::vector<std::string> argv{OCTOP_PATH, "--url", "http://127.0.0.1:" + std::to_string(port_)};
    argv.insert(argv.end(), args.begin(), args.end());
    Child cli(argv);
    auto code = cli.Wait(30s);
    return {code.value_or(-1), cli.output()};
  }

  fs::path dir_;
  std::string kind_;
  std::unique_ptr<Child> daemon_;
  int port_ = 0;
};

TEST_P(OctopdPayload, NumbersBeyondADoubleKeepEveryDigitFromRequestToHandlerAndBack) {
  const std::string payload = std::string(R"({"order":)") + kBig + R"(,"below":)" + kBelowInt64 +
                              R"(,"rate":)" + kFraction + R"(,"price":)" + kCents +
                              R"(,"note":"é \"q\" \\ /"})";
  auto posted = Post(R"({"kind":")" + kind_ + R"(","payload": )" + payload + "}");
  ASSERT_TRUE(posted);
  ASSERT_EQ(posted->status, 201) << posted->body;
  const std::string id = Json::parse(posted->body)["id"];

  // The handler reads the stored text: PostgreSQL prints jsonb with its own spacing and key order, so the
  // digits are looked for, not the whole text.
  const std::string input = HandlerInput(id);
  for (const char* digits : {kBig, kBelowInt64, kFraction, kCents}) {
    EXPECT_NE(input.find(digits), std::string::npos) << digits << " not in the handler's stdin: " << input;
  }
  EXPECT_EQ(Json::parse(input)["note"], "é \"q\" \\ /");

  // The API answers with the payload compacted and every digit in place.
  ASSERT_TRUE(Eventually([&] {
    auto r = Get("/api/octop/v1/jobs/" + id);
    return r && r->body.find(R"("status":"success")") != std::string::npos;
  }));
  auto one = Get("/api/octop/v1/jobs/" + id);
  ASSERT_TRUE(one);
  auto list = Get("/api/octop/v1/jobs?kind=" + kind_);
  ASSERT_TRUE(list);
  auto [code, cli_list] = Cli({"--json", "jobs", "list", "--kind", kind_});
  ASSERT_EQ(code, 0) << cli_list;
  for (const std::string& answer : {one->body, list->body, cli_list}) {
    EXPECT_NE(answer.find(std::string(R"("order":)") + kBig), std::string::npos) << answer;
    EXPECT_NE(answer.find(std::string(R"("below":)") + kBelowInt64), std::string::npos) << answer;
    EXPECT_NE(answer.find(std::string(R"("rate":)") + kFraction), std::string::npos) << answer;
    EXPECT_NE(answer.find(std::string(R"("price":)") + kCents), std::string::npos) << answer;
    EXPECT_FALSE(Json::parse(answer, nullptr, false).is_discarded()) << answer;
  }
}

TEST_P(OctopdPayload, TheCliSendsThePayloadAsWritten) {
  auto [code, out] =
      Cli({"--json", "jobs", "enqueue", kind_, "--payload", std::string("[") + kBig + ", 1.50]"});
  ASSERT_EQ(code, 0) << out;
  const std::string id = Json::parse(out)["id"];
  const std::string input = HandlerInput(id);
  EXPECT_NE(input.find(kBig), std::string::npos) << input;
  EXPECT_NE(input.find("1.50"), std::string::npos) << input;
}

TEST_P(OctopdPayload, APayloadNoBackendCanStoreIsA400AndWritesNothing) {
  for (const std::string& body : {R"({"kind":")" + kind_ + R"(","payload":{"a":"x\u0000y"}})",
                                  R"({"kind":")" + kind_ + R"(","payload":{"\u0000":1}})"}) {
    auto r = Post(body);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << r->body;
    const Json error = Json::parse(r->body, nullptr, false);
    EXPECT_EQ(error["error"]["name"], "InputError") << r->body;
    const std::string message = error["error"]["message"];
    EXPECT_NE(message.find("'payload' contains the escape \\u0000"), std::string::npos) << message;
  }
  auto nul_kind = Post(R"({"kind":"a\u0000b"})");
  ASSERT_TRUE(nul_kind);
  EXPECT_EQ(nul_kind->status, 400) << nul_kind->body;
  EXPECT_NE(nul_kind->body.find("'kind' must not contain the character U+0000"), std::string::npos)
      << nul_kind->body;
  auto list = Get("/api/octop/v1/jobs?kind=" + kind_);
  ASSERT_TRUE(list);
  EXPECT_EQ(Json::parse(list->body)["jobs"].size(), 0u) << list->body;
}

INSTANTIATE_TEST_SUITE_P(Backends, OctopdPayload, ::testing::Values("sqlite", "postgres"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

}  // namespace
