// ApiServer: octopd's HTTP face -- Backstage's scheduler REST API for every plugin, /metrics, /healthz,
// /readyz, the job-queue API, and the dashboard's static files -- on cpp-httplib, behind octop's own
// connection loop, which bounds connections (503 beyond max_connections) and each request's head (fields,
// bytes, time).
//
// Routes are matched on the raw request target split into percent-decoded segments, exactly as Express
// matches `:id`: a task id containing '/' must be sent as %2F and arrives whole. Every error is a JSON body
// in the shape of Backstage's error middleware with the status from the one Status->HTTP table (status.h).
// When a bearer token is configured every POST must carry it (compared in constant time); GETs stay open so
// probes and scrapers work.
//
// Browser safety (docs/reliability.md, "Threat model"): a page on another site can make the user's browser
// send requests to a loopback octopd, so every request must name this server in its Host header (an IP
// literal, localhost, or a configured name: no DNS rebinding), a state-changing request must come from this
// origin or from no browser at all (Origin, Sec-Fetch-Site), a request body must be JSON (no form or
// text/plain "simple request"), and compressed bodies are refused (no decompression bomb). Every answer
// carries nosniff and anti-framing headers.
//
// Ownership: the server borrows the Scheduler (and the other handlers' targets), which must outlive it.
// Thread-safety: Start/Stop from one thread; requests are served on the server's own worker threads.
#ifndef OCTOP_HTTP_API_SERVER_H_
#define OCTOP_HTTP_API_SERVER_H_

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <octop/scheduler.h>
#include <octop/status.h>

namespace prometheus {
class Registry;
}  // namespace prometheus

namespace octop::http {

struct ApiRequest {
  std::string method;
  std::string target;               // as received, for error bodies
  std::vector<std::string> params;  // the values of the route's ':name' segments, decoded
  // Decoded query parameters in order; nullopt: the value does not decode.
  std::vector<std::pair<std::string, std::optional<std::string>>> query;
  std::string body;
  std::string content_type;

  // The first value of `name`, nullopt when absent; InvalidArgument when it does not decode (a malformed
  // escape, a NUL, bytes that are not UTF-8).
  Result<std::optional<std::string>> Query(std::string_view name) const;
};

struct ApiResponse {
  int status = 200;
  std::string content_type = "application/json; charset=utf-8";
  std::string body;

  static ApiResponse Json(const std::string& json, int status = 200);
};

// A handler returns a response or a Status, which becomes the JSON error body.
using ApiHandler = std::function<Result<ApiResponse>(const ApiRequest&)>;

struct ApiServerOptions {
  std::string host = "127.0.0.1";  // default loopback only
  int port = 7007;                 // 0 = an ephemeral port (see ApiServer::port())
  std::optional<std::string> token;
  // With a token: GETs of the API need it too (the dashboard's files and the probes stay open), and /metrics
  // needs it when protect_metrics is set (docs/reliability.md, "Threat model").
  bool protect_reads = false;
  bool protect_metrics = false;
  // Host names, besides IP literals and localhost, that requests may name in their Host header (e.g. the
  // name a reverse proxy forwards). Compared without the port, case-insensitively.
  std::vector<std::string> allowed_hosts;
  std::size_t max_body_bytes = 1 << 20;
  // Connections served at once, each on a thread of its own (slow and idle keep-alive clients hold theirs);
  // a connection beyond them is answered 503 at once and closed.
  std::size_t max_connections = 512;
  // A request's head (request line and header fields: at most 64 KiB and 100 fields) must arrive within this
  // long of its first byte: 408 otherwise. A connection waits at most 5 s for its next request to begin.
  std::chrono::milliseconds header_timeout{10000};
  // Checked by /readyz (e.g. the database answers); OK when absent.
  std::function<Status()> readiness;
  // Serialized by /metrics, after the scheduler's own registry.
  std::vector<std::shared_ptr<prometheus::Registry>> extra_registries;
  // A directory of static files served at / (the dashboard); none when empty.
  std::string web_root;
  // Log sink for warnings (e.g. binding beyond loopback without a token).
  std::function<void(std::string_view)> warn;
};

class ApiServer {
 public:
  ApiServer(Scheduler& scheduler, ApiServerOptions options);
  ~ApiServer();  // Stop()
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  // Adds a route before Start(). `pattern` is a path like "/api/octop/v1/jobs/:id/retry".
  void AddRoute(std::string method, std::string_view pattern, ApiHandler handler);

  // Binds and starts serving on a background thread. Unavailable when the address cannot be bound.
  Status Start();
  int port() const { return port_; }
  void Stop();

  // Splits a request target's path into percent-decoded segments; nullopt for malformed encoding (%zz, %00,
  // or an encoded sequence that is not UTF-8).
  static std::optional<std::vector<std::string>> SplitPath(std::string_view target);

 private:
  struct Route {
    std::string method;
    std::vector<std::string> segments;  // ":name" matches any one segment
    ApiHandler handler;
  };
  class Impl;

  void AddSchedulerRoutes();

  Scheduler& scheduler_;
  ApiServerOptions options_;
  std::vector<Route> routes_;
  std::unique_ptr<Impl> impl_;
  std::thread thread_;
  int port_ = 0;
};

// What CheckBrowserSafety reads of a request; empty views for absent headers.
struct RequestOrigin {
  std::string_view method;
  std::string_view path;  // the request target's path, to exempt the probes and /metrics from the Host check
  std::string_view host;
  std::string_view origin;
  std::string_view sec_fetch_site;
  std::string_view content_type;
  std::string_view content_encoding;
  bool has_body = false;  // a Content-Length above 0 or a chunked body
};

// OK, or the refusal (kPermissionDenied for a foreign Host, Origin or Sec-Fetch-Site; kInvalidArgument for a
// body that is not JSON or is compressed) for one request.
Status CheckBrowserSafety(const RequestOrigin& request, const std::vector<std::string>& allowed_hosts);

// Constant-time comparison of two secrets (the time depends only on the length of `expected`).
bool SecretsEqual(std::string_view given, std::string_view expected);

}  // namespace octop::http

#endif  // OCTOP_HTTP_API_SERVER_H_
