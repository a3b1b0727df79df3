#include "placement/op_work.h"

#include <algorithm>
#include <map>
#include <numeric>

namespace placement {

OpArgument OpArgument::tensor(TensorInfo info) {
  OpArgument a;
  a.type = Type::kTensor;
  a.tensors.push_back(std::move(info));
  return a;
}

OpArgument OpArgument::tensor_list(std::vector<TensorInfo> infos) {
  OpArgument a;
  a.type = Type::kTensorList;
  a.tensors = std::move(infos);
  return a;
}

OpArgument OpArgument::integer(int64_t value) {
  OpArgument a;
  a.type = Type::kInt;
  a.ints = {value};
  return a;
}

OpArgument OpArgument::integers(std::vector<int64_t> values) {
  OpArgument a;
  a.type = Type::kInts;
  a.ints = std::move(values);
  return a;
}

OpArgument OpArgument::boolean(bool value) {
  OpArgument a;
  a.type = Type::kBool;
  a.flag = value;
  return a;
}

OpArgument OpArgument::string(std::string value) {
  OpArgument a;
  a.type = Type::kString;
  a.text = std::move(value);
  return a;
}

uint64_t dtype_bytes(const std::string& dtype) {
  static const std::map<std::string, uint64_t> sizes = {
      {"float64", 8}, {"float32", 4}, {"float16", 2}, {"bfloat16", 2}, {"int64", 8},
      {"int32", 4},   {"int16", 2},   {"int8", 1},    {"uint8", 1},    {"bool", 1}};
  const auto it = sizes.find(dtype);
  return it == sizes.end() ? 4 : it->second;
}

namespace {

// How each kind is counted. The families follow what the kernels do, not the Python API: every
// variant that launches the same kernel shares a formula.
enum class Family {
  kConv,
  kLinear,
  kMatmul,
  kEinsum,
  kRnn,
  kRnnCell,
  kEmbedding,
  kAttention,
  kSoftmax,
  kBatchNorm,
  kRowNorm,
  kElementwise,
  kTranscendental,
  kView,
  kSliceView,
  kExpandView,
  kReduction,
  kPool,
  kLoss,
  kCopy,
  kCreation,
  kNoGradient,
};

const std::map<std::string, Family>& families() {
  static const std::map<std::string, Family> table = [] {
    std::map<std::string, Family> t;
    auto add = [&t](Family f, std::initializer_list<const char*> kinds) {
      for (const char* k : kinds) t[std::string("aten::") + k] = f;
    };
    add(Family::kConv,
        {"_convolution", "convolution", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
         "conv_transpose2d", "conv_transpose3d", "cudnn_convolution", "mkldnn_convolution"});
    add(Family::kLinear, {"linear"});
    add(Family::kMatmul,
        {"matmul", "mm", "bmm", "addmm", "baddbmm", "addbmm", "mv", "addmv", "dot", "bilinear"});
    add(Family::kEinsum, {"einsum"});
    add(Family::kRnn, {"lstm", "gru", "rnn_tanh", "rnn_relu"});
    add(Family::kRnnCell, {"lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell"});
    add(Family::kEmbedding, {"embedding", "embedding_bag", "_embedding_bag"});
    add(Family::kAttention,
        {"scaled_dot_product_attention", "_scaled_dot_product_flash_attention",
         "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention"});
    add(Family::kSoftmax, {"softmax", "_softmax", "log_softmax", "_log_softmax"});
    add(Family::kBatchNorm, {"batch_norm", "_batch_norm_impl_index", "native_batch_norm",
                             "instance_norm", "group_norm", "native_group_norm"});
    add(Family::kRowNorm, {"layer_norm", "native_layer_norm", "rms_norm", "_fused_rms_norm"});
    add(Family::kElementwise, {"add",
                               "sub",
                               "rsub",
                               "mul",
                               "div",
                               "neg",
                               "abs",
                               "relu",
                               "relu6",
                               "leaky_relu",
                               "hardtanh",
                               "clamp",
                               "clamp_min",
                               "clamp_max",
                               "threshold",
                               "dropout",
                               "feature_dropout",
                               "alpha_dropout",
                               "masked_fill",
                               "where",
                               "to",
                               "type_as",
                               "contiguous",
                               "clone",
                               "copy",
                               "square",
                               "reciprocal",
                               "sign",
                               "floor",
                               "ceil",
                               "round",
                               "fmod",
                               "remainder",
                               "maximum",
                               "minimum",
                               "lerp",
                               "addcmul",
                               "addcdiv",
                               "hardswish",
                               "hardsigmoid",
                               "float",
                               "half",
                               "bfloat16",
                               "detach_copy",
                               "_to_copy",
                               "masked_scatter",
                               "fill",
                               "diff"});
    add(Family::kTranscendental,
        {"gelu",  "tanh",  "sigmoid", "silu",     "mish", "exp",        "log",
         "log1p", "expm1", "erf",     "softplus", "elu",  "selu",       "celu",
         "sqrt",  "rsqrt", "pow",     "sin",      "cos",  "logsigmoid", "glu"});
    add(Family::kView, {"view", "reshape", "flatten", "unflatten", "transpose", "permute", "t",
                        "squeeze", "unsqueeze", "detach", "alias", "as_strided", "view_as",
                        "reshape_as", "numpy_T", "movedim", "swapaxes", "unfold"});
    add(Family::kSliceView, {"select", "slice", "narrow", "split", "split_with_sizes", "chunk",
                             "unbind", "unsafe_split", "unsafe_chunk", "tensor_split", "diagonal"});
    add(Family::kExpandView, {"expand", "expand_as", "broadcast_to"});
    add(Family::kReduction,
        {"sum", "mean", "max", "min", "amax", "amin", "prod", "norm", "linalg_vector_norm", "var",
         "std", "var_mean", "std_mean", "logsumexp", "cumsum", "cumprod", "frobenius_norm"});
    add(Family::kPool, {"max_pool1d", "max_pool2d", "max_pool3d", "max_pool2d_with_indices",
                        "avg_pool1d", "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d",
                        "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d",
                        "adaptive_max_pool2d", "_adaptive_avg_pool2d"});
    add(Family::kLoss, {"cross_entropy_loss", "nll_loss", "nll_loss_nd", "nll_loss2d", "mse_loss",
                        "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
                        "binary_cross_entropy_with_logits", "kl_div", "cosine_similarity"});
    add(Family::kCopy, {"cat",
                        "concat",
                        "stack",
                        "index_select",
                        "gather",
                        "scatter",
                        "scatter_add",
                        "index",
                        "index_put",
                        "repeat",
                        "repeat_interleave",
                        "roll",
                        "flip",
                        "constant_pad_nd",
                        "pad",
                        "reflection_pad2d",
                        "replicate_pad2d",
                        "upsample_nearest2d",
                        "upsample_bilinear2d",
                        "masked_select",
                        "take",
                        "tile",
                        "pixel_shuffle",
                        "im2col",
                        "col2im"});
    add(Family::kCreation,
        {"zeros",      "ones",      "full",       "empty",      "arange",    "linspace",
         "rand",       "randn",     "randint",    "zeros_like", "ones_like", "full_like",
         "empty_like", "rand_like", "randn_like", "new_zeros",  "new_ones",  "new_full",
         "new_empty",  "bernoulli", "tril",       "triu",       "eye"});
    add(Family::kNoGradient,
        {"eq",          "ne",           "lt",          "le",          "gt",         "ge",
         "logical_not", "logical_and",  "logical_or",  "bitwise_not", "isnan",      "isinf",
         "argmax",      "argmin",       "topk",        "sort",        "argsort",    "size",
         "numel",       "floor_divide", "any",         "all",         "nonzero",    "__and__",
         "__or__",      "__xor__",      "bitwise_and", "bitwise_or",  "bitwise_xor"});
    return t;
  }();
  return table;
}

// "aten::relu_" runs the kernel of "aten::relu" in place.
const Family* family_of(const std::string& kind) {
  const auto& table = families();
  auto it = table.find(kind);
  if (it == table.end() && kind.size() > 1 && kind.back() == '_')
    it = table.find(kind.substr(0, kind.size() - 1));
  return it == table.end() ? nullptr : &it->second;
}

double numel(const std::vector<int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), 1.0,
                         [](double a, int64_t d) { return a * static_cast<double>(d); });
}

double numel(const TensorInfo& t) { return numel(t.shape); }

bool floating(const std::string& dtype) {
  return dtype == "float32" || dtype == "float64" || dtype == "float16" || dtype == "bfloat16";
}

// The n-th tensor among the inputs (lists flattened), or nullptr.
const TensorInfo* tensor_at(const std::vector<OpArgument>& inputs, size_t index) {
  if (index >= inputs.size() || inputs[index].type != OpArgument::Type::kTensor) return nullptr;
  return &inputs[index].tensors.front();
}

struct Totals {
  double input_bytes = 0, output_bytes = 0, output_numel = 0, largest_input_numel = 0;
  std::string dtype;
};

Totals totals(const std::vector<OpArgument>& inputs, const std::vector<TensorInfo>& outputs) {
  Totals t;
  for (const OpArgument& a : inputs)
    for (const TensorInfo& info : a.tensors) {
      t.input_bytes += static_cast<double>(info.bytes);
      t.largest_input_numel = std::max(t.largest_input_numel, numel(info));
      if (t.dtype.empty() && floating(info.dtype)) t.dtype = info.dtype;
    }
  for (const TensorInfo& info : outputs) {
    t.output_bytes += static_cast<double>(info.bytes);
    t.output_numel += numel(info);
    if (t.dtype.empty() && floating(info.dtype)) t.dtype = info.dtype;
  }
  if (t.dtype.empty()) t.dtype = "float32";
  return t;
}

// Elements of one pooling window: the kernel size (argument 1; one size for every spatial dimension
// when it gives one) of an op pooling `spatial` dimensions, or 0 when the arguments do not say.
double pool_window(const std::vector<OpArgument>& inputs, int spatial) {
  if (inputs.size() < 2 || inputs[1].type != OpArgument::Type::kInts || inputs[1].ints.empty())
    return 0;
  const std::vector<int64_t>& k = inputs[1].ints;
  double window = 1;
  for (int d = 0; d < spatial; ++d)
    window *= static_cast<double>(k[std::min<size_t>(d, k.size() - 1)]);
  return window;
}

// The kernels of a pass are not all it costs the host: every op goes through the dispatcher
// forward, even a view that launches nothing, and autograd runs a node for it backward.
void count_dispatches(OpWork& w, bool autograd_node) {
  w.forward_kernels = std::max(1, w.forward_kernels);
  if (autograd_node) ++w.backward_kernels;
}

bool any_floating_output(const std::vector<TensorInfo>& outputs) {
  return std::any_of(outputs.begin(), outputs.end(),
                     [](const TensorInfo& t) { return floating(t.dtype); });
}

// A product of operands with contraction length k: 2·k FLOPs per output element; backward computes
// the gradient of both operands, each as large a product again.
void product(OpWork& w, double output_numel, double k, const Totals& t) {
  w.math = MathClass::kMatmul;
  w.forward_flops = 2.0 * output_numel * k;
  w.backward_flops = 2.0 * w.forward_flops;
  w.forward_bytes = t.input_bytes + t.output_bytes;
  w.backward_bytes = 2.0 * t.input_bytes + t.output_bytes;
  w.backward_kernels = 2;
}

// FLOPs of an einsum from its equation: 2 × the product of every index's size (one multiply-add
// per point of the joint index space), or 0 when the equation cannot be read.
double einsum_flops(const std::vector<OpArgument>& inputs) {
  if (inputs.size() < 2 || inputs[0].type != OpArgument::Type::kString) return 0;
  std::string equation = inputs[0].text;
  equation.erase(std::remove(equation.begin(), equation.end(), ' '), equation.end());
  const std::string lhs = equation.substr(0, equation.find("->"));
  std::map<char, int64_t> size;
  size_t operand = 0, axis = 0;
  for (char c : lhs) {
    if (c == ',') {
      ++operand;
      axis = 0;
      continue;
    }
    if (operand >= inputs[1].tensors.size()) return 0;
    const auto& shape = inputs[1].tensors[operand].shape;
    if (c == '.' || axis >= shape.size()) return 0;  // ellipses: no formula
    size[c] = std::max(size[c], shape[axis++]);
  }
  double points = 1;
  for (const auto& [letter, n] : size) points *= static_cast<double>(n);
  return 2.0 * points;
}

// A fused multi-layer RNN (cuDNN's or oneDNN's): the input-to-hidden GEMM of a layer is batched
// over all time steps, the hidden-to-hidden GEMM and the gates run once per step.
void rnn(OpWork& w, const std::vector<OpArgument>& inputs, const Totals& t) {
  w.math = MathClass::kMatmul;
  const TensorInfo* x = tensor_at(inputs, 0);
  // aten::lstm(input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
  // batch_first)
  if (!x || inputs.size() < 3 || inputs[2].type != OpArgument::Type::kTensorList ||
      x->shape.size() < 2) {
    w.estimated = true;
    return;
  }
  const bool batch_first =
      inputs.size() > 8 && inputs[8].type == OpArgument::Type::kBool && inputs[8].flag;
  const bool batched = x->shape.size() == 3;
  const double steps = static_cast<double>(batched && batch_first ? x->shape[1] : x->shape[0]);
  const double batch = batched ? static_cast<double>(batch_first ? x->shape[0] : x->shape[1]) : 1.0;
  // Weights come as [w_ih, w_hh, (b_ih, b_hh)] per layer and direction: matrices alternate
  // input-to-hidden and hidden-to-hidden.
  double weight_numel = 0, recurrent_bytes = 0, gate_rows = 0;
  int matrices = 0;
  for (const TensorInfo& p : inputs[2].tensors) {
    if (p.shape.size() != 2) continue;
    weight_numel += numel(p);
    if (matrices % 2 == 1)
      recurrent_bytes += static_cast<double>(p.bytes);
    else
      gate_rows += static_cast<double>(p.shape[0]);
    ++matrices;
  }
  const double layers_and_directions = matrices / 2.0;
  const double elt = static_cast<double>(dtype_bytes(t.dtype));
  const double gates = batch * steps * gate_rows;  // gate pre-activations over all layers and steps
  w.forward_flops = 2.0 * batch * steps * weight_numel + 8.0 * gates;
  w.backward_flops = 2.0 * w.forward_flops;
  // Inputs and outputs once, the recurrent weights every step (too large for on-chip reuse across
  // steps in general), the gates written and read back.
  w.forward_bytes = t.input_bytes + t.output_bytes + steps * recurrent_bytes + 2.0 * gates * elt;
  w.backward_bytes = 2.0 * w.forward_bytes;
  // One dispatch per layer call each way; what the library does inside (per step) is the
  // device's: DeviceSpec::rnn_layer_s and rnn_step_s.
  w.rnn_layers = static_cast<int>(std::min(1e6, layers_and_directions));
  w.rnn_steps = static_cast<int>(std::min(1e6, layers_and_directions * steps));
  w.forward_kernels = w.rnn_layers;
  w.backward_kernels = w.rnn_layers;
}

void rnn_cell(OpWork& w, const std::vector<OpArgument>& inputs, const Totals& t) {
  // aten::lstm_cell(input, hx, w_ih, w_hh, b_ih, b_hh)
  const TensorInfo* x = tensor_at(inputs, 0);
  const TensorInfo* w_ih = tensor_at(inputs, 2);
  const TensorInfo* w_hh = tensor_at(inputs, 3);
  w.math = MathClass::kMatmul;
  if (!x || !w_ih || !w_hh) {
    w.estimated = true;
    return;
  }
  const double batch = x->shape.size() == 2 ? static_cast<double>(x->shape[0]) : 1.0;
  const double gates = batch * (w_ih->shape.empty() ? 0.0 : static_cast<double>(w_ih->shape[0]));
  w.forward_flops = 2.0 * batch * (numel(*w_ih) + numel(*w_hh)) + 8.0 * gates;
  w.backward_flops = 2.0 * w.forward_flops;
  const double elt = static_cast<double>(dtype_bytes(t.dtype));
  w.forward_bytes = t.input_bytes + t.output_bytes + 2.0 * gates * elt;
  w.backward_bytes = 2.0 * w.forward_bytes;
  w.forward_kernels = 3;  // two GEMMs and the fused gates
  w.backward_kernels = 5;
}

void embedding(OpWork& w, const std::string& kind, const std::vector<OpArgument>& inputs,
               const Totals& t) {
  // aten::embedding(weight, indices, padding_idx, scale_grad_by_freq, sparse)
  const TensorInfo* table = tensor_at(inputs, 0);
  const double index_bytes =
      tensor_at(inputs, 1) ? static_cast<double>(tensor_at(inputs, 1)->bytes) : 0.0;
  const bool sparse = kind == "aten::embedding" && inputs.size() > 4 &&
                      inputs[4].type == OpArgument::Type::kBool && inputs[4].flag;
  // Forward gathers rows. Backward scatter-adds the output's gradient into a gradient of the
  // whole table, zeroed first, unless the gradient is sparse.
  w.forward_bytes = index_bytes + 2.0 * t.output_bytes;
  w.forward_flops = 0;
  w.backward_flops = t.output_numel;
  const double table_bytes = table ? static_cast<double>(table->bytes) : 0.0;
  w.backward_bytes = index_bytes + 3.0 * t.output_bytes + (sparse ? 0.0 : table_bytes);
  w.backward_kernels = sparse ? 2 : 4;  // zero, sort the indices, accumulate, (scale)
}

void attention(OpWork& w, const std::vector<OpArgument>& inputs, const Totals& t) {
  // (query, key, value, attn_mask, dropout_p, is_causal, ...): [..., L, E] x [..., S, E]
  const TensorInfo* q = tensor_at(inputs, 0);
  const TensorInfo* k = tensor_at(inputs, 1);
  const TensorInfo* v = tensor_at(inputs, 2);
  w.math = MathClass::kMatmul;
  if (!q || !k || !v || q->shape.size() < 2 || k->shape.size() < 2) {
    w.estimated = true;
    return;
  }
  const double heads =
      numel(q->shape) / static_cast<double>(q->shape.back() * q->shape[q->shape.size() - 2]);
  const double lq = static_cast<double>(q->shape[q->shape.size() - 2]),
               e = static_cast<double>(q->shape.back());
  const double s = static_cast<double>(k->shape[k->shape.size() - 2]),
               ev = static_cast<double>(v->shape.back());
  const bool causal =
      inputs.size() > 5 && inputs[5].type == OpArgument::Type::kBool && inputs[5].flag;
  const double scores = heads * lq * s * (causal ? 0.5 : 1.0);
  // Q·Kᵀ and P·V, the softmax in between; fused kernels recompute the scores backward.
  w.forward_flops = 2.0 * scores * (e + ev) + 5.0 * scores;
  w.backward_flops = 2.5 * w.forward_flops;
  w.forward_bytes = t.input_bytes + t.output_bytes;
  w.backward_bytes = 2.0 * (t.input_bytes + t.output_bytes);
  w.backward_kernels = 2;
}

}  // namespace

bool known_op_kind(const std::string& kind) { return family_of(kind) != nullptr; }

void add_gradient_accumulation(OpGraph& graph) {
  const auto consumers = graph.consumers();
  for (Op& op : graph.ops) {
    if (!op.work || !any_floating_output(op.outputs)) continue;
    const size_t n = consumers[op.id].size();
    if (n < 2) continue;
    op.work->backward_bytes +=
        static_cast<double>(n - 1) * 3.0 * static_cast<double>(op.output_bytes());
    op.work->backward_flops += static_cast<double>(n - 1) * static_cast<double>(op.output_bytes()) /
                               static_cast<double>(dtype_bytes(op.work->dtype));
    op.work->backward_kernels += static_cast<int>(n - 1);
  }
}

OpWork estimate_work(const std::string& kind, const std::vector<OpArgument>& inputs,
                     const std::vector<TensorInfo>& outputs) {
  const Totals t = totals(inputs, outputs);
  OpWork w;
  w.dtype = t.dtype;
  const bool has_gradient = any_floating_output(outputs);
  const Family* family = family_of(kind);
  // Without a formula: read every input, write every output, once each way.
  w.forward_bytes = t.input_bytes + t.output_bytes;
  w.backward_bytes = has_gradient ? 2.0 * w.forward_bytes : 0.0;
  w.backward_kernels = has_gradient ? 1 : 0;
  if (!family) {
    w.estimated = true;
    w.forward_flops = t.output_numel;
    w.backward_flops = has_gradient ? t.output_numel : 0.0;
    count_dispatches(w, has_gradient);
    return w;
  }
  switch (*family) {
    case Family::kConv: {
      const TensorInfo* x = tensor_at(inputs, 0);
      const TensorInfo* weight = tensor_at(inputs, 1);
      if (!x || !weight || weight->shape.empty() || weight->shape[0] == 0) {
        w.estimated = true;
        break;
      }
      // Transposed convolutions scatter each input element over its kernel window instead.
      bool transposed = kind.find("conv_transpose") != std::string::npos;
      if ((kind == "aten::_convolution" || kind == "aten::convolution") && inputs.size() > 6 &&
          inputs[6].type == OpArgument::Type::kBool)
        transposed = inputs[6].flag;
      const double per_output = numel(*weight) / static_cast<double>(weight->shape[0]);
      product(w, transposed ? numel(*x) : t.output_numel, per_output, t);
      w.math = MathClass::kConv;
      break;
    }
    case Family::kLinear: {
      const TensorInfo* weight = tensor_at(inputs, 1);
      if (!weight || weight->shape.empty()) {
        w.estimated = true;
        break;
      }
      product(w, t.output_numel, static_cast<double>(weight->shape.back()), t);
      break;
    }
    case Family::kMatmul: {
      // The first matrix operand's last dimension is the contraction (addmm and baddbmm take the
      // added tensor first).
      const bool added_first = kind == "aten::addmm" || kind == "aten::baddbmm" ||
                               kind == "aten::addbmm" || kind == "aten::addmv" ||
                               kind == "aten::addmm_" || kind == "aten::baddbmm_";
      const TensorInfo* a = tensor_at(inputs, added_first ? 1 : 0);
      if (!a || a->shape.empty()) {
        w.estimated = true;
        break;
      }
      const double k = static_cast<double>(a->shape.back());
      // addbmm sums the batch: its output is one matrix, its work that of every batch entry.
      const double outputs_computed = kind == "aten::addbmm" && a->shape.size() == 3
                                          ? t.output_numel * static_cast<double>(a->shape[0])
                                          : std::max(t.output_numel, 1.0);
      product(w, outputs_computed, k, t);
      break;
    }
    case Family::kEinsum: {
      const double flops = einsum_flops(inputs);
      if (flops <= 0) {
        w.estimated = true;
        break;
      }
      w.math = MathClass::kMatmul;
      w.forward_flops = flops;
      w.backward_flops = 2.0 * flops;
      w.backward_bytes = 2.0 * t.input_bytes + t.output_bytes;
      w.backward_kernels = 2;
      break;
    }
    case Family::kRnn:
      rnn(w, inputs, t);
      break;
    case Family::kRnnCell:
      rnn_cell(w, inputs, t);
      break;
    case Family::kEmbedding:
      embedding(w, kind, inputs, t);
      break;
    case Family::kAttention:
      attention(w, inputs, t);
      break;
    case Family::kSoftmax:
      // Max, exp-sum and normalise fuse into one pass; backward reads the output and its gradient.
      w.forward_flops = 5.0 * t.output_numel;
      w.backward_flops = 3.0 * t.output_numel;
      w.forward_bytes = t.input_bytes + t.output_bytes;
      w.backward_bytes = 3.0 * t.output_bytes;
      break;
    case Family::kBatchNorm:
      // Training mode: one pass for the statistics, one to normalise; backward reduces two sums
      // over the input and its gradient, then writes the input's gradient.
      w.forward_flops = 8.0 * t.output_numel;
      w.backward_flops = 12.0 * t.output_numel;
      w.forward_bytes =
          2.0 * t.largest_input_numel * static_cast<double>(dtype_bytes(t.dtype)) + t.output_bytes;
      w.backward_bytes = 5.0 * t.output_bytes;
      w.forward_kernels = 2;
      w.backward_kernels = 2;
      break;
    case Family::kRowNorm:
      // A row fits on chip: one read, one write; backward reads the input and the gradient.
      w.forward_flops = 8.0 * t.output_numel;
      w.backward_flops = 12.0 * t.output_numel;
      w.backward_bytes = t.input_bytes + 2.0 * t.output_bytes;
      w.backward_kernels = 2;  // the input's gradient, and the weight's and bias's
      break;
    case Family::kElementwise:
      w.forward_flops = t.output_numel;
      w.backward_flops = has_gradient ? t.output_numel : 0.0;
      w.backward_bytes = has_gradient ? t.input_bytes + 2.0 * t.output_bytes : 0.0;
      break;
    case Family::kTranscendental:
      w.forward_flops = 10.0 * t.output_numel;
      w.backward_flops = has_gradient ? 12.0 * t.output_numel : 0.0;
      w.backward_bytes = has_gradient ? t.input_bytes + 2.0 * t.output_bytes : 0.0;
      break;
    case Family::kView:
      // Metadata only, both ways: no kernel, no bytes; the dispatch and autograd's node remain.
      w.forward_bytes = w.backward_bytes = 0;
      w.forward_kernels = w.backward_kernels = 0;
      break;
    case Family::kSliceView:
      // Free forward; backward writes the part into a zeroed gradient of the whole input.
      w.forward_bytes = 0;
      w.forward_kernels = 0;
      w.backward_bytes = has_gradient ? t.input_bytes + 2.0 * t.output_bytes : 0.0;
      w.backward_kernels = has_gradient ? 2 : 0;
      break;
    case Family::kExpandView:
      // Free forward; backward sums the gradient over the broadcast dimensions.
      w.forward_bytes = 0;
      w.forward_kernels = 0;
      w.backward_flops = t.output_numel;
      w.backward_bytes = has_gradient ? t.output_bytes + t.input_bytes : 0.0;
      break;
    case Family::kReduction:
      w.forward_flops = t.largest_input_numel;
      w.backward_flops = has_gradient ? t.largest_input_numel : 0.0;
      w.backward_bytes = has_gradient ? t.input_bytes + t.output_bytes : 0.0;
      break;
    case Family::kPool: {
      // One compare or add per window element and output; an adaptive pool's windows tile its
      // input. Backward, max pooling scatters each output's gradient to its maximum; average
      // pooling spreads it over the window.
      w.math = MathClass::kPool;
      const bool adaptive = kind.find("adaptive") != std::string::npos;
      const int spatial = kind.find("1d") != std::string::npos   ? 1
                          : kind.find("3d") != std::string::npos ? 3
                                                                 : 2;
      const double window = adaptive ? 0 : pool_window(inputs, spatial);
      w.forward_flops =
          window > 0 ? t.output_numel * window : std::max(t.largest_input_numel, t.output_numel);
      const bool max_pool = kind.find("max_pool") != std::string::npos;
      w.backward_flops = max_pool ? t.output_numel : w.forward_flops;
      w.backward_bytes = t.input_bytes + 2.0 * t.output_bytes;
      break;
    }
    case Family::kLoss:
      w.forward_flops = 5.0 * t.largest_input_numel;
      w.backward_flops = 5.0 * t.largest_input_numel;
      w.backward_bytes = 2.0 * t.input_bytes;
      w.backward_kernels = 2;
      break;
    case Family::kCopy:
      w.forward_flops = 0;
      w.backward_bytes = has_gradient ? t.input_bytes + t.output_bytes : 0.0;
      break;
    case Family::kCreation:
      w.forward_bytes = t.output_bytes;
      w.forward_flops = 0;
      w.backward_bytes = 0;
      w.backward_kernels = 0;
      break;
    case Family::kNoGradient:
      w.forward_flops = t.largest_input_numel;
      w.backward_bytes = 0;
      w.backward_kernels = 0;
      break;
  }
  if (w.estimated) {
    w.math = MathClass::kVector;
    w.forward_flops = t.output_numel;
    w.backward_flops = has_gradient ? t.output_numel : 0.0;
    w.forward_bytes = t.input_bytes + t.output_bytes;
    w.backward_bytes = has_gradient ? 2.0 * w.forward_bytes : 0.0;
    w.forward_kernels = 1;
    w.backward_kernels = has_gradient ? 1 : 0;
  }
  count_dispatches(w,
                   has_gradient && *family != Family::kCreation && *family != Family::kNoGradient);
  return w;
}

}  // namespace placement
