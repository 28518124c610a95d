#include "src/common/host.h"

#include <unistd.h>

namespace stepwatch {

std::string short_hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "";
  std::string h(buf);
  if (auto dot = h.find('.'); dot != std::string::npos) h.resize(dot);
  if (h.size() > 63) h.resize(63);
  return h;
}

}  // namespace stepwatch
