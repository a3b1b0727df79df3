// Updates run on a thread of their own while the backward goes on (overlapped_updates.h): each
// batch of parameters whose gradients have arrived is updated as it comes, and a failure puts
// every batch back, the one that failed part way too.

#include <gtest/gtest.h>

#include <stdexcept>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <torch/optim/adam.h>

#include "optimizer_state.h"
#include "overlapped_updates.h"

namespace placement {
namespace {

struct Parameters {
  std::vector<at::Tensor> tensors;

  explicit Parameters(int count) {
    at::manual_seed(5);
    for (int i = 0; i < count; ++i) {
      at::Tensor p = at::randn({64, 32}).requires_grad_();
      p.mutable_grad() = at::randn({64, 32});
      tensors.push_back(p);
    }
  }
  std::vector<at::Tensor> values() const {
    std::vector<at::Tensor> out;
    for (const at::Tensor& p : tensors) out.push_back(p.detach().clone());
    return out;
  }
};

bool same(const at::Tensor& a, const at::Tensor& b) { return at::equal(a, b); }

// Adam, watched: the thread each update runs on; armed, an update of `fails_on` fails after
// updating everything it was given.
class Watched final : public StepOptimizer {
 public:
  explicit Watched(torch::optim::Adam& adam) : inner_(adam) {}
  void step() override { inner_.step(); }
  void zero_grad() override { inner_.zero_grad(); }
  uint64_t move_state(const std::vector<at::Tensor>& p,
                      const std::vector<c10::Device>& d) override {
    return inner_.move_state(p, d);
  }
  std::optional<SavedState> save_state(const std::vector<at::Tensor>& parameters) override {
    return inner_.save_state(parameters);
  }
  bool steps_parameters_apart() const override { return true; }
  void step_parameters(const std::vector<at::Tensor>& parameters) override {
    threads.push_back(std::this_thread::get_id());
    inner_.step_parameters(parameters);
    for (const at::Tensor& p : parameters)
      if (fails_on.defined() && p.is_same(fails_on)) throw std::runtime_error("out of host memory");
  }

  std::vector<std::thread::id> threads;
  at::Tensor fails_on;

 private:
  TorchStepOptimizer inner_;
};

TEST(OverlappedUpdates, EachBatchIsUpdatedOnAThreadOfItsOwnAsOneStepWouldUpdateIt) {
  Parameters mine(3), twin(3);
  torch::optim::Adam adam(mine.tensors, torch::optim::AdamOptions(1e-2));
  torch::optim::Adam twin_adam(twin.tensors, torch::optim::AdamOptions(1e-2));
  Watched watched(adam);
  {
    detail::OverlappedUpdates updates(watched, /*undoable=*/true);
    updates.ready(mine.tensors[2]);
    updates.finish();
    updates.ready(mine.tensors[0]);
    updates.ready(mine.tensors[1]);
    updates.finish();
    ASSERT_EQ(updates.updated().size(), 3u);
    EXPECT_TRUE(updates.updated()[0].is_same(mine.tensors[2]));
    EXPECT_GT(updates.saved_bytes(), 0u);
  }
  twin_adam.step();
  for (size_t i = 0; i < 3; ++i)
    EXPECT_TRUE(same(mine.tensors[i], twin.tensors[i])) << "parameter " << i;
  ASSERT_FALSE(watched.threads.empty());
  for (const std::thread::id& t : watched.threads) EXPECT_NE(t, std::this_thread::get_id());
}

TEST(OverlappedUpdates, AFailurePutsBackEveryBatchAndRunsNoneAfterIt) {
  Parameters mine(4);
  const std::vector<at::Tensor> before = mine.values();
  torch::optim::Adam adam(mine.tensors, torch::optim::AdamOptions(1e-2));
  Watched watched(adam);
  watched.fails_on = mine.tensors[1];
  detail::OverlappedUpdates updates(watched, /*undoable=*/true);
  updates.ready(mine.tensors[0]);
  updates.finish();
  EXPECT_FALSE(same(mine.tensors[0], before[0])) << "the first batch was updated";
  updates.ready(mine.tensors[1]);  // updated, then fails
  EXPECT_THROW(updates.finish(), std::runtime_error);
  updates.ready(mine.tensors[2]);  // after the failure: not run
  EXPECT_THROW(updates.finish(), std::runtime_error);
  EXPECT_EQ(updates.updated().size(), 1u);
  EXPECT_EQ(updates.undo(), 2u) << "the first batch, and the one that failed";
  EXPECT_TRUE(updates.updated().empty());
  for (size_t i = 0; i < 4; ++i) EXPECT_TRUE(same(mine.tensors[i], before[i])) << "parameter " << i;
  // The state the first updates made is gone with them, as if Adam had never stepped.
  EXPECT_TRUE(adam.state().empty());
  EXPECT_EQ(watched.threads.size(), 2u);
}

TEST(OverlappedUpdates, AnOptimizerThatCannotStepParametersApartIsRefused) {
  Parameters mine(1);
  torch::optim::Adam adam(mine.tensors, torch::optim::AdamOptions(1e-2));
  struct Whole final : StepOptimizer {
    void step() override {}
    void zero_grad() override {}
    uint64_t move_state(const std::vector<at::Tensor>&, const std::vector<c10::Device>&) override {
      return 0;
    }
  } whole;
  EXPECT_THROW(detail::OverlappedUpdates updates(whole, true), std::logic_error);
}

TEST(OverlappedUpdates, WithoutSavesAFailureLeavesWhatWasUpdated) {
  // Where no retry follows (the job's own placement), nothing is copied first: a failed batch
  // stays as far as it got, as a failing optimizer.step() would.
  Parameters mine(2);
  const std::vector<at::Tensor> before = mine.values();
  torch::optim::Adam adam(mine.tensors, torch::optim::AdamOptions(1e-2));
  Watched watched(adam);
  watched.fails_on = mine.tensors[1];
  detail::OverlappedUpdates updates(watched, /*undoable=*/false);
  updates.ready(mine.tensors[0]);
  updates.finish();
  updates.ready(mine.tensors[1]);
  EXPECT_THROW(updates.finish(), std::runtime_error);
  EXPECT_EQ(updates.saved_bytes(), 0u);
  EXPECT_EQ(updates.undo(), 0u);
  EXPECT_FALSE(same(mine.tensors[0], before[0]));
  EXPECT_FALSE(same(mine.tensors[1], before[1]));
}

}  // namespace
}  // namespace placement
