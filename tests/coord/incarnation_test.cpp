// The incarnation and launcher records: what the leader writes and the launchers read, parsed
// leniently (only "incarnation" is required) and never mistaken for incarnation 0.
#include "src/coord/incarnation.h"

#include <gtest/gtest.h>

namespace stepwatch::coord {
namespace {

TEST(IncarnationKeys, AreUnderTheJob) {
  EXPECT_EQ(incarnation_key("/sw", "j1"), "/sw/jobs/j1/incarnation");
  EXPECT_EQ(launchers_prefix("/sw", "j1"), "/sw/jobs/j1/launchers/");
  EXPECT_EQ(launcher_key("/sw", "j1", "gpu-17"), "/sw/jobs/j1/launchers/gpu-17");
}

TEST(IncarnationRecord, RoundTrips) {
  IncarnationRecord r{3, "step_20", 20, 41, "gpu-1", 1'700'000'000'000'000'000};
  auto back = incarnation_from_json(incarnation_to_json(r), "k");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->incarnation, 3);
  EXPECT_EQ(back->resume_from, "step_20");
  EXPECT_EQ(back->resume_step, 20);
  EXPECT_EQ(back->incident, 41);
  EXPECT_EQ(back->by, "gpu-1");
  EXPECT_EQ(back->at_ns, r.at_ns);
}

TEST(IncarnationRecord, OnlyIncarnationIsRequired) {
  auto r = incarnation_from_json(R"({"incarnation": 2, "later_field": [1, 2]})", "k");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->incarnation, 2);
  EXPECT_EQ(r->resume_from, "");
  auto null_resume = incarnation_from_json(R"({"incarnation": 1, "resume_from": null})", "k");
  ASSERT_TRUE(null_resume.ok());
  EXPECT_EQ(null_resume->resume_from, "");
}

TEST(IncarnationRecord, RefusesWhatIsNotOne) {
  struct Case {
    const char* text;
    const char* says;
  } cases[] = {
      {"", "not a JSON object"},
      {"[1]", "not a JSON object"},
      {"{}", "\"incarnation\" is missing"},
      {R"({"incarnation": "2"})", "\"incarnation\" must be an integer"},
      {R"({"incarnation": 1.5})", "\"incarnation\" must be an integer"},
      {R"({"incarnation": -1})", "must be >= 0"},
      {R"({"incarnation": 1, "resume_from": 7})", "\"resume_from\" must be a string"},
  };
  for (const auto& c : cases) {
    auto r = incarnation_from_json(c.text, "etcd key /sw/jobs/j/incarnation");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.error().message.find(c.says), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find("/sw/jobs/j/incarnation"), std::string::npos);
  }
}

TEST(LauncherRecord, RoundTrips) {
  LauncherRecord r{"gpu-17", 4242, 5, 1'700'000'000'000'000'000};
  auto back = launcher_from_json(launcher_to_json(r), "k");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->node, "gpu-17");
  EXPECT_EQ(back->pid, 4242);
  EXPECT_EQ(back->incarnation, 5);
  EXPECT_EQ(back->started_at_ns, r.started_at_ns);
}

TEST(NodeName, Rule) {
  EXPECT_TRUE(valid_node_name("gpu-17.rack_2"));
  EXPECT_FALSE(valid_node_name(""));
  EXPECT_FALSE(valid_node_name("a/b"));
  EXPECT_FALSE(valid_node_name(std::string(64, 'a')));
}

}  // namespace
}  // namespace stepwatch::coord
