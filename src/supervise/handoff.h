// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// A bounded hand-off from the thread that drains the job's pipes to a slower consumer on a
// thread of its own: a terminal nobody reads (`stepwatch run ... | less`, Ctrl-S), a log
// contract's patterns. The producer never waits, so the job never blocks on its output because
// of the watchdog; what does not fit is dropped and counted.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace stepwatch::supervise {

class Handoff {
 public:
  // `consume` runs on the hand-off's thread, one chunk at a time, in order. It should return
  // soon once `stopping()` is true (close() waits for it).
  using Consumer = std::function<void(std::string&&)>;
  Handoff(size_t max_bytes, Consumer consume);
  ~Handoff();
  Handoff(const Handoff&) = delete;
  Handoff& operator=(const Handoff&) = delete;

  // Queues the chunk; false (and counted) when the queue is full.
  bool push(std::string chunk);
  // Stops taking chunks, lets the consumer work through the queue, and joins it. Idempotent.
  void close();
  bool stopping() const { return closing_.load(); }
  uint64_t dropped_bytes() const { return dropped_.load(); }
  uint64_t dropped_chunks() const { return dropped_chunks_.load(); }

 private:
  void run();

  const size_t max_bytes_;
  Consumer consume_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  size_t queued_bytes_ = 0;
  std::atomic<bool> closing_{false};
  std::atomic<uint64_t> dropped_{0}, dropped_chunks_{0};
  std::thread thread_;
};

}  // namespace stepwatch::supervise
