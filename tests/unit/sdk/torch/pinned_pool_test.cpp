// The pinned pool's rules, with slabs of ordinary memory standing in for the CUDA runtime's.
#include "pinned_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "transfer.h"

namespace placement::detail {
namespace {

// Counts what the pool takes and gives back.
struct Ledger {
  std::atomic<int64_t> slabs{0};
  std::atomic<int64_t> bytes{0};
  std::atomic<int64_t> most_bytes{0};
};

class CountedSlabs final : public SlabSource {
 public:
  explicit CountedSlabs(Ledger& ledger) : ledger_(ledger) {}
  void* allocate(size_t bytes) override {
    ++ledger_.slabs;
    const int64_t now = ledger_.bytes += static_cast<int64_t>(bytes);
    if (now > ledger_.most_bytes) ledger_.most_bytes = now;
    return std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  }
  void release(void* slab, size_t bytes) noexcept override {
    --ledger_.slabs;
    ledger_.bytes -= static_cast<int64_t>(bytes);
    std::free(slab);
  }

 private:
  Ledger& ledger_;
};

constexpr uint64_t kMiB = uint64_t{1} << 20;

TEST(PinnedPool, BlocksAreCarvedFromOneSlabAt256BytesNotRoundedToPowersOfTwo) {
  Ledger ledger;
  PinnedPool pool(uint64_t{1} << 30, std::make_unique<CountedSlabs>(ledger));
  {
    c10::DataPtr a = pool.allocate(1000), b = pool.allocate(5000), c = pool.allocate(70000);
    EXPECT_EQ(ledger.slabs, 1);
    EXPECT_EQ(ledger.bytes, static_cast<int64_t>(PinnedPool::kSlabBytes));
    EXPECT_EQ(pool.stats().in_use_bytes, 1024u + 5120u + 70144u);  // 131072 rounded up would be 2x
    EXPECT_EQ(static_cast<char*>(b.get()) - static_cast<char*>(a.get()), 1024);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(c.get()) % PinnedPool::kGranularity, 0u);
  }
  EXPECT_EQ(pool.stats().in_use_bytes, 0u);
  EXPECT_EQ(pool.stats().peak_in_use_bytes, 1024u + 5120u + 70144u);
  EXPECT_EQ(ledger.slabs, 1) << "a freed block's slab is kept for the next one";
}

TEST(PinnedPool, NeverHoldsMoreThanItsBudgetAndSaysWhichSettingToRaise) {
  Ledger ledger;
  PinnedPool pool(1 * kMiB, std::make_unique<CountedSlabs>(ledger));
  c10::DataPtr first = pool.allocate(600 << 10);
  EXPECT_EQ(ledger.bytes, static_cast<int64_t>(kMiB)) << "a slab no larger than the budget";
  try {
    c10::DataPtr second = pool.allocate(600 << 10);
    FAIL() << "a block past the budget was given";
  } catch (const c10::OutOfMemoryError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("out of pinned host memory: 614400 bytes"), std::string::npos) << what;
    EXPECT_NE(what.find("budget is 1048576 bytes (1 MiB"), std::string::npos) << what;
    EXPECT_NE(what.find("[memory] host_pinned_bytes"), std::string::npos) << what;
  }
  EXPECT_EQ(pool.stats().refusals, 1u);
  EXPECT_LE(ledger.most_bytes, static_cast<int64_t>(kMiB));
  first = c10::DataPtr();
  c10::DataPtr again = pool.allocate(600 << 10);  // the freed block, no new slab
  EXPECT_EQ(ledger.slabs, 1);
  EXPECT_LE(ledger.most_bytes, static_cast<int64_t>(kMiB));
}

TEST(PinnedPool, FreedNeighboursMergeSoALargerBlockFitsWhereTheyWere) {
  Ledger ledger;
  PinnedPool pool(1 * kMiB, std::make_unique<CountedSlabs>(ledger));
  std::vector<c10::DataPtr> quarters;
  for (int i = 0; i < 4; ++i) quarters.push_back(pool.allocate(256 << 10));
  char* second = static_cast<char*>(quarters[1].get());
  quarters[2] = c10::DataPtr();  // freed out of order: the later one first
  quarters[1] = c10::DataPtr();
  c10::DataPtr half = pool.allocate(512 << 10);
  EXPECT_EQ(half.get(), second);
  EXPECT_EQ(ledger.slabs, 1);
  EXPECT_THROW(pool.allocate(1), c10::OutOfMemoryError) << "the slab is full again";
}

TEST(PinnedPool, ALowerBudgetGivesBackIdleSlabsAndTakesNoneUntilUnderIt) {
  Ledger ledger;
  PinnedPool pool(4 * kMiB, std::make_unique<CountedSlabs>(ledger));
  c10::DataPtr a = pool.allocate(3 * kMiB);  // a slab of the 4 MiB left
  c10::DataPtr b = pool.allocate(kMiB);      // the rest of it
  EXPECT_EQ(ledger.slabs, 1);
  b = c10::DataPtr();
  pool.set_limit(2 * kMiB);  // the slab holds 3 MiB in use: it stays
  EXPECT_EQ(ledger.bytes, static_cast<int64_t>(4 * kMiB));
  EXPECT_THROW(pool.allocate(2 * kMiB), c10::OutOfMemoryError) << "no room in the slab";
  a = c10::DataPtr();  // wholly free while over the budget: given back at once
  EXPECT_EQ(ledger.slabs, 0);
  EXPECT_EQ(pool.stats().reserved_bytes, 0u);
  c10::DataPtr c = pool.allocate(2 * kMiB);
  EXPECT_EQ(ledger.bytes, static_cast<int64_t>(2 * kMiB));
  c = c10::DataPtr();
  pool.trim();
  EXPECT_EQ(ledger.slabs, 0);
}

TEST(PinnedPool, BlocksFreedOnOtherThreadsAllComeBack) {
  // Autograd's threads free what a step allocated on the training thread: two threads allocate,
  // two others free what they are handed.
  Ledger ledger;
  PinnedPool pool(8 * kMiB, std::make_unique<CountedSlabs>(ledger));
  std::mutex mutex;
  std::deque<c10::DataPtr> handed;
  std::atomic<int> producing{2}, refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      std::uniform_int_distribution<size_t> size(1, 200 << 10);
      for (int i = 0; i < 2000; ++i) {
        try {
          c10::DataPtr block = pool.allocate(size(rng));
          std::memset(block.get(), t, 1);
          const std::lock_guard<std::mutex> lock(mutex);
          handed.push_back(std::move(block));
        } catch (const c10::OutOfMemoryError&) {
          ++refused;
        }
      }
      --producing;
    });
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&] {
      for (;;) {
        c10::DataPtr block;
        bool done = false;
        {
          const std::lock_guard<std::mutex> lock(mutex);
          if (!handed.empty()) {
            block = std::move(handed.front());
            handed.pop_front();
          } else {
            done = producing == 0;
          }
        }
        if (done) return;
        if (!block) std::this_thread::yield();
      }  // each block is freed here, on this thread
    });
  for (std::thread& t : threads) t.join();
  const PinnedPoolStats s = pool.stats();
  EXPECT_EQ(s.in_use_bytes, 0u);
  EXPECT_LE(s.peak_reserved_bytes, 8 * kMiB);
  EXPECT_EQ(s.refusals, static_cast<uint64_t>(refused.load()));
  pool.trim();
  EXPECT_EQ(ledger.slabs, 0);
}

TEST(PinnedPool, AHostCopyInThePoolIsBitwiseWithTheSameStrides) {
  const at::Tensor t = at::randn({7, 33}, at::kFloat).t();  // dense, not contiguous
  const uint64_t before = host_pool().stats().in_use_bytes;
  {
    const at::Tensor copy = host_pool_copy(t);
    EXPECT_TRUE(in_host_pool(copy));
    EXPECT_FALSE(in_host_pool(t));
    EXPECT_EQ(copy.strides(), t.strides());
    EXPECT_TRUE(at::equal(copy, t));
    EXPECT_GE(host_pool().stats().in_use_bytes, before + t.nbytes());
  }
  EXPECT_EQ(host_pool().stats().in_use_bytes, before);
}

TEST(PinnedPool, ACopyAskedForThePoolLandsThereAndOthersDoNot) {
  const at::Tensor t = at::arange(1000, at::kFloat);
  const std::vector<at::Tensor> out =
      copy_all({{t, c10::Device(c10::kCPU), true}, {t, c10::Device(c10::kCPU), false}});
  EXPECT_TRUE(in_host_pool(out[0]));
  EXPECT_FALSE(in_host_pool(out[1]));
  EXPECT_TRUE(at::equal(out[0], t));
  EXPECT_TRUE(at::equal(out[1], t));
}

}  // namespace
}  // namespace placement::detail
