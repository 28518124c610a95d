// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Slurm's commands as shell scripts in a directory, for tests of the code that calls them
// (runbook::SlurmControl and the resume owner; the real Slurm runs in tests/e2e/test_slurm*.py).
// Options before the command, up to the "--" that ends them, are skipped as getopt_long would.
//   scontrol -o -- show job ID    a one-line record with Restarts from the file `restarts` and
//                                 UserId from `user` (this process's uid unless set_user_id)
//   scontrol -- requeue ID        Restarts + 1, the id appended to `requeues`
//   scontrol -- update ...        its NodeName=... State=DRAIN arguments appended to `drains`
//   scancel -- ID                 the id appended to `cancels`; exits 1 when the file
//                                 `scancel-fails` exists
// Every call appends its whole command line to `calls`: what ran at all.
#pragma once

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "src/spec/spec.h"

namespace stepwatch::test {

class FakeSlurm {
 public:
  explicit FakeSlurm(std::filesystem::path dir) : dir_(std::move(dir)) {
    std::filesystem::create_directories(dir_);
    write_script("scontrol",
                 fmt::format("#!/bin/sh\n"
                             "echo \"scontrol $*\" >> {0}/calls\n"
                             "n=$(cat {0}/restarts)\n"
                             "while [ $# -gt 0 ]; do\n"
                             "  case \"$1\" in --) shift; break ;; -*) shift ;; *) break ;; esac\n"
                             "done\n"
                             "if [ \"$1\" = show ]; then\n"
                             "  echo \"JobId=$3 JobName=train.sh UserId=$(cat {0}/user) "
                             "JobState=RUNNING Requeue=1 Restarts=$n BatchHost=a NodeList=a,b\"\n"
                             "elif [ \"$1\" = requeue ]; then\n"
                             "  echo $((n + 1)) > {0}/restarts; echo \"$2\" >> {0}/requeues\n"
                             "elif [ \"$1\" = update ]; then\n"
                             "  echo \"$2 $3\" >> {0}/drains\n"
                             "fi\n",
                             dir_.string()));
    write_script("scancel", fmt::format("#!/bin/sh\n"
                                        "echo \"scancel $*\" >> {0}/calls\n"
                                        "if [ \"$1\" = -- ]; then shift; fi\n"
                                        "if [ -e {0}/scancel-fails ]; then echo \"scancel: error: "
                                        "Kill job error on job id $1\" >&2; exit 1; fi\n"
                                        "echo \"$1\" >> {0}/cancels\n",
                                        dir_.string()));
    set_restarts(0);
    set_user_id(::getuid());
  }

  std::string scontrol() const { return (dir_ / "scontrol").string(); }
  std::string scancel() const { return (dir_ / "scancel").string(); }
  // The [slurm] settings that use these scripts.
  spec::SlurmSettings settings() const {
    spec::SlurmSettings s;
    s.scontrol = scontrol();
    s.scancel = scancel();
    return s;
  }
  void set_restarts(int n) const { std::ofstream((dir_ / "restarts").string()) << n << "\n"; }
  // The job's UserId=name(uid) in `scontrol show job`.
  void set_user_id(uid_t uid) const {
    std::ofstream((dir_ / "user").string()) << fmt::format("user{0}({0})\n", uid);
  }
  void fail_scancel() const { std::ofstream((dir_ / "scancel-fails").string()) << "1\n"; }
  std::string requeues() const { return read("requeues"); }
  std::string cancels() const { return read("cancels"); }
  std::string drains() const { return read("drains"); }
  // Every command line run, one a line ("" when nothing ran).
  std::string calls() const { return read("calls"); }

 private:
  void write_script(const char* name, const std::string& text) const {
    std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  }
  std::string read(const char* name) const {
    std::ifstream in((dir_ / name).string());
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  std::filesystem::path dir_;
};

}  // namespace stepwatch::test
