#include "daemon/daemon_config.h"

#include <cstdlib>

#include <gtest/gtest.h>

namespace octop::daemon {
namespace {

using Json = nlohmann::json;

Result<ScheduleConfig> Read(const char* json) {
  return ReadScheduleConfig(Json::parse(json), "", "mock-config");
}

// Backstage's SchedulerService.test.ts cases.
TEST(ReadScheduleConfig, AllValidValues) {
  auto s = Read(R"({"frequency":{"cron":"0 30 * * * *"},"timeout":"PT3M","initialDelay":{"minutes":20},
                    "scope":"global"})");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_TRUE(std::holds_alternative<CronFrequency>(s->frequency));
  EXPECT_EQ(std::get<CronFrequency>(s->frequency).cron, "0 30 * * * *");
  EXPECT_EQ(s->timeout.ToIso(), "PT3M");
  ASSERT_TRUE(s->initial_delay.has_value());
  EXPECT_EQ(s->initial_delay->units().minutes, 20);
  EXPECT_EQ(s->scope, "global");
}

TEST(ReadScheduleConfig, AllValidRequiredValues) {
  auto s = Read(R"({"frequency":{"cron":"0 30 * * * *"},"timeout":"PT3M"})");
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->initial_delay.has_value());
  EXPECT_FALSE(s->scope.has_value());
}

TEST(ReadScheduleConfig, FailWithoutRequiredFrequencyOrTimeout) {
  EXPECT_NE(
      Read(R"({"timeout":"PT3M"})").status().message().find("Missing required config value at 'frequency'"),
      std::string::npos);
  EXPECT_NE(
      Read(R"({"frequency":"PT1M"})").status().message().find("Missing required config value at 'timeout'"),
      std::string::npos);
}

TEST(ReadScheduleConfig, InvalidFrequencyKey) {
  auto s = Read(R"({"frequency":{"invalid":"value"},"timeout":"PT3M"})");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find(
                "Failed to read duration from config at 'frequency', Error: Needs one or more of"),
            std::string::npos)
      << s.status().message();
}

TEST(ReadScheduleConfig, InvalidFrequencyValue) {
  auto s = Read(R"({"frequency":{"minutes":"value"},"timeout":"PT3M"})");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find(
                "Failed to read duration from config, Error: Unable to convert config value for "
                "key 'frequency.minutes' in 'mock-config' to a number"),
            std::string::npos)
      << s.status().message();
}

TEST(ReadScheduleConfig, FrequencyWithAdditionalInvalidProp) {
  auto s = Read(R"({"frequency":{"minutes":1,"invalid":"value"},"timeout":"PT3M"})");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("Unknown property 'invalid'; expected one or more of"),
            std::string::npos)
      << s.status().message();
}

TEST(ReadScheduleConfig, InvalidScopeValue) {
  auto s = Read(R"({"frequency":"PT1M","timeout":"PT3M","scope":"galaxy"})");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find(
                "Only \"global\" or \"local\" are allowed for TaskScheduleDefinition.scope, but got: galaxy"),
            std::string::npos);
}

TEST(ReadScheduleConfig, ManualTriggerHumanStringsAndTimeZone) {
  auto manual = Read(R"({"frequency":{"trigger":"manual"},"timeout":"10m"})");
  ASSERT_TRUE(manual.ok()) << manual.status().ToString();
  EXPECT_TRUE(std::holds_alternative<ManualTrigger>(manual->frequency));
  EXPECT_EQ(manual->timeout.ToIso(), "PT10M");
  EXPECT_FALSE(Read(R"({"frequency":{"trigger":"sometimes"},"timeout":"10m"})").ok());
  auto human = Read(R"({"frequency":"90m","timeout":"30 seconds"})");
  ASSERT_TRUE(human.ok()) << human.status().ToString();
  EXPECT_EQ(std::get<Duration>(human->frequency).ToIso(), "PT1H30M");
  auto tz = Read(R"({"frequency":{"cron":"0 2 * * *","timeZone":"Europe/Paris"},"timeout":"PT1H"})");
  ASSERT_TRUE(tz.ok());
  EXPECT_EQ(std::get<CronFrequency>(tz->frequency).time_zone, "Europe/Paris");
  auto dst = Read(R"({"frequency":{"cron":"30 2 * * *","dstPolicy":"skip,twice"},"timeout":"PT1H"})");
  ASSERT_TRUE(dst.ok()) << dst.status().ToString();
  EXPECT_EQ(std::get<CronFrequency>(dst->frequency).dst_policy, DstPolicy::Parse("skip,twice").value());
  auto typo = Read(R"({"frequency":{"cron":"0 2 * * *","timezone":"Europe/Paris"},"timeout":"PT1H"})");
  EXPECT_NE(typo.status().message().find("unknown key 'timezone'; did you mean 'timeZone'?"),
            std::string::npos)
      << typo.status().message();
}

TEST(ReadScheduleConfig, BadDurationStringNamesKeyAndValue) {
  auto s = Read(R"({"frequency":"soonish","timeout":"PT3M"})");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("'soonish'"), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find("frequency"), std::string::npos);
}

TEST(ParseDaemonConfig, DatabaseTakesBackstagesShape) {
  auto config = ParseDaemonConfig(
      "database:\n  connection: postgresql://octop@db/backstage\n  pluginDivisionMode: schema\n"
      "  prefix: bs_\n  schemaPrefix: plug_\n",
      "t.yaml");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->database, "postgresql://octop@db/backstage");
  EXPECT_EQ(config->plugin_division.mode, PluginDivision::Mode::kSchema);
  EXPECT_EQ(config->plugin_division.prefix, "bs_");
  EXPECT_EQ(config->plugin_division.schema_prefix, "plug_");
  // A plain URL keeps Backstage's defaults: a database per plugin named backstage_plugin_<id>.
  auto plain = ParseDaemonConfig("database: postgresql://octop@db/backstage\n", "t.yaml");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->plugin_division, PluginDivision{});
  EXPECT_EQ(plain->pooling, PostgresPooling{});  // prepared statements, LISTEN on the same URL
}

TEST(ParseDaemonConfig, DatabaseTakesThePoolerSettings) {
  auto config = ParseDaemonConfig(
      "database:\n  connection: postgresql://octop@bouncer:6432/octop\n  preparedStatements: false\n"
      "  listenConnection: postgresql://octop@db:5432/octop\n",
      "t.yaml");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->database, "postgresql://octop@bouncer:6432/octop");
  EXPECT_EQ(config->pooling, (PostgresPooling{.prepared_statements = false,
                                              .listen_url = "postgresql://octop@db:5432/octop"}));
}

constexpr const char* kExample = R"(
database: postgresql://octop@127.0.0.1:5432/octop
nodeId: node-a
http:
  listen: 0.0.0.0:8080
  token: ${OCTOP_TEST_TOKEN}
  allowedHosts: [octop.internal, scheduler.example.com]
scheduler:
  workCheckFrequency: 2s
plugins:
  demo:
    tasks:
      - id: heartbeat
        schedule: { frequency: { minutes: 1 }, timeout: 30s, initialDelay: PT5S, scope: local }
        command: [sh, -c, 'echo hi']
      - id: report
        schedule:
          frequency: { cron: '0 2 * * *', timeZone: Europe/Paris }
          timeout: 1h
        command:
          argv: [./report.sh, --full]
          env: { MODE: nightly, RETRIES: 3 }
          workingDir: /srv
          killGrace: 10s
      - id: ping
        schedule: { frequency: { trigger: manual }, timeout: PT10S }
        webhook: { url: 'http://127.0.0.1:9000/hook', method: put, headers: { X-Key: abc } }
jobs:
  prefetch: 200
  wakeClaimInterval: 5ms
  rescueInterval: 3s
  reconcileInterval: 10s
  handlers:
    - kind: email
      queue: mail
      concurrency: 8
      timeout: 2m
      command: [./send-mail]
)";

TEST(ParseDaemonConfig, ReadsEveryKey) {
  ::setenv("OCTOP_TEST_TOKEN", "0123456789abcdef0123", 1);
  auto c = ParseDaemonConfig(kExample, "octop.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->database, "postgresql://octop@127.0.0.1:5432/octop");
  EXPECT_EQ(c->node_id, "node-a");
  EXPECT_EQ(c->http.host, "0.0.0.0");
  EXPECT_EQ(c->http.port, 8080);
  EXPECT_EQ(c->http.token, "0123456789abcdef0123");
  EXPECT_EQ(c->http.allowed_hosts, (std::vector<std::string>{"octop.internal", "scheduler.example.com"}));
  EXPECT_EQ(c->work_check_frequency, std::chrono::seconds(2));
  ASSERT_EQ(c->plugins.size(), 1u);
  const auto& tasks = c->plugins[0].tasks;
  ASSERT_EQ(tasks.size(), 3u);
  EXPECT_EQ(tasks[0].id, "heartbeat");
  EXPECT_EQ(tasks[0].schedule.scope, "local");
  EXPECT_EQ(std::get<Duration>(tasks[0].schedule.frequency).ToIso(), "PT1M");
  EXPECT_EQ(std::get<CommandAction>(tasks[0].action).argv, (std::vector<std::string>{"sh", "-c", "echo hi"}));
  const auto& report = std::get<CommandAction>(tasks[1].action);
  EXPECT_EQ(report.env.at("RETRIES"), "3");
  EXPECT_EQ(report.working_dir, "/srv");
  EXPECT_EQ(report.kill_grace, std::chrono::seconds(10));
  const auto& hook = std::get<WebhookAction>(tasks[2].action);
  EXPECT_EQ(hook.method, "PUT");
  EXPECT_EQ(hook.headers.at("X-Key"), "abc");
  ASSERT_EQ(c->job_handlers.size(), 1u);
  EXPECT_EQ(c->job_handlers[0].concurrency, 8);
  EXPECT_EQ(c->job_handlers[0].queue, "mail");
  EXPECT_EQ(c->job_prefetch, 200);
  EXPECT_EQ(c->job_wake_claim_interval, std::chrono::milliseconds(5));
  EXPECT_EQ(c->job_rescue_interval, std::chrono::seconds(3));
  EXPECT_EQ(c->job_reconcile_interval, std::chrono::seconds(10));
}

TEST(ParseDaemonConfig, ADoubledDollarKeepsABraceForTheShell) {
  ::setenv("OCTOP_TEST_WORD", "hi", 1);
  auto c = ParseDaemonConfig(
      "plugins:\n  p:\n    tasks:\n      - id: a\n        schedule: {frequency: PT1M, timeout: PT1M}\n"
      "        command: [bash, -c, 'echo $${HOME%/*} $$ $HOME ${OCTOP_TEST_WORD}$${x}']\n",
      "t.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(std::get<CommandAction>(c->plugins[0].tasks[0].action).argv[2],
            "echo ${HOME%/*} $$ $HOME hi${x}");
}

TEST(ParseDaemonConfig, AZeroWakeClaimIntervalClaimsOnEveryWakeUp) {
  auto c = ParseDaemonConfig("jobs: {wakeClaimInterval: 0s}", "zero.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->job_wake_claim_interval, std::chrono::milliseconds(0));
}

TEST(ParseDaemonConfig, EmptyFileGivesDefaults) {
  auto c = ParseDaemonConfig("", "empty.yaml");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->database, "sqlite:octop-data");
  EXPECT_EQ(c->job_wake_claim_interval, std::chrono::milliseconds(1));
  EXPECT_EQ(c->job_rescue_interval, std::chrono::seconds(15));
  EXPECT_EQ(c->job_reconcile_interval, std::chrono::minutes(5));
  EXPECT_EQ(c->http.host, "127.0.0.1");
  EXPECT_EQ(c->http.port, 7007);
}

struct BadCase {
  const char* yaml;
  const char* expected;  // a piece of the message
};

class ParseDaemonConfigErrors : public ::testing::TestWithParam<BadCase> {};

TEST_P(ParseDaemonConfigErrors, NamesTheKeyAndValue) {
  auto c = ParseDaemonConfig(GetParam().yaml, "octop.yaml");
  ASSERT_FALSE(c.ok()) << GetParam().yaml;
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find(GetParam().expected), std::string::npos) << c.status().message();
  EXPECT_EQ(c.status().message().rfind("octop.yaml: ", 0), 0u) << c.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    All, ParseDaemonConfigErrors,
    ::testing::Values(
        BadCase{"databse: x", "line 1: databse: unknown key 'databse'; did you mean 'database'?"},
        BadCase{"http: {listen: 'nowhere'}", "http.listen: expected host:port, got 'nowhere'"},
        BadCase{"http: {listen: 'h:99999'}", "port must be 0-65535, got '99999'"},
        BadCase{"http: {token: short}", "at least 16 characters"},
        BadCase{"http: {protectReads: true}", "http.protectReads: needs http.token"},
        BadCase{"http: {token: 0123456789abcdef, protectMetrics: 'yes'}", "expected true or false"},
        // What a start refuses, --check refuses too (both read the file through ParseDaemonConfig).
        BadCase{"database: 'mysql://db/x'", "database: unknown database URL 'mysql://db/x'"},
        BadCase{"database: {connection: 'postgresql://h/db', pluginDivisionMode: tables}",
                "database.pluginDivisionMode: expected database or schema, got 'tables'"},
        BadCase{"database: {connection: 'postgresql://h/db', schemaPrefix: 'a-b'}",
                "database.schemaPrefix: must start with a letter or underscore"},
        BadCase{"database: {pluginDivisionMode: schema}", "database: missing required key 'connection'"},
        BadCase{"database: {connection: 'postgresql://h/db', preparedStatements: 'off'}",
                "database.preparedStatements: expected true or false, got \"off\""},
        BadCase{"database: {connection: 'postgresql://h/db', listenConnection: 'db:5432'}",
                "database.listenConnection: expected a postgresql:// URL"},
        BadCase{"database: {connection: 'postgresql://h/db', prefx: a}", "unknown key 'prefx'"},
        // The plugin's database name (prefix + id) must fit PostgreSQL's 63 bytes.
        BadCase{"database: {connection: 'postgresql://h/db', prefix: "
                "pppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp}\n"
                "plugins:\n  demo:\n    tasks: []\n",
                "longer than 63 bytes"},
        BadCase{"plugins:\n  p:\n    tasks:\n      - {id: a, schedule: {frequency: {cron: '61 * * * *'}, "
                "timeout: PT1M}, command: [x]}\n",
                "plugins.p.tasks[0].schedule: "},
        BadCase{"plugins:\n  p:\n    tasks:\n      - {id: a, schedule: {frequency: {cron: '0 * * * *', "
                "timeZone: Mars/Olympus}, timeout: PT1M}, command: [x]}\n",
                "Unknown time zone 'Mars/Olympus'"},
        BadCase{"plugins:\n  p:\n    tasks:\n      - {id: a, schedule: {frequency: {cron: '0 * * * *', "
                "dstPolicy: wall}, timeout: PT1M}, command: [x]}\n",
                "dstPolicy: Invalid DST policy \"wall\""},
        BadCase{"plugins:\n  p:\n    tasks:\n      - {id: a, schedule: {frequency: 0s, timeout: PT1M}, "
                "command: [x]}\n",
                "the frequency must be longer than zero"},
        BadCase{"plugins:\n  p:\n    tasks:\n      - {id: a, schedule: {frequency: PT1M, timeout: 0s}, "
                "command: [x]}\n",
                "the timeout must be longer than zero"},
        BadCase{"plugins:\n  p:\n    tasks:\n      - {id: '  ', schedule: {frequency: PT1M, timeout: PT1M}, "
                "command: [x]}\n",
                "plugins.p.tasks[0].id: "},
        BadCase{
            "plugins:\n  p:\n    tasks:\n      - {id: a, schedule: {frequency: PT1M, timeout: P1000000Y}, "
            "command: [x]}\n",
            "is longer than 100 years"},
        BadCase{"plugins:\n  p:\n    tasks:\n      - {id: a, schedule: {frequency: PT1M, timeout: PT1M, "
                "initialDelay: P300Y}, command: [x]}\n",
                "is longer than 100 years"},
        BadCase{"plugins:\n  p:\n    tasks:\n      - {id: a, schedule: {frequency: PT1M, timeout: PT1M}, "
                "command: {argv: [x], killGrace: P1000000Y}}\n",
                "killGrace: \"P1000000Y\" is longer than 100 years"},
        BadCase{
            "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
            "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
            "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
            "g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\nh: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g, "
            "*g]\n",
            "more than 100000 values (nested aliases?)"},
        BadCase{"http: {allowedHosts: octop.internal}", "http.allowedHosts: expected a list of host names"},
        BadCase{"http: {allowedHosts: ['octop.internal:7007']}", "without port or scheme"},
        BadCase{"http: {allowedHosts: ['http://x']}", "without port or scheme"},
        BadCase{"http: {token: '${OCTOP_SURELY_UNSET_VAR}'}",
                "environment variable OCTOP_SURELY_UNSET_VAR is not set"},
        BadCase{"logLevel: loud", "expected trace, debug, info, warn, error or off, got 'loud'"},
        BadCase{"plugins: {Bad/Id: {}}", "plugin id 'Bad/Id' must be"},
        BadCase{"plugins:\n  p:\n    tasks:\n      - id: a\n        command: [x]\n",
                "line 4: plugins.p.tasks[0]: missing required key 'schedule'"},
        BadCase{
            "plugins:\n  p:\n    tasks:\n      - id: a\n        schedule: {frequency: PT1M, timeout: PT1M}\n",
            "needs exactly one action: 'command' or 'webhook'"},
        BadCase{"plugins:\n  p:\n    tasks:\n      - {id: a, schedule: {frequency: PT1M, timeout: PT1M}, "
                "command: []}\n",
                "argv must be a non-empty list"},
        BadCase{"plugins:\n  p:\n    tasks:\n      - {id: a, schedule: {frequency: PT1M, timeout: PT1M}, "
                "command: [x]}\n"
                "      - {id: a, schedule: {frequency: PT1M, timeout: PT1M}, command: [x]}\n",
                "task id 'a' is used twice in plugin p"},
        BadCase{"plugins:\n  p:\n    tasks:\n      - {id: a, schedule: {frequency: PT1M, timeout: PT1M, "
                "scop: local},"
                " command: [x]}\n",
                "unknown key 'scop'; did you mean 'scope'?"},
        BadCase{"plugins:\n  p:\n    tasks:\n      - {id: a, schedule: {frequency: PT1M, timeout: PT1M},"
                " webhook: {url: 'ftp://x'}}\n",
                "expected an http:// or https:// URL, got 'ftp://x'"},
        BadCase{"jobs: {handlers: [{kind: k, concurrency: 0, command: [x]}]}",
                "jobs.handlers[0].concurrency: expected a whole number from 1 to 1024, got 0"},
        BadCase{"jobs: {prefetch: 1001}", "jobs.prefetch: expected a whole number from 0 to 1000, got 1001"},
        BadCase{"jobs: {wakeClaimInterval: 2s}",
                "jobs.wakeClaimInterval: must be from 0 to 100 ms, got 2000 ms"},
        BadCase{"jobs: {wakeClaimInterval: often}", "jobs.wakeClaimInterval"},
        BadCase{"jobs: {rescueInterval: 0s}", "jobs.rescueInterval: must be longer than zero"},
        BadCase{"a: [unclosed", "not valid YAML"}, BadCase{"database: a\ndatabase: b\n", "appears twice"},
        BadCase{"databse: \"\xff\xfe\"", "unknown key 'databse'"},
        BadCase{"http: {listen: [\"\xff\"]}", "http.listen: expected a string, got [\"\xEF\xBF\xBD\"]"}));

}  // namespace
}  // namespace octop::daemon
