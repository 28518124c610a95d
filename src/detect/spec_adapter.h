// The job spec as the detector sees it. Kept apart from the detector so the detector itself
// never depends on how specs are written.
#pragma once

#include "src/detect/config.h"
#include "src/spec/spec.h"

namespace stepwatch::detect {

Config config_from_spec(const spec::JobSpec& spec);

}  // namespace stepwatch::detect
