#include "http/api_server.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <mutex>
#include <system_error>

#include <dirent.h>
#include <httplib.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>
#include <sys/socket.h>

#include "core/js_text.h"
#include "http/task_json.h"

namespace octop::http {

namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// decodeURIComponent: '+' stays '+', malformed escapes are an error (Express answers 400 for them).
std::optional<std::string> PercentDecode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      if (s[i] == '\0') return std::nullopt;  // a raw NUL is as invalid as an encoded one
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size()) return std::nullopt;
    const int hi = HexValue(s[i + 1]);
    const int lo = HexValue(s[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    const char c = static_cast<char>(hi * 16 + lo);
    if (c == '\0') return std::nullopt;
    out += c;
    i += 2;
  }
  if (!text::IsValidUtf8(out)) return std::nullopt;  // decodeURIComponent rejects lone surrogates too
  return out;
}

// A value that does not decode (a malformed escape, a NUL, bytes that are not UTF-8) is kept as nullopt, so
// that a route reading it refuses the request (ApiRequest::Query) rather than answering as if it had not been
// given; a key that does not decode names no parameter any route reads.
std::vector<std::pair<std::string, std::optional<std::string>>> ParseQuery(std::string_view q) {
  std::vector<std::pair<std::string, std::optional<std::string>>> out;
  while (!q.empty()) {
    auto amp = q.find('&');
    std::string_view part = q.substr(0, amp);
    q = amp == std::string_view::npos ? std::string_view() : q.substr(amp + 1);
    if (part.empty()) continue;
    auto eq = part.find('=');
    std::string key(part.substr(0, eq));
    std::string value(eq == std::string_view::npos ? std::string_view() : part.substr(eq + 1));
    std::replace(key.begin(), key.end(), '+', ' ');
    std::replace(value.begin(), value.end(), '+', ' ');
    auto k = PercentDecode(key);
    if (k) out.emplace_back(std::move(*k), PercentDecode(value));
  }
  return out;
}

bool IsLoopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1" || host.starts_with("127.");
}

// Set on the listen thread while it refuses a connection beyond the bound (see ConnectionThreads).
thread_local bool t_refuse_connection = false;

// httplib serves each connection on one thread from start to close; its default pool of 8 threads let 8 slow
// or idle clients stop the API, probes too. This queue gives every connection a thread of its own, up to
// `max` at once; a connection beyond that is refused at once with a 503 on the listen thread (no thread, no
// read), so a crowd of clients costs idle threads up to a bound and then a clear answer (docs/reliability.md,
// "Threat model").
class ConnectionThreads : public httplib::TaskQueue {
 public:
  explicit ConnectionThreads(std::size_t max) : state_(std::make_shared<State>()) { state_->max = max; }

  void enqueue(std::function<void()> fn) override {
    auto serve = std::make_shared<std::function<void()>>(std::move(fn));
    {
      std::lock_guard lock(state_->mu);
      if (state_->active < state_->max) {
        ++state_->active;
        try {
          // The thread holds the state, not this queue: it may still be unlocking after shutdown() has
          // returned.
          std::thread([state = state_, serve] {
            (*serve)();
            std::lock_guard held(state->mu);
            --state->active;
            state->idle.notify_all();
          }).detach();
          return;
        } catch (const std::system_error&) {
          --state_->active;  // no thread to be had (a resource limit): refused like one beyond the bound
        }
      }
    }
    t_refuse_connection = true;
    (*serve)();
    t_refuse_connection = false;
  }

  // Called by httplib once its listen loop has ended: waits for every connection to close.
  void shutdown() override {
    std::unique_lock lock(state_->mu);
    state_->idle.wait(lock, [&] { return state_->active == 0; });
  }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable idle;
    std::size_t active = 0;
    std::size_t max = 0;
  };
  std::shared_ptr<State> state_;
};

// A request's head (request line and header fields) as octop reads it before httplib parses it: httplib 0.11
// bounds each line (8 KiB) and each read (the read timeout), but neither the number of fields nor the time a
// client may take to send them (docs/reliability.md, "Threat model").
struct HeadLimits {
  std::size_t max_bytes = 64 * 1024;
  std::size_t max_fields = 100;
  std::chrono::milliseconds deadline{10000};  // from the head's first byte to its end
  std::chrono::milliseconds idle{5000};       // waiting for a request to begin
};

enum class HeadResult { kReady, kClosed, kTooLarge, kTooManyFields, kTimedOut };

// The connection's socket, with a buffer in front: the head is read (bounded) into the buffer, and httplib
// then reads it from there before reading on from the socket. Bytes of a pipelined request stay buffered for
// the next round.
class BufferedSocketStream final : public httplib::Stream {
 public:
  BufferedSocketStream(int sock, std::chrono::milliseconds read_timeout,
                       std::chrono::milliseconds write_timeout)
      : sock_(sock), read_timeout_(read_timeout), write_timeout_(write_timeout) {}

  bool is_readable() const override { return pos_ < buffer_.size() || Poll(POLLIN, read_timeout_); }
  bool is_writable() const override { return Poll(POLLOUT, write_timeout_); }

  ssize_t read(char* ptr, size_t size) override {
    if (pos_ < buffer_.size()) {
      const std::size_t n = std::min(size, buffer_.size() - pos_);
      std::memcpy(ptr, buffer_.data() + pos_, n);
      pos_ += n;
      return static_cast<ssize_t>(n);
    }
    if (!Poll(POLLIN, read_timeout_)) return -1;
    return Recv(ptr, size);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!Poll(POLLOUT, write_timeout_)) return -1;
    ssize_t n;
    do {
      n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { Address(true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { Address(false, ip, port); }
  socket_t socket() const override { return sock_; }

  // Reads until the buffer holds a whole head, within `limits`; `stopping` says the server is closing.
  HeadResult ReadHead(const HeadLimits& limits, const std::function<bool()>& stopping) {
    buffer_.erase(0, pos_);
    pos_ = 0;
    const auto slice = std::chrono::milliseconds(100);  // how soon a stopping server is noticed
    const auto idle_until = std::chrono::steady_clock::now() + limits.idle;
    while (buffer_.empty()) {
      if (stopping() || std::chrono::steady_clock::now() >= idle_until) return HeadResult::kClosed;
      if (!Poll(POLLIN, slice)) continue;
      if (!Fill()) return HeadResult::kClosed;
    }
    const auto deadline = std::chrono::steady_clock::now() + limits.deadline;
    std::size_t scanned = 0;
    std::size_t fields = 0;
    while (true) {
      // Count the lines seen so far; the head ends at the first empty one.
      for (std::size_t eol; (eol = buffer_.find("\r\n", scanned)) != std::string::npos; scanned = eol + 2) {
        if (eol + 2 > limits.max_bytes) return HeadResult::kTooLarge;
        if (eol == scanned && scanned > 0) return HeadResult::kReady;
        if (scanned > 0 && ++fields > limits.max_fields) return HeadResult::kTooManyFields;
      }
      if (buffer_.size() > limits.max_bytes) return HeadResult::kTooLarge;
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) return HeadResult::kTimedOut;
      if (stopping()) return HeadResult::kClosed;
      if (!Poll(POLLIN, std::min<std::chrono::milliseconds>(
                            slice, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now)))) {
        continue;
      }
      if (!Fill()) return HeadResult::kClosed;
    }
  }

 private:
  bool Poll(short events, std::chrono::milliseconds timeout) const {
    pollfd p{sock_, events, 0};
    int n;
    do {
      n = ::poll(&p, 1, static_cast<int>(timeout.count()));
    } while (n < 0 && errno == EINTR);
    return n > 0 && (p.revents & (events | POLLHUP | POLLERR)) != 0;
  }
  ssize_t Recv(char* ptr, std::size_t size) {
    ssize_t n;
    do {
      n = ::recv(sock_, ptr, size, 0);
    } while (n < 0 && errno == EINTR);
    return n;
  }
  // Appends what the socket has; false at the end of the stream or on an error.
  bool Fill() {
    char chunk[16 * 1024];
    const ssize_t n = Recv(chunk, sizeof chunk);
    if (n <= 0) return false;
    buffer_.append(chunk, static_cast<std::size_t>(n));
    return true;
  }
  void Address(bool peer, std::string& ip, int& port) const {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    auto* sa = reinterpret_cast<sockaddr*>(&addr);
    if ((peer ? ::getpeername(sock_, sa, &len) : ::getsockname(sock_, sa, &len)) != 0) return;
    char host[NI_MAXHOST];
    char service[NI_MAXSERV];
    if (::getnameinfo(sa, len, host, sizeof host, service, sizeof service, NI_NUMERICHOST | NI_NUMERICSERV) !=
        0)
      return;
    ip = host;
    port = std::atoi(service);
  }

  const int sock_;
  const std::chrono::milliseconds read_timeout_;
  const std::chrono::milliseconds write_timeout_;
  std::string buffer_;
  std::size_t pos_ = 0;  // the next byte httplib reads
};

// No page may sniff an answer into script or frame the dashboard (clickjacking): on every answer, the ones
// httplib writes and the ones the front writes itself.
const httplib::Headers& SecurityHeaders() {
  static const httplib::Headers headers{{"X-Content-Type-Options", "nosniff"},
                                        {"X-Frame-Options", "DENY"},
                                        {"Content-Security-Policy", "frame-ancestors 'none'"},
                                        {"Referrer-Policy", "no-referrer"}};
  return headers;
}

// An answer written by the front itself (a connection refused, a head refused), JSON in Backstage's error
// shape, after which the connection closes.
std::string FrontAnswer(int status, const char* reason, const Status& error) {
  OrderedJson body = ErrorBody(error, "", "");
  body["response"]["statusCode"] = status;
  const std::string text = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string answer =
      "HTTP/1.1 " + std::to_string(status) + " " + reason +
      "\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: " + std::to_string(text.size()) +
      "\r\nConnection: close\r\n";
  for (const auto& [name, value] : SecurityHeaders()) answer += name + ": " + value + "\r\n";
  if (status == 503) answer += "Retry-After: 1\r\n";
  return answer + "\r\n" + text;
}

// httplib's server with octop's own connection loop: each request's head is read within HeadLimits before
// httplib parses it (process_request, which httplib keeps for subclasses), and connections beyond the bound
// are answered 503 (ConnectionThreads).
class BoundedServer final : public httplib::Server {
 public:
  explicit BoundedServer(HeadLimits limits) : limits_(limits) {}

 private:
  bool process_and_close_socket(socket_t sock) override {
    bool ret = true;
    if (t_refuse_connection) {
      // On the listen thread: never wait for this client. An answer the socket cannot take at once is
      // dropped.
      const std::string answer = FrontAnswer(503, "Service Unavailable",
                                             UnavailableError("Too many connections; try again shortly"));
      (void)::send(sock, answer.data(), answer.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      ret = false;
    } else {
      BufferedSocketStream strm(sock, std::chrono::seconds(read_timeout_sec_),
                                std::chrono::seconds(write_timeout_sec_));
      const auto stopping = [this] { return svr_sock_ == INVALID_SOCKET; };
      for (std::size_t left = keep_alive_max_count_; left > 0 && !stopping(); --left) {
        const HeadResult head = strm.ReadHead(limits_, stopping);
        if (head == HeadResult::kClosed) break;
        if (head != HeadResult::kReady) {
          const std::string answer =
              head == HeadResult::kTimedOut
                  ? FrontAnswer(408, "Request Timeout",
                                InvalidArgumentError("The request's header fields took longer than allowed"))
                  : FrontAnswer(
                        431, "Request Header Fields Too Large",
                        InvalidArgumentError(head == HeadResult::kTooLarge
                                                 ? "The request's header fields are larger than allowed"
                                                 : "The request has more header fields than allowed"));
          (void)strm.write(answer.data(), answer.size());
          ret = false;
          break;
        }
        bool connection_closed = false;
        ret = process_request(strm, left == 1, connection_closed, nullptr);
        if (!ret || connection_closed) break;
      }
    }
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
    return ret;
  }

  const HeadLimits limits_;
};

// cpp-httplib 0.11 listens with a backlog of 5 (a compile-time constant of the packaged library), so a burst
// of connections overflows it and the clients wait for SYN retransmits (1 s, 3 s, ...). listen() may be
// called again on a listening socket to change its backlog: find ours among this process's descriptors.
void WidenListenBacklog(int port) {
  DIR* fds = ::opendir("/proc/self/fd");
  if (fds == nullptr) return;
  while (const dirent* entry = ::readdir(fds)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0') continue;
    int listening = 0;
    socklen_t len = sizeof listening;
    if (::getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening)
      continue;
    sockaddr_storage addr{};
    socklen_t addr_len = sizeof addr;
    if (::getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&addr), &addr_len) != 0) continue;
    const int bound = addr.ss_family == AF_INET    ? ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port)
                      : addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                                   : -1;
    if (bound == port) ::listen(static_cast<int>(fd), SOMAXCONN);
  }
  ::closedir(fds);
}

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// The host of a Host header value ("name:port", "[::1]:port"), lower-cased, without the port.
std::string HostName(std::string_view host) {
  if (host.starts_with('[')) {
    const auto close = host.find(']');
    return Lower(host.substr(0, close == std::string_view::npos ? host.size() : close + 1));
  }
  return Lower(host.substr(0, host.find(':')));
}

bool IsIpLiteral(std::string_view name) {
  if (name.starts_with('[')) return name.ends_with(']') && name.size() > 2;
  int dots = 0;
  for (char c : name) {
    if (c == '.') {
      ++dots;
    } else if (c < '0' || c > '9') {
      return false;
    }
  }
  return dots == 3;
}

// The media type of a Content-Type value, lower-cased, without parameters or spaces.
std::string MediaType(std::string_view content_type) {
  std::string_view type = content_type.substr(0, content_type.find(';'));
  while (!type.empty() && (type.back() == ' ' || type.back() == '\t')) type.remove_suffix(1);
  while (!type.empty() && (type.front() == ' ' || type.front() == '\t')) type.remove_prefix(1);
  return Lower(type);
}

// An IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT").
std::string HttpDate(WallTime t) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  ::gmtime_r(&seconds, &tm);
  static constexpr const char* kDays[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                            "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  char buf[40];
  std::snprintf(buf, sizeof buf, "%s, %02d %s %04d %02d:%02d:%02d GMT", kDays[tm.tm_wday % 7],
                tm.tm_mday % 100, kMonths[tm.tm_mon % 12], (tm.tm_year + 1900) % 10000, tm.tm_hour % 100,
                tm.tm_min % 100, tm.tm_sec % 100);
  return buf;
}

}  // namespace

Status CheckBrowserSafety(const RequestOrigin& r, const std::vector<std::string>& allowed_hosts) {
  // Probes and scrapers address a node by whatever name their platform gives it, and those answers hold
  // nothing a rebinding page could use against the node.
  const bool exempt_path = r.path == "/healthz" || r.path == "/readyz" || r.path == "/metrics";
  if (!r.host.empty() && !exempt_path) {
    const std::string name = HostName(r.host);
    const bool allowed = IsIpLiteral(name) || name == "localhost" || name.ends_with(".localhost") ||
                         std::any_of(allowed_hosts.begin(), allowed_hosts.end(),
                                     [&](const std::string& h) { return Lower(h) == name; });
    if (!allowed) {
      return PermissionDeniedError("Host '" + std::string(r.host.substr(0, 255)) +
                                   "' is not a name of this server; add it to http.allowedHosts");
    }
  }
  if (!r.content_encoding.empty() && Lower(r.content_encoding) != "identity") {
    return InvalidArgumentError("Content-Encoding '" + std::string(r.content_encoding.substr(0, 64)) +
                                "' is not accepted; send the body uncompressed");
  }
  const bool safe_method = r.method == "GET" || r.method == "HEAD" || r.method == "OPTIONS";
  if (safe_method) return Status::Ok();
  // Browsers send Origin with every cross-origin request that changes state, and Sec-Fetch-Site with every
  // request; command-line clients send neither.
  if (!r.origin.empty()) {
    const std::string_view origin = r.origin;
    const auto scheme_end = origin.find("://");
    const bool same = scheme_end != std::string_view::npos && !r.host.empty() &&
                      Lower(origin.substr(scheme_end + 3)) == Lower(r.host);
    if (!same) {
      return PermissionDeniedError("Cross-origin request from '" + std::string(origin.substr(0, 255)) +
                                   "' refused");
    }
  }
  if (!r.sec_fetch_site.empty() && r.sec_fetch_site != "same-origin" && r.sec_fetch_site != "none") {
    return PermissionDeniedError(
        "Cross-site request refused (Sec-Fetch-Site: " + std::string(r.sec_fetch_site.substr(0, 32)) + ")");
  }
  if (r.has_body) {
    const std::string type = MediaType(r.content_type);
    if (type != "application/json" && !(type.starts_with("application/") && type.ends_with("+json"))) {
      return InvalidArgumentError("A request body must be sent as Content-Type: application/json, got '" +
                                  std::string(r.content_type.substr(0, 64)) + "'");
    }
  }
  return Status::Ok();
}

bool SecretsEqual(std::string_view given, std::string_view expected) {
  // Every byte of `expected` is compared whatever `given` holds, so timing reveals neither content nor
  // prefix.
  unsigned char diff = given.size() == expected.size() ? 0 : 1;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const char g = i < given.size() ? given[i] : '\0';
    diff = static_cast<unsigned char>(
        diff | (static_cast<unsigned char>(g) ^ static_cast<unsigned char>(expected[i])));
  }
  return diff == 0;
}

Result<std::optional<std::string>> ApiRequest::Query(std::string_view name) const {
  for (const auto& [k, v] : query) {
    if (k != name) continue;
    if (!v) {
      return InvalidArgumentError("Query parameter '" + k + "' is not valid percent-encoded UTF-8 text");
    }
    return v;
  }
  return std::optional<std::string>();
}

ApiResponse ApiResponse::Json(const std::string& json, int status) {
  ApiResponse r;
  r.status = status;
  r.body = json;
  return r;
}

std::optional<std::vector<std::string>> ApiServer::SplitPath(std::string_view target) {
  std::string_view path = target.substr(0, target.find('?'));
  std::vector<std::string> segments;
  if (path.empty() || path.front() != '/') return std::nullopt;
  path.remove_prefix(1);
  while (true) {
    auto slash = path.find('/');
    auto decoded = PercentDecode(path.substr(0, slash));
    if (!decoded) return std::nullopt;
    segments.push_back(std::move(*decoded));
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  if (segments.size() > 1 && segments.back().empty()) segments.pop_back();  // a trailing '/' is ignored
  return segments;
}

class ApiServer::Impl {
 public:
  explicit Impl(HeadLimits limits) : server(limits) {}
  BoundedServer server;
  std::atomic<bool> listen_done{false};  // the listen thread has returned
};

ApiServer::ApiServer(Scheduler& scheduler, ApiServerOptions options)
    : scheduler_(scheduler),
      options_(std::move(options)),
      impl_(std::make_unique<Impl>(HeadLimits{.deadline = options_.header_timeout})) {
  AddSchedulerRoutes();
}

ApiServer::~ApiServer() { Stop(); }

void ApiServer::AddRoute(std::string method, std::string_view pattern, ApiHandler handler) {
  Route route{.method = std::move(method), .segments = {}, .handler = std::move(handler)};
  auto segments = SplitPath(pattern);
  if (segments) route.segments = std::move(*segments);
  routes_.push_back(std::move(route));
}

void ApiServer::AddSchedulerRoutes() {
  auto plugin_of = [this](const std::string& id) -> Result<PluginScheduler*> {
    PluginScheduler* p = scheduler_.FindPlugin(id);
    if (p == nullptr) return NotFoundError("No plugin '" + id + "' on this node");
    return p;
  };
  AddRoute("GET", "/api/:plugin/.backstage/scheduler/v1/tasks",
           [plugin_of](const ApiRequest& req) -> Result<ApiResponse> {
             OCTOP_ASSIGN_OR_RETURN(PluginScheduler * plugin, plugin_of(req.params[0]));
             OCTOP_ASSIGN_OR_RETURN(std::vector<TaskStateEntry> entries, plugin->GetTaskStates());
             return ApiResponse::Json(
                 TasksResponseToJson(entries).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
           });
  for (const char* action : {"trigger", "cancel"}) {
    const bool trigger = std::string_view(action) == "trigger";
    AddRoute("POST", std::string("/api/:plugin/.backstage/scheduler/v1/tasks/:id/") + action,
             [plugin_of, trigger](const ApiRequest& req) -> Result<ApiResponse> {
               OCTOP_ASSIGN_OR_RETURN(PluginScheduler * plugin, plugin_of(req.params[0]));
               Status s = trigger ? plugin->TriggerTask(req.params[1]) : plugin->CancelTask(req.params[1]);
               if (!s.ok()) return s;
               ApiResponse r;
               r.content_type =
                   "text/plain; charset=utf-8";  // Express's res.status(200).end(): an empty body
               return r;
             });
  }
  AddRoute("GET", "/api/octop/v1/plugins", [this](const ApiRequest&) -> Result<ApiResponse> {
    OrderedJson j{{"plugins", scheduler_.PluginIds()}};
    return ApiResponse::Json(j.dump());
  });
  AddRoute("GET", "/healthz",
           [](const ApiRequest&) -> Result<ApiResponse> { return ApiResponse::Json(R"({"status":"ok"})"); });
  AddRoute("GET", "/readyz", [this](const ApiRequest&) -> Result<ApiResponse> {
    if (options_.readiness) OCTOP_RETURN_IF_ERROR(options_.readiness());
    return ApiResponse::Json(R"({"status":"ready"})");
  });
  AddRoute("GET", "/metrics", [this](const ApiRequest&) -> Result<ApiResponse> {
    std::vector<prometheus::MetricFamily> families;
    std::vector<std::shared_ptr<prometheus::Registry>> registries{scheduler_.metrics_registry()};
    registries.insert(registries.end(), options_.extra_registries.begin(), options_.extra_registries.end());
    for (const auto& registry : registries) {
      if (!registry) continue;
      auto collected = registry->Collect();
      families.insert(families.end(), collected.begin(), collected.end());
    }
    ApiResponse r;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = prometheus::TextSerializer().Serialize(families);
    return r;
  });
}

Status ApiServer::Start() {
  httplib::Server& server = impl_->server;
  server.set_payload_max_length(options_.max_body_bytes);
  server.new_task_queue = [max = options_.max_connections] { return new ConnectionThreads(max); };
  server.set_read_timeout(10, 0);
  server.set_write_timeout(10, 0);
  server.set_default_headers(SecurityHeaders());
  if (!options_.web_root.empty() && std::filesystem::is_directory(options_.web_root)) {
    server.set_mount_point("/", options_.web_root);
  }
  // Every answer carries its Date, as Express's do (RFC 9110 requires it of a server with a clock).
  server.set_post_routing_handler([](const httplib::Request&, httplib::Response& res) {
    res.set_header("Date", HttpDate(Clock::Real().WallNow()));
  });
  // `http_status` overrides the table's status (413, 405, 414...) in the response and in the body alike, so
  // the body's response.statusCode never contradicts the status line.
  auto send_error = [](httplib::Response& res, const Status& status, const std::string& method,
                       const std::string& target, int http_status = 0) {
    res.status = http_status != 0 ? http_status : HttpStatus(status.code());
    OrderedJson body = ErrorBody(status, method, target);
    body["response"]["statusCode"] = res.status;
    res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                    "application/json; charset=utf-8");
  };
  // Catch-all handlers (rather than a pre-routing hook) so httplib has read and size-checked the body first.
  auto dispatch = [this, send_error](const httplib::Request& req, httplib::Response& res) {
    auto segments = SplitPath(req.target);
    if (!segments) {
      send_error(res, InvalidArgumentError("Malformed URL encoding in '" + req.target + "'"), req.method,
                 req.target);
      return;
    }
    bool path_matched = false;
    for (const Route& route : routes_) {
      if (route.segments.size() != segments->size()) continue;
      std::vector<std::string> params;
      bool match = true;
      for (std::size_t i = 0; i < route.segments.size() && match; ++i) {
        if (route.segments[i].starts_with(':')) {
          params.push_back((*segments)[i]);
        } else {
          match = route.segments[i] == (*segments)[i];
        }
      }
      if (!match) continue;
      path_matched = true;
      if (route.method != req.method && !(req.method == "HEAD" && route.method == "GET")) continue;
      const bool probe = req.path == "/healthz" || req.path == "/readyz";
      const bool metrics = req.path == "/metrics";
      const bool needs_token =
          options_.token.has_value() &&
          (req.method == "POST" || (metrics ? options_.protect_metrics : !probe && options_.protect_reads));
      if (needs_token) {
        const std::string auth = req.get_header_value("Authorization");
        constexpr std::string_view kBearer = "Bearer ";
        const bool ok = auth.starts_with(kBearer) &&
                        SecretsEqual(std::string_view(auth).substr(kBearer.size()), *options_.token);
        if (!ok) {
          res.set_header("WWW-Authenticate", "Bearer");
          send_error(res, UnauthenticatedError("Missing or invalid bearer token"), req.method, req.target);
          return;
        }
      }
      const auto query_start = req.target.find('?');
      ApiRequest api{.method = req.method,
                     .target = req.target,
                     .params = std::move(params),
                     .query = ParseQuery(query_start == std::string::npos
                                             ? std::string_view()
                                             : std::string_view(req.target).substr(query_start + 1)),
                     .body = req.body,
                     .content_type = req.get_header_value("Content-Type")};
      Result<ApiResponse> result = InternalError("handler did not run");
      try {
        result = route.handler(api);
      } catch (const std::exception& e) {
        result = InternalError(std::string("unexpected error: ") + e.what());
      }
      if (!result.ok()) {
        send_error(res, result.status(), req.method, req.target);
      } else {
        res.status = result->status;
        res.set_content(result->body, result->content_type);
      }
      return;
    }
    if (path_matched) {
      send_error(res, InvalidArgumentError("Method " + req.method + " is not allowed on " + req.target),
                 req.method, req.target, 405);
      return;
    }
    send_error(res, NotFoundError("Not found: " + req.method + " " + req.target), req.method, req.target);
  };
  // httplib answers 400 to a POST with neither Content-Length nor chunked encoding (what `curl -X POST url`
  // sends); Express accepts it as an empty body, so such requests are dispatched before httplib reads a body.
  server.set_pre_routing_handler([this, dispatch, send_error](const httplib::Request& req,
                                                              httplib::Response& res) {
    const bool has_body_framing = req.has_header("Content-Length") || req.has_header("Transfer-Encoding");
    // Request smuggling shapes (two lengths, or a length beside chunking) and a target the router would
    // refuse (a NUL, a malformed escape) are refused here, for the static files too.
    Status framing = Status::Ok();
    if (req.get_header_value_count("Content-Length") > 1 ||
        (req.has_header("Content-Length") && req.has_header("Transfer-Encoding")) ||
        req.get_header_value_count("Transfer-Encoding") > 1) {
      framing = InvalidArgumentError("Conflicting Content-Length and Transfer-Encoding headers");
    } else if (!SplitPath(req.target)) {
      framing = InvalidArgumentError("Malformed URL encoding in '" + req.target + "'");
    }
    if (!framing.ok()) {
      res.set_header("Connection", "close");
      send_error(res, framing, req.method, req.target);
      return httplib::Server::HandlerResponse::Handled;
    }
    // Checked before httplib reads (and would decompress) the body.
    const std::string host = req.get_header_value("Host");
    const std::string origin = req.get_header_value("Origin");
    const std::string fetch_site = req.get_header_value("Sec-Fetch-Site");
    const std::string content_type = req.get_header_value("Content-Type");
    const std::string encoding = req.get_header_value("Content-Encoding");
    const std::string length = req.get_header_value("Content-Length");
    const bool has_body = req.has_header("Transfer-Encoding") ||
                          (!length.empty() && length.find_first_not_of('0') != std::string::npos);
    const Status safe =
        CheckBrowserSafety({.method = req.method,
                            .path = std::string_view(req.target).substr(0, req.target.find('?')),
                            .host = host,
                            .origin = origin,
                            .sec_fetch_site = fetch_site,
                            .content_type = content_type,
                            .content_encoding = encoding,
                            .has_body = has_body},
                           options_.allowed_hosts);
    if (!safe.ok()) {
      // The body, if any, is left unread: the connection cannot carry another request.
      res.set_header("Connection", "close");
      send_error(res, safe, req.method, req.target, safe.code() == StatusCode::kInvalidArgument ? 415 : 0);
      return httplib::Server::HandlerResponse::Handled;
    }
    if (has_body_framing || (req.method != "POST" && req.method != "PUT" && req.method != "PATCH")) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    dispatch(req, res);
    return httplib::Server::HandlerResponse::Handled;
  });
  server.Get(".*", dispatch);
  server.Post(".*", dispatch);
  server.Put(".*", dispatch);
  server.Delete(".*", dispatch);
  server.Patch(".*", dispatch);
  server.Options(".*", dispatch);
  server.set_error_handler([send_error](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    // httplib's own refusals (413 body too large, 414 URI too long, 400 malformed request...) get the JSON
    // error shape too; every 4xx is the client's input, so it is an InputError, not an internal one.
    Status status = res.status == 413   ? InvalidArgumentError("Request body is larger than allowed")
                    : res.status == 414 ? InvalidArgumentError("Request URI is longer than allowed")
                    : res.status == 404 ? NotFoundError("Not found: " + req.method + " " + req.target)
                    : res.status >= 400 && res.status < 500
                        ? InvalidArgumentError("Bad request (HTTP " + std::to_string(res.status) + ")")
                        : InternalError("HTTP " + std::to_string(res.status));
    send_error(res, status, req.method, req.target, res.status);
  });
  server.set_exception_handler(
      [send_error](const httplib::Request& req, httplib::Response& res, std::exception_ptr) {
        send_error(res, InternalError("unexpected error"), req.method, req.target);
      });

  if (!IsLoopback(options_.host) && !options_.token && options_.warn) {
    options_.warn(
        "listening on " + options_.host +
        " beyond loopback without a bearer token: anyone who can reach it can trigger and cancel tasks");
  }
  if (options_.port == 0) {
    port_ = server.bind_to_any_port(options_.host);
    if (port_ < 0) port_ = 0;
  } else {
    port_ = server.bind_to_port(options_.host, options_.port) ? options_.port : 0;
  }
  if (port_ <= 0) {
    return UnavailableError("cannot listen on " + options_.host + ":" + std::to_string(options_.port));
  }
  WidenListenBacklog(port_);
  // bind_to_port already listens, so connections queue in the backlog until the thread accepts them.
  thread_ = std::thread([&server, impl = impl_.get()] {
    server.listen_after_bind();
    impl->listen_done = true;
  });
  return Status::Ok();
}

void ApiServer::Stop() {
  if (thread_.joinable()) {
    // httplib's stop() does nothing until the listen loop has begun: a Stop() right after Start() would
    // otherwise leave the loop running and the join hanging.
    while (!impl_->server.is_running() && !impl_->listen_done.load()) std::this_thread::yield();
    impl_->server.stop();
    thread_.join();
  }
}

}  // namespace octop::http
