#include "server/fair_share.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace placementd {
namespace {

// What the share started, in order, as "uid/job/n"; each start is run later by the test, as a
// policy thread would run the work a start posts.
struct Started {
  std::vector<std::string> order;
  FairShare::Start start(const std::string& what) {
    return [this, what] { order.push_back(what); };
  }
};

int job_a, job_b, job_c;  // three jobs, by address
const void* const a = &job_a;
const void* const b = &job_b;
const void* const c = &job_c;

TEST(FairShare, AnotherUsersRequestStartsOnceOneRunningRequestEndsNotAfterTheFlood) {
  FairShare share(2, 2);
  Started s;
  // uid 1000 floods with two jobs: two start, forty wait.
  for (int n = 0; n < 21; ++n) {
    share.submit(1000, a, s.start("1000/a/" + std::to_string(n)));
    share.submit(1000, b, s.start("1000/b/" + std::to_string(n)));
  }
  EXPECT_EQ(s.order, (std::vector<std::string>{"1000/a/0", "1000/b/0"}));
  EXPECT_EQ(share.waiting(), 40u);
  share.submit(2000, c, s.start("2000/c/0"));
  EXPECT_EQ(s.order.size(), 2u) << "every slot is taken";
  share.done(1000, a);
  ASSERT_EQ(s.order.size(), 3u);
  EXPECT_EQ(s.order.back(), "2000/c/0") << "the other user's turn, before the flood's next";
  share.done(2000, c);
  EXPECT_EQ(s.order.back(), "1000/a/1");
  EXPECT_EQ(share.running(), 2u);
}

TEST(FairShare, AUserHoldsNoMoreSlotsThanItsShareSoAnotherUsersRequestStartsAtOnce) {
  FairShare share(2, 1);
  Started s;
  for (int n = 0; n < 5; ++n) {
    share.submit(1000, a, s.start("1000/a/" + std::to_string(n)));
    share.submit(1000, b, s.start("1000/b/" + std::to_string(n)));
    share.submit(1000, nullptr, s.start("1000/x/" + std::to_string(n)));
  }
  EXPECT_EQ(s.order, std::vector<std::string>{"1000/a/0"}) << "one slot of two for one user";
  share.submit(2000, c, s.start("2000/c/0"));
  EXPECT_EQ(s.order.back(), "2000/c/0") << "started at once, beside the flood";
  EXPECT_EQ(share.running(), 2u);
  share.done(2000, c);
  EXPECT_EQ(share.running(), 1u) << "the free slot is not the flooding user's";
  share.done(1000, a);
  EXPECT_EQ(s.order.back(), "1000/b/0");
}

TEST(FairShare, AUserAloneGetsEverySlotAndAJobRunsOneRequestAtATime) {
  FairShare share(3, 3);
  Started s;
  for (int n = 0; n < 3; ++n) share.submit(1000, a, s.start("a" + std::to_string(n)));
  EXPECT_EQ(s.order, std::vector<std::string>{"a0"}) << "one of a job's requests at a time";
  share.submit(1000, b, s.start("b0"));
  share.submit(1000, nullptr, s.start("x0"));
  share.submit(1000, nullptr, s.start("x1"));
  // Three slots: a0, b0 and one request of no job run; the other waits for a slot.
  EXPECT_EQ(s.order, (std::vector<std::string>{"a0", "b0", "x0"}));
  share.done(1000, nullptr);
  EXPECT_EQ(s.order.back(), "x1") << "requests of no job run side by side";
  share.done(1000, a);
  EXPECT_EQ(s.order.back(), "a1");
  share.done(1000, b);
  share.done(1000, nullptr);
  EXPECT_EQ(share.running(), 1u) << "a2 waits for a1: a job's requests stay in order";
  share.done(1000, a);
  EXPECT_EQ(s.order.back(), "a2");
  share.done(1000, a);
  EXPECT_EQ(share.running(), 0u);
  EXPECT_EQ(share.waiting(), 0u);
}

TEST(FairShare, UsersAndTheirJobsTakeTurns) {
  FairShare share(1, 1);
  struct Running {
    uid_t uid;
    const void* job;
  };
  std::vector<std::string> order;
  std::vector<Running> running;
  auto submit = [&](uid_t uid, const void* job, std::string what) {
    share.submit(uid, job, [&, uid, job, what] {
      order.push_back(what);
      running.push_back({uid, job});
    });
  };
  submit(1, a, "1a0");  // runs at once
  submit(1, a, "1a1");
  submit(1, b, "1b0");
  submit(2, c, "2c0");
  submit(2, c, "2c1");
  submit(3, nullptr, "3x0");
  while (!running.empty()) {
    const Running r = running.back();
    running.pop_back();
    share.done(r.uid, r.job);
  }
  // User 1, then 2, then 3, then 1 again: within user 1, job b's turn after job a's.
  EXPECT_EQ(order, (std::vector<std::string>{"1a0", "2c0", "3x0", "1b0", "2c1", "1a1"}));
}

}  // namespace
}  // namespace placementd
