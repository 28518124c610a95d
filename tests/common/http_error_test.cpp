// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The one wording of an HTTP client's failure, by cpp-httplib's error names. The test includes
// httplib so that a release that renames an error breaks here, not in a page's text.
#include "src/common/http_error.h"

#include <gtest/gtest.h>
#include <httplib.h>

namespace stepwatch {
namespace {

TEST(HttpErrorText, NamesTheCauseInOneLine) {
  const std::pair<httplib::Error, std::string> cases[] = {
      {httplib::Error::Connection, "cannot connect (refused or unreachable)"},
      {httplib::Error::ConnectionTimeout, "connect timed out"},
      {httplib::Error::Read, "no complete reply (connection closed or read timed out)"},
      {httplib::Error::Write, "sending the request failed"},
      {httplib::Error::SSLConnection, "TLS handshake failed"},
      {httplib::Error::SSLLoadingCerts, "cannot load CA certificates"},
      {httplib::Error::SSLServerVerification, "TLS server certificate verification failed"},
      {httplib::Error::Canceled, "request failed: Canceled"},
  };
  for (const auto& [error, text] : cases) {
    EXPECT_EQ(http_error_text(httplib::to_string(error)), text) << httplib::to_string(error);
  }
}

TEST(HttpErrorText, AnUnknownNameIsShownAsIs) {
  EXPECT_EQ(http_error_text("SomethingNew"), "request failed: SomethingNew");
  EXPECT_EQ(http_error_text(""), "request failed: ");
}

}  // namespace
}  // namespace stepwatch
