#include "server/graph_limits.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include <nlohmann/json.hpp>

#include "placement/protocol.h"

namespace placementd {

namespace {

using nlohmann::json;

// Follows the key path of every container and counts the direct children of graph.ops and
// graph.edges. Strings are handed over by nlohmann as it reads them; nothing else is kept.
class CountingSax : public nlohmann::json_sax<json> {
 public:
  std::optional<uint64_t> ops, edges;

  bool null() override { return child(); }
  bool boolean(bool) override { return child(); }
  bool number_integer(number_integer_t) override { return child(); }
  bool number_unsigned(number_unsigned_t) override { return child(); }
  bool number_float(number_float_t, const string_t&) override { return child(); }
  bool string(string_t&) override { return child(); }
  bool binary(binary_t&) override { return child(); }
  bool start_object(std::size_t) override { return open(); }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    if (!stack_.empty()) stack_.back().key = stack_.size() <= 2 ? k : std::string();
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  struct Level {
    std::string key;              // the key being read, kept only where it can lead to graph.ops
    uint64_t* counter = nullptr;  // graph.ops or graph.edges: counts this level's children
  };

  // Counts a child of the container in force, if that is one of the two arrays.
  bool child() {
    if (!stack_.empty() && stack_.back().counter) ++*stack_.back().counter;
    return true;
  }
  bool open() {
    child();
    if (stack_.size() >= placement::protocol::kMaxPayloadDepth) return false;
    Level level;
    // Root {graph: {ops: [...], edges: [...]}}: at depth 2, under the root's "graph" key.
    if (stack_.size() == 2 && stack_[0].key == "graph") {
      if (stack_[1].key == "ops") level.counter = &ops_count_;
      if (stack_[1].key == "edges") level.counter = &edges_count_;
    }
    stack_.push_back(std::move(level));
    return true;
  }
  bool close() {
    if (stack_.empty()) return false;
    if (stack_.back().counter == &ops_count_) ops = ops_count_;
    if (stack_.back().counter == &edges_count_) edges = edges_count_;
    stack_.pop_back();
    return true;
  }

  std::vector<Level> stack_;
  uint64_t ops_count_ = 0, edges_count_ = 0;
};

}  // namespace

std::string mib(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.0f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

std::optional<GraphCounts> count_graph_upload(const uint8_t* payload, size_t size) {
  CountingSax sax;
  const bool complete =
      json::sax_parse(payload, payload + size, &sax, nlohmann::detail::input_format_t::cbor);
  if (!complete || !sax.ops || !sax.edges) return std::nullopt;
  return GraphCounts{*sax.ops, *sax.edges};
}

uint64_t estimate_session_bytes(const GraphCounts& counts, uint64_t payload_bytes, int max_groups) {
  // Fitted to the daemon's peak RSS over idle with unrolled 4-layer stacks of 20k, 80k and 160k
  // ops (1.75 edges per op; the feedforward placer, 100 candidates): 7.3 KiB per op and edge pair,
  // of which about 5.3 KiB is the decoded upload (21 bytes per byte of CBOR), freed once the graph
  // is built. Per group pair, the features' and the placers' G² floats and doubles.
  constexpr uint64_t kPerOp = 7000, kPerEdge = 256, kPerGroupPair = 64, kBase = 8u << 20;
  // What a graph's bytes cost decoded and built, for ops heavier than these: the decoded document
  // and the graph built from it.
  constexpr uint64_t kPerPayloadByte = 28;
  const auto g = static_cast<uint64_t>(max_groups);
  const uint64_t by_count = counts.ops * kPerOp + counts.edges * kPerEdge;
  return kBase + std::max(by_count, payload_bytes * kPerPayloadByte) + g * g * kPerGroupPair;
}

std::optional<std::string> graph_over_limits(const GraphCounts& counts, uint64_t payload_bytes,
                                             const LimitsConfig& limits, int max_groups) {
  if (counts.ops > static_cast<uint64_t>(limits.max_graph_ops))
    return "graph has " + std::to_string(counts.ops) +
           " ops; [limits] max_graph_ops = " + std::to_string(limits.max_graph_ops);
  const uint64_t bytes = estimate_session_bytes(counts, payload_bytes, max_groups);
  if (bytes > static_cast<uint64_t>(limits.max_session_bytes))
    return "graph of " + std::to_string(counts.ops) + " ops and " + std::to_string(counts.edges) +
           " edges needs about " + mib(bytes) + " in the daemon; [limits] max_session_bytes = " +
           std::to_string(limits.max_session_bytes) + " (" +
           mib(static_cast<uint64_t>(limits.max_session_bytes)) + ")";
  return std::nullopt;
}

}  // namespace placementd
