// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
/* A C11 program using libstepwatch.so exactly as a C trainer would, checking the results by
 * reading the beacon file's bytes back through include/stepwatch/beacon_v1.h. Compiled as C
 * with -Wall -Wextra -Wpedantic -Werror: the public headers must stay valid C. Exit status 0
 * means every check passed. */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stepwatch/beacon_v1.h"
#include "stepwatch/stepwatch.h"

static int g_failures = 0;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      ++g_failures;                                                            \
    }                                                                          \
  } while (0)

#define CHECK_RC(call, want)                                                                   \
  do {                                                                                         \
    int rc_ = (call);                                                                          \
    if (rc_ != (want)) {                                                                       \
      fprintf(stderr, "%s:%d: %s returned %d (%s), want %d\n", __FILE__, __LINE__, #call, rc_, \
              stepwatch_strerror(rc_), (want));                                                \
      ++g_failures;                                                                            \
    }                                                                                          \
  } while (0)

/* Reads the whole beacon file; returns 0 on success. */
static int read_beacon(const char* path, stepwatch_beacon_v1* out) {
  FILE* f = fopen(path, "rb");
  size_t got;
  char extra;
  if (f == NULL) {
    fprintf(stderr, "cannot open %s\n", path);
    return -1;
  }
  got = fread(out, 1, sizeof *out, f);
  if (got != sizeof *out || fread(&extra, 1, 1, f) != 0) {
    fprintf(stderr, "%s: not exactly %u bytes\n", path, (unsigned)STEPWATCH_BEACON_V1_SIZE);
    fclose(f);
    return -1;
  }
  fclose(f);
  return 0;
}

static void test_null_handle(void) {
  CHECK_RC(stepwatch_step(NULL, 1), STEPWATCH_ENULL);
  CHECK_RC(stepwatch_step_loss(NULL, 1, 1.0), STEPWATCH_ENULL);
  CHECK_RC(stepwatch_loss(NULL, 1.0), STEPWATCH_ENULL);
  CHECK_RC(stepwatch_beat(NULL), STEPWATCH_ENULL);
  CHECK_RC(stepwatch_sample(NULL, 1, STEPWATCH_WAIT_NONE, "x"), STEPWATCH_ENULL);
  CHECK_RC(stepwatch_phase_begin(NULL, "eval"), STEPWATCH_ENULL);
  CHECK_RC(stepwatch_phase_end(NULL), STEPWATCH_ENULL);
  CHECK_RC(stepwatch_checkpoint_committed(NULL, "c", 1), STEPWATCH_ENULL);
  CHECK_RC(stepwatch_finish(NULL, 1), STEPWATCH_ENULL);
  CHECK(strcmp(stepwatch_path(NULL), "") == 0);
  stepwatch_close(NULL);
  CHECK(stepwatch_abi_version() == STEPWATCH_ABI_VERSION);
  CHECK(strcmp(stepwatch_strerror(STEPWATCH_OK), "ok") == 0);
  CHECK(strstr(stepwatch_strerror(STEPWATCH_ENOJOB), "STEPWATCH_JOB") != NULL);
}

static void test_open_env_without_job(void) {
  stepwatch_t* sw = NULL;
  unsetenv("STEPWATCH_JOB");
  CHECK_RC(stepwatch_open_env(&sw), STEPWATCH_ENOJOB);
  CHECK(sw == NULL);
  CHECK(strstr(stepwatch_last_error(), "STEPWATCH_JOB") != NULL);
}

static void test_options_struct_size(const char* dir) {
  stepwatch_options o;
  stepwatch_t* sw = NULL;
  stepwatch_options_init(&o);
  CHECK(o.struct_size == sizeof o);
  CHECK(o.rank == -1 && o.world_size == -1 && o.local_rank == -1 && o.incarnation == -1);
  o.dir = dir;
  o.job = "c-job";
  o.struct_size = 8;
  CHECK_RC(stepwatch_open(&o, &sw), STEPWATCH_EINVAL);
  CHECK(sw == NULL);
  CHECK(strstr(stepwatch_last_error(), "struct_size") != NULL);
}

static void test_full_api(const char* dir) {
  stepwatch_options o;
  stepwatch_t* sw = NULL;
  stepwatch_beacon_v1 b;
  char expected_path[4096];
  uint64_t seq_before;

  stepwatch_options_init(&o);
  o.dir = dir;
  o.job = "c-job";
  o.rank = 1;
  o.local_rank = 1;
  o.world_size = 2;
  o.incarnation = 5;
  CHECK_RC(stepwatch_open(&o, &sw), STEPWATCH_OK);
  if (sw == NULL) {
    fprintf(stderr, "open failed: %s\n", stepwatch_last_error());
    ++g_failures;
    return;
  }
  snprintf(expected_path, sizeof expected_path, "%s/c-job/rank-1.beacon", dir);
  CHECK(strcmp(stepwatch_path(sw), expected_path) == 0);

  if (read_beacon(stepwatch_path(sw), &b) != 0) {
    ++g_failures;
    stepwatch_close(sw);
    return;
  }
  CHECK(b.magic == STEPWATCH_BEACON_MAGIC);
  CHECK(b.version == STEPWATCH_BEACON_VERSION);
  CHECK(b.size == STEPWATCH_BEACON_V1_SIZE);
  CHECK(b.seq == 0);
  CHECK(b.pid == (int32_t)getpid());
  CHECK(b.rank == 1 && b.local_rank == 1 && b.world_size == 2);
  CHECK(b.incarnation == 5);
  CHECK(b.status == STEPWATCH_STATUS_RUNNING);
  CHECK(b.step == -1 && b.step_count == 0);
  CHECK(b.ckpt_step == -1);
  CHECK(isnan(b.loss) && b.loss_wall_ns == 0);
  CHECK(strcmp(b.job, "c-job") == 0);
  CHECK(strcmp(b.phase, "init") == 0);
  CHECK(b.created_wall_ns > 0 && b.created_mono_ns > 0);
  seq_before = b.seq;

  CHECK_RC(stepwatch_phase_begin(sw, "compile"), STEPWATCH_OK);
  CHECK_RC(stepwatch_step(sw, 0), STEPWATCH_OK);
  CHECK_RC(stepwatch_phase_end(sw), STEPWATCH_OK);
  CHECK_RC(stepwatch_step_loss(sw, 1, 0.75), STEPWATCH_OK);
  CHECK_RC(stepwatch_phase_begin(sw, "eval"), STEPWATCH_OK);
  CHECK_RC(stepwatch_beat(sw), STEPWATCH_OK);
  CHECK_RC(stepwatch_beat(sw), STEPWATCH_OK);
  /* The progress sampler's call, as a C trainer's own sampler thread makes it. */
  CHECK_RC(stepwatch_sample(sw, UINT64_C(0x1234), STEPWATCH_WAIT_COLLECTIVE, "allreduce (c)"),
           STEPWATCH_OK);
  CHECK_RC(stepwatch_sample(sw, 1, 9, NULL), STEPWATCH_EINVAL);
  CHECK_RC(stepwatch_sample(sw, 1, -1, NULL), STEPWATCH_EINVAL);
  CHECK_RC(stepwatch_phase_end(sw), STEPWATCH_OK);
  CHECK_RC(stepwatch_loss(sw, 0.5), STEPWATCH_OK);
  CHECK_RC(stepwatch_checkpoint_committed(sw, "ckpt-000001", 1), STEPWATCH_OK);
  CHECK_RC(stepwatch_step(sw, -1), STEPWATCH_EINVAL);
  CHECK_RC(stepwatch_phase_begin(sw, "bad name"), STEPWATCH_EINVAL);
  CHECK_RC(stepwatch_phase_end(sw), STEPWATCH_EPHASE);
  CHECK_RC(stepwatch_checkpoint_committed(sw, "", 1), STEPWATCH_EINVAL);
  CHECK_RC(stepwatch_finish(sw, 1), STEPWATCH_OK);

  if (read_beacon(stepwatch_path(sw), &b) != 0) {
    ++g_failures;
    stepwatch_close(sw);
    return;
  }
  /* 11 accepted updates, 2 sequence numbers each; refused calls wrote nothing. */
  CHECK(b.seq == seq_before + 22);
  CHECK(b.step == 1);
  CHECK(b.step_count == 2);
  CHECK(b.recent[0].step == 0 && b.recent[1].step == 1);
  CHECK(b.recent[1].mono_ns == b.step_mono_ns);
  CHECK(b.step_wall_ns >= b.created_wall_ns);
  CHECK(b.loss == 0.5);
  CHECK(b.loss_wall_ns > 0 && b.loss_mono_ns >= b.step_mono_ns);
  CHECK(b.beat_count == 2 && b.beat_mono_ns > 0);
  CHECK(strcmp(b.phase, "train") == 0);
  /* init->compile, compile->train, train->eval, eval->train */
  CHECK(b.phase_count == 4);
  CHECK(b.ckpt_step == 1);
  CHECK(strcmp(b.ckpt_id, "ckpt-000001") == 0);
  CHECK(b.status == STEPWATCH_STATUS_FINISHED);
  CHECK(b.update_mono_ns >= b.ckpt_mono_ns);

  stepwatch_close(sw);
  /* The file stays for the watchdog after close. */
  CHECK(read_beacon(expected_path, &b) == 0);
}

static void test_open_env(const char* dir) {
  stepwatch_t* sw = NULL;
  stepwatch_beacon_v1 b;
  setenv("STEPWATCH_DIR", dir, 1);
  setenv("STEPWATCH_JOB", "c-env", 1);
  setenv("SLURM_PROCID", "2", 1);
  setenv("SLURM_NTASKS", "3", 1);
  setenv("SLURM_LOCALID", "0", 1);
  CHECK_RC(stepwatch_open_env(&sw), STEPWATCH_OK);
  if (sw == NULL) return;
  CHECK(strstr(stepwatch_path(sw), "/c-env/rank-2.beacon") != NULL);
  CHECK_RC(stepwatch_step(sw, 10), STEPWATCH_OK);
  if (read_beacon(stepwatch_path(sw), &b) == 0) {
    CHECK(b.rank == 2 && b.world_size == 3 && b.local_rank == 0);
    CHECK(b.step == 10 && strcmp(b.phase, "train") == 0);
  } else {
    ++g_failures;
  }
  stepwatch_close(sw);

  setenv("RANK", "x", 1);
  CHECK_RC(stepwatch_open_env(&sw), STEPWATCH_ENORANK);
  CHECK(strstr(stepwatch_last_error(), "RANK") != NULL);
  unsetenv("RANK");
}

int main(void) {
  char dir[] = "/tmp/stepwatch-c-test-XXXXXX";
  char cmd[256];
  const char* vars[] = {"STEPWATCH_DIR", "STEPWATCH_JOB", "STEPWATCH_INCARNATION",
                        "RANK",          "LOCAL_RANK",    "WORLD_SIZE",
                        "SLURM_PROCID",  "SLURM_LOCALID", "SLURM_NTASKS"};
  size_t i;
  for (i = 0; i < sizeof vars / sizeof vars[0]; ++i) unsetenv(vars[i]);
  if (mkdtemp(dir) == NULL) {
    perror("mkdtemp");
    return 2;
  }
  test_null_handle();
  test_open_env_without_job();
  test_options_struct_size(dir);
  test_full_api(dir);
  test_open_env(dir);

  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  if (g_failures != 0) {
    fprintf(stderr, "%d check(s) failed\n", g_failures);
    return 1;
  }
  printf("c_consumer_test: all checks passed\n");
  return 0;
}
