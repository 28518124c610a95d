// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: raw HTTP requests to our two servers, the supervisor's ack endpoint
// (src/serve/ack_routes.cpp) and the agent's API (src/serve/agent_api.cpp), both behind the shared
// pre-routing checks of src/serve/http_server.cpp. Both are started once, on 127.0.0.1 port 0
// with a bearer token; the agent watches one stalled job with an open incident, so an ack can
// succeed. Byte 0 picks the server (even: ack endpoint, odd: agent API); the rest is sent as
// is on a fresh connection, the write side is shut, and the answer is read to the end.
//
// Properties: an answer is one well-formed HTTP/1.1 response (after any 100 Continue) whose
// body matches its Content-Length; nothing is ever acked, and no ack answers 2xx, unless the
// request carries "Bearer <token>"; and for a plain, well-formed request (simple_request())
// the status is what the rules say: 411 for a chunked body, 403 for a foreign Host or (on
// requests that change something) Origin, 401 without the token, then 405 with the right Allow
// for a wrong method on a known path.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/require.h"
#include "fuzz/scratch.h"
#include "src/agent/agent.h"
#include "src/common/clock.h"
#include "src/common/host.h"
#include "src/common/log.h"
#include "src/contract/beacon_writer.h"
#include "src/serve/ack_routes.h"
#include "src/serve/agent_api.h"

namespace {

namespace fs = std::filesystem;

constexpr std::string_view kToken = "fuzz-token-5c1d";
constexpr const char* kJob = "fuzz-job";

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string percent_decoded(std::string_view s);

// ---- The servers, started once ------------------------------------------------------------

struct Servers {
  std::atomic<uint64_t> acks{0};  // on_ack calls of the ack endpoint
  std::unique_ptr<stepwatch::serve::AckServer> ack;
  fs::path dir;
  std::unique_ptr<stepwatch::contract::BeaconWriter> beacon;
  std::unique_ptr<stepwatch::agent::Agent> agent;
  std::unique_ptr<stepwatch::serve::ApiServer> api;
};

Servers& servers() {
  static Servers* s = [] {
    stepwatch::set_log_level(
        stepwatch::LogLevel::kError);  // 401s and 403s are the normal case here
    auto* s = new Servers;             // never destroyed; its servers are stopped at exit
    stepwatch::serve::AckServerConfig ac;
    ac.bearer_token = std::string(kToken);
    ac.threads = 8;
    ac.on_ack = [s](const stepwatch::serve::AckRequest& req) -> stepwatch::serve::AckResult {
      ++s->acks;
      stepwatch::store::Incident inc;
      inc.id = 1;
      inc.job = req.job;
      inc.state = "stalled";
      return std::optional<stepwatch::store::Incident>(inc);
    };
    ac.status = [] { return std::string(R"({"state": "healthy"})"); };
    s->ack = std::make_unique<stepwatch::serve::AckServer>(ac);
    FUZZ_REQUIRE(s->ack->start().ok());

    // One job that stalls: a step a second expected, none for ten seconds.
    s->dir = stepwatch::fuzz::scratch_path("http");
    fs::create_directories(s->dir / "beacons");
    fs::create_directories(s->dir / "specs");
    std::ofstream(s->dir / "specs" / (std::string(kJob) + ".toml"))
        << "expected_interval = \"1s\"\ngrace_intervals = 2\n";
    stepwatch::contract::Identity id;
    id.dir = (s->dir / "beacons").string();
    id.job = kJob;
    id.host = stepwatch::short_hostname();
    auto w = stepwatch::contract::BeaconWriter::create(id);
    FUZZ_REQUIRE(w.ok());
    s->beacon = std::move(*w);
    for (int i = 1; i <= 8; ++i) s->beacon->step(i);
    stepwatch::agent::AgentConfig config;
    config.beacon_roots = {id.dir};
    config.state_dir = (s->dir / "state").string();
    config.specs_dir = (s->dir / "specs").string();
    config.gpu = false;
    auto a = stepwatch::agent::Agent::open(config);
    FUZZ_REQUIRE(a.ok());
    s->agent = std::move(*a);
    stepwatch::Stamp t0 = stepwatch::SystemClock::instance().now();
    auto at = [&](int64_t ms) {
      return stepwatch::Stamp{t0.wall_ns + ms * stepwatch::kNsPerMs,
                              t0.mono_ns + ms * stepwatch::kNsPerMs};
    };
    FUZZ_REQUIRE(s->agent->poll_once(at(500)).ok());
    FUZZ_REQUIRE(s->agent->poll_once(at(10'000)).ok());
    stepwatch::serve::ApiConfig api;
    api.port = 0;
    api.bearer_token = std::string(kToken);
    api.threads = 8;
    s->api = std::make_unique<stepwatch::serve::ApiServer>(*s->agent, api);
    FUZZ_REQUIRE(s->api->start().ok());
    return s;
  }();
  return *s;
}

// Successful acks of the agent's job (an ack the agent took, whatever the answer said).
uint64_t agent_acks(const Servers& s) {
  auto job = s.agent->job(kJob);
  FUZZ_REQUIRE(job.has_value());
  auto it = job->actions_total.find("ack");
  return it == job->actions_total.end() ? 0 : it->second;
}

// ---- One exchange ---------------------------------------------------------------------------

// How soon an answer is due, by the framing httplib 0.11 reads (a request line and header
// lines ending in CRLF, a blank CRLF line, then a body only for POST, PUT, PATCH, PRI and
// DELETE: Content-Length bytes, or up to the end of the stream without one). The write side
// is never shut: httplib drops its answer once it sees the end of the stream.
enum class Due {
  kNothing,  // the headers are not complete: nothing is answered before more bytes come
  kMaybe,    // a body is still missing: only the pre-routing checks may answer now
  kAnswer,   // everything the server reads is there: an answer must come
};

Due due(std::string_view r) {
  size_t nl = r.find('\n');
  if (nl == std::string_view::npos) return Due::kNothing;
  std::string_view request_line = r.substr(0, nl + 1);
  r.remove_prefix(nl + 1);
  std::optional<uint64_t> length;
  std::optional<bool> chunked;
  for (;;) {
    nl = r.find('\n');
    if (nl == std::string_view::npos) return Due::kNothing;
    std::string_view line = r.substr(0, nl + 1);
    r.remove_prefix(nl + 1);
    if (line == "\r\n") break;
    size_t colon = line.find(':');
    if (colon == std::string_view::npos || !line.ends_with("\r\n")) continue;
    // httplib keeps a header only with a value left after trimming spaces and tabs.
    std::string_view raw = line.substr(colon + 1, line.size() - colon - 3);
    size_t b = raw.find_first_not_of(" \t"), e = raw.find_last_not_of(" \t");
    if (b == std::string_view::npos) continue;
    std::string name = lower(line.substr(0, colon));
    std::string value = percent_decoded(raw.substr(b, e - b + 1));
    value.resize(std::min(value.size(), value.find('\0')));  // httplib's value ends at a NUL
    if (name == "content-length" && !length) length = std::strtoull(value.c_str(), nullptr, 10);
    // Only the first of each counts, for httplib and for our check alike.
    if (name == "transfer-encoding" && !chunked)
      chunked = lower(value).find("chunked") != std::string::npos;
  }
  // The method as httplib splits the line: its first word, around spaces and tabs.
  std::string_view words = request_line.substr(0, request_line.find_last_not_of("\r\n") + 1);
  size_t start = std::min(words.size(), words.find_first_not_of(" \t"));
  std::string_view method = words.substr(start, words.find(' ', start) - start);
  method = method.substr(0, method.find_last_not_of(" \t") + 1);
  bool body = method == "POST" || method == "PUT" || method == "PATCH" || method == "PRI" ||
              method == "DELETE";
  if (!body || chunked.value_or(false))
    return Due::kAnswer;  // chunked: refused (411) before any body is read
  return length && *length <= r.size() ? Due::kAnswer : Due::kMaybe;
}

// This process's threads: the servers' connection threads come and go with the requests.
size_t thread_count() {
  size_t n = 0;
  std::error_code ec;
  for (auto it = fs::directory_iterator("/proc/self/task", ec);
       !ec && it != fs::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  return n;
}

// Waits (1 s at most) until the connection threads of this input are done, so that every input
// is judged alone and libFuzzer's leak check after it sees no request still in flight.
void wait_for_threads(size_t before) {
  for (int i = 0; i < 20'000 && thread_count() > before; ++i) ::usleep(50);
}

struct Exchange {
  std::string response;
  bool complete = false;  // read to the server's end of stream
};

// Connects to 127.0.0.1:port. A blocking connect that libFuzzer's timer signal (SIGALRM)
// interrupts goes on in the background: wait for it.
void connect_loopback(int fd, int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int err = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 ? 0 : errno;
  if (err == EINTR) {
    pollfd p{fd, POLLOUT, 0};
    int ready = 0;
    while ((ready = ::poll(&p, 1, 2000)) < 0 && errno == EINTR) {
    }
    socklen_t len = sizeof err;
    if (ready <= 0 || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = ETIMEDOUT;
  }
  if (err != 0) {
    std::string what = fmt::format("connect to 127.0.0.1:{}: {}", port, std::strerror(err));
    stepwatch::fuzz::violated(what.c_str(), __FILE__, __LINE__);
  }
}

Exchange exchange(int port, std::string_view request, Due when) {
  Exchange x;
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  FUZZ_REQUIRE(fd >= 0);
  timeval tv{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  connect_loopback(fd, port);
  while (!request.empty()) {
    ssize_t n = ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the server answered and closed before reading it all
    request.remove_prefix(static_cast<size_t>(n));
  }
  // The server closes once it has answered (one request per connection). Calls that the timer
  // signal interrupts are resumed with the time left.
  using Clock = std::chrono::steady_clock;
  auto deadline = Clock::now() + std::chrono::milliseconds(when == Due::kAnswer  ? 2000
                                                           : when == Due::kMaybe ? 5
                                                                                 : 0);
  char buf[16384];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    pollfd p{fd, POLLIN, 0};
    int ready = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(0, left.count())));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) break;
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) x.complete = true;
    if (n <= 0) break;
    x.response.append(buf, static_cast<size_t>(n));
    deadline = Clock::now() + std::chrono::seconds(2);  // the rest of an answer that has begun
  }
  // Closed with a reset: thousands of connections a second would otherwise fill the ephemeral
  // ports with TIME_WAIT, and a server still waiting for bytes stops at once.
  linger hard{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
  ::close(fd);
  return x;
}

// ---- The answer -----------------------------------------------------------------------------

struct Response {
  int status = 0;
  std::multimap<std::string, std::string> headers;  // names in lower case
  std::string body;
};

// Parses one HTTP/1.1 response, skipping 100 Continue; aborts when it is not well formed.
Response parse_response(std::string_view r) {
  for (;;) {
    FUZZ_REQUIRE(r.starts_with("HTTP/1.1 ") && r.size() >= 13);
    Response out;
    for (size_t i = 9; i < 12; ++i) FUZZ_REQUIRE(r[i] >= '0' && r[i] <= '9');
    out.status = (r[9] - '0') * 100 + (r[10] - '0') * 10 + (r[11] - '0');
    FUZZ_REQUIRE(out.status >= 100 && out.status <= 599 && r[12] == ' ');
    size_t eol = r.find("\r\n");
    FUZZ_REQUIRE(eol != std::string_view::npos);
    for (size_t i = 13; i < eol; ++i) FUZZ_REQUIRE(r[i] >= 0x20 && r[i] < 0x7f);
    size_t end = r.find("\r\n\r\n");
    FUZZ_REQUIRE(end != std::string_view::npos && end >= eol);
    std::string_view head = r.substr(eol + 2, end - eol);
    r.remove_prefix(end + 4);
    while (!head.empty()) {
      size_t nl = head.find("\r\n");
      std::string_view line = head.substr(0, nl);
      head.remove_prefix(nl + 2);
      size_t colon = line.find(": ");
      FUZZ_REQUIRE(colon != std::string_view::npos && colon > 0);
      out.headers.emplace(lower(line.substr(0, colon)), std::string(line.substr(colon + 2)));
    }
    if (out.status == 100) {
      FUZZ_REQUIRE(out.headers.empty());
      continue;
    }
    FUZZ_REQUIRE(out.status >= 200);
    auto cl = out.headers.find("content-length");
    if (cl != out.headers.end()) {
      FUZZ_REQUIRE(out.headers.count("content-length") == 1);
      // A HEAD answer says how long the body would be and sends none.
      FUZZ_REQUIRE(r.empty() || r.size() == std::stoul(cl->second));
    }
    out.body = std::string(r);
    return out;
  }
}

// ---- The request, as our rules read it ------------------------------------------------------

// httplib decodes %XX and %uXXXX in header values (detail::decode_url). Only ASCII matters
// here (the token is ASCII); other %u values stay as written.
std::string percent_decoded(std::string_view s) {
  auto hex = [&](size_t at, size_t digits) -> int {
    int v = 0;
    for (size_t i = at; i < at + digits; ++i) {
      char c = i < s.size() ? s[i] : '\0';
      int d = c >= '0' && c <= '9'   ? c - '0'
              : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                     : -1;
      if (d < 0) return -1;
      v = v * 16 + d;
    }
    return v;
  };
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 1 < s.size() && (s[i + 1] == 'u' || s[i + 1] == 'U')) {
      int v = hex(i + 2, 4);
      if (v >= 0 && v < 0x80) {
        out += static_cast<char>(v);
        i += 5;
        continue;
      }
    }
    if (int v = s[i] == '%' ? hex(i + 1, 2) : -1; v >= 0) {
      out += static_cast<char>(v);
      i += 2;
      continue;
    }
    out += s[i];
  }
  return out;
}

// Whether "Bearer <token>" (the scheme in any case) appears in the bytes at all: a request
// without it can never be authorized, however httplib reads it.
bool has_bearer(std::string_view bytes) {
  for (const std::string& b : {std::string(bytes), percent_decoded(bytes)}) {
    for (size_t at = b.find(kToken); at != std::string::npos; at = b.find(kToken, at + 1)) {
      if (at >= 7 && lower(std::string_view(b).substr(at - 7, 7)) == "bearer ") return true;
    }
  }
  return false;
}

struct SimpleRequest {
  bool partial = false;  // its body is not all there: the server waits for the rest
  std::string method;
  std::string path;
  std::multimap<std::string, std::string> headers;  // names in lower case
  size_t count(const char* name) const { return headers.count(name); }
  std::string get(const char* name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

// A request that every HTTP parser reads the same way: a known method, an origin-form target
// of plain printable ASCII, "Name: value" headers without escapes or odd spacing, and a body
// no longer than its Content-Length (shorter: partial). Anything else: nullopt (only the
// general properties apply).
std::optional<SimpleRequest> simple_request(std::string_view r) {
  SimpleRequest q;
  size_t eol = r.find("\r\n");
  if (eol == std::string_view::npos) return std::nullopt;
  std::string_view line = r.substr(0, eol);
  size_t sp1 = line.find(' ');
  size_t sp2 = line.rfind(' ');
  if (sp1 == std::string_view::npos || sp2 <= sp1 || line.substr(sp2 + 1) != "HTTP/1.1")
    return std::nullopt;
  q.method = std::string(line.substr(0, sp1));
  static const char* kMethods[] = {"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"};
  if (std::find(std::begin(kMethods), std::end(kMethods), q.method) == std::end(kMethods))
    return std::nullopt;
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  if (target.empty() || target.front() != '/' || target.size() > 1024) return std::nullopt;
  for (char c : target) {
    if (c <= 0x20 || c >= 0x7f || c == '%' || c == '#' || c == '\\' || c == '+')
      return std::nullopt;
  }
  // httplib refuses a target with two queries (400); one '?' at most keeps it simple.
  if (std::count(target.begin(), target.end(), '?') > 1) return std::nullopt;
  q.path = std::string(target.substr(0, target.find('?')));
  r.remove_prefix(eol + 2);
  for (int n = 0;; ++n) {
    eol = r.find("\r\n");
    if (eol == std::string_view::npos || n > 30) return std::nullopt;
    line = r.substr(0, eol);
    r.remove_prefix(eol + 2);
    if (line.empty()) break;
    size_t colon = line.find(": ");
    if (colon == std::string_view::npos || colon == 0 || line.size() > 1024) return std::nullopt;
    for (char c : line.substr(0, colon)) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') return std::nullopt;
    }
    std::string_view value = line.substr(colon + 2);
    if (value.empty() || value.front() == ' ' || value.back() == ' ') return std::nullopt;
    for (char c : value) {
      if (c < 0x20 || c >= 0x7f || c == '%') return std::nullopt;
    }
    q.headers.emplace(lower(line.substr(0, colon)), std::string(value));
  }
  // What httplib treats on its own before our rules run: 100-continue, keep-alive, ranges.
  for (const char* name : {"expect", "connection", "range"}) {
    if (q.count(name) > 0) return std::nullopt;
  }
  if (lower(q.get("content-type")).find("multipart") != std::string::npos) return std::nullopt;
  bool takes_body =
      q.method == "POST" || q.method == "PUT" || q.method == "PATCH" || q.method == "DELETE";
  if (q.count("transfer-encoding") == 0) {
    if (q.count("content-length") > 1) return std::nullopt;
    std::string cl = q.get("content-length");
    if (cl.empty()) {
      if (!r.empty()) return std::nullopt;
      q.partial = takes_body;  // read up to the end of the stream, which never comes
    } else {
      if (cl.size() > 7 || !std::all_of(cl.begin(), cl.end(), ::isdigit)) return std::nullopt;
      size_t length = std::stoul(cl);
      if (r.size() > length || (r.size() < length && !takes_body)) return std::nullopt;
      q.partial = r.size() < length;
    }
  } else if (q.count("content-length") > 0 ||
             lower(q.get("transfer-encoding")).find("chunked") == std::string::npos) {
    return std::nullopt;
  }
  return q;
}

// src/serve/http_server.cpp's host_of: "127.0.0.1:9465" -> "127.0.0.1", "[::1]:1" -> "[::1]".
std::string host_of(const std::string& authority) {
  if (!authority.empty() && authority.front() == '[') {
    size_t end = authority.find(']');
    return end == std::string::npos ? authority : authority.substr(0, end + 1);
  }
  return authority.substr(0, authority.find(':'));
}

bool loopback_origin(const std::string& origin) {
  for (std::string_view scheme : {"http://", "https://"}) {
    if (origin.starts_with(scheme))
      return stepwatch::is_loopback_literal(host_of(origin.substr(scheme.size())));
  }
  return false;
}

bool bearer_ok(const SimpleRequest& q) {
  if (q.count("authorization") != 1) return false;
  std::string auth = q.get("authorization");
  return auth.size() > 7 && lower(auth.substr(0, 7)) == "bearer " && auth.substr(7) == kToken;
}

// The method a known path takes ("" for an unknown path), per docs/api.md and ack_server.h.
std::string allowed_method(bool agent, const std::string& path) {
  if (!agent) {
    if (path == "/ack") return "POST";
    return path == "/status" || path == "/healthz" ? "GET" : "";
  }
  for (const char* p : {"/api/v1/jobs", "/api/v1/incidents", "/healthz", "/", "/metrics"}) {
    if (path == p) return "GET";
  }
  constexpr std::string_view kJobs = "/api/v1/jobs/";
  if (!path.starts_with(kJobs)) return "";
  std::string_view id = std::string_view(path).substr(kJobs.size());
  bool ack = id.ends_with("/ack");
  if (ack) id.remove_suffix(4);
  if (id.empty() || id.size() > 63) return "";
  for (char c : id) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') return "";
  }
  return ack ? "POST" : "GET";
}

// What the pre-routing checks answer, in their order; nullopt: they let the request through.
std::optional<int> refused(const SimpleRequest& q) {
  bool reads = q.method == "GET" || q.method == "HEAD";
  if (lower(q.get("transfer-encoding")).find("chunked") != std::string::npos) return 411;
  if (q.count("host") > 0 && !stepwatch::is_loopback_literal(host_of(q.get("host")))) return 403;
  if (!reads && q.count("origin") > 0 && !loopback_origin(q.get("origin"))) return 403;
  if (!reads && !bearer_ok(q)) return 401;
  return std::nullopt;
}

void check_rules(bool agent, const SimpleRequest& q, std::optional<int> refusal,
                 const Response& res) {
  if (refusal) {
    FUZZ_REQUIRE(res.status == *refusal);
    FUZZ_REQUIRE(*refusal != 401 || res.headers.count("www-authenticate") == 1);
    return;
  }
  FUZZ_REQUIRE(res.status != 401 && res.status != 403 && res.status != 411);
  std::string allow = allowed_method(agent, q.path);
  bool right = q.method == allow || (q.method == "HEAD" && allow == "GET");
  if (!allow.empty() && !right) {
    FUZZ_REQUIRE(res.status == 405);
    auto a = res.headers.find("allow");
    FUZZ_REQUIRE(a != res.headers.end() && a->second == allow);
  }
  if (allow.empty()) FUZZ_REQUIRE(res.status == 404);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  Servers& s = servers();
  // Stopped before exit: a connection's thread still parsing a request must not outlive the
  // static objects of libcpp-httplib (a heap-use-after-free at the end of a run otherwise). Its
  // function-local statics (the request-line regex) are made on the first request and destroyed
  // in reverse order of making: one request to each server first, so they go after this handler.
  // The real agent stops its API before it returns too.
  for (int port : {s.api->port(), s.ack->port()}) {
    Exchange warm =
        exchange(port, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", Due::kAnswer);
    FUZZ_REQUIRE(warm.complete && !warm.response.empty());
  }
  std::atexit([] {
    servers().api->stop();
    servers().ack->stop();
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  Servers& s = servers();
  bool agent = (data[0] & 1) != 0;
  std::string_view request(reinterpret_cast<const char*>(data) + 1, size - 1);
  auto simple = simple_request(request);
  std::optional<int> refusal = simple ? refused(*simple) : std::nullopt;
  // A refusal comes before any body is read: it is due even while the body is incomplete.
  Due when = refusal ? Due::kAnswer : due(request);

  uint64_t acks_before = agent ? agent_acks(s) : s.acks.load();
  const int port = agent ? s.api->port() : s.ack->port();
  size_t threads = thread_count();
  Exchange x = exchange(port, request, when);
  wait_for_threads(threads);
  const bool retried = when == Due::kAnswer && (!x.complete || x.response.empty());
  if (retried) {
    // Unanswered within the wait: once more before it counts. On a loaded machine (make test
    // beside other work) a connection's thread can miss the 2 s wait; a request the servers
    // never answer misses both.
    x = exchange(port, request, when);
  }
  uint64_t acks = (agent ? agent_acks(s) : s.acks.load()) - acks_before;
  bool bearer = has_bearer(request);
  FUZZ_REQUIRE(acks == 0 || (bearer && acks <= (retried ? 2u : 1u)));
  FUZZ_REQUIRE(when != Due::kAnswer || (x.complete && !x.response.empty()));
  if (!x.complete || x.response.empty()) return 0;  // not answered (yet): nothing to read

  Response res = parse_response(x.response);
  bool acked = res.body.find("\"acked\":true") != std::string::npos;
  FUZZ_REQUIRE(!acked || (bearer && res.status == 200));
  if (res.status >= 200 && res.status < 300 && !bearer) {
    // Without the token only reads succeed: the ack endpoint's /status and /healthz, the API's
    // GETs; a Range header gets a slice of one of them (206).
    FUZZ_REQUIRE(!acked && (agent || res.status == 206 || res.body == "ok\n" ||
                            res.body.find("\"state\": \"healthy\"") != std::string::npos ||
                            res.body.empty()));
  }
  if (simple && (!simple->partial || refusal)) check_rules(agent, *simple, refusal, res);
  return 0;
}
