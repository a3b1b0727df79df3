// The hot-swap's batched copies: every path gives an equal, independent copy on the target. The
// CUDA paths (pinned staging, pinned results, NCCL between GPUs) run where a GPU is present
// (scripts/gpu-run.sh runs this binary there); without one only their routing is checked.
#include <gtest/gtest.h>

#include <torch/cuda.h>
#include <torch/torch.h>

#include "cuda_transfer.h"
#include "transfer.h"

namespace placement::detail {
namespace {

const c10::Device kCpu(c10::DeviceType::CPU);
c10::Device cuda(int i) {
  return c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(i));
}

TEST(Transfer, RoutesEachPairOfDevices) {
  EXPECT_EQ(copy_path(kCpu, kCpu), CopyPath::kClone);
  EXPECT_EQ(copy_path(cuda(0), cuda(0)), CopyPath::kClone);
  if (has_cuda_copy_paths()) {
    EXPECT_EQ(copy_path(kCpu, cuda(0)), CopyPath::kHostToDevice);
    EXPECT_EQ(copy_path(cuda(1), kCpu), CopyPath::kDeviceToHost);
    EXPECT_EQ(copy_path(cuda(0), cuda(1)), CopyPath::kNccl);
  } else {
    EXPECT_EQ(copy_path(kCpu, cuda(0)), CopyPath::kTensorTo);
    EXPECT_EQ(copy_path(cuda(0), cuda(1)), CopyPath::kTensorTo);
  }
}

TEST(Transfer, ACopyOnTheSameDeviceIsEqualAndIndependent) {
  const at::Tensor a = torch::randn({64, 33});
  const at::Tensor b = torch::arange(10, torch::kInt64);
  const at::Tensor strided = torch::randn({8, 8}).t();
  const std::vector<at::Tensor> out = copy_all({{a, kCpu}, {b, kCpu}, {strided, kCpu}});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_TRUE(at::equal(out[0], a));
  EXPECT_TRUE(at::equal(out[1], b));
  EXPECT_TRUE(at::equal(out[2], strided));
  EXPECT_EQ(out[1].scalar_type(), at::kLong);
  EXPECT_NE(out[0].data_ptr(), a.data_ptr()) << "logical devices get copies of their own";
  EXPECT_TRUE(copy_all({}).empty());
}

class CudaTransfer : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
    if (!has_cuda_copy_paths()) GTEST_SKIP() << "built without the CUDA toolkit and NCCL";
  }
};

TEST_F(CudaTransfer, HostToDeviceAndBackAreBitwiseEqualAndEndPinned) {
  // 100 MiB + 3 floats: several staging chunks and a ragged end.
  const at::Tensor pageable = torch::randn({(int64_t{100} << 18) + 3});
  const at::Tensor pinned = torch::randn({1000}).pin_memory();
  const at::Tensor empty = torch::empty({0});
  const auto on_gpu = copy_all({{pageable, cuda(0)}, {pinned, cuda(0)}, {empty, cuda(0)}});
  for (const at::Tensor& t : on_gpu) EXPECT_EQ(t.device(), cuda(0));
  const auto back = copy_all({{on_gpu[0], kCpu}, {on_gpu[1], kCpu}, {on_gpu[2], kCpu}});
  EXPECT_TRUE(at::equal(back[0], pageable));
  EXPECT_TRUE(at::equal(back[1], pinned));
  EXPECT_EQ(back[2].numel(), 0);
  EXPECT_TRUE(back[0].is_pinned()) << "so that moving it to a GPU again is one DMA";
}

#ifdef PLACEMENT_CUDA_COPY_PATHS
TEST_F(CudaTransfer, TheNcclPathWorksOnOneGpu) {
  // A one-device communicator sending to itself: what a one-GPU machine can check of the NCCL path.
  const at::Tensor a =
      torch::randn({(int64_t{64} << 18) + 5}, torch::TensorOptions().device(cuda(0)));
  std::vector<at::Tensor> out(1);
  cuda_copy({{a, cuda(0)}}, {0}, out);
  EXPECT_EQ(out[0].device(), cuda(0));
  EXPECT_NE(out[0].data_ptr(), a.data_ptr());
  EXPECT_TRUE(at::equal(out[0].cpu(), a.cpu()));
}
#endif

TEST_F(CudaTransfer, GpuToGpuGoesThroughNccl) {
  if (torch::cuda::device_count() < 2) GTEST_SKIP() << "one GPU: nothing to move between";
  const at::Tensor a = torch::randn({1 << 20}, torch::TensorOptions().device(cuda(0)));
  const at::Tensor b = torch::randn({4096}, torch::TensorOptions().device(cuda(1)));
  const auto out = copy_all({{a, cuda(1)}, {b, cuda(0)}});
  EXPECT_EQ(out[0].device(), cuda(1));
  EXPECT_EQ(out[1].device(), cuda(0));
  EXPECT_TRUE(at::equal(out[0].cpu(), a.cpu()));
  EXPECT_TRUE(at::equal(out[1].cpu(), b.cpu()));
}

}  // namespace
}  // namespace placement::detail
