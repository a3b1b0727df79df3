#include <gtest/gtest.h>

#include "placement/op_work.h"

namespace placement {
namespace {

TensorInfo tensor(std::vector<int64_t> shape, const std::string& dtype = "float32") {
  TensorInfo t;
  t.shape = std::move(shape);
  t.dtype = dtype;
  t.bytes = dtype_bytes(dtype);
  for (int64_t d : t.shape) t.bytes *= static_cast<uint64_t>(d);
  return t;
}

double bytes(const std::vector<int64_t>& shape) { return static_cast<double>(tensor(shape).bytes); }

TEST(OpWork, ConvolutionCountsOneMultiplyAddPerWeightAndOutputPosition) {
  // ResNet-50's stem: 3 -> 64 channels, 7x7, stride 2, on 224x224: 118 M multiply-adds per image.
  const TensorInfo x = tensor({2, 3, 224, 224}), w = tensor({64, 3, 7, 7}),
                   y = tensor({2, 64, 112, 112});
  const OpWork work = estimate_work(
      "aten::_convolution",
      {OpArgument::tensor(x), OpArgument::tensor(w), OpArgument{}, OpArgument::integers({2, 2}),
       OpArgument::integers({3, 3}), OpArgument::integers({1, 1}), OpArgument::boolean(false)},
      {y});
  EXPECT_EQ(work.math, MathClass::kConv);
  EXPECT_FALSE(work.estimated);
  EXPECT_DOUBLE_EQ(work.forward_flops, 2.0 * 2 * 64 * 112 * 112 * 3 * 7 * 7);
  EXPECT_DOUBLE_EQ(work.backward_flops, 2 * work.forward_flops);
  EXPECT_DOUBLE_EQ(work.forward_bytes,
                   bytes({2, 3, 224, 224}) + bytes({64, 3, 7, 7}) + bytes({2, 64, 112, 112}));
  // A grouped (depthwise) convolution: each output reads only its group's channels.
  const OpWork depthwise = estimate_work(
      "aten::conv2d",
      {OpArgument::tensor(tensor({1, 32, 10, 10})), OpArgument::tensor(tensor({32, 1, 3, 3}))},
      {tensor({1, 32, 10, 10})});
  EXPECT_DOUBLE_EQ(depthwise.forward_flops, 2.0 * 32 * 10 * 10 * 9);
}

TEST(OpWork, TransposedConvolutionScattersEachInputOverItsWindow) {
  // 16 -> 8 channels, 4x4 kernel, 5x5 -> 12x12 (stride 2, no padding).
  const OpWork work = estimate_work(
      "aten::_convolution",
      {OpArgument::tensor(tensor({1, 16, 5, 5})), OpArgument::tensor(tensor({16, 8, 4, 4})),
       OpArgument{}, OpArgument::integers({2, 2}), OpArgument::integers({0, 0}),
       OpArgument::integers({1, 1}), OpArgument::boolean(true)},
      {tensor({1, 8, 12, 12})});
  EXPECT_DOUBLE_EQ(work.forward_flops, 2.0 * 16 * 5 * 5 * 8 * 4 * 4);
}

TEST(OpWork, MatrixProductsContractOverTheFirstOperandsLastDimension) {
  const OpWork linear = estimate_work(
      "aten::linear",
      {OpArgument::tensor(tensor({8, 128, 768})), OpArgument::tensor(tensor({3072, 768}))},
      {tensor({8, 128, 3072})});
  EXPECT_EQ(linear.math, MathClass::kMatmul);
  EXPECT_DOUBLE_EQ(linear.forward_flops, 2.0 * 8 * 128 * 3072 * 768);
  const OpWork addmm =
      estimate_work("aten::addmm",
                    {OpArgument::tensor(tensor({10})), OpArgument::tensor(tensor({4, 20})),
                     OpArgument::tensor(tensor({20, 10}))},
                    {tensor({4, 10})});
  EXPECT_DOUBLE_EQ(addmm.forward_flops, 2.0 * 4 * 10 * 20);
  const OpWork bmm = estimate_work(
      "aten::matmul",
      {OpArgument::tensor(tensor({2, 12, 384, 64})), OpArgument::tensor(tensor({2, 12, 64, 384}))},
      {tensor({2, 12, 384, 384})});
  EXPECT_DOUBLE_EQ(bmm.forward_flops, 2.0 * 2 * 12 * 384 * 384 * 64);
  const OpWork einsum =
      estimate_work("aten::einsum",
                    {OpArgument::string("bij, bjk -> bik"),
                     OpArgument::tensor_list({tensor({3, 4, 5}), tensor({3, 5, 6})})},
                    {tensor({3, 4, 6})});
  EXPECT_FALSE(einsum.estimated);
  EXPECT_DOUBLE_EQ(einsum.forward_flops, 2.0 * 3 * 4 * 5 * 6);
}

TEST(OpWork, FusedLstmRunsEveryWeightOncePerTimeStepAndCountsItsLayerCallsAndSteps) {
  // 2 layers, hidden 256, input 128, sequence 50, batch 16 (time-major).
  const std::vector<TensorInfo> weights = {
      tensor({1024, 128}), tensor({1024, 256}), tensor({1024}), tensor({1024}),
      tensor({1024, 256}), tensor({1024, 256}), tensor({1024}), tensor({1024})};
  const OpWork work =
      estimate_work("aten::lstm",
                    {OpArgument::tensor(tensor({50, 16, 128})),
                     OpArgument::tensor_list({tensor({2, 16, 256}), tensor({2, 16, 256})}),
                     OpArgument::tensor_list(weights), OpArgument::boolean(true),
                     OpArgument::integer(2), OpArgument{}, OpArgument::boolean(true),
                     OpArgument::boolean(false), OpArgument::boolean(false)},
                    {tensor({50, 16, 256}), tensor({2, 16, 256}), tensor({2, 16, 256})});
  EXPECT_EQ(work.math, MathClass::kMatmul);
  const double weight_numel = 1024.0 * 128 + 3 * 1024.0 * 256;
  const double gates = 16.0 * 50 * 2048;
  EXPECT_DOUBLE_EQ(work.forward_flops, 2.0 * 16 * 50 * weight_numel + 8.0 * gates);
  EXPECT_EQ(work.rnn_layers, 2);
  EXPECT_EQ(work.rnn_steps, 2 * 50);
  EXPECT_EQ(work.forward_kernels, 2)
      << "one dispatch per layer; what runs per step is the device's";
  EXPECT_EQ(work.backward_kernels, 2 + 1) << "and autograd's node";
  // batch_first reads the sequence length from the second dimension.
  const OpWork batch_first =
      estimate_work("aten::lstm",
                    {OpArgument::tensor(tensor({16, 50, 128})),
                     OpArgument::tensor_list({tensor({2, 16, 256}), tensor({2, 16, 256})}),
                     OpArgument::tensor_list(weights), OpArgument::boolean(true),
                     OpArgument::integer(2), OpArgument{}, OpArgument::boolean(true),
                     OpArgument::boolean(false), OpArgument::boolean(true)},
                    {tensor({16, 50, 256}), tensor({2, 16, 256}), tensor({2, 16, 256})});
  EXPECT_DOUBLE_EQ(batch_first.forward_flops, work.forward_flops);
  EXPECT_EQ(batch_first.rnn_steps, work.rnn_steps);
  // Other ops run no RNN library.
  const OpWork relu =
      estimate_work("aten::relu", {OpArgument::tensor(tensor({4, 6}))}, {tensor({4, 6})});
  EXPECT_EQ(relu.rnn_layers + relu.rnn_steps, 0);
}

TEST(OpWork, EmbeddingBackwardWritesTheWholeTableUnlessSparse) {
  const TensorInfo table = tensor({30522, 768}), ids = tensor({24, 384}, "int64"),
                   out = tensor({24, 384, 768});
  auto with_sparse = [&](bool sparse) {
    return estimate_work(
        "aten::embedding",
        {OpArgument::tensor(table), OpArgument::tensor(ids), OpArgument::integer(-1),
         OpArgument::boolean(false), OpArgument::boolean(sparse)},
        {out});
  };
  const OpWork dense = with_sparse(false), sparse = with_sparse(true);
  EXPECT_DOUBLE_EQ(dense.forward_flops, 0.0);
  EXPECT_DOUBLE_EQ(dense.forward_bytes,
                   static_cast<double>(ids.bytes) + 2.0 * static_cast<double>(out.bytes));
  EXPECT_DOUBLE_EQ(dense.backward_bytes - sparse.backward_bytes, static_cast<double>(table.bytes));
}

TEST(OpWork, ViewsMoveNoBytesButAreDispatchedAndSlicesPayBackward) {
  const OpWork view =
      estimate_work("aten::view", {OpArgument::tensor(tensor({4, 6})), OpArgument::integers({24})},
                    {tensor({24})});
  EXPECT_EQ(view.forward_kernels, 1) << "the dispatcher runs even where no kernel does";
  EXPECT_EQ(view.backward_kernels, 1) << "autograd's node for the view";
  EXPECT_DOUBLE_EQ(view.forward_bytes + view.backward_bytes, 0.0);
  const OpWork slice = estimate_work(
      "aten::select",
      {OpArgument::tensor(tensor({4, 6})), OpArgument::integer(0), OpArgument::integer(1)},
      {tensor({6})});
  EXPECT_DOUBLE_EQ(slice.forward_bytes, 0.0);
  EXPECT_EQ(slice.backward_kernels, 3)
      << "the node, zeroing the input's gradient, writing the part";
  EXPECT_GT(slice.backward_bytes, 0.0);
  const OpWork zeros =
      estimate_work("aten::zeros", {OpArgument::integers({4, 6})}, {tensor({4, 6})});
  EXPECT_EQ(zeros.backward_kernels, 0) << "a new tensor has no autograd node";
}

TEST(OpWork, PoolingComparesEveryWindowElementAndMaxPoolingScattersBackward) {
  // Inception's pooling branch: 3x3, stride 1, padding 1, on 16 x 32 x 16 x 16.
  const TensorInfo x = tensor({16, 32, 16, 16});
  const OpWork max = estimate_work(
      "aten::max_pool2d",
      {OpArgument::tensor(x), OpArgument::integers({3, 3}), OpArgument::integers({1, 1}),
       OpArgument::integers({1, 1}), OpArgument::integers({1, 1}), OpArgument::boolean(false)},
      {x});
  EXPECT_EQ(max.math, MathClass::kPool);
  EXPECT_DOUBLE_EQ(max.forward_flops, 9.0 * 16 * 32 * 16 * 16);
  EXPECT_DOUBLE_EQ(max.backward_flops, 16.0 * 32 * 16 * 16);
  // One size for both dimensions; average pooling spreads each gradient over its window.
  const OpWork avg =
      estimate_work("aten::avg_pool2d", {OpArgument::tensor(x), OpArgument::integers({2})},
                    {tensor({16, 32, 8, 8})});
  EXPECT_DOUBLE_EQ(avg.forward_flops, 4.0 * 16 * 32 * 8 * 8);
  EXPECT_DOUBLE_EQ(avg.backward_flops, avg.forward_flops);
  // An adaptive pool's windows tile the input.
  const OpWork adaptive = estimate_work("aten::adaptive_avg_pool2d",
                                        {OpArgument::tensor(x), OpArgument::integers({1, 1})},
                                        {tensor({16, 32, 1, 1})});
  EXPECT_DOUBLE_EQ(adaptive.forward_flops, 16.0 * 32 * 16 * 16);
}

TEST(OpWork, InPlaceVariantsShareTheirKernelsFormula) {
  const std::vector<OpArgument> in = {OpArgument::tensor(tensor({1000}))};
  EXPECT_EQ(estimate_work("aten::relu_", in, {tensor({1000})}),
            estimate_work("aten::relu", in, {tensor({1000})}));
  EXPECT_TRUE(known_op_kind("aten::relu_"));
}

TEST(OpWork, ComparisonsHaveNoBackwardAndUnknownKindsAreMemoryBoundGuesses) {
  const OpWork eq = estimate_work(
      "aten::eq", {OpArgument::tensor(tensor({100})), OpArgument::tensor(tensor({100}))},
      {tensor({100}, "bool")});
  EXPECT_EQ(eq.backward_kernels, 0);
  EXPECT_DOUBLE_EQ(eq.backward_bytes, 0.0);
  EXPECT_FALSE(known_op_kind("aten::frobnicate"));
  const OpWork guess =
      estimate_work("aten::frobnicate", {OpArgument::tensor(tensor({100}))}, {tensor({50})});
  EXPECT_TRUE(guess.estimated);
  EXPECT_EQ(guess.math, MathClass::kVector);
  EXPECT_DOUBLE_EQ(guess.forward_bytes, bytes({100}) + bytes({50}));
  EXPECT_DOUBLE_EQ(guess.backward_bytes, 2 * guess.forward_bytes);
}

TEST(OpWork, ArithmeticDtypeIsTheFirstFloatingTensors) {
  const OpWork half = estimate_work("aten::linear",
                                    {OpArgument::tensor(tensor({4, 8}, "bfloat16")),
                                     OpArgument::tensor(tensor({8, 8}, "bfloat16"))},
                                    {tensor({4, 8}, "bfloat16")});
  EXPECT_EQ(half.dtype, "bfloat16");
  const OpWork lookup =
      estimate_work("aten::embedding",
                    {OpArgument::tensor(tensor({10, 4})), OpArgument::tensor(tensor({3}, "int64"))},
                    {tensor({3, 4})});
  EXPECT_EQ(lookup.dtype, "float32");
}

TEST(OpWork, OutputsWithSeveralConsumersSumTheirGradientsBackward) {
  // 0 -> {1, 2} -> 3: op 0's output gradient is the sum of two.
  OpGraph g;
  for (int i = 0; i < 4; ++i) {
    Op op;
    op.id = i;
    op.name = "op" + std::to_string(i);
    op.kind = "aten::relu";
    op.outputs = {tensor({1000})};
    op.work = estimate_work(op.kind, {OpArgument::tensor(tensor({1000}))}, op.outputs);
    g.ops.push_back(op);
  }
  g.edges = {{0, 1, 4000}, {0, 2, 4000}, {1, 3, 4000}, {2, 3, 4000}};
  const OpWork before = *g.ops[0].work;
  add_gradient_accumulation(g);
  EXPECT_DOUBLE_EQ(g.ops[0].work->backward_bytes, before.backward_bytes + 3 * 4000.0);
  EXPECT_EQ(g.ops[0].work->backward_kernels, before.backward_kernels + 1);
  EXPECT_EQ(*g.ops[1].work, before) << "one consumer: nothing to sum";
}

}  // namespace
}  // namespace placement
