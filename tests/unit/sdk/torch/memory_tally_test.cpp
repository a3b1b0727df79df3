// Counting what logical CPU devices hold where memory is allocated: allocations made while a
// device is current are its own until freed, on any thread; limits throw as a GPU's allocator
// does.

#include <gtest/gtest.h>

#include <thread>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "memory_tally.h"

namespace placement::detail {
namespace {

constexpr uint64_t kMiB = 1 << 20;

TEST(MemoryTally, CountsWhatADeviceAllocatesUntilItIsFreed) {
  ASSERT_TRUE(MemoryTally::available());
  MemoryTally tally({"cpu:0", "cpu:1"}, {0, 0});
  at::Tensor a, b;
  {
    const MemoryTally::Scope on(&tally, 1);
    a = at::empty({static_cast<int64_t>(kMiB)}, at::kByte);
  }
  b = at::empty({static_cast<int64_t>(kMiB)}, at::kByte);  // nobody's
  EXPECT_EQ(tally.live(0), 0u);
  EXPECT_EQ(tally.live(1), kMiB);
  a = at::Tensor();
  EXPECT_EQ(tally.live(1), 0u);
  EXPECT_EQ(tally.peak(1), kMiB);
  tally.reset_peaks();
  EXPECT_EQ(tally.peak(1), 0u);
}

TEST(MemoryTally, AdoptsWhatWasAllocatedBeforeAndMovesCountsBetweenDevices) {
  MemoryTally tally({"cpu:0", "cpu:1"}, {0, 0});
  at::Tensor weights = at::empty({static_cast<int64_t>(2 * kMiB)}, at::kByte);
  EXPECT_TRUE(tally.adopt(weights, 0));
  EXPECT_TRUE(tally.adopt(weights, 0)) << "twice is once";
  EXPECT_EQ(tally.live(0), 2 * kMiB);
  EXPECT_TRUE(tally.adopt(weights.view({2, -1})[1], 1)) << "a view counts its whole storage";
  EXPECT_EQ(tally.live(0), 0u);
  EXPECT_EQ(tally.live(1), 2 * kMiB);
  weights = at::Tensor();
  EXPECT_EQ(tally.live(1), 0u);
}

TEST(MemoryTally, AnAllocationPastALimitThrowsAnOutOfMemoryNamingTheDevice) {
  MemoryTally tally({"cpu:0", "cpu:1"}, {0, 3 * kMiB});
  const MemoryTally::Scope on(&tally, 1);
  const at::Tensor held = at::empty({static_cast<int64_t>(2 * kMiB)}, at::kByte);
  EXPECT_NO_THROW(at::empty({static_cast<int64_t>(2 * kMiB)}, at::kByte))
      << "limits hold only while enforced";
  tally.set_enforcing(true);
  try {
    (void)at::empty({static_cast<int64_t>(2 * kMiB)}, at::kByte);
    FAIL() << "past the limit";
  } catch (const c10::OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("out of memory on cpu:1 (its memory limit)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(at::empty({static_cast<int64_t>(kMiB / 2)}, at::kByte));
  tally.set_enforcing(false);
}

TEST(MemoryTally, EachThreadCountsForItsOwnCurrentDeviceAndFreesCountWhereverTheyHappen) {
  MemoryTally tally({"cpu:0", "cpu:1"}, {0, 0});
  at::Tensor made_there;
  std::thread worker([&] {
    tally.make_current(0);
    made_there = at::empty({static_cast<int64_t>(kMiB)}, at::kByte);
    const MemoryTally::Scope nobody(nullptr, -1);
    (void)at::empty({static_cast<int64_t>(kMiB)}, at::kByte);
  });
  worker.join();
  EXPECT_EQ(tally.live(0), kMiB);
  {
    const at::Tensor here = at::empty({static_cast<int64_t>(kMiB)}, at::kByte);
    EXPECT_EQ(tally.live(0), kMiB) << "this thread has no device current";
  }
  made_there = at::Tensor();  // freed on this thread: still cpu:0's to give back
  EXPECT_EQ(tally.live(0), 0u);
}

TEST(MemoryTally, AllocationsOutlivingTheirTallyAreFreedSafely) {
  at::Tensor survivor;
  {
    MemoryTally tally({"cpu:0"}, {0});
    const MemoryTally::Scope on(&tally, 0);
    survivor = at::ones({1024});
  }
  EXPECT_EQ(survivor.sum().item<float>(), 1024.0f);
  survivor = at::Tensor();
}

}  // namespace
}  // namespace placement::detail
