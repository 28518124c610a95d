// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
/* A trainer's view of an installed stepwatch: built by tests/install/install_test.sh from the
 * installed header and libstepwatch.so only (through pkg-config, and through find_package as C
 * inside a CMake project). It writes one step to a beacon under argv[1]; exit status 0 means the
 * library answered as the header says. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "stepwatch/stepwatch.h"

int main(int argc, char** argv) {
  stepwatch_options o;
  stepwatch_t* sw = NULL;
  int rc;
  if (argc != 2) {
    fprintf(stderr, "usage: %s BEACON_ROOT\n", argv[0]);
    return 2;
  }
  if (stepwatch_abi_version() != STEPWATCH_ABI_VERSION) {
    fprintf(stderr, "abi version %d, header says %d\n", stepwatch_abi_version(),
            STEPWATCH_ABI_VERSION);
    return 1;
  }
  if (strstr(stepwatch_strerror(STEPWATCH_ENOJOB), "STEPWATCH_JOB") == NULL) {
    fprintf(stderr, "strerror(ENOJOB) = \"%s\"\n", stepwatch_strerror(STEPWATCH_ENOJOB));
    return 1;
  }
  stepwatch_options_init(&o);
  o.dir = argv[1];
  o.job = "install-test";
  o.rank = 0;
  o.world_size = 1;
  rc = stepwatch_open(&o, &sw);
  if (rc != STEPWATCH_OK) {
    fprintf(stderr, "open: %s (%s)\n", stepwatch_strerror(rc), stepwatch_last_error());
    return 1;
  }
  rc = stepwatch_step(sw, 1);
  if (rc == STEPWATCH_OK) rc = stepwatch_finish(sw, 1);
  if (rc != STEPWATCH_OK) {
    fprintf(stderr, "step/finish: %s\n", stepwatch_strerror(rc));
    stepwatch_close(sw);
    return 1;
  }
  if (access(stepwatch_path(sw), R_OK) != 0) {
    fprintf(stderr, "no beacon at %s\n", stepwatch_path(sw));
    stepwatch_close(sw);
    return 1;
  }
  printf("%s\n", stepwatch_path(sw));
  stepwatch_close(sw);
  return 0;
}
