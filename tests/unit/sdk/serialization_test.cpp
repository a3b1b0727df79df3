#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

#include "placement/serialization.h"
#include "test_graphs.h"

namespace {
// The errno this program's fsync fails with, or 0 to sync: libplacement's calls come here first
// (the program's own symbols come before libc's), so a failing disk is one store away.
std::atomic<int> fsync_fails_with{0};
}  // namespace

extern "C" int fsync(int fd) {
  if (const int err = fsync_fails_with.load()) {
    errno = err;
    return -1;
  }
  return static_cast<int>(::syscall(SYS_fsync, fd));
}

namespace placement {
namespace {

using nlohmann::json;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const FormatError& e) {
    return e.what();
  }
  return "";
}

TEST(Serialization, GraphRoundTripsThroughJsonAndCbor) {
  OpGraph g = testing::two_chains(3);
  g.ops[1].pinned = DeviceKind::kCpu;
  g.ops[2].parameter_bytes = 4096;
  g.ops[2].profile["cuda"] = {0.001, 0.002, 1 << 20};
  g.ops[1].profile["cuda"] = {0.003, 0.006, 0.0, 4096, true};
  OpWork work;
  work.math = MathClass::kConv;
  work.dtype = "bfloat16";
  work.forward_flops = 1.5e9;
  work.backward_flops = 3e9;
  work.forward_bytes = 4096;
  work.backward_bytes = 8192;
  work.forward_kernels = 2;
  work.backward_kernels = 0;
  work.estimated = true;
  g.ops[0].work = work;
  OpWork lstm;
  lstm.rnn_layers = 2;
  lstm.rnn_steps = 100;
  g.ops[3].work = lstm;
  const json doc = to_json(g);
  EXPECT_EQ(graph_from_json(doc), g);
  EXPECT_EQ(graph_from_json(json::from_cbor(json::to_cbor(doc))), g);
  // Graphs written before RNN calls and steps were counted read as none.
  json old = doc;
  old["ops"][3]["work"].erase("rnn_layers");
  old["ops"][3]["work"].erase("rnn_steps");
  EXPECT_EQ(graph_from_json(old).ops[3].work->rnn_steps, 0);
}

TEST(Serialization, DevicesPlacementMeasurementRoundTrip) {
  DeviceSet d = testing::devices(3);
  DeviceSpec spec;
  spec.preset = "custom";
  spec.fp32_flops = 1e12;
  spec.tf32_flops = 8e12;
  spec.memory_bandwidth = 2e11;
  spec.launch_s = 4e-6;
  spec.compute_efficiency = 0.6;
  spec.conv_layout_bandwidth = 3e9;
  spec.pool_efficiency = 0.004;
  spec.rnn_layer_s = 1.1e-4;
  spec.rnn_step_s = 1.5e-6;
  spec.step_s = 9e-5;
  d.devices[2].spec = spec;
  EXPECT_EQ(devices_from_json(to_json(d)), d);
  d.devices[2].spec->memory_bandwidth = 0;
  EXPECT_EQ(error_of([&] { devices_from_json(to_json(d)); }),
            "device cpu:2 spec: memory bandwidth must be > 0");
  d.devices[2].spec.reset();
  const OpGraph g = testing::chain(4);
  const Placement p{{2, 0, 1, 2}};
  EXPECT_EQ(placement_from_json(to_json(p, d), g, d), p);
  const Grouping grouping{{0, 1, 1, 0}, 2};
  EXPECT_EQ(grouping_from_json(to_json(grouping), g), grouping);
}

// A graph with its parameter table: four ops, a weight read by ops 0 and 3 (tied) and one by op 2.
OpGraph with_parameters() {
  OpGraph g = testing::chain(4);
  g.parameters = {{"embed.weight", 4096, {0, 3}}, {"mlp.weight", 1024, {2}}};
  return g;
}

TEST(Serialization, AGraphCarriesItsParametersAndAPlacementItsResidence) {
  const OpGraph g = with_parameters();
  EXPECT_EQ(graph_from_json(to_json(g)), g);
  EXPECT_EQ(graph_from_json(to_json(g)).fingerprint(), testing::chain(4).fingerprint())
      << "the parameter table leaves the model's identity as it was";
  const DeviceSet d = testing::devices(3);
  Placement p{{0, 0, 1, 0}};
  EXPECT_FALSE(to_json(p, d).contains("residence")) << "none without one";
  p.residence.parameters = {{2, Fetch::kStream}, {-1, Fetch::kPersist}};
  p.residence.activations.resize(4);
  p.residence.activations[1] = {ActivationPolicy::kOffload, 2};
  p.residence.activations[2] = {ActivationPolicy::kRecompute, -1};
  const json doc = to_json(p, d);
  EXPECT_EQ(placement_from_json(doc, g, d), p);
  EXPECT_NE(p.fingerprint(), Placement{p.device_of_op}.fingerprint());
  // Device indices go by name: a device set in another order reads the same placement.
  DeviceSet reordered = d;
  std::swap(reordered.devices[0], reordered.devices[2]);
  const Placement read = placement_from_json(doc, g, reordered);
  EXPECT_EQ(read.residence.parameters[0].home, 0) << "cpu:2 is first now";
  EXPECT_EQ(read.residence.activations[1].device, 0);
  // Errors name the entry at fault.
  json bad = doc;
  bad["residence"]["parameter_fetch"][1] = "sometimes";
  EXPECT_EQ(error_of([&] { placement_from_json(bad, g, d); }),
            "residence.parameter_fetch[1]: expected \"persist\" or \"stream\", not \"sometimes\"");
  bad = doc;
  bad["residence"]["activation_device"][1] = 7;
  EXPECT_EQ(error_of([&] { placement_from_json(bad, g, d); }),
            "residence.activation_device[1]: device index 7 is not in 'devices' (or -1)");
  bad = doc;
  bad["residence"].erase("parameter_fetch");
  EXPECT_EQ(error_of([&] { placement_from_json(bad, g, d); }),
            "residence: 'parameter_home' and 'parameter_fetch' come together");
  bad = doc;
  bad["residence"]["activations"][1] = "recompute";  // with a device, which only an offload names
  EXPECT_NE(error_of([&] { placement_from_json(bad, g, d); }).find("only an offloaded activation"),
            std::string::npos);
  bad = doc;
  bad["residence"]["parameter_home"].push_back(0);
  bad["residence"]["parameter_fetch"].push_back("persist");
  EXPECT_NE(error_of([&] {
              placement_from_json(bad, g, d);
            }).find("residence names 3 parameters, graph has 2"),
            std::string::npos);
  json parameters = to_json(g);
  parameters["parameters"][0]["readers"] = json::array({3, 0});
  EXPECT_NE(error_of([&] { graph_from_json(parameters); })
                .find("parameter 0 'embed.weight': its readers must be ops of this graph in "
                      "ascending order (0 is not)"),
            std::string::npos);
}

TEST(Serialization, ErrorsNameThePathOfTheFieldAtFault) {
  json doc = to_json(testing::chain(3));
  doc["ops"][1].erase("kind");
  EXPECT_EQ(error_of([&] { graph_from_json(doc); }), "ops[1]: missing required key 'kind'");
  doc = to_json(testing::chain(3));
  doc["ops"][2]["outputs"][0]["shape"] = "big";
  EXPECT_EQ(error_of([&] { graph_from_json(doc); }),
            "ops[2].outputs[0].shape: expected an array, found string");
  doc = to_json(testing::chain(3));
  doc["ops"][0]["colour"] = "red";
  EXPECT_NE(error_of([&] { graph_from_json(doc); }).find("ops[0]: unknown key 'colour'"),
            std::string::npos);
  doc = to_json(testing::chain(3));
  doc["ops"][0]["parameter_bytes"] = -5;
  EXPECT_EQ(error_of([&] { graph_from_json(doc); }),
            "ops[0].parameter_bytes: expected a non-negative integer, found -5");
}

TEST(Serialization, OpWorkFieldsAreChecked) {
  OpGraph g = testing::chain(2);
  g.ops[1].work = OpWork{};
  json doc = to_json(g);
  doc["ops"][1]["work"]["math"] = "quantum";
  EXPECT_EQ(error_of([&] { graph_from_json(doc); }),
            "ops[1].work.math: unknown math class 'quantum' (vector, matmul, conv or pool)");
  doc = to_json(g);
  doc["ops"][1]["work"]["forward_bytes"] = -1;
  EXPECT_EQ(error_of([&] { graph_from_json(doc); }), "ops[1].work: work figures must be >= 0");
}

TEST(Serialization, GraphInvariantsAreChecked) {
  json doc = to_json(testing::chain(3));
  doc["edges"].push_back({2, 0, 4});
  EXPECT_NE(error_of([&] { graph_from_json(doc); }).find("graph has a cycle through op 0"),
            std::string::npos);
  doc = to_json(testing::chain(3));
  doc["edges"].push_back({1, 5, 4});
  EXPECT_NE(error_of([&] { graph_from_json(doc); }).find("dangling"), std::string::npos);
}

TEST(Serialization, DeviceWithoutMemoryIsNamed) {
  json doc = to_json(testing::devices(2));
  doc["devices"][1]["memory_bytes"] = 0;
  EXPECT_EQ(error_of([&] { devices_from_json(doc); }), "device cpu:1 has no memory");
  doc["devices"][1]["name"] = "tpu:0";
  EXPECT_NE(
      error_of([&] { devices_from_json(doc); }).find("devices[1].name: unknown device kind 'tpu'"),
      std::string::npos);
}

TEST(Serialization, PlacementWithAForeignDeviceIsRejected) {
  const OpGraph g = testing::chain(2);
  json doc = {{"devices", {"cpu:0", "cuda:7"}}, {"device_of_op", {0, 1}}};
  EXPECT_NE(error_of([&] {
              placement_from_json(doc, g, testing::devices(2));
            }).find("devices[1]: device 'cuda:7' is not in the device set"),
            std::string::npos);
}

TEST(Serialization, GzipFilesRoundTrip) {
  const std::string path =
      std::filesystem::temp_directory_path() / ("g." + std::to_string(::getpid()) + ".json.gz");
  const OpGraph g = testing::two_chains(50);
  write_json_file(path, to_json(g));
  EXPECT_EQ(load_graph_file(path), g);
  EXPECT_LT(std::filesystem::file_size(path), to_json(g).dump(1).size() / 4) << "compressed";
  std::ofstream(path) << "not gzip at all";
  EXPECT_THROW(load_graph_file(path), FormatError);
  std::filesystem::remove(path);
}

TEST(Serialization, FilesAreWrittenAtomicallyAndErrorsNameTheFile) {
  const std::string dir =
      std::filesystem::temp_directory_path() / ("ser." + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/graph.json";
  write_json_file(path, to_json(testing::chain(3)));
  EXPECT_EQ(load_graph_file(path), testing::chain(3));
  // Only the final file remains: the temporary was renamed over it.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 1);
  std::ofstream(dir + "/bad.json") << "{\"ops\": [";
  const std::string e = error_of([&] { load_graph_file(dir + "/bad.json"); });
  EXPECT_EQ(e.rfind(dir + "/bad.json: not valid JSON", 0), 0u) << e;
  EXPECT_EQ(error_of([&] {
              read_json_file(dir + "/missing.json");
            }).rfind(dir + "/missing.json: cannot open", 0),
            0u);
  std::filesystem::remove_all(dir);
}

TEST(Serialization, AFailedSyncLeavesTheFileItReplacesAndNoDescriptorBehind) {
  // Each failed fsync once kept its temporary's descriptor open: a daemon on a failing disk ran
  // out of descriptors, and with them of connections for every user.
  const std::string dir =
      std::filesystem::temp_directory_path() / ("fsync." + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/state.json";
  write_json_file(path, json{{"kept", true}});
  const auto descriptors = [] {
    return std::distance(std::filesystem::directory_iterator("/proc/self/fd"), {});
  };
  const auto before = descriptors();
  fsync_fails_with = EIO;
  for (int i = 0; i < 50; ++i) {
    try {
      write_json_file(path, json{{"kept", false}});
      ADD_FAILURE() << "a failed fsync was not reported";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(": fsync failed: Input/output error"), std::string::npos)
          << e.what();
    }
  }
  fsync_fails_with = 0;
  EXPECT_EQ(descriptors(), before);
  EXPECT_EQ(read_json_file(path), (json{{"kept", true}}));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 1) << "no temporary left";
  std::filesystem::remove_all(dir);
}

TEST(Serialization, AnAtomicWriteNeverWritesThroughALinkPlantedAtItsTemporary) {
  // In a directory another user can write (a socket directory, /tmp), a link at the temporary's
  // name would have the write go into the file it names: the temporary is always a new file.
  const std::string dir =
      std::filesystem::temp_directory_path() / ("ser-link." + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string victim = dir + "/victim";
  std::ofstream(victim) << "precious";
  const std::string path = dir + "/out.json";
  std::filesystem::create_symlink(victim, path + ".tmp." + std::to_string(::getpid()));
  write_file_atomically(path, "{}\n");
  std::ifstream in(victim);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "precious");
  std::ifstream out(path);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(out), {}), "{}\n");
  EXPECT_FALSE(std::filesystem::is_symlink(path));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace placement
