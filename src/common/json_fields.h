// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The one set of JSON field readers, for every parser of JSON another process wrote (trace
// lines, node summaries, etcd records; STYLE rule 14): a field that is missing or of the wrong
// type reads the same in each of them, e.g. `field "poll_ns" must be an integer, got "7"`.
//
// The readers throw FieldError. Each parser catches it once, in the function that returns its
// Result, so it never leaves the parser (STYLE rule 4). Only nlohmann's forward declarations
// here: the parsers' own .cpp files include nlohmann/json.hpp (STYLE rule 11).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/result.h"

namespace stepwatch::json_fields {

using Json = nlohmann::json;

struct FieldError {
  Errc code = Errc::kParse;
  std::string message;
};

// The FieldError as an Error, its message prefixed with "<source>: " unless source is empty.
Error to_error(const FieldError& e, std::string_view source = "");

// How deep JSON another process wrote may nest. nlohmann parses and destroys without recursion,
// but dump() and every reader that walks a value recurse: a value of '[' x 600,000 (1.2 MB, under
// etcd's request limit) crashed every agent that re-serialized it (reliability review E5). Our
// own records nest 5 deep at most.
inline constexpr int kMaxDepth = 32;

// The nesting depth of a JSON text: brackets and braces outside strings, counted without parsing
// and without recursion; the count stops at `limit` + 1.
int nesting_depth(std::string_view text, int limit = kMaxDepth);

// The parsed value, of any type, bounded: "<source>: nested deeper than 32 levels" (code
// kSizeMismatch) before any parse, or "<source>: not valid JSON: <text>" (text cut at 80).
Result<Json> parse_bounded(std::string_view text, std::string_view source);
// The parsed object, bounded as parse_bounded, or "<source>: not a JSON object: <text>".
Result<Json> parse_object(std::string_view text, std::string_view source);

// The field, present (null included); throws `field "<key>" is missing`.
const Json& need(const Json& o, const char* key);
// The field, or nullptr when it is absent or null.
const Json* present(const Json& o, const char* key);

// The value as a type; throws `field "<key>" must be <what>, got <value>` (value cut at 80).
int64_t as_int(const Json& v, const char* key);
double as_num(const Json& v, const char* key);
std::string as_str(const Json& v, const char* key);
bool as_bool(const Json& v, const char* key);
std::vector<int64_t> as_ints(const Json& v, const char* key);
std::vector<std::string> as_strs(const Json& v, const char* key);

// An optional field: absent or null keeps `out`; anything else goes through `conv` (one of the
// readers above, or a lambda over them).
template <class T, class Conv>
void opt(const Json& o, const char* key, T& out, Conv conv) {
  if (const Json* v = present(o, key)) out = conv(*v, key);
}

// A whole record: parse_object(text, source), then read(object) with the readers above (they
// throw; read may throw a FieldError of its own for a rule beyond the type), a FieldError
// becoming the Error "<source>: ...". Every parser's shell, written once; read_object<T> is it
// for a parser that fills one T.
Status read_fields(std::string_view text, std::string_view source,
                   const std::function<void(const Json&)>& read);
template <class T, class Read>
Result<T> read_object(std::string_view text, std::string_view source, Read read) {
  T out{};
  if (auto st = read_fields(text, source, [&](const Json& j) { read(j, out); }); !st)
    return st.error();
  return out;
}

}  // namespace stepwatch::json_fields
