#include "server/uid_log_limit.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace placementd {
namespace {

using std::chrono::seconds;

TEST(UidLogLimit, EachUidLogsItsShareAWindowAndTheRestIsSummedUp) {
  UidLogLimit limit(3, seconds(60));
  const auto t0 = UidLogLimit::Clock::time_point{} + seconds(1000);
  int logged = 0;
  for (int i = 0; i < 1000; ++i)
    logged += limit.allow(1000, "bad frame " + std::to_string(i), t0 + seconds(i % 50));
  EXPECT_EQ(logged, 3);
  // Another user's lines are its own: the flood took none of them.
  EXPECT_TRUE(limit.allow(1001, "job 7 'bert' attached", t0 + seconds(10)));
  EXPECT_TRUE(limit.summaries(t0 + seconds(59)).empty()) << "the window has not ended";
  const auto lines = limit.summaries(t0 + seconds(60));
  ASSERT_EQ(lines.size(), 1u) << "uid 1001 logged everything it made";
  EXPECT_EQ(lines[0],
            "uid 1000: 997 more lines not logged in the last 60 s (at most 3 a uid), the last: "
            "bad frame 999");
  // A new window: the uid logs again, and nothing is summed up twice.
  EXPECT_TRUE(limit.allow(1000, "bad frame 1000", t0 + seconds(61)));
  EXPECT_TRUE(limit.summaries(t0 + seconds(200)).empty());
}

TEST(UidLogLimit, TheLastLineKeptForTheSummaryIsBounded) {
  UidLogLimit limit(0, seconds(1));
  const auto t0 = UidLogLimit::Clock::time_point{} + seconds(5);
  EXPECT_FALSE(limit.allow(1000, std::string(1 << 20, 'x'), t0));
  const auto lines = limit.summaries(t0 + seconds(1));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_LT(lines[0].size(), UidLogLimit::kMaxKeptLine + 200);
}

}  // namespace
}  // namespace placementd
