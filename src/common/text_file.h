// Reading a whole small file that a user may have put there: a spec, an agent config, a token;
// and writing a small secret file that only its owner may read.
// Never waits and never reads without bound: open uses O_NONBLOCK and fstat refuses anything
// but a regular file (a FIFO would otherwise block the reader forever), and a file over the
// limit is refused. Errors name the path and the cause.
#pragma once

#include <sys/types.h>

#include <cstddef>
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

// Replaces whatever is at path (a symlink there is removed, never followed) with a new file of
// mode 0600 holding text: created exclusively (O_EXCL | O_NOFOLLOW), so nobody else's file is
// ever opened or truncated. Errors name the path.
Status write_private_file(const std::string& path, std::string_view text);

// A fresh secret: 32 bytes from getrandom(2) as 64 lowercase hex digits.
Result<std::string> random_token();

}  // namespace stepwatch
