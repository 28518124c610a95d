// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The pager's HTTP client: the only translation unit with cpp-httplib client code (STYLE rule 11).
// Debian's cpp-httplib is a compiled library built with OpenSSL; its pkg-config flags define
// CPPHTTPLIB_OPENSSL_SUPPORT, which must match the library's, so the build takes them from there.
#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "src/common/duration.h"
#include "src/common/host.h"
#include "src/common/http_error.h"
#include "src/runbook/pager.h"

namespace stepwatch::runbook {

namespace {

struct ParsedUrl {
  std::string scheme;     // "http" or "https", lower case
  std::string authority;  // host[:port], [v6]:port
  std::string path;       // "/..." with the query; "/" when the URL has none
};

Result<ParsedUrl> parse_url(const std::string& url) {
  auto sep = url.find("://");
  if (sep == std::string::npos) {
    return Error{Errc::kInvalidArgument,
                 fmt::format("\"{}\" is not an http:// URL", redact_url(url))};
  }
  ParsedUrl p;
  p.scheme = url.substr(0, sep);
  std::transform(p.scheme.begin(), p.scheme.end(), p.scheme.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (p.scheme != "http" && p.scheme != "https") {
    return Error{Errc::kInvalidArgument, fmt::format("\"{}\": scheme \"{}\" is not http or https",
                                                     redact_url(url), p.scheme)};
  }
  std::string rest = url.substr(sep + 3);
  auto end = rest.find_first_of("/?#");
  p.authority = rest.substr(0, end);
  p.path = end == std::string::npos ? "/" : rest.substr(end);
  if (auto hash = p.path.find('#'); hash != std::string::npos) p.path.erase(hash);
  if (p.path.empty() || p.path[0] != '/') p.path.insert(0, "/");
  if (p.authority.empty()) {
    return Error{Errc::kInvalidArgument, fmt::format("\"{}\" has no host", redact_url(url))};
  }
  if (p.authority.find('@') != std::string::npos) {
    return Error{Errc::kInvalidArgument,
                 fmt::format("\"{}\": credentials in the URL are not supported", redact_url(url))};
  }
  return p;
}

// The one wording of a client-side HTTP failure (common/http_error.h).
std::string describe(httplib::Error e) {
  return http_error_text(httplib::to_string(e));
}

}  // namespace

bool https_supported() {
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
  return true;
#else
  return false;
#endif
}

Attempt post_json(const std::string& url, const std::string& body, int64_t timeout_ns) {
  Attempt a;
  const std::string shown = redact_url(url);  // what the details say: never the path's secret
  auto parsed = parse_url(url);
  if (!parsed) {
    a.permanent = true;
    a.detail = parsed.error().message;
    return a;
  }
  if (parsed->scheme == "https" && !https_supported()) {
    a.permanent = true;
    a.detail =
        fmt::format("{}: https not supported in this build (cpp-httplib without OpenSSL)", shown);
    return a;
  }
  httplib::Client cli(parsed->scheme + "://" + parsed->authority);
  if (!cli.is_valid()) {
    a.permanent = true;
    a.detail = fmt::format("{}: not a usable host and port", shown);
    return a;
  }
  const auto timeout = std::chrono::nanoseconds(std::max<int64_t>(timeout_ns, kNsPerMs));
  cli.set_connection_timeout(timeout);
  cli.set_read_timeout(timeout);
  cli.set_write_timeout(timeout);
  cli.set_keep_alive(false);
  cli.set_follow_location(false);

  // httplib bounds each connect, read and write; the watchdog bounds the attempt as a whole, so
  // a receiver that trickles bytes cannot hold a page past its timeout.
  std::mutex mu;
  std::condition_variable cv;
  bool done = false, fired = false;
  std::thread watchdog([&] {
    std::unique_lock lock(mu);
    if (!cv.wait_for(lock, timeout, [&] { return done; })) {
      fired = true;
      cli.stop();
    }
  });
  httplib::Headers headers = {{"User-Agent", "stepwatch"}};
  const int64_t start = mono_now_ns();
  auto res = cli.Post(parsed->path, headers, body, "application/json");
  const bool out_of_time = mono_now_ns() - start >= timeout_ns - timeout_ns / 10;
  {
    std::lock_guard lock(mu);
    done = true;
  }
  cv.notify_all();
  watchdog.join();

  if (!res) {
    // A read or connect that ran out the clock is a timeout, whichever limit noticed first.
    a.detail = fired || out_of_time || res.error() == httplib::Error::Canceled
                   ? fmt::format("{}: no answer within {}", shown, format_duration(timeout_ns))
                   : fmt::format("{}: {}", shown, describe(res.error()));
    return a;
  }
  a.http_status = res->status;
  a.ok = res->status >= 200 && res->status < 300;
  std::string said = res->body.substr(0, 200);
  for (char& c : said) {
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  }
  if (a.ok) {
    a.detail = fmt::format("{}: HTTP {}", shown, res->status);
  } else {
    a.permanent = res->status < 500 && res->status != 408 && res->status != 429;
    a.detail = fmt::format("{}: HTTP {}{}{}", shown, res->status, said.empty() ? "" : ": ", said);
  }
  return a;
}

}  // namespace stepwatch::runbook
