// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/common/http_error.h"

namespace stepwatch {

namespace {

struct Wording {
  std::string_view name;  // httplib::to_string(httplib::Error)
  std::string_view text;
};

constexpr Wording kWordings[] = {
    {"Connection", "cannot connect (refused or unreachable)"},
    {"ConnectionTimeout", "connect timed out"},
    {"Read", "no complete reply (connection closed or read timed out)"},
    {"Write", "sending the request failed"},
    {"SSLConnection", "TLS handshake failed"},
    {"SSLLoadingCerts", "cannot load CA certificates"},
    {"SSLServerVerification", "TLS server certificate verification failed"},
};

}  // namespace

std::string http_error_text(std::string_view httplib_error_name) {
  for (const auto& w : kWordings) {
    if (w.name == httplib_error_name) return std::string(w.text);
  }
  return "request failed: " + std::string(httplib_error_name);
}

}  // namespace stepwatch
