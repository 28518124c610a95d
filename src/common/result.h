// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Errors are values: Result<T> holds either a T or an Error with a code and a message
// that names the object and the cause ("rank-3.beacon: bad magic 0x0").
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace stepwatch {

enum class Errc {
  kOk = 0,
  kNotFound,         // the object does not exist (file, process, job)
  kIo,               // a system call failed for another reason
  kPermission,       // EACCES / EPERM
  kInvalidArgument,  // the caller passed something malformed
  kBadMagic,         // a beacon file that is not a beacon
  kUnknownVersion,   // a beacon layout this build does not know
  kTruncated,        // shorter than its header says
  kSizeMismatch,     // header size and file size disagree
  kTorn,             // never got a consistent read after N retries
  kJobMismatch,      // the record names another job
  kParse,            // malformed text input (JSON, TOML, durations)
  kBusy,             // another writer holds the record right now
  kInvalidField,     // a record field out of its allowed range
};

const char* errc_name(Errc code);

struct Error {
  Errc code = Errc::kOk;
  std::string message;
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}  // NOLINT
  Result(Errc code, std::string message) : v_(Error{code, std::move(message)}) {}

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

// Result<void>: success or an Error.
template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT
  Result(Errc code, std::string message) : error_{code, std::move(message)}, ok_(false) {}

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return error_; }

 private:
  Error error_;
  bool ok_ = true;
};

using Status = Result<void>;

}  // namespace stepwatch
