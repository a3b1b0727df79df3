#include "server/uid_backlog.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace placementd {
namespace {

TEST(UidBacklog, AdmitsWhatFitsBesideWhatWaitsAndAnythingAlone) {
  UidBacklog backlog;
  EXPECT_TRUE(backlog.admits(5000, 1000)) << "nothing waits: a request over the cap goes alone";
  backlog.add(600);
  EXPECT_TRUE(backlog.admits(400, 1000));
  EXPECT_FALSE(backlog.admits(401, 1000));
  EXPECT_FALSE(backlog.admits(5000, 1000));
  backlog.done(600);
  EXPECT_EQ(backlog.bytes(), 0u);
  EXPECT_TRUE(backlog.admits(5000, 1000));
}

TEST(UidBacklog, AWaitingConnectionIsResumedOnceItsRequestFits) {
  UidBacklog backlog;
  backlog.add(700);
  backlog.add(200);
  int resumed_small = 0, resumed_large = 0;
  EXPECT_TRUE(backlog.wait(300, 1000, [&] { ++resumed_small; }));
  EXPECT_TRUE(backlog.wait(2000, 1000, [&] { ++resumed_large; }));
  backlog.done(200);  // 700 held: 300 fits
  EXPECT_EQ(resumed_small, 1);
  EXPECT_EQ(resumed_large, 0);
  backlog.done(700);  // nothing held: the one over the cap goes
  EXPECT_EQ(resumed_small, 1) << "resumed once";
  EXPECT_EQ(resumed_large, 1);
  // Already admitted: nothing is kept, the caller goes on.
  EXPECT_FALSE(backlog.wait(300, 1000, [&] { ++resumed_small; }));
  backlog.add(10);
  backlog.done(10);
  EXPECT_EQ(resumed_small, 1);
}

TEST(UidBacklog, NoWaiterIsLostToARequestDoneOnAnotherThread) {
  // The I/O thread waits while handler threads finish requests: a done() between the check and
  // the wait must either admit the request or resume it.
  for (int round = 0; round < 2000; ++round) {
    UidBacklog backlog;
    backlog.add(1000);
    std::atomic<bool> resumed{false};
    std::thread handler([&] { backlog.done(1000); });
    const bool waits = backlog.wait(500, 1000, [&] { resumed = true; });
    handler.join();
    EXPECT_TRUE(!waits || resumed) << "round " << round;
  }
}

}  // namespace
}  // namespace placementd
