// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/common/host.h"

#include <gtest/gtest.h>

namespace stepwatch {
namespace {

TEST(RedactUrl, ShowsSchemeAndAuthorityOnly) {
  EXPECT_EQ(redact_url("https://hooks.example/services/T0/B0/xoxb-SECRET"),
            "https://hooks.example/…");
  EXPECT_EQ(redact_url("http://127.0.0.1:19480/page?token=s3cr3t"), "http://127.0.0.1:19480/…");
  EXPECT_EQ(redact_url("http://am.example:9093"), "http://am.example:9093");
  EXPECT_EQ(redact_url("http://am.example:9093/"), "http://am.example:9093");
  EXPECT_EQ(redact_url("http://[::1]:9093/x"), "http://[::1]:9093/…");
  EXPECT_EQ(redact_url("http://host#frag"), "http://host/…");
}

TEST(RedactUrl, DropsCredentialsWhereverTheyAre) {
  EXPECT_EQ(redact_url("http://alice:pa55w0rd@127.0.0.1:19480/page"), "http://127.0.0.1:19480/…");
  EXPECT_EQ(redact_url("http://a@b:p@w@host"), "http://host");
  EXPECT_EQ(redact_url("http://user@"), "http://");
}

TEST(RedactUrl, TextThatIsNotAUrlIsNotEchoed) {
  EXPECT_EQ(redact_url("xoxb-SECRET"), "<not a URL>");
  EXPECT_EQ(redact_url(""), "<not a URL>");
  EXPECT_EQ(redact_url("://host/x"), "<not a URL>");
}

}  // namespace
}  // namespace stepwatch
