// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// One request to the etcd gateway, endpoint by endpoint; see gateway.h.
#include "src/coord/gateway.h"

#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "src/common/http_error.h"

namespace stepwatch::coord {

namespace {

constexpr size_t kMaxReplyBytes = 64 << 20;  // far past any range we make; a runaway is cut

// The one wording of a client-side HTTP failure (common/http_error.h).
std::string describe(httplib::Error e) {
  return http_error_text(httplib::to_string(e));
}

std::string shortened(const std::string& body) {
  return body.size() > 200 ? body.substr(0, 200) + "..." : body;
}

struct Endpoint {
  std::string url;
  std::unique_ptr<httplib::Client> http;  // kept: its connection stays open between calls
};

struct Exchange {
  bool answered = false;    // a status and the body came back
  bool maybe_sent = false;  // no answer, but the request may have reached the server
  GatewayReply reply;
  std::string failure;  // why there was no answer
};

Exchange exchange(Endpoint& ep, const char* method, const char* path, const std::string& body) {
  Exchange x;
  bool trailer = false;
  httplib::Request req;
  req.method = method;
  req.path = path;
  req.body = body;
  if (!body.empty()) req.headers.emplace("Content-Type", "application/json");
  req.response_handler = [&](const httplib::Response& res) {
    x.reply.status = res.status;
    trailer = res.has_header("Trailer");
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    x.reply.body.append(data, n);
    return x.reply.body.size() <= kMaxReplyBytes;
  };
  auto res = ep.http->send(req);
  // cpp-httplib 0.11.4 wants the blank line right after a chunked body's last chunk, so the
  // trailer the gateway declares on every error reply fails the read once the body is in. Only
  // the error's text could suffer if the body were cut short.
  const bool trailer_bug = !res && res.error() == httplib::Error::Read && trailer &&
                           x.reply.status != 0 && x.reply.status != 200;
  if (res || trailer_bug) {
    x.answered = true;
    return x;
  }
  x.failure = describe(res.error());
  x.maybe_sent =
      res.error() != httplib::Error::Connection && res.error() != httplib::Error::ConnectionTimeout;
  return x;
}

}  // namespace

struct Gateway::Impl {
  std::vector<Endpoint> endpoints;
  size_t current = 0;        // the endpoint that answered last
  std::string config_error;  // set when the options are unusable: every call returns it
};

Gateway::Gateway(const EtcdOptions& options) : impl_(std::make_unique<Impl>()) {
  if (options.endpoints.empty()) impl_->config_error = "etcd: no endpoints configured";
  const auto timeout = std::chrono::nanoseconds(std::max<int64_t>(options.timeout_ns, kNsPerMs));
  for (std::string url : options.endpoints) {
    while (url.size() > 7 && url.back() == '/') url.pop_back();
    Endpoint ep{url, nullptr};
    if (url.rfind("http://", 0) != 0 || url.size() <= 7) {
      impl_->config_error = fmt::format("etcd endpoint \"{}\" is not http://host:port", url);
      impl_->endpoints.push_back(std::move(ep));
      continue;
    }
    ep.http = std::make_unique<httplib::Client>(url);
    if (!ep.http->is_valid())
      impl_->config_error = fmt::format("etcd endpoint \"{}\" is unusable", url);
    ep.http->set_connection_timeout(timeout);
    ep.http->set_read_timeout(timeout);
    ep.http->set_write_timeout(timeout);
    ep.http->set_keep_alive(true);
    // httplib writes the headers and the body apart: with Nagle on, the body waits for the
    // server's delayed ACK, 40 ms a call.
    ep.http->set_tcp_nodelay(true);
    ep.http->set_follow_location(false);
    // etcd wants the bare token (with a "Bearer " prefix it is an invalid token).
    if (!options.token.empty()) ep.http->set_default_headers({{"Authorization", options.token}});
    impl_->endpoints.push_back(std::move(ep));
  }
}

Gateway::~Gateway() = default;
Gateway::Gateway(Gateway&&) noexcept = default;
Gateway& Gateway::operator=(Gateway&&) noexcept = default;

const std::string& Gateway::endpoint() const {
  static const std::string kNone;
  return impl_->endpoints.empty() ? kNone : impl_->endpoints[impl_->current].url;
}

Result<GatewayReply> Gateway::call(const char* method, const char* path, const std::string& body,
                                   bool resend) {
  Impl& s = *impl_;
  if (!s.config_error.empty()) return Error{Errc::kInvalidArgument, s.config_error};
  std::string tried;
  for (size_t n = 0; n < s.endpoints.size(); ++n) {
    const size_t i = (s.current + n) % s.endpoints.size();
    Endpoint& ep = s.endpoints[i];
    Exchange x = exchange(ep, method, path, body);
    if (!x.answered && x.maybe_sent && !resend) {
      return Error{Errc::kIo, fmt::format("etcd {}: {}: {}; not resent: it may have been applied",
                                          ep.url, path, x.failure)};
    }
    if (!x.answered || (x.reply.status == 503 && resend)) {
      if (x.answered) x.failure = "HTTP 503: " + shortened(x.reply.body);
      tried += fmt::format("{}{} ({})", tried.empty() ? "" : "; ", ep.url, x.failure);
      continue;
    }
    s.current = i;
    return std::move(x.reply);
  }
  return Error{Errc::kIo, fmt::format("etcd: no endpoint answered {}: {}", path, tried)};
}

}  // namespace stepwatch::coord
