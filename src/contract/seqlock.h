// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The beacon's update protocol: a single-word sequence lock shared between processes.
//
// Writer: CAS seq even -> odd (fails instead of waiting when another writer is inside),
// release fence, field stores, then store seq+2 with release. Reader: load seq (acquire); if
// odd retry; copy the record; acquire fence; reload seq; equal means the copy is consistent.
// Fields are written and read with relaxed atomic word accesses, so the same code is
// race-free when writer and reader are threads of one process (the concurrency test).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "stepwatch/beacon_v1.h"

namespace stepwatch::contract {

template <class T>
inline void store_relaxed(T* field, T value) {
  __atomic_store_n(field, value, __ATOMIC_RELAXED);
}

inline void store_relaxed(double* field, double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  __atomic_store_n(reinterpret_cast<uint64_t*>(field), bits, __ATOMIC_RELAXED);
}

// Copies a NUL-terminated string into a fixed field of a multiple of 8 bytes, padding with NUL.
inline void store_string(char* field, size_t field_size, const char* src, size_t len) {
  uint64_t* words = reinterpret_cast<uint64_t*>(field);
  for (size_t w = 0; w < field_size / 8; ++w) {
    uint64_t word = 0;
    for (size_t b = 0; b < 8; ++b) {
      size_t i = w * 8 + b;
      uint64_t c = (i < len && i + 1 < field_size) ? static_cast<unsigned char>(src[i]) : 0;
      word |= c << (8 * b);  // little-endian layout
    }
    __atomic_store_n(&words[w], word, __ATOMIC_RELAXED);
  }
}

// Enters an update of the block guarded by `word` (the record's `seq`, or the sampler block's
// `sample_seq`). Returns false (and writes nothing) if another writer is inside.
inline bool seq_begin(uint64_t* word, uint64_t* seq) {
  uint64_t s = __atomic_load_n(word, __ATOMIC_RELAXED);
  if (s & 1) return false;
  if (!__atomic_compare_exchange_n(word, &s, s + 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
    return false;
  // Orders the odd seq before the field stores that follow (smp_wmb in kernel seqlocks).
  __atomic_thread_fence(__ATOMIC_RELEASE);
  *seq = s;
  return true;
}
inline bool seq_begin(stepwatch_beacon_v1* b, uint64_t* seq) {
  return seq_begin(&b->seq, seq);
}

inline void seq_end(uint64_t* word, uint64_t seq) {
  __atomic_store_n(word, seq + 2, __ATOMIC_RELEASE);
}
inline void seq_end(stepwatch_beacon_v1* b, uint64_t seq) {
  seq_end(&b->seq, seq);
}

// Leaves an update that wrote nothing: seq returns to its even value (readers saw no change).
inline void seq_abort(stepwatch_beacon_v1* b, uint64_t seq) {
  __atomic_store_n(&b->seq, seq, __ATOMIC_RELEASE);
}

enum class ReadOutcome { kOk, kOdd, kChanged };

// One read attempt of `src` (a mapping shared with a writer) into `dst`.
// `seen` (optional) receives the sequence number the attempt started from.
inline ReadOutcome seq_read_once(const stepwatch_beacon_v1* src, stepwatch_beacon_v1* dst,
                                 uint64_t* seen = nullptr) {
  uint64_t s1 = __atomic_load_n(&src->seq, __ATOMIC_ACQUIRE);
  if (seen != nullptr) *seen = s1;
  if (s1 & 1) return ReadOutcome::kOdd;
  const uint64_t* from = reinterpret_cast<const uint64_t*>(src);
  uint64_t* to = reinterpret_cast<uint64_t*>(dst);
  for (size_t i = 0; i < sizeof(stepwatch_beacon_v1) / 8; ++i)
    to[i] = __atomic_load_n(&from[i], __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
  uint64_t s2 = __atomic_load_n(&src->seq, __ATOMIC_RELAXED);
  return s1 == s2 ? ReadOutcome::kOk : ReadOutcome::kChanged;
}

// The progress sampler's block: from sample_seq up to reserved1, guarded by its own seqlock.
inline constexpr size_t kSampleBlockBegin = offsetof(stepwatch_beacon_v1, sample_seq);
inline constexpr size_t kSampleBlockEnd = offsetof(stepwatch_beacon_v1, reserved1);

// One read attempt of the sampler block of `src` into the same bytes of `dst`: the record's
// copy (seq_read_once) is consistent for the record's fields only, since the sampler writes
// under sample_seq.
inline ReadOutcome sample_read_once(const stepwatch_beacon_v1* src, stepwatch_beacon_v1* dst) {
  uint64_t s1 = __atomic_load_n(&src->sample_seq, __ATOMIC_ACQUIRE);
  if (s1 & 1) return ReadOutcome::kOdd;
  const uint64_t* from = reinterpret_cast<const uint64_t*>(src);
  uint64_t* to = reinterpret_cast<uint64_t*>(dst);
  for (size_t i = kSampleBlockBegin / 8; i < kSampleBlockEnd / 8; ++i)
    to[i] = __atomic_load_n(&from[i], __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
  uint64_t s2 = __atomic_load_n(&src->sample_seq, __ATOMIC_RELAXED);
  return s1 == s2 ? ReadOutcome::kOk : ReadOutcome::kChanged;
}

}  // namespace stepwatch::contract
