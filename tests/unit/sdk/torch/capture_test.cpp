// Capture of real TorchScript models, traced at test time by tests/models/make_models.py.

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>

#include <torch/csrc/jit/serialization/import.h>
#include <nlohmann/json.hpp>

#include "placement/capture.h"
#include "placement/serialization.h"

namespace placement {
namespace {

std::string model(const std::string& name) { return std::string(MODEL_DIR) + "/" + name + ".pt"; }

OpGraph capture_model(const std::string& name) {
  std::ifstream in(std::string(MODEL_DIR) + "/" + name + ".json");
  const auto spec = nlohmann::json::parse(in);
  return capture_file(model(name), spec["inputs"].get<std::vector<std::vector<int64_t>>>(),
                      spec["dtype"]);
}

std::map<std::string, int> kinds(const OpGraph& g) {
  std::map<std::string, int> count;
  for (const auto& op : g.ops) ++count[op.kind];
  return count;
}

// Takes a C string, so that no temporary std::string lives beside the reference it returns.
const Op& named(const OpGraph& g, const char* name) {
  for (const auto& op : g.ops)
    if (op.name == name) return op;
  throw std::runtime_error(std::string("no op named ") + name);
}

TEST(Capture, MlpOpsNamesParametersAndEdges) {
  const OpGraph g = capture_model("mlp");
  ASSERT_EQ(g.ops.size(), 3u);
  EXPECT_EQ(g.name, "mlp");
  const Op& l1 = named(g, "layer1/linear");
  EXPECT_EQ(l1.kind, "aten::linear");
  EXPECT_EQ(l1.parameter_bytes, (32u * 64 + 64) * 4);
  EXPECT_EQ(l1.outputs.at(0).shape, (std::vector<int64_t>{8, 64}));
  EXPECT_EQ(l1.outputs.at(0).dtype, "float32");
  EXPECT_EQ(l1.outputs.at(0).bytes, 8u * 64 * 4);
  EXPECT_EQ(named(g, "act/relu").parameter_bytes, 0u);
  EXPECT_EQ(named(g, "layer2/linear").outputs.at(0).shape, (std::vector<int64_t>{8, 10}));
  ASSERT_EQ(g.edges.size(), 2u);
  EXPECT_EQ(g.edges[0].bytes, 8u * 64 * 4);
  EXPECT_NO_THROW(g.validate());
}

TEST(Capture, BranchesJoinWithOneEdgePerProducer) {
  const OpGraph g = capture_model("two_tower");
  const Op& cat = named(g, "cat");
  int into_cat = 0;
  for (const auto& e : g.edges) into_cat += e.dst == cat.id;
  EXPECT_EQ(into_cat, 2) << "the list plumbing is folded: cat depends on both towers";
  EXPECT_NO_THROW(named(g, "left.0.0/linear"));
  EXPECT_NO_THROW(named(g, "right.2.1/tanh"));
}

TEST(Capture, RecurrentModelsPerLayerAndUnrolled) {
  const OpGraph layered = capture_model("gnmt_small");
  EXPECT_EQ(kinds(layered)["aten::lstm"], 8) << "one op per LSTM layer, 4 encoder + 4 decoder";
  EXPECT_NO_THROW(named(layered, "encoder.3/lstm"));
  EXPECT_NO_THROW(named(layered, "attention/softmax"));
  const OpGraph unrolled = capture_model("gnmt_small_unrolled");
  // A traced LSTMCell is recorded as its gate ops: one unsafe_chunk (the four gates) per cell.
  EXPECT_EQ(kinds(unrolled)["aten::unsafe_chunk"], 4 * 6 + 4 * 5)
      << "one cell per layer and time step";
  EXPECT_NO_THROW(named(unrolled, "decoder.3/unsafe_chunk.4"))
      << "the 5th step of the last decoder layer";
  EXPECT_GT(unrolled.ops.size(), 4 * layered.ops.size());
  EXPECT_EQ(kinds(capture_model("rnnlm_small"))["aten::lstm"], 2);
}

TEST(Capture, ResNetCountsEveryParameterOnce) {
  const OpGraph g = capture_model("resnet18");
  EXPECT_EQ(kinds(g)["aten::_convolution"] + kinds(g)["aten::conv2d"], 20);
  EXPECT_EQ(named(g, "conv1/_convolution").parameter_bytes, 64u * 3 * 7 * 7 * 4);
  // Parameters plus the batch-norm buffers the graph reads: traced in train mode, it updates the
  // running statistics and counts num_batches_tracked up.
  const torch::jit::Module m = torch::jit::load(model("resnet18"));
  uint64_t expected = 0;
  for (const auto& p : m.parameters()) expected += p.numel() * p.element_size();
  for (const auto& b : m.buffers()) expected += b.numel() * b.element_size();
  uint64_t captured = 0;
  for (const auto& op : g.ops) captured += op.parameter_bytes;
  EXPECT_EQ(captured, expected);
}

// Bytes of the module's parameters and buffers (what capture must charge to the ops that read
// them).
uint64_t module_state_bytes(const std::string& name) {
  const torch::jit::Module m = torch::jit::load(model(name));
  uint64_t bytes = 0;
  for (const auto& p : m.parameters()) bytes += p.numel() * p.element_size();
  for (const auto& b : m.buffers()) bytes += b.numel() * b.element_size();
  return bytes;
}

TEST(Capture, WeightsPassedInAListAreCountedWithTheOpThatReadsThem) {
  // aten::lstm takes its weights as one prim::ListConstruct of attribute reads, not as attributes.
  for (const std::string name : {"gnmt_small", "rnnlm_small", "gnmt_example"}) {
    const OpGraph g = capture_model(name);
    uint64_t captured = 0;
    for (const auto& op : g.ops) captured += op.parameter_bytes;
    EXPECT_EQ(captured, module_state_bytes(name)) << name;
  }
  const OpGraph g = capture_model("rnnlm_small");
  // One layer: LSTM(32, 32) with both biases, float32.
  EXPECT_EQ(named(g, "layers.0/lstm").parameter_bytes, 4u * (4 * 32 * 32 * 2 + 4 * 32 * 2));
  for (const auto& e : g.edges) {
    if (g.ops[e.dst].kind == "aten::lstm") {
      EXPECT_LT(e.bytes, 4u * 4 * 32 * 32)
          << "an edge into " << g.ops[e.dst].name << " carries the layer's weights";
    }
  }
}

TEST(Capture, EveryOpCarriesItsWorkAndEveryKindOfTheTestModelsHasAFormula) {
  for (const std::string name : {"mlp", "two_tower", "gnmt_small", "gnmt_small_unrolled",
                                 "rnnlm_small", "bert_small", "resnet18"}) {
    const OpGraph g = capture_model(name);
    std::set<std::string> guessed;
    for (const auto& op : g.ops) {
      ASSERT_TRUE(op.work) << name << ": " << op.name;
      if (op.work->estimated) guessed.insert(op.kind);
    }
    std::string list;
    for (const auto& kind : guessed) list += kind + " ";
    EXPECT_TRUE(guessed.empty()) << name << ": no formula for " << list;
  }
  const OpGraph resnet = capture_model("resnet18");
  // conv1 on 1x3x64x64: 64 output channels at 32x32, each a 3x7x7 window.
  const Op& conv1 = named(resnet, "conv1/_convolution");
  EXPECT_EQ(conv1.work->math, MathClass::kConv);
  EXPECT_DOUBLE_EQ(conv1.work->forward_flops, 2.0 * 64 * 32 * 32 * 3 * 7 * 7);
  // rnnlm_small: LSTM(32, 32), one layer, over its 8-token input sequence.
  const OpGraph rnnlm = capture_model("rnnlm_small");
  const Op& lstm = named(rnnlm, "layers.0/lstm");
  EXPECT_EQ(lstm.work->math, MathClass::kMatmul);
  EXPECT_EQ(lstm.work->rnn_layers, 1);
  EXPECT_EQ(lstm.work->rnn_steps, 8);
  // mlp's Linear(32, 64) backward: autograd's node, two products, and one gradient accumulation
  // for each of its weight and bias.
  EXPECT_EQ(named(capture_model("mlp"), "layer1/linear").work->backward_kernels, 5);
}

// A model traced on the meta device (tests/models/make_models.py --device meta) has no weights and
// no values; capture runs it on meta inputs and must record what a capture on the CPU records: the
// same ops, names, shapes, parameter bytes, edges and work.
TEST(Capture, OnTheMetaDeviceTheGraphIsTheOneTheCpuCaptures) {
  for (const std::string name : {"mlp", "gnmt_small", "gnmt_small_unrolled", "rnnlm_small",
                                 "bert_small", "hf_bert", "hf_gpt2", "hf_llama"}) {
    const std::string meta = std::string(MODEL_DIR) + "/meta/" + name;
    std::ifstream in(meta + ".json");
    const auto spec = nlohmann::json::parse(in);
    const OpGraph on_meta = capture_file(
        meta + ".pt", spec["inputs"].get<std::vector<std::vector<int64_t>>>(), spec["dtype"]);
    const OpGraph on_cpu = capture_model(name);
    const nlohmann::json meta_json = to_json(on_meta), cpu_json = to_json(on_cpu);
    ASSERT_EQ(meta_json["ops"].size(), cpu_json["ops"].size()) << name;
    for (size_t i = 0; i < cpu_json["ops"].size(); ++i)
      ASSERT_EQ(meta_json["ops"][i], cpu_json["ops"][i]) << name << ": op " << i;
    EXPECT_EQ(meta_json, cpu_json) << name << ": edges";
  }
}

TEST(Capture, TransformerIsCapturedOpByOp) {
  const OpGraph g = capture_model("bert_small");
  EXPECT_EQ(kinds(g).count("aten::_transformer_encoder_layer_fwd"), 0u)
      << "no fused inference fast path";
  EXPECT_GE(kinds(g)["aten::layer_norm"], 2 * 2 + 1);
  EXPECT_NO_THROW(named(g, "encoder.layers.1.linear2/linear"));
}

TEST(Capture, SameModelSameFingerprint) {
  EXPECT_EQ(capture_model("two_tower").fingerprint(), capture_model("two_tower").fingerprint());
  EXPECT_NE(capture_model("two_tower").fingerprint(), capture_model("mlp").fingerprint());
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const CaptureError& e) {
    return e.what();
  }
  return "";
}

TEST(Capture, BadInputsAreNamed) {
  const std::string not_torchscript = std::string(MODEL_DIR) + "/mlp.json";
  EXPECT_NE(error_of([&] {
              capture_file(not_torchscript, {{8, 32}});
            })
                .find(not_torchscript +
                      ": neither a .pt2 archive (torch.export.save) nor a TorchScript file"),
            std::string::npos);
  const std::string shape = error_of([&] { capture_file(model("mlp"), {{8, 33}}); });
  EXPECT_NE(shape.find("aten::linear in layer1 failed on the example inputs"), std::string::npos)
      << shape;
  EXPECT_NE(error_of([&] {
              capture_file(model("mlp"), {{8, 32}, {8, 32}});
            }).find("takes 1 input(s), 2 given"),
            std::string::npos);
  const std::string flow = error_of([&] { capture_file(model("control_flow"), {{2, 4}}); });
  EXPECT_NE(flow.find("control flow (prim::If"), std::string::npos) << flow;
  EXPECT_NE(error_of([&] {
              capture_file(model("mlp"), {{8, 32}}, "complex");
            }).find("unknown input dtype 'complex'"),
            std::string::npos);
}

// A model with nothing to train has no backward: --profile says so instead of LibTorch's autograd
// error and its stack.
TEST(CaptureCommand, AModelWithoutParametersIsNotProfiled) {
  const std::string path = std::string(MODEL_DIR) + "/parameterless.pt";
  torch::jit::Module doubler("Doubler");
  doubler.define("def forward(self, x):\n    return x * 2.0 + 1.0\n");
  doubler.save(path);
  const std::string err = std::string(MODEL_DIR) + "/parameterless.err";
  EXPECT_NE(std::system((std::string(PLACEMENTCTL_BIN) + " capture " + path +
                         " --input 4x8 --profile cpu 2> " + err)
                            .c_str()),
            0);
  std::ifstream in(err);
  const std::string message((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(message.find("parameterless.pt's first output depends on no trained parameter"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find("Exception raised from"), std::string::npos) << message;
}

}  // namespace
}  // namespace placement

namespace placement {
namespace {

// The command line a person uses: placementctl capture, which runs placementctl-capture.
TEST(CaptureCommand, WritesAGraphFileThatLoadsBack) {
  const std::string out = std::string(MODEL_DIR) + "/gnmt_small.graph.json";
  const std::string command = std::string(PLACEMENTCTL_BIN) + " capture " + model("gnmt_small") +
                              " --input 2x6 --input 2x5 --dtype int64 -o " + out + " > /dev/null";
  ASSERT_EQ(std::system(command.c_str()), 0);
  const OpGraph g = load_graph_file(out);
  EXPECT_EQ(g.name, "gnmt_small");
  EXPECT_EQ(g.fingerprint(), capture_model("gnmt_small").fingerprint());
  const std::string bad = std::string(PLACEMENTCTL_BIN) + " capture " + model("gnmt_small") +
                          " --input 2x6 2> /dev/null";
  EXPECT_NE(std::system(bad.c_str()), 0) << "one input for a model that takes two";
}

TEST(CaptureCommand, KeepProfilesCopiesAnEarlierCapturesProfilesIntoANewCapture) {
  const std::string dir = std::string(MODEL_DIR) + "/";
  const std::string base =
      std::string(PLACEMENTCTL_BIN) + " capture " + model("mlp") + " --input 8x32 ";
  ASSERT_EQ(std::system((base + "--profile cpu --profile-steps 1 -o " + dir +
                         "mlp.profiled.json > /dev/null")
                            .c_str()),
            0);
  // An old file: its ops have no work.
  OpGraph old = load_graph_file(dir + "mlp.profiled.json");
  for (auto& op : old.ops) op.work.reset();
  write_json_file(dir + "mlp.old.json", to_json(old));
  ASSERT_EQ(std::system((base + "--keep-profiles " + dir + "mlp.old.json -o " + dir +
                         "mlp.kept.json > /dev/null")
                            .c_str()),
            0);
  const OpGraph kept = load_graph_file(dir + "mlp.kept.json");
  ASSERT_EQ(kept.ops.size(), old.ops.size());
  for (size_t i = 0; i < kept.ops.size(); ++i) {
    EXPECT_EQ(kept.ops[i].profile, old.ops[i].profile) << kept.ops[i].name;
    EXPECT_FALSE(kept.ops[i].profile.empty());
    EXPECT_TRUE(kept.ops[i].work) << kept.ops[i].name;
  }
  // Another batch size is another model.
  const std::string other = std::string(PLACEMENTCTL_BIN) + " capture " + model("mlp") +
                            " --input 4x32 --keep-profiles " + dir + "mlp.old.json -o " + dir +
                            "mlp.other.json 2> " + dir + "mlp.err";
  EXPECT_NE(std::system(other.c_str()), 0);
  std::ifstream err(dir + "mlp.err");
  const std::string message((std::istreambuf_iterator<char>(err)),
                            std::istreambuf_iterator<char>());
  EXPECT_NE(message.find("mlp.old.json: a different model (fingerprint "), std::string::npos)
      << message;
}

TEST(CaptureCommand, AModelOnTheMetaDeviceIsCapturedButNotProfiled) {
  const std::string dir = std::string(MODEL_DIR) + "/meta/";
  const std::string base =
      std::string(PLACEMENTCTL_BIN) + " capture " + dir + "mlp.pt --input 8x32 ";
  ASSERT_EQ(std::system((base + "-o " + dir + "mlp.graph.json > /dev/null").c_str()), 0);
  EXPECT_EQ(load_graph_file(dir + "mlp.graph.json").fingerprint(),
            capture_model("mlp").fingerprint());
  EXPECT_NE(std::system((base + "--profile cpu 2> " + dir + "mlp.err").c_str()), 0);
  std::ifstream err(dir + "mlp.err");
  const std::string message((std::istreambuf_iterator<char>(err)),
                            std::istreambuf_iterator<char>());
  EXPECT_NE(message.find("mlp.pt: saved on the meta device, so it has shapes but no weights"),
            std::string::npos)
      << message;
}

TEST(CaptureCommand, AnExportedModelIsCapturedAtItsRecordedExampleAndProfiled) {
  // No --input, no --dtype: the .pt2's own example (two int64 token tensors for GNMT), and its
  // weights read for the profiled steps.
  const std::string out = ::testing::TempDir() + "gnmt_small.pt2.graph.json";
  const std::string command = std::string(PLACEMENTCTL_BIN) + " capture " + EXPORT_DIR +
                              "/gnmt_small.pt2 --profile cpu --profile-steps 1 -o " + out +
                              " > /dev/null";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  const OpGraph graph = load_graph_file(out);
  EXPECT_EQ(graph.fingerprint(),
            capture_file(std::string(EXPORT_DIR) + "/gnmt_small.pt2", {{2, 6}, {2, 5}}, "int64")
                .fingerprint());
  const bool profiled = std::all_of(graph.ops.begin(), graph.ops.end(),
                                    [](const Op& op) { return op.profile.count("cpu") == 1; });
  EXPECT_TRUE(profiled);
}

}  // namespace
}  // namespace placement
