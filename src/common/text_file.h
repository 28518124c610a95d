// Reading a whole small file that a user may have put there: a spec, an agent config, a token.
// Never waits and never reads without bound: open uses O_NONBLOCK and fstat refuses anything
// but a regular file (a FIFO would otherwise block the reader forever), and a file over the
// limit is refused. Errors name the path and the cause.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>

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
Result<TextFile> read_text_file(const std::string& path, size_t max_bytes, Symlinks symlinks = Symlinks::kFollow);

}  // namespace stepwatch
