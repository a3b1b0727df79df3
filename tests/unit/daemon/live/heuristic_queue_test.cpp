#include "live/heuristic_queue.h"

#include <gtest/gtest.h>

#include "test_graphs.h"

namespace placementd {
namespace {

using placement::Placement;

class HeuristicQueueTest : public ::testing::Test {
 protected:
  const placement::OpGraph graph = placement::testing::chain(4, 1024);
  const Placement on0 = Placement::single(graph, 0), on1 = Placement::single(graph, 1);
  Placement split = Placement::single(graph, 0);
  void SetUp() override { split.device_of_op[2] = split.device_of_op[3] = 1; }
};

TEST_F(HeuristicQueueTest, PlacementsAreOfferedInTheirOrderOnceAndTheBookSaysWhatBecameOfEach) {
  HeuristicQueue q;
  q.refuse("hash", "does not fit: too big");
  const size_t a = q.predict("metis", 0.5, on1.fingerprint());
  const size_t b = q.predict("scotch", 0.4, split.fingerprint());
  EXPECT_EQ(q.placer(b), "scotch");
  q.enqueue(split, b);  // fastest first: the session sorts
  q.enqueue(on1, a);
  EXPECT_EQ(q.queued(), (std::set<std::string>{on1.fingerprint(), split.fingerprint()}));
  const auto none = [](const Placement&) { return std::optional<std::string>(); };
  std::optional<Placement> first = q.next(none);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->fingerprint(), split.fingerprint());
  EXPECT_EQ(q.queued(), std::set<std::string>{on1.fingerprint()});
  ASSERT_TRUE(q.next(none));
  EXPECT_TRUE(q.empty());
  EXPECT_FALSE(q.next(none)) << "each is offered once";
  const nlohmann::json& book = q.report();
  ASSERT_EQ(book.size(), 3u);
  EXPECT_EQ(book[0],
            (nlohmann::json{{"placer", "hash"}, {"not_offered", "does not fit: too big"}}));
  EXPECT_EQ(book[1]["placer"], "metis");
  EXPECT_EQ(book[1]["predicted_step_time_s"], 0.5);
  EXPECT_EQ(book[1]["placement_fingerprint"], on1.fingerprint());
  EXPECT_TRUE(book[1]["offered"].get<bool>());
  EXPECT_TRUE(book[2]["offered"].get<bool>());
}

TEST_F(HeuristicQueueTest, ARefusedPlacementLeavesTheQueueWithWhyAndTheNextOneIsOffered) {
  HeuristicQueue q;
  q.enqueue(on0, q.predict("single", 0.9, on0.fingerprint()));
  q.enqueue(on1, q.predict("metis", 1.0, on1.fingerprint()));
  const std::string ran = on0.fingerprint();
  std::optional<Placement> p = q.next([&](const Placement& c) -> std::optional<std::string> {
    if (c.fingerprint() == ran) return "the same as a candidate that ran already";
    return std::nullopt;
  });
  ASSERT_TRUE(p);
  EXPECT_EQ(p->fingerprint(), on1.fingerprint());
  EXPECT_EQ(q.report()[0]["not_offered"], "the same as a candidate that ran already");
  EXPECT_FALSE(q.report()[0].contains("offered"));
  EXPECT_TRUE(q.report()[1]["offered"].get<bool>());
  q.clear();
  EXPECT_TRUE(q.empty());
  EXPECT_TRUE(q.report().empty());
}

}  // namespace
}  // namespace placementd
