// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/common/result.h"

namespace stepwatch {

const char* errc_name(Errc code) {
  switch (code) {
    case Errc::kOk:
      return "ok";
    case Errc::kNotFound:
      return "not found";
    case Errc::kIo:
      return "i/o error";
    case Errc::kPermission:
      return "permission denied";
    case Errc::kInvalidArgument:
      return "invalid argument";
    case Errc::kBadMagic:
      return "bad magic";
    case Errc::kUnknownVersion:
      return "unknown version";
    case Errc::kTruncated:
      return "truncated";
    case Errc::kSizeMismatch:
      return "size mismatch";
    case Errc::kTorn:
      return "torn";
    case Errc::kJobMismatch:
      return "job id mismatch";
    case Errc::kParse:
      return "parse error";
    case Errc::kBusy:
      return "busy";
    case Errc::kInvalidField:
      return "invalid field";
  }
  return "unknown error";
}

}  // namespace stepwatch
