// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/common/json_fields.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace stepwatch::json_fields {
namespace {

// The message a reader throws for `text`'s field "f", or "" when it reads.
template <class Read>
std::string error_of(const std::string& text, Read read) {
  Json j = Json::parse(text);
  try {
    read(j);
  } catch (const FieldError& e) {
    return e.message;
  }
  return "";
}

// E5: a value nested past the bound is refused before it is parsed (nothing recurses over it);
// brackets inside strings do not count.
TEST(JsonFields, DepthIsBoundedBeforeAnyParse) {
  EXPECT_EQ(nesting_depth(R"({"a":[1,{"b":2}]})"), 3);
  EXPECT_EQ(nesting_depth(R"({"a":"[[[[{{{{\"[["})"), 1);
  EXPECT_EQ(nesting_depth("[]"), 1);
  EXPECT_EQ(nesting_depth("7"), 0);
  const std::string deep = std::string(600000, '[') + std::string(600000, ']');
  EXPECT_EQ(nesting_depth(deep), kMaxDepth + 1) << "the count stops past the bound";
  auto r = parse_bounded(deep, "etcd key /x");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "etcd key /x: nested deeper than 32 levels: refused unparsed");
  auto o = parse_object(R"({"obs":)" + deep + "}", "etcd key /x");
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.error().message.find("nested deeper"), std::string::npos) << o.error().message;
  const std::string ok_depth = std::string(kMaxDepth, '[') + std::string(kMaxDepth, ']');
  EXPECT_TRUE(parse_bounded(ok_depth, "x").ok());
  EXPECT_FALSE(parse_bounded("[" + ok_depth + "]", "x").ok());
  auto bad = parse_bounded("{", "etcd key /y");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message, "etcd key /y: not valid JSON: {");
}

TEST(JsonFields, WrongTypesAndMissingFieldsReadTheSameEverywhere) {
  struct Case {
    std::string text;
    std::string want;
    void (*read)(const Json&);
  } cases[] = {
      {R"({})", "field \"f\" is missing", [](const Json& j) { (void)need(j, "f"); }},
      {R"({"f": "7"})", "field \"f\" must be an integer, got \"7\"",
       [](const Json& j) { (void)as_int(need(j, "f"), "f"); }},
      {R"({"f": 1.5})", "field \"f\" must be an integer, got 1.5",
       [](const Json& j) { (void)as_int(need(j, "f"), "f"); }},
      {R"({"f": "x"})", "field \"f\" must be a number, got \"x\"",
       [](const Json& j) { (void)as_num(need(j, "f"), "f"); }},
      {R"({"f": 7})", "field \"f\" must be a string, got 7",
       [](const Json& j) { (void)as_str(need(j, "f"), "f"); }},
      {R"({"f": 1})", "field \"f\" must be true or false, got 1",
       [](const Json& j) { (void)as_bool(need(j, "f"), "f"); }},
      {R"({"f": [1, "2"]})", "field \"f\" must be a list of integers, got [1,\"2\"]",
       [](const Json& j) { (void)as_ints(need(j, "f"), "f"); }},
      {R"({"f": "a"})", "field \"f\" must be a list of strings, got \"a\"",
       [](const Json& j) { (void)as_strs(need(j, "f"), "f"); }},
  };
  for (const auto& c : cases) EXPECT_EQ(error_of(c.text, c.read), c.want) << c.text;
}

TEST(JsonFields, AnOptionalFieldAbsentOrNullKeepsTheDefault) {
  Json j = Json::parse(R"({"a": null, "b": 3, "s": ["x", "y"]})");
  int64_t a = 9, b = 0, c = 5;
  std::optional<int64_t> o;
  std::vector<std::string> s;
  opt(j, "a", a, as_int);
  opt(j, "b", b, as_int);
  opt(j, "c", c, as_int);
  opt(j, "a", o, as_int);
  opt(j, "s", s, as_strs);
  EXPECT_EQ(a, 9);
  EXPECT_EQ(b, 3);
  EXPECT_EQ(c, 5);
  EXPECT_FALSE(o.has_value());
  EXPECT_EQ(s, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(present(j, "a"), nullptr);
  EXPECT_NO_THROW((void)need(j, "a"));  // null is present for need: the field is there
}

TEST(JsonFields, AValueFromAnotherProcessIsShownBounded) {
  std::string big(500, 'x');
  std::string message =
      error_of("{\"f\": \"" + big + "\"}", [](const Json& j) { (void)as_int(need(j, "f"), "f"); });
  EXPECT_LT(message.size(), 140u) << message;
}

TEST(JsonFields, ParseObjectNamesTheSource) {
  auto bad = parse_object("[1]", "/sw/jobs/j/incarnation");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message, "/sw/jobs/j/incarnation: not a JSON object: [1]");
  auto good = parse_object(R"({"a": 1})", "k");
  ASSERT_TRUE(good.ok());
  EXPECT_EQ((*good)["a"], 1);
  Error e = to_error(FieldError{Errc::kInvalidField, "field \"a\" is wrong"}, "k");
  EXPECT_EQ(e.code, Errc::kInvalidField);
  EXPECT_EQ(e.message, "k: field \"a\" is wrong");
  EXPECT_EQ(to_error(FieldError{Errc::kParse, "m"}).message, "m");
}

}  // namespace
}  // namespace stepwatch::json_fields
