// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The job spec as the detector sees it. Kept apart from the detector so the detector itself
// never depends on how specs are written.
#pragma once

#include "src/detect/config.h"
#include "src/spec/spec.h"

namespace stepwatch::detect {

// Every field of Config comes from here (Config has no defaults of its own).
Config config_from_spec(const spec::JobSpec& spec);

// config_from_spec(spec::default_spec()): the detector as an empty spec file configures it.
Config default_config();

}  // namespace stepwatch::detect
