// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The TOML reader under the job spec and agent.toml: lines, types, getters, unknown keys, and
// the bounded file read.
#include "src/spec/toml_reader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "src/common/clock.h"

namespace stepwatch::spec {
namespace {

TEST(TomlReader, KeepsTypesAndLines) {
  TomlDocument doc = parse_toml(
      "a = \"x\"\nb = 3\n\n[t]\nc = [1.5, true]\nd = 1979-05-27\n[[p]]\ne = 1\n", "f.toml");
  ASSERT_FALSE(doc.syntax_error.has_value());
  const TomlValue& root = doc.root;
  ASSERT_TRUE(root.is(TomlType::kTable));
  ASSERT_EQ(root.entries.size(), 4u);  // ordered by key: a, b, p, t
  EXPECT_EQ(root.entries[0].key, "a");
  EXPECT_EQ(root.entries[0].line, 1);
  EXPECT_EQ(root.find("a")->string, "x");
  EXPECT_EQ(root.find("b")->integer, 3);
  EXPECT_EQ(root.find("b")->line, 2);
  const TomlValue* t = root.find("t");
  ASSERT_NE(t, nullptr);
  const TomlValue* c = t->find("c");
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(c->items.size(), 2u);
  EXPECT_EQ(c->items[0].floating, 1.5);
  EXPECT_TRUE(c->items[1].boolean);
  EXPECT_EQ(c->items[1].line, 5);
  EXPECT_STREQ(type_name(t->find("d")->type), "a date");
  EXPECT_TRUE(root.find("p")->is_array_of_tables());
  EXPECT_FALSE(c->is_array_of_tables());
  EXPECT_EQ(root.find("nope"), nullptr);
}

TEST(TomlReader, SyntaxErrorsNameLineAndColumn) {
  TomlDocument doc = parse_toml("a = 1\nb = = 2\n", "f.toml");
  ASSERT_TRUE(doc.syntax_error.has_value());
  EXPECT_EQ(doc.syntax_error->line, 2);
  EXPECT_GT(doc.syntax_error->column, 0);
  EXPECT_EQ(doc.syntax_error->text().rfind("f.toml:2:", 0), 0u) << doc.syntax_error->text();
  EXPECT_NE(doc.syntax_error->text().find(": malformed TOML: "), std::string::npos);
}

struct Fixture {
  KeyLines lines;
  IssueSink sink{"f.toml", &lines};
  std::vector<std::string> texts() {
    std::vector<std::string> out;
    for (const auto& e : sink.take_errors()) out.push_back(e.text());
    return out;
  }
};

TEST(TomlReader, GettersSayWhatWasExpectedAndFound) {
  Fixture f;
  TomlReader in(&f.sink, &f.lines);
  TomlDocument doc = parse_toml(
      "s = 1\nb = \"no\"\ni = 2.5\nn = 3\nd = \"0s\"\nz = \"x\"\nbig = 3000000000\n", "f");
  const TomlValue& r = doc.root;
  std::string s;
  bool b = false;
  int i = 0;
  double n = 0;
  int64_t d = -1;
  EXPECT_FALSE(in.get(*r.find("s"), "s", &s));
  EXPECT_FALSE(in.get(*r.find("b"), "b", &b));
  EXPECT_FALSE(in.get_int(*r.find("i"), "i", &i, 0, 10));
  EXPECT_FALSE(in.get_int(*r.find("big"), "big", &i, INT32_MIN, INT32_MAX));
  EXPECT_TRUE(in.get_number(*r.find("n"), "n", &n));
  EXPECT_EQ(n, 3.0);
  EXPECT_FALSE(in.get_duration(*r.find("d"), "d", &d));
  EXPECT_EQ(d, -1) << "left alone on a mistake";
  EXPECT_TRUE(in.get_duration(*r.find("d"), "d", &d, TomlReader::Zero::kAllow));
  EXPECT_EQ(d, 0);
  EXPECT_EQ(in.table(*r.find("z"), "z"), nullptr);
  EXPECT_EQ(f.texts(), (std::vector<std::string>{
                           "f.toml:1: s: expected a string, got an integer",
                           "f.toml:2: b: expected true or false, got a string",
                           "f.toml:3: i: expected an integer, got a float",
                           "f.toml:5: d: must be a positive duration, got \"0s\"",
                           "f.toml:6: z: expected a table ([z]), got a string",
                           "f.toml:7: big: 3000000000 is out of range",
                       }));

  Fixture g;
  TomlReader must(&g.sink, &g.lines, TomlReader::Wording::kMustBe);
  EXPECT_FALSE(must.get(*r.find("s"), "s", &s));
  EXPECT_FALSE(must.get_int(*r.find("n"), "n", &i, 5, 9, "a whole number from 5 to 9"));
  EXPECT_EQ(g.texts(), (std::vector<std::string>{"f.toml:1: s: must be a string, got an integer",
                                                 "f.toml:4: n: must be a whole number from 5 to "
                                                 "9, got 3"}));
}

TEST(TomlReader, UnknownKeysGetDidYouMeanAndKnownOnesTheirLines) {
  Fixture f;
  TomlReader in(&f.sink, &f.lines);
  TomlDocument doc = parse_toml("[t]\nwindw = 1\nwarmup_steps = 2\ncolour = 3\n", "f");
  constexpr std::string_view kKnown[] = {"window", "warmup_steps"};
  std::vector<std::string> seen;
  in.each_key(*doc.root.find("t"), "t", kKnown,
              [&](std::string_view key, const TomlValue&, const std::string& path) {
                seen.push_back(std::string(key) + "@" + path);
              });
  EXPECT_EQ(seen, std::vector<std::string>{"warmup_steps@t.warmup_steps"});
  EXPECT_EQ(f.lines.line("t.warmup_steps"), 3);
  EXPECT_FALSE(f.lines.has("t.windw"));
  EXPECT_EQ(f.texts(), (std::vector<std::string>{
                           "f.toml:2: t.windw: unknown key; did you mean \"window\"?",
                           "f.toml:4: t.colour: unknown key",
                       }));
}

TEST(TomlReader, IssuesComeInFileOrderWithLineLessOnesLast) {
  KeyLines lines;
  IssueSink sink("f.toml", &lines);
  sink.error(0, "x", "no line");
  sink.error(9, "b", "late");
  sink.error(2, "a", "early");
  auto errors = sink.take_errors();
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_EQ(errors[0].text(), "f.toml:2: a: early");
  EXPECT_EQ(errors[1].text(), "f.toml:9: b: late");
  EXPECT_EQ(errors[2].text(), "f.toml: x: no line");
}

TEST(TomlReader, ReadsAFileWithinItsBound) {
  std::string dir = ::testing::TempDir() + "/toml-reader-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  std::string path = dir + "/a.toml";
  std::ofstream(path) << "a = 1\n";
  auto ok = read_toml_file(path, 100, "a job spec");
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(*ok, "a = 1\n");
  auto big = read_toml_file(path, 3, "a job spec");
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().message, path + ": larger than 3 bytes; not a job spec");
  auto missing = read_toml_file(dir + "/none.toml", 100, "a job spec");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, Errc::kNotFound);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace stepwatch::spec
