// Choosing the fastest of many noisy measurements with the planning model's help: where the model
// is right up to a constant it ranks, where it is useless or the measurements are exact the
// measurements rank, and bad input is refused without changing what was kept.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "planning/sim/model_assisted_selection.h"

namespace placementd::sim {
namespace {

constexpr size_t kOps = 60;

struct Candidate {
  std::vector<int> device_of_op;
  double truth, predicted, measured;
};

// Placements of kOps ops on 4 devices, each moving a few ops away from a reference; the more it
// moves, the slower (by 0.05% an op), so near-equal candidates crowd near the optimum as they do
// around a warm start.
std::vector<Candidate> crowd(size_t n, double noise, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> ops(0, static_cast<int>(kOps) - 1), device(0, 3), moves(0, 12);
  std::normal_distribution<double> gauss(0.0, 1.0);
  std::vector<Candidate> out;
  for (size_t i = 0; i < n; ++i) {
    Candidate c{std::vector<int>(kOps, 0), 0.0, 0.0, 0.0};
    for (int m = moves(rng); m > 0; --m)
      c.device_of_op[static_cast<size_t>(ops(rng))] = device(rng);
    const auto moved =
        std::count_if(c.device_of_op.begin(), c.device_of_op.end(), [](int d) { return d != 0; });
    c.truth = 0.5 * (1.0 + 0.0005 * static_cast<double>(moved) + 1e-6 * static_cast<double>(i));
    c.measured = c.truth * (1.0 + noise * gauss(rng));
    out.push_back(c);
  }
  return out;
}

size_t argmin(const std::vector<Candidate>& cs, double Candidate::*field) {
  return static_cast<size_t>(
      std::min_element(cs.begin(), cs.end(),
                       [&](const auto& a, const auto& b) { return a.*field < b.*field; }) -
      cs.begin());
}

ModelAssistedSelection select(const std::vector<Candidate>& cs, double noise,
                              size_t max_candidates = 256) {
  ModelAssistedSelection s(max_candidates);
  for (size_t i = 0; i < cs.size(); ++i)
    s.add(cs[i].device_of_op, cs[i].predicted, cs[i].measured, noise, i);
  return s;
}

TEST(ModelAssistedSelection, AModelRightUpToAConstantBeatsTheLuckiestMeasurement) {
  std::vector<Candidate> cs = crowd(100, 0.02, 7);
  for (Candidate& c : cs) c.predicted = 1.1 * c.truth;  // 10% off, the same everywhere
  const size_t fastest = argmin(cs, &Candidate::truth);
  ASSERT_NE(argmin(cs, &Candidate::measured), fastest)
      << "the lowest measurement is a lucky slower one";
  const ModelAssistedSelection s = select(cs, 0.02);
  const auto best = s.best();
  ASSERT_TRUE(best);
  EXPECT_EQ(best->tag, fastest);
  EXPECT_EQ(*best->device_of_op, cs[fastest].device_of_op);
  EXPECT_NEAR(best->estimate_s, cs[fastest].truth, 0.01 * cs[fastest].truth)
      << "the model's offset is calibrated away by the measurements";
  ASSERT_TRUE(s.model_error());
  EXPECT_LE(*s.model_error(), 0.005);
}

// As around a warm start: near the optimum the model is off by the same constant (the bottleneck
// is the same), while the exploration's slow placements have other bottlenecks, where the model is
// off by 10% each in its own way. The slow ones must not make the crowd's model look unreliable.
TEST(ModelAssistedSelection, SlowExplorationDoesNotHideHowRightTheModelIsNearTheOptimum) {
  std::vector<Candidate> cs = crowd(60, 0.02, 7);
  for (Candidate& c : cs) c.predicted = 1.05 * c.truth;
  std::mt19937_64 rng(17);
  std::uniform_real_distribution<double> slower(1.2, 5.0);
  std::lognormal_distribution<double> off(0.0, 0.1);
  std::normal_distribution<double> gauss(0.0, 1.0);
  for (const Candidate& near : crowd(40, 0.0, 19)) {
    Candidate c = near;
    std::fill(c.device_of_op.begin(), c.device_of_op.begin() + kOps / 2, 3);  // far from the crowd
    c.truth *= slower(rng);
    c.predicted = c.truth * off(rng);
    c.measured = c.truth * (1.0 + 0.02 * gauss(rng));
    cs.push_back(c);
  }
  std::shuffle(cs.begin(), cs.end(), rng);
  const size_t fastest = argmin(cs, &Candidate::truth);
  ASSERT_NE(argmin(cs, &Candidate::measured), fastest);
  const ModelAssistedSelection s = select(cs, 0.02);
  EXPECT_EQ(s.best()->tag, fastest)
      << cs[s.best()->tag].truth << " vs " << cs[fastest].truth << " err "
      << s.model_error().value_or(-1) << " len " << s.correlation_length().value_or(-1) << " tlen "
      << s.time_correlation_length().value_or(-1);
}

TEST(ModelAssistedSelection, AUselessModelLeavesTheRankingToPreciseMeasurements) {
  std::vector<Candidate> cs = crowd(100, 0.0001, 11);
  std::mt19937_64 rng(3);
  std::lognormal_distribution<double> nonsense(0.0, 0.3);
  for (Candidate& c : cs) c.predicted = 0.5 * nonsense(rng);
  const ModelAssistedSelection s = select(cs, 0.0001);
  ASSERT_TRUE(s.best());
  // As good as the measurements can tell (ties in moved ops differ by less than the noise), and
  // not the model's favourite.
  const double fastest = cs[argmin(cs, &Candidate::truth)].truth;
  EXPECT_LE(cs[s.best()->tag].truth, fastest * (1.0 + 3 * 0.0001));
  const size_t favourite = argmin(cs, &Candidate::predicted);
  ASSERT_GT(cs[favourite].truth, fastest * (1.0 + 3 * 0.0001)) << "the model's favourite is slow";
  ASSERT_TRUE(s.model_error());
  EXPECT_GE(*s.model_error(), 0.08) << "the measurements show the model is far off";
}

TEST(ModelAssistedSelection, TooFewCandidatesOrExactMeasurementsRankByMeasurement) {
  std::vector<Candidate> cs = crowd(20, 0.02, 5);
  for (size_t i = 0; i < cs.size(); ++i)
    cs[i].predicted = 1.0 + static_cast<double>(i);  // unrelated
  const std::vector<Candidate> few(cs.begin(),
                                   cs.begin() + ModelAssistedSelection::kMinCandidates - 1);
  const ModelAssistedSelection s = select(few, 0.02);
  EXPECT_EQ(s.best()->tag, argmin(few, &Candidate::measured));
  EXPECT_FALSE(s.model_error());

  const ModelAssistedSelection exact = select(cs, 0.0);
  EXPECT_EQ(exact.best()->tag, argmin(cs, &Candidate::measured));
  EXPECT_DOUBLE_EQ(exact.best()->estimate_s, cs[argmin(cs, &Candidate::measured)].measured);
  EXPECT_FALSE(exact.model_error());
  EXPECT_FALSE(exact.correlation_length());
}

TEST(ModelAssistedSelection, NothingAddedNothingBest) {
  const ModelAssistedSelection s;
  EXPECT_FALSE(s.best());
  EXPECT_EQ(s.size(), 0u);
}

TEST(ModelAssistedSelection, BadInputIsRefusedAndKeepsWhatWasThere) {
  ModelAssistedSelection s;
  s.add(std::vector<int>(kOps, 0), 1.0, 1.0, 0.02, 0);
  const auto refused = [&](std::vector<int> placement, double predicted, double measured,
                           double noise, const char* says) {
    try {
      s.add(std::move(placement), predicted, measured, noise, 1);
      ADD_FAILURE() << "accepted: " << says;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  refused(std::vector<int>(kOps, 1), 0.0, 1.0, 0.02, "must be positive");
  refused(std::vector<int>(kOps, 1), 1.0, -1.0, 0.02, "must be positive");
  refused(std::vector<int>(kOps, 1), std::nan(""), 1.0, 0.02, "must be positive");
  refused(std::vector<int>(kOps, 1), 1.0, std::numeric_limits<double>::infinity(), 0.02,
          "and finite");
  refused(std::vector<int>(kOps, 1), 1.0, 1.0, -0.01, "noise must be >= 0");
  refused(std::vector<int>(kOps + 1, 1), 1.0, 1.0, 0.02, "61 ops after ones of 60");
  EXPECT_EQ(s.size(), 1u);
  EXPECT_EQ(s.best()->tag, 0u);
}

TEST(ModelAssistedSelection, KeepsTheCandidatesTheModelPredictsFastest) {
  std::vector<Candidate> cs = crowd(30, 0.0, 13);
  for (Candidate& c : cs) c.predicted = c.truth;
  // Measured fastest of all, but the model predicts it slowest: over the cap, it is dropped.
  cs[0].predicted = 10.0;
  cs[0].measured = 0.01;
  const ModelAssistedSelection s = select(cs, 0.0, 10);
  EXPECT_EQ(s.size(), 10u);
  std::vector<Candidate> kept = cs;
  std::sort(kept.begin(), kept.end(),
            [](const auto& a, const auto& b) { return a.predicted < b.predicted; });
  kept.resize(10);
  EXPECT_NE(s.best()->tag, 0u);
  EXPECT_DOUBLE_EQ(s.best()->estimate_s, kept[argmin(kept, &Candidate::measured)].measured);
}

}  // namespace
}  // namespace placementd::sim
