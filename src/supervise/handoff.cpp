// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/supervise/handoff.h"

namespace stepwatch::supervise {

Handoff::Handoff(size_t max_bytes, Consumer consume)
    : max_bytes_(max_bytes), consume_(std::move(consume)), thread_([this] { run(); }) {}

Handoff::~Handoff() {
  close();
}

bool Handoff::push(std::string chunk) {
  {
    std::lock_guard lock(mu_);
    if (!closing_.load() && queued_bytes_ + chunk.size() <= max_bytes_) {
      queued_bytes_ += chunk.size();
      queue_.push_back(std::move(chunk));
      cv_.notify_one();
      return true;
    }
  }
  dropped_ += chunk.size();
  ++dropped_chunks_;
  return false;
}

void Handoff::close() {
  {
    std::lock_guard lock(mu_);
    closing_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void Handoff::run() {
  for (;;) {
    std::string chunk;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return !queue_.empty() || closing_.load(); });
      if (queue_.empty()) return;  // closing, and nothing left
      chunk = std::move(queue_.front());
      queue_.pop_front();
      queued_bytes_ -= chunk.size();
    }
    consume_(std::move(chunk));
  }
}

}  // namespace stepwatch::supervise
