#pragma once
// [limits]: a graph upload is weighed before it is decoded. Decoding is where a graph's memory is
// first spent (the decoded document costs about 20 times the upload's bytes), so the op and edge
// counts are read from the CBOR stream itself, without building anything, and the session the
// graph would make is estimated from them.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "config/config.h"

namespace placementd {

struct GraphCounts {
  uint64_t ops = 0;
  uint64_t edges = 0;
};

/// The lengths of `graph.ops` and `graph.edges` in a graph_upload payload, found by one pass over
/// its CBOR that allocates nothing per element. nullopt when the payload is not such a document (or
/// nests too deep): the regular decode then says what is wrong with it.
std::optional<GraphCounts> count_graph_upload(const uint8_t* payload, size_t size);

/// What one live session with this graph costs the daemon at its peak: decoding the upload, the
/// graph, the memory model, the policy's features and networks over at most `max_groups` groups,
/// and the placements of its candidates. Measured on unrolled recurrent graphs with the default
/// plugins (tests/tools/large_graph_bench prints the estimate next to the measured RSS). Ops rich
/// in outputs, shapes or profiles cost more than their count says: the decoded document's share is
/// then taken from the upload's `payload_bytes`.
uint64_t estimate_session_bytes(const GraphCounts& counts, uint64_t payload_bytes, int max_groups);

/// `bytes` in whole MiB for a message ("412 MiB").
std::string mib(uint64_t bytes);

/// The first limit the graph is over, as a message that names it and the figure ("graph has
/// 412000 ops; [limits] max_graph_ops = 200000"), or nullopt when it is within all of them.
std::optional<std::string> graph_over_limits(const GraphCounts& counts, uint64_t payload_bytes,
                                             const LimitsConfig& limits, int max_groups);

}  // namespace placementd
