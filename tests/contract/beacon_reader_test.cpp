// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Reader errors, each produced by crafted bytes or files: the code and a message naming the file.
#include "src/contract/beacon_reader.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <filesystem>
#include <functional>

#include "src/contract/beacon_writer.h"
#include "tests/contract/test_support.h"

namespace stepwatch::contract {
namespace {

using ::testing::HasSubstr;

constexpr const char* kPath = "/run/x/job-1/rank-0.beacon";

Result<RankSnapshot> decode(const stepwatch_beacon_v1& b, const ReadOptions& o = {}) {
  return decode_beacon(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&b), sizeof b), o,
                       kPath);
}

Result<RankSnapshot> decode(std::string_view bytes, const ReadOptions& o = {}) {
  return decode_beacon(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), o,
      kPath);
}

TEST(DecodeBeacon, AcceptsAValidRecord) {
  stepwatch_beacon_v1 b = test::valid_record();
  auto s = decode(b);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->path, kPath);
  EXPECT_EQ(s->job, "job-1");
  EXPECT_EQ(s->host, "node-1");
  EXPECT_EQ(s->phase, "train");
  EXPECT_EQ(s->pid, 4242);
  EXPECT_EQ(s->pid_start_ticks, 1234u);
  EXPECT_EQ(*s->step, 7);
  ASSERT_EQ(s->recent.size(), 1u);
  EXPECT_FALSE(s->checkpoint.has_value());
  EXPECT_FALSE(s->loss.has_value());
  // A record before its first step.
  b.step = -1;
  b.step_count = 0;
  s = decode(b);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_FALSE(s->step.has_value());
  EXPECT_TRUE(s->recent.empty());
  // An unterminated checkpoint id is ignored while no checkpoint was committed.
  std::memset(b.ckpt_id, 'c', sizeof b.ckpt_id);
  EXPECT_TRUE(decode(b).ok());
}

struct Mutation {
  const char* name;
  std::function<void(stepwatch_beacon_v1&)> mutate;
  Errc code;
  std::string message_has;
};

TEST(DecodeBeacon, RejectsEachInvalidField) {
  const std::vector<Mutation> table = {
      {"bad magic", [](auto& b) { b.magic = 0x1122334455667788; }, Errc::kBadMagic,
       "bad magic 0x1122334455667788"},
      {"zero magic", [](auto& b) { b.magic = 0; }, Errc::kBadMagic, "not a stepwatch beacon"},
      {"unknown version", [](auto& b) { b.version = 2; }, Errc::kUnknownVersion, "version 2"},
      {"version 0", [](auto& b) { b.version = 0; }, Errc::kUnknownVersion, "version 0"},
      {"header size mismatch", [](auto& b) { b.size = 512; }, Errc::kSizeMismatch,
       "header says 512"},
      {"header size larger", [](auto& b) { b.size = 2048; }, Errc::kSizeMismatch,
       "header says 2048"},
      {"odd seq", [](auto& b) { b.seq = 7; }, Errc::kTorn, "writer was inside an update"},
      {"job unterminated", [](auto& b) { std::memset(b.job, 'j', sizeof b.job); },
       Errc::kInvalidField, "field job is not NUL-terminated"},
      {"host unterminated", [](auto& b) { std::memset(b.host, 'h', sizeof b.host); },
       Errc::kInvalidField, "field host is not NUL-terminated"},
      {"phase unterminated", [](auto& b) { std::memset(b.phase, 'p', sizeof b.phase); },
       Errc::kInvalidField, "field phase is not NUL-terminated"},
      {"ckpt_id unterminated",
       [](auto& b) {
         b.ckpt_step = 3;
         std::memset(b.ckpt_id, 'c', sizeof b.ckpt_id);
       },
       Errc::kInvalidField, "field ckpt_id is not NUL-terminated"},
      {"empty job", [](auto& b) { b.job[0] = '\0'; }, Errc::kInvalidField, "field job"},
      {"job with a slash", [](auto& b) { std::strcpy(b.job, "a/b"); }, Errc::kInvalidField,
       "field job"},
      {"job starting with a dot", [](auto& b) { std::strcpy(b.job, "..x"); }, Errc::kInvalidField,
       "field job"},
      {"host with a control byte", [](auto& b) { std::strcpy(b.host, "n\x01"); },
       Errc::kInvalidField, "field host"},
      {"empty phase", [](auto& b) { b.phase[0] = '\0'; }, Errc::kInvalidField, "field phase"},
      {"phase with a space", [](auto& b) { std::strcpy(b.phase, "a b"); }, Errc::kInvalidField,
       "field phase"},
      {"empty checkpoint id",
       [](auto& b) {
         b.ckpt_step = 3;
         b.ckpt_id[0] = '\0';
       },
       Errc::kInvalidField, "field ckpt_id"},
      {"checkpoint id with a quote",
       [](auto& b) {
         b.ckpt_step = 3;
         std::strcpy(b.ckpt_id, "a\"b");
       },
       Errc::kInvalidField, "field ckpt_id"},
      {"sample wait out of range",
       [](auto& b) {
         b.sample_count = 1;
         b.sample_wait = 9;
       },
       Errc::kInvalidField, "field sample_wait is 9"},
      {"sample where not terminated",
       [](auto& b) {
         b.sample_count = 1;
         std::memset(b.sample_where, 'w', sizeof b.sample_where);
       },
       Errc::kInvalidField, "field sample_where is not NUL-terminated"},
      {"sample where unprintable",
       [](auto& b) {
         b.sample_count = 1;
         std::strcpy(b.sample_where, "a\x7f");
       },
       Errc::kInvalidField, "field sample_where holds an unprintable byte"},
      {"sample negative stamp",
       [](auto& b) {
         b.sample_count = 1;
         b.moved_mono_ns = -5;
       },
       Errc::kInvalidField, "field sample has a negative timestamp -5"},
      {"world_size 0", [](auto& b) { b.world_size = 0; }, Errc::kInvalidField, "field world_size"},
      {"world_size negative", [](auto& b) { b.world_size = -4; }, Errc::kInvalidField,
       "field world_size"},
      {"rank == world_size",
       [](auto& b) {
         b.world_size = 4;
         b.rank = 4;
       },
       Errc::kInvalidField, "field rank is 4, outside 0..3"},
      {"rank negative", [](auto& b) { b.rank = -1; }, Errc::kInvalidField, "field rank"},
      {"local_rank >= world_size",
       [](auto& b) {
         b.world_size = 2;
         b.local_rank = 2;
       },
       Errc::kInvalidField, "field local_rank"},
      {"pid 0", [](auto& b) { b.pid = 0; }, Errc::kInvalidField, "field pid"},
      {"pid negative", [](auto& b) { b.pid = -5; }, Errc::kInvalidField, "field pid"},
      {"status 3", [](auto& b) { b.status = 3; }, Errc::kInvalidField, "field status"},
      {"step -2", [](auto& b) { b.step = -2; }, Errc::kInvalidField, "field step"},
      {"ckpt_step -2", [](auto& b) { b.ckpt_step = -2; }, Errc::kInvalidField, "field ckpt_step"},
  };
  for (const auto& m : table) {
    SCOPED_TRACE(m.name);
    stepwatch_beacon_v1 b = test::valid_record();
    m.mutate(b);
    auto s = decode(b);
    ASSERT_FALSE(s.ok()) << "accepted";
    EXPECT_EQ(s.error().code, m.code) << s.error().message;
    EXPECT_THAT(s.error().message, HasSubstr(m.message_has));
    EXPECT_THAT(s.error().message, HasSubstr(kPath)) << "the message names the file";
  }
}

TEST(DecodeBeacon, RejectsEveryNegativeTimestamp) {
  const size_t offsets[] = {
      offsetof(stepwatch_beacon_v1, created_wall_ns),
      offsetof(stepwatch_beacon_v1, created_mono_ns),
      offsetof(stepwatch_beacon_v1, step_wall_ns),
      offsetof(stepwatch_beacon_v1, step_mono_ns),
      offsetof(stepwatch_beacon_v1, phase_wall_ns),
      offsetof(stepwatch_beacon_v1, phase_mono_ns),
      offsetof(stepwatch_beacon_v1, beat_wall_ns),
      offsetof(stepwatch_beacon_v1, beat_mono_ns),
      offsetof(stepwatch_beacon_v1, ckpt_wall_ns),
      offsetof(stepwatch_beacon_v1, ckpt_mono_ns),
      offsetof(stepwatch_beacon_v1, loss_wall_ns),
      offsetof(stepwatch_beacon_v1, loss_mono_ns),
      offsetof(stepwatch_beacon_v1, update_mono_ns),
  };
  for (size_t off : offsets) {
    SCOPED_TRACE(off);
    stepwatch_beacon_v1 b = test::valid_record();
    int64_t neg = -1;
    std::memcpy(reinterpret_cast<char*>(&b) + off, &neg, sizeof neg);
    auto s = decode(b);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().code, Errc::kInvalidField);
    EXPECT_THAT(s.error().message, HasSubstr("negative timestamp -1"));
    EXPECT_THAT(s.error().message, HasSubstr(kPath));
  }
}

TEST(DecodeBeacon, TheSamplerBlockIsReadOnlyWhenASamplerWroteIt) {
  stepwatch_beacon_v1 b = test::valid_record();
  b.sample_wait = 9;  // garbage in a block no sampler wrote (count 0) is not read
  auto none = decode(b);
  ASSERT_TRUE(none.ok()) << none.error().message;
  EXPECT_FALSE(none->sample.has_value());
  b.sample_wait = STEPWATCH_WAIT_DEVICE;
  b.sample_count = 3;
  b.sample_hash = 42;
  b.sample_wall_ns = 1'700'000'000'000'000'000;
  b.sample_mono_ns = 900;
  b.moved_wall_ns = 1'699'999'999'000'000'000;
  b.moved_mono_ns = 800;
  std::strcpy(b.sample_where, "synchronize (__init__.py:566)");
  auto some = decode(b);
  ASSERT_TRUE(some.ok()) << some.error().message;
  ASSERT_TRUE(some->sample.has_value());
  EXPECT_EQ(some->sample->wait, WaitKind::kDevice);
  EXPECT_EQ(some->sample->hash, 42u);
  EXPECT_EQ(some->sample->moved_at.mono_ns, 800);
  EXPECT_EQ(some->sample->where, "synchronize (__init__.py:566)");
  // A copy taken while the sampler was inside an update has no block this time.
  b.sample_seq = 7;
  auto torn = decode(b);
  ASSERT_TRUE(torn.ok());
  EXPECT_FALSE(torn->sample.has_value());
}

TEST(DecodeBeacon, LengthErrors) {
  stepwatch_beacon_v1 b = test::valid_record();
  std::string whole(test::as_bytes(b));
  struct Case {
    size_t size;
    Errc code;
    std::string message_has;
  } cases[] = {
      {0, Errc::kTruncated, "0 bytes, shorter than the 16-byte header"},
      {15, Errc::kTruncated, "15 bytes, shorter"},
      {16, Errc::kTruncated, "16 bytes, header says 1024"},
      {1023, Errc::kTruncated, "1023 bytes, header says 1024"},
      {1025, Errc::kSizeMismatch, "1025 bytes, header says 1024"},
      {4096, Errc::kSizeMismatch, "4096 bytes"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.size);
    std::string bytes = whole;
    bytes.resize(c.size, '\0');
    auto s = decode(bytes);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().code, c.code) << s.error().message;
    EXPECT_THAT(s.error().message, HasSubstr(c.message_has));
    EXPECT_THAT(s.error().message, HasSubstr(kPath));
  }
}

TEST(DecodeBeacon, JobMismatch) {
  stepwatch_beacon_v1 b = test::valid_record("job-a");
  auto s = decode(b, {.expected_job = "job-b"});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, Errc::kJobMismatch);
  EXPECT_THAT(s.error().message, HasSubstr("\"job-a\""));
  EXPECT_THAT(s.error().message, HasSubstr("\"job-b\""));
  EXPECT_THAT(s.error().message, HasSubstr(kPath));
  EXPECT_TRUE(decode(b, {.expected_job = "job-a"}).ok());
}

TEST(DecodeBeacon, LossAndCheckpointPresence) {
  stepwatch_beacon_v1 b = test::valid_record();
  b.loss = std::nan("");
  b.loss_mono_ns = 10;
  auto s = decode(b);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(s->loss.has_value());
  EXPECT_TRUE(std::isnan(*s->loss));
  b.ckpt_step = 0;
  std::strcpy(b.ckpt_id, "first");
  s = decode(b);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(s->checkpoint.has_value());
  EXPECT_EQ(s->checkpoint->id, "first");
}

// --- files -------------------------------------------------------------------------------

class BeaconFiles : public ::testing::Test {
 protected:
  std::string put(const std::string& name, std::string_view bytes) {
    std::string p = dir_ / name;
    test::write_file(p, bytes);
    return p;
  }
  void expect_error(const std::string& path, Errc code, const std::string& message_has,
                    const ReadOptions& o = {}) {
    auto s = read_beacon_file(path, o);
    ASSERT_FALSE(s.ok()) << path << " accepted";
    EXPECT_EQ(s.error().code, code) << s.error().message;
    EXPECT_THAT(s.error().message, HasSubstr(message_has));
    EXPECT_THAT(s.error().message, HasSubstr(path)) << "the message names the file";
  }
  test::TempDir dir_;
};

TEST_F(BeaconFiles, ReadsAValidFile) {
  std::string p = put("rank-0.beacon", test::as_bytes(test::valid_record()));
  auto s = read_beacon_file(p, {.expected_job = "job-1"});
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->path, p);
  EXPECT_EQ(*s->step, 7);
}

TEST_F(BeaconFiles, MissingFile) {
  expect_error(dir_ / "rank-9.beacon", Errc::kNotFound, "no such beacon");
}

TEST_F(BeaconFiles, SymlinkIsRefused) {
  std::string target = put("real.beacon", test::as_bytes(test::valid_record()));
  std::string link = dir_ / "rank-0.beacon";
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  expect_error(link, Errc::kInvalidArgument, "symlink, refused");
}

TEST_F(BeaconFiles, DirectoryIsRefused) {
  std::string d = dir_ / "rank-0.beacon";
  std::filesystem::create_directory(d);
  expect_error(d, Errc::kInvalidArgument, "not a regular file");
}

TEST_F(BeaconFiles, DeviceIsRefused) {
  expect_error("/dev/null", Errc::kInvalidArgument, "not a regular file");
}

TEST_F(BeaconFiles, TruncatedFile) {
  std::string whole(test::as_bytes(test::valid_record()));
  expect_error(put("a.beacon", whole.substr(0, 500)), Errc::kTruncated,
               "500 bytes, a version 1 beacon is 1024");
  expect_error(put("b.beacon", whole.substr(0, 8)), Errc::kTruncated, "8 bytes");
  expect_error(put("c.beacon", ""), Errc::kTruncated, "0 bytes");
}

TEST_F(BeaconFiles, OversizedFile) {
  std::string bytes(test::as_bytes(test::valid_record()));
  bytes.resize(2048, '\0');
  expect_error(put("a.beacon", bytes), Errc::kSizeMismatch,
               "2048 bytes, a version 1 beacon is 1024");
}

TEST_F(BeaconFiles, ForeignFilesReportMagicOrVersionFirst) {
  expect_error(put("a.beacon", std::string(2000, 'x')), Errc::kBadMagic, "bad magic");
  expect_error(put("b.beacon", std::string(1024, 'x')), Errc::kBadMagic, "bad magic");
  stepwatch_beacon_v1 b = test::valid_record();
  b.version = 9;
  expect_error(put("c.beacon", test::as_bytes(b)), Errc::kUnknownVersion, "version 9");
  std::string v9(test::as_bytes(b));
  expect_error(put("d.beacon", v9.substr(0, 100)), Errc::kUnknownVersion, "version 9");
  b = test::valid_record();
  b.size = 64;
  expect_error(put("e.beacon", test::as_bytes(b)), Errc::kSizeMismatch, "header says 64");
}

TEST_F(BeaconFiles, ValidationErrorsNameTheFile) {
  stepwatch_beacon_v1 b = test::valid_record();
  b.world_size = 2;
  b.rank = 2;
  expect_error(put("rank-2.beacon", test::as_bytes(b)), Errc::kInvalidField, "field rank is 2");
  b = test::valid_record();
  b.step_wall_ns = -5;
  expect_error(put("neg.beacon", test::as_bytes(b)), Errc::kInvalidField, "negative timestamp -5");
  b = test::valid_record();
  std::memset(b.phase, 'p', sizeof b.phase);
  expect_error(put("phase.beacon", test::as_bytes(b)), Errc::kInvalidField, "not NUL-terminated");
  expect_error(put("job.beacon", test::as_bytes(test::valid_record("other"))), Errc::kJobMismatch,
               "\"other\"", {.expected_job = "job-1"});
}

TEST_F(BeaconFiles, OddSeqInAStaticFileIsTorn) {
  stepwatch_beacon_v1 b = test::valid_record();
  b.seq = 41;  // a writer died inside an update
  std::string p = put("rank-0.beacon", test::as_bytes(b));
  auto m = BeaconMapping::open(p);
  ASSERT_TRUE(m.ok()) << m.error().message;
  auto s = m->read({.max_retries = 3});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, Errc::kTorn);
  EXPECT_THAT(s.error().message, HasSubstr(p));
  EXPECT_THAT(s.error().message, HasSubstr("stuck or died mid-update"));
  EXPECT_THAT(s.error().message, HasSubstr("4 reads"));
  expect_error(p, Errc::kTorn, "mid-update", {.max_retries = 0});
}

TEST_F(BeaconFiles, WriterStuckMidUpdateInALiveMapping) {
  Identity id;
  id.dir = dir_.path();
  id.job = "job-1";
  auto w = BeaconWriter::create(id);
  ASSERT_TRUE(w.ok()) << w.error().message;
  ASSERT_EQ((*w)->step(1), STEPWATCH_OK);
  auto m = BeaconMapping::open((*w)->path());
  ASSERT_TRUE(m.ok()) << m.error().message;
  ASSERT_TRUE(m->read().ok());

  // Another process maps the same file and enters an update without leaving it.
  int fd = ::open((*w)->path().c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  void* mem =
      ::mmap(nullptr, sizeof(stepwatch_beacon_v1), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  ASSERT_NE(mem, MAP_FAILED);
  auto* other = static_cast<stepwatch_beacon_v1*>(mem);
  uint64_t s = __atomic_load_n(&other->seq, __ATOMIC_ACQUIRE);
  ASSERT_EQ(s % 2, 0u);
  __atomic_store_n(&other->seq, s + 1, __ATOMIC_RELEASE);

  auto torn = m->read({.max_retries = 5});
  ASSERT_FALSE(torn.ok());
  EXPECT_EQ(torn.error().code, Errc::kTorn);
  EXPECT_THAT(torn.error().message, HasSubstr((*w)->path()));
  EXPECT_EQ((*w)->step(2), STEPWATCH_EBUSY) << "the writer does not wait for the stuck one";

  __atomic_store_n(&other->seq, s + 2, __ATOMIC_RELEASE);
  ::munmap(mem, sizeof(stepwatch_beacon_v1));
  auto ok = m->read({.max_retries = 5});
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(*ok->step, 1);
  ASSERT_EQ((*w)->step(3), STEPWATCH_OK);
  EXPECT_EQ(*m->read()->step, 3);
}

TEST_F(BeaconFiles, MappingFollowsTheWriterAndMoves) {
  Identity id;
  id.dir = dir_.path();
  id.job = "job-1";
  auto w = BeaconWriter::create(id);
  ASSERT_TRUE(w.ok()) << w.error().message;
  auto m = BeaconMapping::open((*w)->path());
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->path(), (*w)->path());
  struct stat st {};
  ASSERT_EQ(::stat((*w)->path().c_str(), &st), 0);
  EXPECT_EQ(m->inode(), static_cast<uint64_t>(st.st_ino));
  for (int64_t i = 0; i < 5; ++i) {
    ASSERT_EQ((*w)->step(i), STEPWATCH_OK);
    auto s = m->read({.expected_job = "job-1"});
    ASSERT_TRUE(s.ok()) << s.error().message;
    EXPECT_EQ(*s->step, i);
  }
  auto raw = m->read_raw();
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(test::as_bytes(*raw), test::read_file((*w)->path()));

  BeaconMapping moved(std::move(*m));
  EXPECT_EQ(*moved.read()->step, 4);
  auto other = BeaconMapping::open((*w)->path());
  ASSERT_TRUE(other.ok());
  moved = std::move(*other);
  EXPECT_EQ(*moved.read()->step, 4);
}

// The mapping's fault guard catches a SIGBUS inside a beacon read only: any other SIGBUS in
// the process still ends it, as it would without the guard.
TEST(BeaconMappingFaultGuard, ATruncatedMappingIsAnErrorAndOtherFaultsStillKill) {
  test::TempDir dir;
  std::string path = dir / "rank-0.beacon";
  stepwatch_beacon_v1 rec = test::valid_record();
  test::write_file(path, test::as_bytes(rec));
  auto m = BeaconMapping::open(path);
  ASSERT_TRUE(m.ok()) << m.error().message;
  ASSERT_TRUE(m->read().ok());
  ASSERT_EQ(::truncate(path.c_str(), 0), 0);
  auto r = m->read();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::kSizeMismatch);
  EXPECT_THAT(r.error().message, ::testing::HasSubstr(path + ": the file shrank while mapped"));
  auto seq = m->sequence();
  ASSERT_FALSE(seq.ok());
  EXPECT_EQ(seq.error().code, Errc::kSizeMismatch);

  auto touch_a_truncated_mapping = [&] {
    std::string other = dir / "other";
    test::write_file(other, std::string(4096, 'x'));
    int fd = ::open(other.c_str(), O_RDONLY);
    auto* p =
        static_cast<volatile const char*>(::mmap(nullptr, 4096, PROT_READ, MAP_SHARED, fd, 0));
    if (::truncate(other.c_str(), 0) != 0) ::_exit(12);
    char c = p[0];  // not a beacon read: whatever was there before the guard
    ::_exit(c == 'x' ? 10 : 11);
  };
#if defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer's own SIGBUS handler was there first: it reports and exits.
  EXPECT_EXIT(touch_a_truncated_mapping(), ::testing::ExitedWithCode(1), "AddressSanitizer: BUS");
#else
  EXPECT_EXIT(touch_a_truncated_mapping(), ::testing::KilledBySignal(SIGBUS), "");
#endif
}

}  // namespace
}  // namespace stepwatch::contract
