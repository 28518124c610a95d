// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The C ABI of libstepwatch. Every entry point is noexcept: exceptions (only possible at open,
// the one place that allocates) are caught here and turned into codes.
#include "stepwatch/stepwatch.h"

#include <cstdio>
#include <cstring>
#include <new>

#include "src/contract/beacon_writer.h"
#include "src/contract/identity.h"

struct stepwatch_handle {
  std::unique_ptr<stepwatch::contract::BeaconWriter> writer;
};

namespace {

thread_local char g_last_error[512] = "";

void set_last_error(const char* text) {
  std::snprintf(g_last_error, sizeof g_last_error, "%s", text);
}

int code_for(stepwatch::Errc e) {
  switch (e) {
    case stepwatch::Errc::kNotFound:
      return STEPWATCH_ENOJOB;
    case stepwatch::Errc::kInvalidArgument:
      return STEPWATCH_EINVAL;
    case stepwatch::Errc::kIo:
    case stepwatch::Errc::kPermission:
      return STEPWATCH_EIO;
    default:
      return STEPWATCH_EINTERNAL;
  }
}

}  // namespace

extern "C" {

void stepwatch_options_init(stepwatch_options* o) {
  if (o == nullptr) return;
  std::memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
  o->rank = -1;
  o->local_rank = -1;
  o->world_size = -1;
  o->incarnation = -1;
}

int stepwatch_open(const stepwatch_options* o, stepwatch_t** out) {
  if (out == nullptr) {
    set_last_error("stepwatch_open: out is NULL");
    return STEPWATCH_EINVAL;
  }
  *out = nullptr;
  try {
    stepwatch::contract::IdentityOverrides ov;
    if (o != nullptr) {
      if (o->struct_size < sizeof(stepwatch_options)) {
        set_last_error(
            "stepwatch_open: options.struct_size is too small (call stepwatch_options_init)");
        return STEPWATCH_EINVAL;
      }
      if (o->dir) ov.dir = o->dir;
      if (o->job) ov.job = o->job;
      if (o->rank >= 0) ov.rank = o->rank;
      if (o->local_rank >= 0) ov.local_rank = o->local_rank;
      if (o->world_size >= 0) ov.world_size = o->world_size;
      if (o->incarnation >= 0) ov.incarnation = o->incarnation;
    }
    auto id = stepwatch::contract::resolve_identity(ov);
    if (!id) {
      set_last_error(id.error().message.c_str());
      int code = code_for(id.error().code);
      // Rank variables at fault are their own code so a launcher bug is easy to tell apart.
      if (code == STEPWATCH_EINVAL &&
          std::strstr(id.error().message.c_str(), "job id") == nullptr) {
        code = STEPWATCH_ENORANK;
      }
      return code;
    }
    auto w = stepwatch::contract::BeaconWriter::create(*id);
    if (!w) {
      set_last_error(w.error().message.c_str());
      return code_for(w.error().code);
    }
    auto* h = new stepwatch_handle{std::move(*w)};
    *out = h;
    set_last_error("");
    return STEPWATCH_OK;
  } catch (const std::bad_alloc&) {
    set_last_error("stepwatch_open: out of memory");
    return STEPWATCH_ENOMEM;
  } catch (const std::exception& e) {
    set_last_error(e.what());
    return STEPWATCH_EINTERNAL;
  } catch (...) {
    set_last_error("stepwatch_open: unknown exception");
    return STEPWATCH_EINTERNAL;
  }
}

int stepwatch_open_env(stepwatch_t** out) {
  return stepwatch_open(nullptr, out);
}

int stepwatch_step(stepwatch_t* sw, int64_t step) {
  if (sw == nullptr) return STEPWATCH_ENULL;
  if (step < 0) return STEPWATCH_EINVAL;
  return sw->writer->step(step);
}

int stepwatch_step_loss(stepwatch_t* sw, int64_t step, double loss) {
  if (sw == nullptr) return STEPWATCH_ENULL;
  if (step < 0) return STEPWATCH_EINVAL;
  return sw->writer->step_loss(step, loss);
}

int stepwatch_loss(stepwatch_t* sw, double loss) {
  return sw ? sw->writer->loss(loss) : STEPWATCH_ENULL;
}
int stepwatch_beat(stepwatch_t* sw) {
  return sw ? sw->writer->beat() : STEPWATCH_ENULL;
}
int stepwatch_phase_begin(stepwatch_t* sw, const char* name) {
  return sw ? sw->writer->phase_begin(name) : STEPWATCH_ENULL;
}
int stepwatch_phase_end(stepwatch_t* sw) {
  return sw ? sw->writer->phase_end() : STEPWATCH_ENULL;
}
int stepwatch_checkpoint_committed(stepwatch_t* sw, const char* id, int64_t step) {
  return sw ? sw->writer->checkpoint_committed(id, step) : STEPWATCH_ENULL;
}
int stepwatch_sample(stepwatch_t* sw, uint64_t hash, int wait, const char* where) {
  if (sw == nullptr) return STEPWATCH_ENULL;
  if (wait < 0) return STEPWATCH_EINVAL;
  return sw->writer->sample(hash, static_cast<uint32_t>(wait), where);
}
int stepwatch_finish(stepwatch_t* sw, int ok) {
  return sw ? sw->writer->finish(ok != 0) : STEPWATCH_ENULL;
}

void stepwatch_close(stepwatch_t* sw) {
  delete sw;
}

const char* stepwatch_path(const stepwatch_t* sw) {
  return sw ? sw->writer->path().c_str() : "";
}

const char* stepwatch_strerror(int code) {
  switch (code) {
    case STEPWATCH_OK:
      return "ok";
    case STEPWATCH_EINVAL:
      return "invalid argument";
    case STEPWATCH_ENOJOB:
      return "no job id (set STEPWATCH_JOB)";
    case STEPWATCH_ENORANK:
      return "rank identity missing or inconsistent";
    case STEPWATCH_EIO:
      return "beacon file could not be created or mapped";
    case STEPWATCH_ENULL:
      return "handle is NULL";
    case STEPWATCH_EBUSY:
      return "beacon busy (another thread is updating it)";
    case STEPWATCH_ENOMEM:
      return "out of memory";
    case STEPWATCH_EPHASE:
      return "phase_end without phase_begin, or phases nested too deep";
    case STEPWATCH_EINTERNAL:
      return "internal error";
    default:
      return "unknown stepwatch error code";
  }
}

const char* stepwatch_last_error(void) {
  return g_last_error;
}
int stepwatch_abi_version(void) {
  return STEPWATCH_ABI_VERSION;
}

}  // extern "C"
