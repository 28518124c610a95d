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
