#pragma once
// Forward declarations of the LibTorch types the SDK's Torch-facing headers mention, so that those
// headers stay cheap to include (a LibTorch header costs seconds of compile time).

namespace torch::jit {
struct Module;
}  // namespace torch::jit
namespace at {
class Tensor;
}  // namespace at
namespace c10 {
struct IValue;
struct Device;
}  // namespace c10
namespace torch::optim {
class Optimizer;
}  // namespace torch::optim
