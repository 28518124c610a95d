// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// A multi-node job's node-fault history in etcd; nlohmann-json stays in this file (STYLE 11).
#include "src/coord/etcd_history.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "src/common/json_fields.h"

namespace stepwatch::coord {

namespace {

using json = nlohmann::json;

using json_fields::as_int;
using json_fields::as_ints;
using json_fields::as_str;
using json_fields::as_strs;
using json_fields::need;
using json_fields::opt;

Error refused(const std::string& key) {
  return Error{Errc::kBusy, fmt::format("{}: write refused by the fence: this node no longer "
                                        "leads the job (its lease lapsed)",
                                        key)};
}

bool newer(const store::HostImplication& a, const store::HostImplication& b) {
  // Store::implications' order: newest first, then host, job, incarnation (highest first).
  if (a.at_ns != b.at_ns) return a.at_ns > b.at_ns;
  if (a.host != b.host) return a.host < b.host;
  if (a.job != b.job) return a.job < b.job;
  return a.incarnation > b.incarnation;
}

}  // namespace

std::string history_prefix(std::string_view prefix, std::string_view job) {
  return fmt::format("{}/jobs/{}/history/", prefix, job);
}

std::string history_key(std::string_view prefix, std::string_view job, int64_t incarnation) {
  return fmt::format("{}{:020d}", history_prefix(prefix, job), incarnation);
}

std::string hosts_prefix(std::string_view prefix) {
  return fmt::format("{}/hosts/", prefix);
}

std::string implication_key(std::string_view prefix, std::string_view host, std::string_view job,
                            int64_t incarnation) {
  return fmt::format("{}{}/{}/{:020d}", hosts_prefix(prefix), host, job, incarnation);
}

std::string incarnation_record_json(const store::IncarnationRecord& r) {
  json j{{"job", r.job},
         {"incarnation", r.incarnation},
         {"started_ns", r.started_ns},
         {"ended_ns", r.ended_ns ? json(*r.ended_ns) : json(nullptr)},
         {"end_reason", r.end_reason},
         {"cause", r.cause},
         {"culprit_ranks", r.culprit_ranks},
         {"culprit_hosts", r.culprit_hosts},
         {"hosts", r.hosts},
         {"checkpoint_step", r.checkpoint_step ? json(*r.checkpoint_step) : json(nullptr)},
         {"scheduler_id", r.scheduler_id}};
  return j.dump();
}

Result<store::IncarnationRecord> incarnation_record_from_json(std::string_view text,
                                                              std::string_view source) {
  return json_fields::read_object<store::IncarnationRecord>(
      text, source, [](const json& j, store::IncarnationRecord& r) {
        need(j, "job");
        need(j, "incarnation");
        opt(j, "job", r.job, as_str);
        opt(j, "incarnation", r.incarnation, as_int);
        opt(j, "started_ns", r.started_ns, as_int);
        opt(j, "ended_ns", r.ended_ns, as_int);
        opt(j, "end_reason", r.end_reason, as_str);
        opt(j, "cause", r.cause, as_str);
        std::vector<int64_t> ranks;
        opt(j, "culprit_ranks", ranks, as_ints);
        r.culprit_ranks.assign(ranks.begin(), ranks.end());
        opt(j, "culprit_hosts", r.culprit_hosts, as_strs);
        opt(j, "hosts", r.hosts, as_strs);
        opt(j, "checkpoint_step", r.checkpoint_step, as_int);
        opt(j, "scheduler_id", r.scheduler_id, as_str);
      });
}

std::string implication_json(const store::HostImplication& i) {
  return json{{"host", i.host},   {"job", i.job},     {"incarnation", i.incarnation},
              {"at_ns", i.at_ns}, {"cause", i.cause}, {"reason", i.reason}}
      .dump();
}

Result<store::HostImplication> implication_from_json(std::string_view text,
                                                     std::string_view source) {
  return json_fields::read_object<store::HostImplication>(
      text, source, [](const json& j, store::HostImplication& i) {
        for (const char* field : {"host", "job", "incarnation", "at_ns"}) need(j, field);
        opt(j, "host", i.host, as_str);
        opt(j, "job", i.job, as_str);
        opt(j, "incarnation", i.incarnation, as_int);
        opt(j, "at_ns", i.at_ns, as_int);
        opt(j, "cause", i.cause, as_str);
        opt(j, "reason", i.reason, as_str);
      });
}

EtcdHistory::EtcdHistory(Kv& etcd, std::string prefix, std::string fence_key,
                         std::function<int64_t()> fence)
    : etcd_(etcd),
      prefix_(std::move(prefix)),
      fence_key_(std::move(fence_key)),
      fence_(std::move(fence)) {}

Result<Compare> EtcdHistory::fenced(std::string_view what) const {
  int64_t fence = fence_();
  if (fence == 0) {
    return Error{Errc::kBusy, fmt::format("{}: not written: this node does not lead the job (the "
                                          "history is its leader's to write, fenced by {})",
                                          what, fence_key_)};
  }
  return Compare::create_rev(fence_key_, fence);
}

Status EtcdHistory::record_incarnation(const store::IncarnationRecord& record) {
  const std::string key = history_key(prefix_, record.job, record.incarnation);
  if (record.job.empty()) {
    return Error{Errc::kInvalidArgument,
                 "record_incarnation: " + *store::incarnation_problem(record)};
  }
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto fence = fenced(key);
    if (!fence) return fence.error();
    auto got = etcd_.range(key);
    if (!got) return got.error();
    store::IncarnationRecord r = record;
    int64_t mod = 0;
    if (!got->kvs.empty()) {
      auto old = incarnation_record_from_json(got->kvs[0].value, key);
      if (!old) return old.error();
      mod = got->kvs[0].mod_revision;
      r = std::move(*old);
      store::merge_incarnation(r, record);
    }
    if (auto problem = store::incarnation_problem(r))
      return Error{Errc::kInvalidArgument, fmt::format("{}: {}", key, *problem)};
    Compare as_read = mod ? Compare::mod_rev(key, mod) : Compare::create_rev(key, 0);
    auto t = etcd_.txn({as_read, *fence}, {TxnOp::put(key, incarnation_record_json(r))},
                       {TxnOp::get(fence_key_)});
    if (!t) return t.error();
    if (t->succeeded) return {};
    if (!fence_held(*t, fence->number)) return refused(key);
    // Another write moved the record meanwhile: merge into that one.
  }
  return Error{Errc::kBusy, fmt::format("{}: kept changing under the write", key)};
}

Result<std::vector<store::IncarnationRecord>> EtcdHistory::incarnations(const std::string& job,
                                                                        int limit) {
  RangeOptions o;
  o.prefix = true;
  o.descending = true;
  o.limit = limit > 0 ? limit : 0;
  auto got = etcd_.range(history_prefix(prefix_, job), o);
  if (!got) return got.error();
  std::vector<store::IncarnationRecord> out;
  for (const auto& kv : got->kvs) {
    auto r = incarnation_record_from_json(kv.value, kv.key);
    if (!r) return r.error();
    out.push_back(std::move(*r));
  }
  return out;
}

Status EtcdHistory::record_implication(const store::HostImplication& i) {
  if (i.host.empty() || i.job.empty()) {
    return Error{Errc::kInvalidArgument,
                 fmt::format("record_implication: host and job are required (host '{}', job "
                             "'{}', incarnation {})",
                             i.host, i.job, i.incarnation)};
  }
  const std::string key = implication_key(prefix_, i.host, i.job, i.incarnation);
  auto fence = fenced(key);
  if (!fence) return fence.error();
  // Written once: a repeat (or a previous leader's record) is kept as it is.
  auto t = etcd_.txn({Compare::create_rev(key, 0), *fence}, {TxnOp::put(key, implication_json(i))},
                     {TxnOp::get(fence_key_)});
  if (!t) return t.error();
  if (t->succeeded || fence_held(*t, fence->number)) return {};  // or kept as it was
  return refused(key);
}

Result<std::vector<store::HostImplication>> EtcdHistory::implications(int64_t since_ns) {
  RangeOptions o;
  o.prefix = true;
  auto got = etcd_.range(hosts_prefix(prefix_), o);
  if (!got) return got.error();
  std::vector<store::HostImplication> out;
  for (const auto& kv : got->kvs) {
    auto i = implication_from_json(kv.value, kv.key);
    if (!i) return i.error();
    if (i->at_ns >= since_ns) out.push_back(std::move(*i));
  }
  std::sort(out.begin(), out.end(), newer);
  return out;
}

}  // namespace stepwatch::coord
