// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/spec/command_template.h"

#include <gtest/gtest.h>

namespace stepwatch::spec {
namespace {

TEST(CommandTemplate, FindsPlaceholders) {
  struct Case {
    const char* arg;
    std::vector<std::string> names;
  } cases[] = {
      {"--from={checkpoint_id}", {"checkpoint_id"}},
      {"{job}-{incarnation}", {"job", "incarnation"}},
      {"{{job}}", {}},     // escaped braces
      {"${HOME}/x", {}},   // a shell variable
      {"{\"a\": 1}", {}},  // JSON
      {"{1abc}", {}},      // not an identifier
      {"{job", {}},        // unterminated
      {"}{job}{", {"job"}},
      {"", {}},
  };
  for (const auto& c : cases) EXPECT_EQ(template_placeholders(c.arg), c.names) << c.arg;
}

TEST(CommandTemplate, ChecksAgainstTheAllowedSet) {
  EXPECT_TRUE(check_template("--step={checkpoint_step}", kResumePlaceholders).ok());
  EXPECT_TRUE(check_template("{pgid}", kPreemptPlaceholders).ok());
  auto bad = check_template("{checkpoint_id}", kPreemptPlaceholders);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, Errc::kInvalidArgument);
  EXPECT_EQ(bad.error().message,
            "unknown placeholder {checkpoint_id} in \"{checkpoint_id}\"; allowed here: "
            "{incarnation}, {job}, {pgid} "
            "(write {{ and }} for literal braces)");
}

// D17: checkpoint ids come from directory names anyone with write access to the checkpoint dir
// can choose; a resume_command may be "bash -c '... {checkpoint_id}'".
TEST(CommandTemplate, ValuesAShellWouldInterpretAreRefused) {
  for (const char* ok : {"step_100", "global_step-20/ckpt", "ckpt:7", "run=3,epoch%2", "a+b@c"}) {
    EXPECT_TRUE(check_template_value("checkpoint id", ok).ok()) << ok;
  }
  for (const char* bad :
       {"x; rm -rf ~", "$(id)", "`id`", "a|b", "a&b", "it's", "a b", "\"q\"", "a\nb", ""}) {
    auto st = check_template_value("checkpoint id", bad);
    ASSERT_FALSE(st.ok()) << bad;
    EXPECT_EQ(st.error().code, Errc::kInvalidArgument);
    EXPECT_EQ(st.error().message.rfind("checkpoint id", 0), 0u) << st.error().message;
  }
}

TEST(CommandTemplate, ExpandsWithTheSameGrammar) {
  TemplateValues v = {{"checkpoint_id", "step_00420"}, {"incarnation", "3"}, {"job", "j"}};
  EXPECT_EQ(expand_template("--load=/ckpt/{checkpoint_id}", v), "--load=/ckpt/step_00420");
  EXPECT_EQ(expand_template("{{job}} {job} ${job} {\"k\": 1}", v), "{job} j ${job} {\"k\": 1}");
  EXPECT_EQ(expand_template("{unknown}", v), "{unknown}") << "left as written";
  EXPECT_EQ(expand_command({"run", "--n={incarnation}"}, v),
            (std::vector<std::string>{"run", "--n=3"}));
}

}  // namespace
}  // namespace stepwatch::spec
