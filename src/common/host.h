// This machine's short host name ("node12" of "node12.cluster.example"), as beacons record it
// and as readers compare it to decide whether monotonic times are comparable. At most 63 bytes;
// "" when it cannot be read.
#pragma once

#include <string>

namespace stepwatch {

std::string short_hostname();

}  // namespace stepwatch
