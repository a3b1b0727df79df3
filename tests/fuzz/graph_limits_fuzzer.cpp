// libFuzzer target: a graph_upload payload as the server weighs it before decoding
// (server/graph_limits.h). count_graph_upload reads the untrusted CBOR itself, so it is fuzzed
// against the decoder it stands in front of: whenever the payload decodes into a map whose
// graph.ops and graph.edges are arrays (what the graph decoder goes on to build), the weigher must
// have counted them, and counted them exactly. A miss would let a graph over [limits] be decoded,
// which is what the limits exist to prevent; a wrong count would refuse a graph within them.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "placement/protocol.h"
#include "placement/serialization.h"
#include "server/graph_limits.h"

namespace {

[[noreturn]] void mismatch(const char* what, uint64_t counted, size_t decoded) {
  std::fprintf(stderr, "graph_limits_fuzzer: %s counted %llu, decoded %zu\n", what,
               static_cast<unsigned long long>(counted), decoded);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto counts = placementd::count_graph_upload(data, size);
  nlohmann::json doc;
  try {
    doc = placement::protocol::decode_payload(data, size);
  } catch (const placement::FormatError&) {
    return 0;  // the server answers bad_payload; nothing is built
  }
  if (!doc.is_object() || !doc.contains("graph") || !doc["graph"].is_object()) return 0;
  const nlohmann::json& graph = doc["graph"];
  if (!graph.contains("ops") || !graph["ops"].is_array() || !graph.contains("edges") ||
      !graph["edges"].is_array())
    return 0;
  if (!counts) mismatch("nothing", 0, graph["ops"].size());
  if (counts->ops != graph["ops"].size()) mismatch("ops", counts->ops, graph["ops"].size());
  if (counts->edges != graph["edges"].size())
    mismatch("edges", counts->edges, graph["edges"].size());
  return 0;
}
