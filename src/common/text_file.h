// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The one small-file reader and writer. read_text_file: a whole small file that a user may have
// put there (a spec, an agent config, a token). read_small: a kernel file (/proc, /sys) or any
// file read until EOF up to a limit. read_range: a slice. write_all and write_private_file: a
// file written whole.
// Never waits and never reads without bound: read_text_file opens with O_NONBLOCK and refuses
// anything but a regular file (a FIFO would otherwise block the reader forever) and a file over
// the limit. Errors name the path and the cause.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "src/common/result.h"

namespace stepwatch {

struct TextFile {
  std::string text;
  mode_t mode = 0;  // st_mode, for callers that check permissions (a token must be 0600)
  uid_t uid = 0;
};

enum class Symlinks { kFollow, kRefuse };

// kNotFound (missing), kPermission, kInvalidArgument (a directory, FIFO, socket or device; a
// symlink when refused; larger than max_bytes), kIo.
Result<TextFile> read_text_file(const std::string& path, size_t max_bytes,
                                Symlinks symlinks = Symlinks::kFollow);

// Reads until EOF, at most max_bytes (anything past is cut; *truncated says so when given).
// For /proc and /sys, whose files report size 0, and any small file whose size may change while
// it is read. kNotFound (missing, or ENOENT/ESRCH mid-read: a process gone), kPermission, kIo.
Result<std::string> read_small(const std::string& path, size_t max_bytes,
                               bool* truncated = nullptr);

// Bytes [offset, offset + length) of a file, fewer when it is shorter. Errors as read_small.
Result<std::string> read_range(const std::string& path, uint64_t offset, uint64_t length);

// Creates or truncates path (a symlink there is not followed) with `mode` and writes text.
Status write_all(const std::string& path, std::string_view text, mode_t mode = 0644);

// Replaces whatever is at path (a symlink there is removed, never followed) with a new file of
// mode 0600 holding text: created exclusively (O_EXCL | O_NOFOLLOW), so nobody else's file is
// ever opened or truncated. Errors name the path.
Status write_private_file(const std::string& path, std::string_view text);

// A fresh secret: 32 bytes from getrandom(2) as 64 lowercase hex digits.
Result<std::string> random_token();

}  // namespace stepwatch
