// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The etcd client's JSON side: request builders, reply parsers and base64, so each gateway quirk
// in the bodies is handled in one place; the HTTP side is gateway.cpp. The one translation unit
// of coord/ with nlohmann-json (STYLE rule 11).
#include "src/coord/etcd_client.h"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string_view>

#include "src/coord/gateway.h"

namespace stepwatch::coord {

namespace {

using json = nlohmann::json;

// A reply that does not have the shape the gateway documents; caught at the call's boundary.
struct BadReply : std::runtime_error {
  using std::runtime_error::runtime_error;
};

constexpr std::string_view kBase64 =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// Standard alphabet with padding, as Go's encoding/json writes []byte.
std::string b64_encode(std::string_view in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  auto byte = [&](size_t i) { return i < in.size() ? static_cast<uint8_t>(in[i]) : 0u; };
  for (size_t i = 0; i < in.size(); i += 3) {
    uint32_t v = byte(i) << 16 | byte(i + 1) << 8 | byte(i + 2);
    out += kBase64[v >> 18 & 63];
    out += kBase64[v >> 12 & 63];
    out += i + 1 < in.size() ? kBase64[v >> 6 & 63] : '=';
    out += i + 2 < in.size() ? kBase64[v & 63] : '=';
  }
  return out;
}

// Each byte's value in kBase64, 64 for a byte outside it: a job leader decodes megabytes of
// summaries a minute (a search of the alphabet per character was most of it).
constexpr std::array<uint8_t, 256> kBase64Values = [] {
  std::array<uint8_t, 256> values{};
  values.fill(64);
  for (size_t i = 0; i < kBase64.size(); ++i) values[static_cast<uint8_t>(kBase64[i])] = i;
  return values;
}();

// Padding is optional; anything outside the alphabet, or a length no encoder makes, is refused.
std::string b64_decode(std::string_view in) {
  size_t n = in.size();
  while (n > 0 && in[n - 1] == '=' && in.size() - n < 2) --n;
  std::string out;
  out.reserve(n * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t d = kBase64Values[static_cast<uint8_t>(in[i])];
    if (d == 64) {
      throw BadReply(fmt::format("bad base64 \"{:.40}\"", in));
    }
    acc = (acc << 6 | d) & 0xffff;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>(acc >> bits & 0xff);
    }
  }
  if (bits >= 6) throw BadReply(fmt::format("bad base64 length {}", in.size()));
  return out;
}

// int64s come as JSON strings (a lease id exceeds 2^53); numbers are accepted too. proto3 leaves
// out zero, so an absent field is 0.
int64_t get_int(const json& obj, const char* field) {
  auto it = obj.find(field);
  if (it == obj.end() || it->is_null()) return 0;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_string()) {
    const auto& s = it->get_ref<const std::string&>();
    int64_t v = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec == std::errc() && end == s.data() + s.size() && !s.empty()) return v;
  }
  throw BadReply(fmt::format("\"{}\" is not an int64: {}", field, it->dump()));
}

std::string get_bytes(const json& obj, const char* field) {
  auto it = obj.find(field);
  if (it == obj.end() || it->is_null()) return {};
  if (!it->is_string()) throw BadReply(fmt::format("\"{}\" is not base64: {}", field, it->dump()));
  return b64_decode(it->get_ref<const std::string&>());
}

// proto3 leaves out false: a failed txn has no "succeeded".
bool get_bool(const json& obj, const char* field) {
  auto it = obj.find(field);
  return it != obj.end() && it->is_boolean() && it->get<bool>();
}

const json& get_object(const json& obj, const char* field) {
  static const json kEmpty = json::object();
  auto it = obj.find(field);
  if (it == obj.end() || it->is_null()) return kEmpty;
  if (!it->is_object()) throw BadReply(fmt::format("\"{}\" is not an object", field));
  return *it;
}

int64_t header_revision(const json& reply) {
  return get_int(get_object(reply, "header"), "revision");
}

// {"key"} or, for a prefix, {"key","range_end"}; an empty prefix is every key ("\0" to "\0", as
// clientv3's WithPrefix sends it: etcd refuses an empty key).
json key_range(const std::string& key, bool prefix) {
  if (!prefix) return json{{"key", b64_encode(key)}};
  std::string from = key.empty() ? std::string(1, '\0') : key;
  return json{{"key", b64_encode(from)}, {"range_end", b64_encode(prefix_end(key))}};
}

// A RangeRequest, for /v3/kv/range and a txn's request_range alike.
json range_request(const std::string& key, const RangeOptions& options) {
  json body = key_range(key, options.prefix);
  if (options.limit > 0) body["limit"] = std::to_string(options.limit);
  if (options.keys_only) body["keys_only"] = true;
  if (options.min_mod_revision > 0)
    body["min_mod_revision"] = std::to_string(options.min_mod_revision);
  if (options.by_create_rev) {
    body["sort_target"] = "CREATE";
    body["sort_order"] = "ASCEND";
  } else if (options.descending) {
    body["sort_target"] = "KEY";
    body["sort_order"] = "DESCEND";
  }
  return body;
}

RangeResult parse_range(const json& reply, int64_t fallback_revision) {
  RangeResult r;
  r.revision = header_revision(reply);
  if (r.revision == 0) r.revision = fallback_revision;
  r.count = get_int(reply, "count");
  if (auto it = reply.find("kvs"); it != reply.end() && it->is_array()) {
    for (const auto& j : *it) {
      r.kvs.push_back(KeyValue{get_bytes(j, "key"), get_bytes(j, "value"),
                               get_int(j, "create_revision"), get_int(j, "mod_revision"),
                               get_int(j, "version"), get_int(j, "lease")});
    }
  }
  return r;
}

// Indexed by Compare::Target and Compare::Result, in their order (asserted below).
constexpr const char* kTargetNames[] = {"CREATE", "MOD", "VERSION", "VALUE"};
constexpr const char* kTargetFields[] = {"create_revision", "mod_revision", "version", "value"};
constexpr const char* kResultNames[] = {"EQUAL", "NOT_EQUAL", "LESS", "GREATER"};
static_assert(static_cast<int>(Compare::Target::kCreate) == 0 &&
              static_cast<int>(Compare::Target::kMod) == 1 &&
              static_cast<int>(Compare::Target::kVersion) == 2 &&
              static_cast<int>(Compare::Target::kValue) == 3);
static_assert(static_cast<int>(Compare::Result::kEqual) == 0 &&
              static_cast<int>(Compare::Result::kNotEqual) == 1 &&
              static_cast<int>(Compare::Result::kLess) == 2 &&
              static_cast<int>(Compare::Result::kGreater) == 3);

json to_json(const Compare& c) {
  const auto target = static_cast<size_t>(c.target);
  json j{{"key", b64_encode(c.key)},
         {"target", kTargetNames[target]},
         {"result", kResultNames[static_cast<size_t>(c.result)]}};
  if (c.target == Compare::Target::kValue) {
    j[kTargetFields[target]] = b64_encode(c.value);
  } else {
    j[kTargetFields[target]] = std::to_string(c.number);
  }
  return j;
}

json put_request(const std::string& key, const std::string& value, int64_t lease) {
  json j{{"key", b64_encode(key)}, {"value", b64_encode(value)}};
  if (lease != 0) j["lease"] = std::to_string(lease);
  return j;
}

json to_json(const TxnOp& op) {
  switch (op.kind) {
    case TxnOp::Kind::kPut:
      return json{{"request_put", put_request(op.key, op.value, op.lease)}};
    case TxnOp::Kind::kDelete:
      return json{{"request_delete_range", key_range(op.key, op.prefix)}};
    case TxnOp::Kind::kRange:
      return json{{"request_range", range_request(op.key, op.range)}};
  }
  throw std::invalid_argument("unknown TxnOp kind");
}

Errc errc_for_status(int status) {
  switch (status) {
    case 400:
      return Errc::kInvalidArgument;
    case 401:
    case 403:
      return Errc::kPermission;
    case 404:
      return Errc::kNotFound;
    default:
      return Errc::kIo;
  }
}

// The first JSON value of a body: a streamed reply (keepalive) is `{"result":{...}}` lines. The
// gateway writes each value on one line (a newline inside a string is escaped), so the first
// line is parsed from memory; a body laid out otherwise is read as a stream, value by value.
json parse_first(const std::string& body) {
  const size_t eol = body.find('\n');
  json j = json::parse(body.begin(), eol == std::string::npos ? body.end() : body.begin() + eol,
                       nullptr, false);
  if (!j.is_discarded()) return j;
  std::istringstream in(body);
  in >> j;
  return j;
}

// The gateway's error text: {"error","message","code"}, else the body itself, shortened.
std::string error_text(const std::string& body) {
  json j = json::parse(body, nullptr, false);
  if (j.is_object()) {
    for (const char* field : {"message", "error"}) {
      if (auto it = j.find(field); it != j.end() && it->is_string() && !it->empty()) {
        return it->get<std::string>();
      }
    }
  }
  return body.size() > 200 ? body.substr(0, 200) + "..." : body;
}

}  // namespace

struct EtcdClient::Impl {
  Gateway gateway;

  explicit Impl(const EtcdOptions& options) : gateway(options) {}

  const std::string& endpoint() const { return gateway.endpoint(); }

  // The parsed body of a 200 reply; any other status an error with the gateway's message.
  Result<json> call(const char* method, const char* path, const std::string& body, bool resend) {
    auto reply = gateway.call(method, path, body, resend);
    if (!reply) return reply.error();
    if (reply->status != 200) {
      return Error{errc_for_status(reply->status),
                   fmt::format("etcd {}: {}: HTTP {}: {}", endpoint(), path, reply->status,
                               error_text(reply->body))};
    }
    return parse_first(reply->body);
  }

  Result<json> post(const char* path, const json& body, bool resend = true) {
    return call("POST", path, body.dump(), resend);
  }

  // Runs one public call: a malformed reply (or any exception) becomes an error naming the call.
  template <class T, class F>
  Result<T> guard(const char* path, F&& f) noexcept {
    try {
      return f();
    } catch (const std::exception& e) {
      return Error{Errc::kParse,
                   fmt::format("etcd {}: {}: malformed reply: {}", endpoint(), path, e.what())};
    }
  }
};

EtcdClient::EtcdClient(EtcdOptions options) : impl_(std::make_unique<Impl>(options)) {}
EtcdClient::~EtcdClient() = default;
EtcdClient::EtcdClient(EtcdClient&&) noexcept = default;
EtcdClient& EtcdClient::operator=(EtcdClient&&) noexcept = default;

const std::string& EtcdClient::endpoint() const {
  return impl_->endpoint();
}

Result<int64_t> EtcdClient::put(const std::string& key, const std::string& value, int64_t lease) {
  return impl_->guard<int64_t>("/v3/kv/put", [&]() -> Result<int64_t> {
    auto reply = impl_->post("/v3/kv/put", put_request(key, value, lease));
    if (!reply) return reply.error();
    return header_revision(*reply);
  });
}

Result<RangeResult> EtcdClient::range(const std::string& key, const RangeOptions& options) {
  return impl_->guard<RangeResult>("/v3/kv/range", [&]() -> Result<RangeResult> {
    auto reply = impl_->post("/v3/kv/range", range_request(key, options));
    if (!reply) return reply.error();
    return parse_range(*reply, 0);
  });
}

Result<int64_t> EtcdClient::del(const std::string& key, bool prefix) {
  return impl_->guard<int64_t>("/v3/kv/deleterange", [&]() -> Result<int64_t> {
    auto reply = impl_->post("/v3/kv/deleterange", key_range(key, prefix));
    if (!reply) return reply.error();
    return get_int(*reply, "deleted");
  });
}

Result<TxnResult> EtcdClient::txn(const std::vector<Compare>& compares,
                                  const std::vector<TxnOp>& success,
                                  const std::vector<TxnOp>& failure) {
  return impl_->guard<TxnResult>("/v3/kv/txn", [&]() -> Result<TxnResult> {
    json body{{"compare", json::array()}, {"success", json::array()}, {"failure", json::array()}};
    for (const auto& c : compares) body["compare"].push_back(to_json(c));
    for (const auto& op : success) body["success"].push_back(to_json(op));
    for (const auto& op : failure) body["failure"].push_back(to_json(op));
    auto reply = impl_->post("/v3/kv/txn", body, /*resend=*/false);
    if (!reply) return reply.error();
    TxnResult t;
    t.succeeded = get_bool(*reply, "succeeded");
    t.revision = header_revision(*reply);
    if (auto it = reply->find("responses"); it != reply->end() && it->is_array()) {
      for (const auto& op : *it) {
        if (op.contains("response_range")) {
          t.ranges.push_back(parse_range(get_object(op, "response_range"), t.revision));
        }
      }
    }
    return t;
  });
}

Result<Lease> EtcdClient::grant(int64_t ttl_s) {
  return impl_->guard<Lease>("/v3/lease/grant", [&]() -> Result<Lease> {
    auto reply = impl_->post("/v3/lease/grant", json{{"TTL", std::to_string(ttl_s)}});
    if (!reply) return reply.error();
    if (auto it = reply->find("error"); it != reply->end() && it->is_string() && !it->empty()) {
      return Error{Errc::kIo,
                   fmt::format("etcd {}: /v3/lease/grant: {}", endpoint(), it->get<std::string>())};
    }
    Lease lease{get_int(*reply, "ID"), get_int(*reply, "TTL")};
    if (lease.id == 0) throw BadReply("no lease ID");
    return lease;
  });
}

Result<int64_t> EtcdClient::keepalive(int64_t lease) {
  return impl_->guard<int64_t>("/v3/lease/keepalive", [&]() -> Result<int64_t> {
    auto reply = impl_->post("/v3/lease/keepalive", json{{"ID", std::to_string(lease)}});
    if (!reply) return reply.error();
    // A stream reply carries either {"result":{...}} or {"error":{"message",...}}.
    if (auto it = reply->find("error"); it != reply->end()) {
      std::string text = it->is_object() ? it->value("message", it->dump()) : it->dump();
      return Error{Errc::kIo, fmt::format("etcd {}: /v3/lease/keepalive: {}", endpoint(), text)};
    }
    if (!reply->contains("result")) throw BadReply("no \"result\"");
    return get_int(get_object(*reply, "result"), "TTL");
  });
}

Status EtcdClient::revoke(int64_t lease) {
  auto r = impl_->guard<int64_t>("/v3/lease/revoke", [&]() -> Result<int64_t> {
    auto reply = impl_->post("/v3/lease/revoke", json{{"ID", std::to_string(lease)}});
    if (!reply) return reply.error();
    return 0;
  });
  if (!r) return r.error();
  return {};
}

Result<int64_t> EtcdClient::time_to_live(int64_t lease) {
  return impl_->guard<int64_t>("/v3/lease/timetolive", [&]() -> Result<int64_t> {
    auto reply = impl_->post("/v3/lease/timetolive", json{{"ID", std::to_string(lease)}});
    if (!reply) return reply.error();
    return get_int(*reply, "TTL");
  });
}

Status EtcdClient::health() {
  auto r = impl_->guard<int64_t>("/health", [&]() -> Result<int64_t> {
    auto reply = impl_->call("GET", "/health", {}, /*resend=*/true);
    if (!reply) return reply.error();
    // "true" in 3.4; a bool is taken too.
    auto it = reply->find("health");
    if (it != reply->end() && (*it == "true" || *it == true)) return 0;
    return Error{Errc::kIo,
                 fmt::format("etcd {}: /health: not healthy: {}", endpoint(), reply->dump())};
  });
  if (!r) return r.error();
  return {};
}

}  // namespace stepwatch::coord
