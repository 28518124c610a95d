// `stepwatch status` as text: one line per rank, readable without any daemon.
#pragma once

#include <string>
#include <vector>

#include "src/common/clock.h"
#include "src/contract/job_scan.h"

namespace stepwatch::cli {

// Age of a stamp at `now`: monotonic when the record comes from this host, else wall clock.
// Returns -1 when unknown.
int64_t age_ns(const Stamp& at, const Stamp& now, bool same_host);

std::string render_status(const std::vector<contract::JobView>& jobs, const Stamp& now, const std::string& local_host);

}  // namespace stepwatch::cli
