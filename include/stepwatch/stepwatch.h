// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
/* libstepwatch: the trainer side of the stepwatch step contract.
 *
 * A rank opens a handle once, then reports each committed optimizer step, phase changes,
 * beats inside long phases, committed checkpoints and its loss. Every call after open is
 * wait-free in the common case (a few stores into a shared-memory beacon), never allocates,
 * never throws and never blocks: if another thread of the same rank is mid-update the call
 * returns STEPWATCH_EBUSY instead of waiting.
 *
 *   stepwatch_t* sw = NULL;
 *   if (stepwatch_open_env(&sw) != STEPWATCH_OK) { fprintf(stderr, "%s\n", stepwatch_last_error());
 * } for (step = 0; ...; ++step) { train(); stepwatch_step(sw, step); } stepwatch_finish(sw, 1);
 * stepwatch_close(sw);
 *
 * Every function accepts a NULL handle and returns STEPWATCH_ENULL, so a trainer can keep
 * running with a disabled watchdog. See docs/contract.md.
 */
#ifndef STEPWATCH_STEPWATCH_H
#define STEPWATCH_STEPWATCH_H

#include <stdint.h>

#if defined(__GNUC__)
#define STEPWATCH_API __attribute__((visibility("default")))
#else
#define STEPWATCH_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define STEPWATCH_ABI_VERSION 1

/* Return codes: 0 on success, negative on failure. */
#define STEPWATCH_OK 0
#define STEPWATCH_EINVAL -1    /* an argument is malformed (name too long, bad characters) */
#define STEPWATCH_ENOJOB -2    /* no job id: STEPWATCH_JOB is unset and none was given */
#define STEPWATCH_ENORANK -3   /* rank identity missing or inconsistent in the environment */
#define STEPWATCH_EIO -4       /* the beacon file could not be created or mapped */
#define STEPWATCH_ENULL -5     /* the handle is NULL */
#define STEPWATCH_EBUSY -6     /* another thread is updating this beacon; nothing was written */
#define STEPWATCH_ENOMEM -7    /* out of memory at open */
#define STEPWATCH_EPHASE -8    /* phase_end without a phase, or phases nested too deep */
#define STEPWATCH_EINTERNAL -9 /* a bug: please report it */

#define STEPWATCH_PHASE_DEPTH 8 /* nesting limit for phase_begin */

typedef struct stepwatch_handle stepwatch_t;

/* Explicit identity for stepwatch_open. Set struct_size = sizeof(stepwatch_options);
 * NULL strings and negative numbers mean "take it from the environment". */
typedef struct stepwatch_options {
  uint32_t struct_size;
  const char* dir;     /* beacon root; default $STEPWATCH_DIR, then /dev/shm/stepwatch */
  const char* job;     /* job id; default $STEPWATCH_JOB */
  int32_t rank;        /* default RANK, then SLURM_PROCID */
  int32_t local_rank;  /* default LOCAL_RANK, then SLURM_LOCALID, then rank */
  int32_t world_size;  /* default WORLD_SIZE, then SLURM_NTASKS, then 1 */
  int64_t incarnation; /* default $STEPWATCH_INCARNATION, then 0 */
} stepwatch_options;

/* Fills options with "everything from the environment". */
STEPWATCH_API void stepwatch_options_init(stepwatch_options* options);

STEPWATCH_API int stepwatch_open(const stepwatch_options* options, stepwatch_t** out);
STEPWATCH_API int stepwatch_open_env(stepwatch_t** out);

/* Hot path. step is the trainer's own step number (it may jump on resume). */
STEPWATCH_API int stepwatch_step(stepwatch_t* sw, int64_t step);
STEPWATCH_API int stepwatch_step_loss(stepwatch_t* sw, int64_t step, double loss);
STEPWATCH_API int stepwatch_loss(stepwatch_t* sw, double loss);
STEPWATCH_API int stepwatch_beat(stepwatch_t* sw);

/* Phases nest: begin("eval") ... end() returns to the enclosing phase. The beacon starts in
 * "init"; the first step moves an unlabeled "init" to "train". */
STEPWATCH_API int stepwatch_phase_begin(stepwatch_t* sw, const char* name);
STEPWATCH_API int stepwatch_phase_end(stepwatch_t* sw);

/* Call after the checkpoint is durable (its commit marker written). */
STEPWATCH_API int stepwatch_checkpoint_committed(stepwatch_t* sw, const char* id, int64_t step);

/* The progress sampler (docs/contract.md): where the rank's main thread is, about once a
 * second, from a thread of its own. hash: a digest of the main thread's top frames (0: unknown);
 * wait: STEPWATCH_WAIT_* (stepwatch/beacon_v1.h); where: a short label such as
 * "all_reduce (distributed_c10d.py:1536)", or NULL; longer than 63 bytes is cut, unprintable
 * bytes become '?'. The beacon records when hash or wait last changed. It has its own lock: a
 * sample never makes stepwatch_step busy. The Python package runs such a thread by itself;
 * C and C++ trainers call this from theirs. STEPWATCH_EINVAL: wait out of range. */
STEPWATCH_API int stepwatch_sample(stepwatch_t* sw, uint64_t hash, int wait, const char* where);

/* Marks the rank finished (ok != 0) or failed (ok == 0) before it exits. */
STEPWATCH_API int stepwatch_finish(stepwatch_t* sw, int ok);

/* Unmaps the beacon and frees the handle; the file stays for the watchdog. NULL is a no-op. */
STEPWATCH_API void stepwatch_close(stepwatch_t* sw);

/* The beacon file this handle writes, or "" for NULL. */
STEPWATCH_API const char* stepwatch_path(const stepwatch_t* sw);

/* Static text for a return code. */
STEPWATCH_API const char* stepwatch_strerror(int code);
/* Detail of the last failed open on this thread (names the variable or file). */
STEPWATCH_API const char* stepwatch_last_error(void);
STEPWATCH_API int stepwatch_abi_version(void);

#ifdef __cplusplus
}
#endif
#endif /* STEPWATCH_STEPWATCH_H */
