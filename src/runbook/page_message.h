// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The page for a verdict: what `stepwatch run` and `stepwatch agent` both send when a job turns
// stalled or dead. The caller adds who and where (incident id, incarnation, host, ack command).
#pragma once

#include <string>

#include "src/detect/verdict.h"
#include "src/runbook/pager.h"

namespace stepwatch::runbook {

PageMessage page_for_verdict(const std::string& job, const std::string& owner,
                             const detect::Verdict& v);

}  // namespace stepwatch::runbook
