// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
/* stepwatch beacon, contract version 1 (1.1: the progress sampler block carved from reserved
 * bytes; a 1.0 record reads as "no sampler"): the authoritative byte layout.
 *
 * One record per rank at $STEPWATCH_DIR/<job>/rank-<rank>.beacon, exactly
 * STEPWATCH_BEACON_V1_SIZE bytes, little-endian, every field naturally aligned.
 * docs/contract.md explains the update protocol (a seqlock on `seq`). Changing any offset,
 * size or meaning here requires a new version number; the static asserts below keep the
 * compiler honest. Usable from C11 and C++.
 */
#ifndef STEPWATCH_BEACON_V1_H
#define STEPWATCH_BEACON_V1_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* "SWBEACON" read as a little-endian uint64. */
#define STEPWATCH_BEACON_MAGIC UINT64_C(0x4E4F434145425753)
#define STEPWATCH_BEACON_VERSION 1u
#define STEPWATCH_BEACON_V1_SIZE 1024u

#define STEPWATCH_JOB_MAX 64u /* bytes including the terminating NUL */
#define STEPWATCH_HOST_MAX 64u
#define STEPWATCH_PHASE_MAX 32u
#define STEPWATCH_CKPT_ID_MAX 64u
#define STEPWATCH_RECENT_STEPS 16u /* ring of the last committed steps */

/* sample_wait: what the main thread is waiting in, as the progress sampler saw it */
#define STEPWATCH_WAIT_NONE 0u /* running its own code, or a wait the sampler does not know */
#define STEPWATCH_WAIT_COLLECTIVE                                                            \
  1u                             /* a collective or its wait: all_reduce, broadcast, barrier \
                                  */
#define STEPWATCH_WAIT_DEVICE 2u /* the device: torch.cuda.synchronize, an event or stream */
#define STEPWATCH_WAIT_STORE 3u  /* rendezvous: init_process_group, store get/wait */
#define STEPWATCH_WAIT_MAX 3u
#define STEPWATCH_WHERE_MAX 64u /* sample_where, bytes including the terminating NUL */

/* status */
#define STEPWATCH_STATUS_RUNNING 0u
#define STEPWATCH_STATUS_FINISHED 1u /* the trainer said it finished cleanly */
#define STEPWATCH_STATUS_FAILED 2u   /* the trainer said it is exiting on an error */

typedef struct stepwatch_step_mark {
  int64_t step;    /* step number as given by the trainer */
  int64_t mono_ns; /* CLOCK_MONOTONIC when it was committed */
} stepwatch_step_mark;

typedef struct stepwatch_beacon_v1 {
  /* --- identity: written once at creation --- */
  uint64_t magic;           /*   0 STEPWATCH_BEACON_MAGIC */
  uint32_t version;         /*   8 STEPWATCH_BEACON_VERSION */
  uint32_t size;            /*  12 sizeof(stepwatch_beacon_v1) */
  uint64_t seq;             /*  16 seqlock: odd while a writer is inside an update */
  uint64_t pid_start_ticks; /*  24 field 22 of /proc/<pid>/stat: pid reuse guard */
  int32_t pid;              /*  32 the writing process */
  int32_t rank;             /*  36 global rank, 0..world_size-1 */
  int32_t local_rank;       /*  40 rank on this host */
  int32_t world_size;       /*  44 ranks in the job */
  uint32_t incarnation;     /*  48 launch number, from STEPWATCH_INCARNATION */
  uint32_t status;          /*  52 STEPWATCH_STATUS_* */
  int64_t created_wall_ns;  /*  56 CLOCK_REALTIME at open */
  int64_t created_mono_ns;  /*  64 CLOCK_MONOTONIC at open */
  /* --- progress --- */
  int64_t step;           /*  72 last committed step; -1 before the first */
  int64_t step_wall_ns;   /*  80 */
  int64_t step_mono_ns;   /*  88 */
  uint64_t step_count;    /*  96 number of step commits in this incarnation */
  int64_t phase_wall_ns;  /* 104 when the current phase began */
  int64_t phase_mono_ns;  /* 112 */
  int64_t beat_wall_ns;   /* 120 last beat; 0 if none */
  int64_t beat_mono_ns;   /* 128 */
  uint64_t beat_count;    /* 136 beats in this incarnation */
  int64_t ckpt_step;      /* 144 step of the last committed checkpoint; -1 if none */
  int64_t ckpt_wall_ns;   /* 152 */
  int64_t ckpt_mono_ns;   /* 160 */
  double loss;            /* 168 last loss; NaN: not reported */
  int64_t loss_wall_ns;   /* 176 */
  int64_t loss_mono_ns;   /* 184 */
  uint64_t phase_count;   /* 192 phase transitions so far (catches a phase shorter than a poll) */
  int64_t update_mono_ns; /* 200 last write of any kind */
  char job[STEPWATCH_JOB_MAX];         /* 208 NUL-terminated */
  char host[STEPWATCH_HOST_MAX];       /* 272 NUL-terminated */
  char phase[STEPWATCH_PHASE_MAX];     /* 336 NUL-terminated current phase */
  char ckpt_id[STEPWATCH_CKPT_ID_MAX]; /* 368 NUL-terminated last committed checkpoint id */
  uint8_t reserved0[16];               /* 432 zero */
  stepwatch_step_mark recent[STEPWATCH_RECENT_STEPS]; /* 448 ring, slot = (step_count-1) % 16 */
  /* --- progress sampler (contract 1.1): a block with its own seqlock, written only by the
   * rank's sampler thread, so a sample never makes a step call busy. All zero when no sampler
   * runs (a 1.0 writer): readers treat sample_count == 0 as "no sampler". --- */
  uint64_t sample_seq;    /* 704 seqlock of this block: odd while the sampler is inside */
  uint32_t sample_wait;   /* 712 STEPWATCH_WAIT_* */
  uint32_t sample_pad;    /* 716 zero */
  uint64_t sample_count;  /* 720 samples taken */
  int64_t sample_wall_ns; /* 728 the last sample: the sampler's own liveness */
  int64_t sample_mono_ns; /* 736 */
  int64_t moved_wall_ns;  /* 744 when the main thread's position (hash or wait) last changed */
  int64_t moved_mono_ns;  /* 752 */
  uint64_t sample_hash;   /* 760 digest of the main thread's top frames; 0: unknown */
  char sample_where[STEPWATCH_WHERE_MAX]; /* 768 NUL-terminated, printable: "all_reduce (...)" */
  uint8_t reserved1[192];                 /* 832 zero; future fields need a new version */
} stepwatch_beacon_v1;

#ifdef __cplusplus
#define STEPWATCH_STATIC_ASSERT static_assert
#else
#define STEPWATCH_STATIC_ASSERT _Static_assert
#endif

STEPWATCH_STATIC_ASSERT(sizeof(stepwatch_beacon_v1) == STEPWATCH_BEACON_V1_SIZE, "beacon v1 size");
STEPWATCH_STATIC_ASSERT(offsetof(stepwatch_beacon_v1, seq) == 16, "seq offset");
STEPWATCH_STATIC_ASSERT(offsetof(stepwatch_beacon_v1, pid) == 32, "pid offset");
STEPWATCH_STATIC_ASSERT(offsetof(stepwatch_beacon_v1, status) == 52, "status offset");
STEPWATCH_STATIC_ASSERT(offsetof(stepwatch_beacon_v1, step) == 72, "step offset");
STEPWATCH_STATIC_ASSERT(offsetof(stepwatch_beacon_v1, loss) == 168, "loss offset");
STEPWATCH_STATIC_ASSERT(offsetof(stepwatch_beacon_v1, update_mono_ns) == 200, "update offset");
STEPWATCH_STATIC_ASSERT(offsetof(stepwatch_beacon_v1, job) == 208, "job offset");
STEPWATCH_STATIC_ASSERT(offsetof(stepwatch_beacon_v1, host) == 272, "host offset");
STEPWATCH_STATIC_ASSERT(offsetof(stepwatch_beacon_v1, phase) == 336, "phase offset");
STEPWATCH_STATIC_ASSERT(offsetof(stepwatch_beacon_v1, ckpt_id) == 368, "ckpt_id offset");
STEPWATCH_STATIC_ASSERT(offsetof(stepwatch_beacon_v1, recent) == 448, "recent offset");
STEPWATCH_STATIC_ASSERT(offsetof(stepwatch_beacon_v1, sample_seq) == 704, "sample_seq offset");
STEPWATCH_STATIC_ASSERT(offsetof(stepwatch_beacon_v1, sample_hash) == 760, "sample_hash offset");
STEPWATCH_STATIC_ASSERT(offsetof(stepwatch_beacon_v1, sample_where) == 768, "sample_where offset");
STEPWATCH_STATIC_ASSERT(offsetof(stepwatch_beacon_v1, reserved1) == 832, "reserved1 offset");

#ifdef __cplusplus
}
#endif
#endif /* STEPWATCH_BEACON_V1_H */
