// The job's incarnation in etcd and the launchers that relaunch on it (docs/multinode.md, Keys):
//   <prefix>/jobs/<job>/incarnation {"incarnation":N,"resume_from","resume_step","incident","by",
//                                          "at_ns"}
//       written only by the job's leader, by CAS on its mod revision; absent means 0;
//   <prefix>/jobs/<job>/launchers/<node>  {"node","pid","incarnation","started_at_ns"}
//       each node's `stepwatch run --coord`, under its own lease: while one exists, relaunching
//       the job is someone's job.
// Both are read leniently: only "incarnation" is required (a newer writer may add fields).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "src/common/result.h"
#include "src/coord/etcd_client.h"

namespace stepwatch::coord {

struct IncarnationRecord {
  int64_t incarnation = 0;
  std::string resume_from;             // the checkpoint the next incarnation resumes from; "" none
  std::optional<int64_t> resume_step;  // its step, when known
  int64_t incident = 0;                // the incident that moved it; 0 none
  std::string by;                      // the leader node that wrote it
  int64_t at_ns = 0;                   // wall clock of the write
};

struct LauncherRecord {
  std::string node;
  int pid = 0;                // the launcher's own pid on that node
  int64_t incarnation = 0;    // the incarnation it launched last
  int64_t started_at_ns = 0;  // wall clock of that launch
};

std::string incarnation_key(std::string_view prefix, std::string_view job);
std::string launchers_prefix(std::string_view prefix, std::string_view job);  // ends with '/'
std::string launcher_key(std::string_view prefix, std::string_view job, std::string_view node);

std::string incarnation_to_json(const IncarnationRecord& r);
// Errors name `source` (the key) and the field at fault.
Result<IncarnationRecord> incarnation_from_json(std::string_view text, std::string_view source);
std::string launcher_to_json(const LauncherRecord& r);
Result<LauncherRecord> launcher_from_json(std::string_view text, std::string_view source);

// The incarnation key as read: `mod_revision` 0 when the key is absent (incarnation 0), else
// what a CAS from this record compares.
struct JobIncarnation {
  IncarnationRecord record;
  int64_t mod_revision = 0;
};
// One range of the key. A value that does not parse is an error naming the key, never 0.
Result<JobIncarnation> read_incarnation(EtcdClient& etcd, const std::string& key);

// 1-63 characters from [A-Za-z0-9._-]: a node name as it appears in keys, verdicts and pages.
bool valid_node_name(std::string_view name);

}  // namespace stepwatch::coord
