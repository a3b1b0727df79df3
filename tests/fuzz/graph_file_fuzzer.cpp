// libFuzzer target: a graph file (JSON), as placementctl and the daemon's tools read one
// (load_graph_file): FormatError for what is malformed, std::invalid_argument from validate() for a
// graph that breaks its invariants, nothing else.

#include <cstddef>
#include <cstdint>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "placement/graph.h"
#include "placement/serialization.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json doc = nlohmann::json::parse(data, data + size, nullptr, false);
  if (doc.is_discarded()) return 0;
  try {
    placement::graph_from_json(doc).validate();
  } catch (const placement::FormatError&) {
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
