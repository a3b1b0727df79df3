// Emptying a storage that autograd saved and filling it again before the backward reads it: the
// gradients are those of a storage never touched.

#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/ops/empty.h>

#include "storage_shelf.h"

namespace placement::detail {
namespace {

TEST(StorageShelf, AnEmptiedSavedTensorFilledAgainGivesTheBackwardItsBytes) {
  at::manual_seed(0);
  const at::Tensor w = at::randn({8, 8}).requires_grad_();
  const at::Tensor x = at::randn({4, 8}).requires_grad_();
  // Plain: y = tanh(x @ w), whose backward reads what tanh saved (its output).
  (at::tanh(at::mm(x, w))).sum().backward();
  const at::Tensor gw = w.grad().clone(), gx = x.grad().clone();
  w.mutable_grad() = at::Tensor();
  x.mutable_grad() = at::Tensor();

  const at::Tensor y = at::tanh(at::mm(x, w));
  const at::Tensor kept = y.detach().clone();
  StorageShelf shelf;
  auto copy = std::make_shared<at::Tensor>();
  const auto id = shelf.add(
      y.storage(),
      [copy](c10::StorageImpl& storage, size_t nbytes) {
        allocate(storage, nbytes);
        storage_bytes(storage).copy_(*copy);
      },
      [copy](c10::StorageImpl& storage) {
        *copy = storage_bytes(storage).clone();
        return true;
      });
  ASSERT_TRUE(id);
  EXPECT_EQ(shelf.add(y.storage(), nullptr), id) << "registered once";
  EXPECT_EQ(shelf.evict(*id), 4u * 8u * sizeof(float));
  EXPECT_TRUE(shelf.evicted(*id));
  EXPECT_EQ(y.storage().nbytes(), 0u) << "its memory is given back";
  EXPECT_EQ(shelf.evict(*id), 0u) << "emptied once";
  shelf.ensure(*id);
  EXPECT_FALSE(shelf.evicted(*id));
  EXPECT_TRUE(at::equal(y.detach(), kept));
  y.sum().backward();  // no version counter moved: autograd takes the bytes it saved
  EXPECT_TRUE(at::equal(w.grad(), gw));
  EXPECT_TRUE(at::equal(x.grad(), gx));
}

TEST(StorageShelf, AStorageNothingHoldsAnyMoreIsLeftAlone) {
  StorageShelf shelf;
  std::optional<StorageShelf::Id> id;
  {
    const at::Tensor t = at::ones({16});
    id = shelf.add(t.storage(), [](c10::StorageImpl&, size_t) { FAIL() << "filled"; });
    ASSERT_TRUE(id);
  }
  EXPECT_EQ(shelf.evict(*id), 0u);
  EXPECT_NO_THROW(shelf.ensure(*id));
}

TEST(StorageShelf, AStorageThatCannotBeGivenBackStaysFilled) {
  StorageShelf shelf;
  const at::Tensor t = at::ones({16});
  const auto id = shelf.add(
      t.storage(), [](c10::StorageImpl&, size_t) {}, [](c10::StorageImpl&) { return false; });
  EXPECT_EQ(shelf.evict(*id), 0u);
  EXPECT_FALSE(shelf.evicted(*id));
  EXPECT_TRUE(at::equal(t, at::ones({16})));
}

TEST(StorageShelf, AFillThatFailsLeavesTheStorageEmptyToBeTriedAgain) {
  StorageShelf shelf;
  const at::Tensor t = at::ones({16});
  bool fail = true;
  const auto id = shelf.add(t.storage(), [&fail](c10::StorageImpl& storage, size_t nbytes) {
    allocate(storage, nbytes);
    if (fail) throw std::runtime_error("copy failed");
    storage_bytes(storage).fill_(0);
  });
  shelf.evict(*id);
  EXPECT_THROW(shelf.ensure(*id), std::runtime_error);
  EXPECT_TRUE(shelf.evicted(*id));
  EXPECT_EQ(t.storage().nbytes(), 0u);
  fail = false;
  shelf.ensure(*id);
  EXPECT_TRUE(at::equal(t, at::zeros({16})));
}

}  // namespace
}  // namespace placement::detail
