// What the server's weigher says a payload takes decoded (protocol::weigh_payload), against what
// decoding and then freeing it takes, on the payloads real jobs send and on the shapes no message
// has. The server refuses a payload over kMaxDecodedPerPayloadByte (server.cpp) bytes of weight per
// byte: this prints where real messages and hostile shapes fall beside that line.
//
// Real: the graph upload of every graph under tests/data/graphs (the test and papers' models, as
// the SDK sends them) and a profile report of each with an entry per op. Hostile: a payload of
// about --hostile-bytes of empty maps, empty arrays, empty strings, nulls, and 1-byte chunks of
// one indefinite string.
//
//   payload_weight_bench [--graphs DIR] [--hostile-bytes N]   (--help)
//
// The heap is counted by this program's own operator new and delete, in glibc's blocks (the
// weight's unit); the figures are per byte of CBOR payload.

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <new>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "command_line.h"
#include "placement/devices.h"
#include "placement/messages.h"
#include "placement/protocol.h"
#include "placement/serialization.h"

namespace {

bool counting = false;
int64_t live = 0, peak = 0;

int64_t block_of(void* p) { return static_cast<int64_t>(malloc_usable_size(p) + 8); }

}  // namespace

void* operator new(size_t n) {
  void* p = std::malloc(n ? n : 1);
  if (p == nullptr) throw std::bad_alloc();
  if (counting) {
    live += block_of(p);
    peak = std::max(peak, live);
  }
  return p;
}
void operator delete(void* p) noexcept {
  if (p != nullptr && counting) live -= block_of(p);
  std::free(p);
}
void operator delete(void* p, size_t) noexcept { operator delete(p); }

namespace {

struct Row {
  std::string name;
  size_t bytes;
  uint64_t weight;
  int64_t held;
};

// Weighs `payload`, then decodes and frees it counting the heap it held at its peak.
Row measure(const std::string& name, const std::vector<uint8_t>& payload) {
  const auto weight = placement::protocol::weigh_payload(payload.data(), payload.size());
  live = peak = 0;
  counting = true;
  try {
    nlohmann::json doc =
        placement::protocol::decode_payload(payload.data(), payload.size(), weight);
  } catch (const placement::FormatError&) {
  }
  counting = false;
  return {name, payload.size(), weight.decoded_bytes, peak};
}

void print(const Row& r) {
  const double b = static_cast<double>(r.bytes);
  std::printf("%-52s %10zu %8.1f %8.1f %6.2f\n", r.name.c_str(), r.bytes,
              static_cast<double>(r.weight) / b, static_cast<double>(r.held) / b,
              static_cast<double>(r.weight) / static_cast<double>(std::max<int64_t>(r.held, 1)));
}

// The median of 5 weighings of `payload`, stopping past `stop_above`, in milliseconds.
double weighing_ms(const std::vector<uint8_t>& payload, uint64_t stop_above) {
  std::vector<double> ms;
  for (int i = 0; i < 5; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const auto w = placement::protocol::weigh_payload(payload.data(), payload.size(), stop_above);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
    if (w.items == 0) ms.back() = 0;  // keeps the call
  }
  std::sort(ms.begin(), ms.end());
  return ms[2];
}

// An array of `count` copies of `item`, each one byte of CBOR when `item` is empty or null.
std::vector<uint8_t> array_of(size_t count, const nlohmann::json& item) {
  return nlohmann::json::to_cbor(nlohmann::json::array_t(count, item));
}

int run(const std::string& graphs, size_t hostile_bytes) {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(graphs))
    if (entry.is_regular_file() && entry.path().string().find(".json") != std::string::npos)
      files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  if (files.empty()) throw std::runtime_error("no graph files under " + graphs);
  std::printf("%-52s %10s %8s %8s %6s\n", "payload", "bytes", "weight/B", "held/B", "w/held");
  double real_max = 0;
  for (const auto& file : files) {
    const placement::OpGraph graph = placement::load_graph_file(file.string());
    const placement::DeviceSet devices;
    const std::string name = std::filesystem::relative(file, graphs).string();
    const nlohmann::json upload =
        placement::messages::GraphUpload{graph, std::nullopt}.to_json(devices);
    placement::messages::ProfileReport report;
    report.placement_id = 1;
    report.steps = 5;
    for (const auto& op : graph.ops)
      report.ops.push_back({op.id, "cuda", {1.234e-5, 2.5e-5, 1e-6, 123456}});
    for (const Row& r :
         {measure("graph_upload " + name, nlohmann::json::to_cbor(upload)),
          measure("profile_report " + name, nlohmann::json::to_cbor(report.to_json()))}) {
      print(r);
      real_max = std::max(real_max, static_cast<double>(r.weight) / static_cast<double>(r.bytes));
    }
  }
  std::vector<uint8_t> chunks = {0x7f};
  while (chunks.size() + 3 < hostile_bytes) chunks.insert(chunks.end(), {0x61, 'x'});
  chunks.push_back(0xff);
  double hostile_min = 1e18;
  for (const Row& r : {measure("empty maps", array_of(hostile_bytes, nlohmann::json::object())),
                       measure("empty arrays", array_of(hostile_bytes, nlohmann::json::array())),
                       measure("empty strings", array_of(hostile_bytes, "")),
                       measure("nulls", array_of(hostile_bytes, nullptr)),
                       measure("1-byte chunks of one string", chunks)}) {
    print(r);
    if (r.name != "1-byte chunks of one string")
      hostile_min =
          std::min(hostile_min, static_cast<double>(r.weight) / static_cast<double>(r.bytes));
  }
  std::printf("real messages weigh at most %.1f bytes per byte; hostile shapes at least %.1f\n",
              real_max, hostile_min);
  // What the I/O thread spends on a hostile frame: weighing it whole, and as the server does,
  // stopping past its limit (48 bytes per byte and 1 MiB).
  const std::vector<uint8_t> maps = array_of(hostile_bytes, nlohmann::json::object());
  std::printf(
      "weighing %zu bytes of empty maps: %.1f ms whole, %.1f ms stopped at the server's "
      "limit (median of 5)\n",
      maps.size(), weighing_ms(maps, std::numeric_limits<uint64_t>::max()),
      weighing_ms(maps, (uint64_t{1} << 20) + 48 * maps.size()));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Weighed against held: what protocol::weigh_payload says each payload takes decoded, "
      "and what decoding it does",
      "payload_weight_bench"};
  std::string graphs = SOURCE_DIR "/tests/data/graphs";
  size_t hostile_bytes = 1 << 20;
  app.add_option("--graphs", graphs,
                 "folder of graph files (.json, .json.gz), searched recursively")
      ->capture_default_str();
  app.add_option("--hostile-bytes", hostile_bytes, "size of each hostile payload")
      ->check(CLI::Range(size_t{16}, size_t{1} << 30))
      ->capture_default_str();
  return examples::command_line::run(app, argc, argv, [&] { return run(graphs, hostile_bytes); });
}
