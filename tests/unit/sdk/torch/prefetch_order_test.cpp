// Which streamed parameters are filled ahead (prefetch_order.h): by the order the last forward
// read them in, within a window of bytes.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "copy_lane.h"
#include "prefetch_order.h"

namespace placement::detail {
namespace {

// Entries 10, 11, 12, 13 first read at nodes 2, 5, 5, 9, of 100, 40, 60 and 300 bytes.
PrefetchOrder four_reads() {
  PrefetchOrder order;
  order.first_read(10, 2, 100);
  order.first_read(11, 5, 40);
  order.first_read(12, 5, 60);
  order.first_read(13, 9, 300);
  order.end_pass();
  return order;
}

auto none_filled = [](size_t) { return false; };

TEST(PrefetchOrder, NamesNothingBeforeAPassHasEnded) {
  PrefetchOrder order;
  order.first_read(1, 0, 8);
  EXPECT_TRUE(order.ahead_of(0, 1000, none_filled).empty());
  EXPECT_EQ(order.size(), 0u);
  order.end_pass();
  EXPECT_EQ(order.size(), 1u);
}

TEST(PrefetchOrder, TheForwardFillsWhatTheNextNodesReadWithinTheWindow) {
  const PrefetchOrder order = four_reads();
  // After node 2: the entries read at node 5 (100 bytes), not node 9's too (400).
  EXPECT_EQ(order.ahead_of(2, 100, none_filled), (std::vector<size_t>{11, 12}));
  EXPECT_EQ(order.ahead_of(2, 99, none_filled), (std::vector<size_t>{11}));
  EXPECT_EQ(order.ahead_of(2, 400, none_filled), (std::vector<size_t>{11, 12, 13}));
  // Before node 2 reads: node 2's own entry first.
  EXPECT_EQ(order.ahead_of(0, 100, none_filled), (std::vector<size_t>{10}));
  // The next entry is named even when it alone is past the window.
  EXPECT_EQ(order.ahead_of(5, 1, none_filled), (std::vector<size_t>{13}));
  EXPECT_TRUE(order.ahead_of(9, 1000, none_filled).empty());
}

TEST(PrefetchOrder, EntriesFilledAlreadyHoldTheirBytesAndAreNotNamedAgain) {
  const PrefetchOrder order = four_reads();
  auto eleven = [](size_t e) { return e == 11; };
  EXPECT_EQ(order.ahead_of(2, 100, eleven), (std::vector<size_t>{12}));
  EXPECT_EQ(order.ahead_of(2, 99, eleven), std::vector<size_t>{});
}

TEST(PrefetchOrder, TheBackwardFillsWhatTheForwardReadBeforeNearestFirst) {
  const PrefetchOrder order = four_reads();
  auto none_done = [](size_t) { return false; };
  EXPECT_EQ(order.behind(13, 60, none_filled, none_done), (std::vector<size_t>{12}));
  EXPECT_EQ(order.behind(13, 100, none_filled, none_done), (std::vector<size_t>{12, 11}));
  EXPECT_EQ(order.behind(13, 1000, none_filled, none_done), (std::vector<size_t>{12, 11, 10}));
  // Those whose gradients went home already are passed over and hold nothing.
  auto twelve_done = [](size_t e) { return e == 12; };
  EXPECT_EQ(order.behind(13, 140, none_filled, twelve_done), (std::vector<size_t>{11, 10}));
  EXPECT_TRUE(order.behind(10, 1000, none_filled, none_done).empty());
  EXPECT_TRUE(order.behind(99, 1000, none_filled, none_done).empty()) << "an entry never read";
}

TEST(PrefetchOrder, APassThatReadNothingKeepsTheLastOrder) {
  PrefetchOrder order = four_reads();
  order.end_pass();
  EXPECT_EQ(order.size(), 4u);
  order.first_read(13, 1, 300);
  order.end_pass();
  EXPECT_EQ(order.size(), 1u);
  EXPECT_EQ(order.ahead_of(0, 1000, none_filled), (std::vector<size_t>{13}));
}

TEST(PrefetchOrder, APassThatFailedPartWayLeavesNothingOfItsReads) {
  PrefetchOrder order = four_reads();
  order.begin_pass();
  order.first_read(12, 1, 60);  // ... and the forward threw
  order.begin_pass();
  order.first_read(10, 2, 100);
  order.first_read(13, 9, 300);
  order.end_pass();
  EXPECT_EQ(order.size(), 2u);
  EXPECT_EQ(order.ahead_of(0, 1000, none_filled), (std::vector<size_t>{10, 13}));
}

TEST(CopyLane, OnTheHostACopyIsMadeAtOnceAndNothingIsInFlight) {
  int copies = 0;
  Landing landed = copy_aside(c10::Device(c10::kCPU), [&] { ++copies; });
  EXPECT_EQ(copies, 1);
  EXPECT_FALSE(landed.pending());
  landed.wait_on_current_stream();
  landed.synchronize();
}

}  // namespace
}  // namespace placement::detail
