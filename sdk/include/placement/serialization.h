#pragma once
// JSON forms of the core types: files for humans, and (encoded as CBOR) the wire protocol's
// payloads. Decoding checks every field and throws FormatError with the JSON path of the first
// field at fault.

#include <stdexcept>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "placement/devices.h"
#include "placement/graph.h"
#include "placement/placement.h"

namespace placement {

/// A document does not have the expected shape. what() reads "<path>: <problem>", e.g.
/// "ops[3].outputs[0].shape: expected an array of integers"; file loaders prefix the file name.
class FormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// What a decoder does with a key it does not know. The protocol's one rule: a message is read
/// with kIgnore at every depth, the graph, devices and placement nested in it included, so that a
/// newer peer may say more within a version; a file (a graph, a stored placement, a topology, a
/// config) is read with kRefuse, so that a typo fails instead of being ignored.
enum class UnknownKeys { kRefuse, kIgnore };

nlohmann::json to_json(const OpGraph& graph);
nlohmann::json to_json(const DeviceSet& devices);
nlohmann::json to_json(const Grouping& grouping);
/// {"devices": [names...], "device_of_op": [indices...]}: self-describing, so a file can be checked
/// against the device set it is used with.
nlohmann::json to_json(const Placement& placement, const DeviceSet& devices);

/// The decoders check shapes and types, then the type's own validate() (graph acyclic, ...).
OpGraph graph_from_json(const nlohmann::json& doc, UnknownKeys unknown = UnknownKeys::kRefuse);
DeviceSet devices_from_json(const nlohmann::json& doc, UnknownKeys unknown = UnknownKeys::kRefuse);
Grouping grouping_from_json(const nlohmann::json& doc, const OpGraph& graph);
/// Maps the document's device names onto `devices`; a name `devices` lacks is an error.
Placement placement_from_json(const nlohmann::json& doc, const OpGraph& graph,
                              const DeviceSet& devices, UnknownKeys unknown = UnknownKeys::kRefuse);

/// Reads a JSON file, gzip-compressed if the name ends in ".gz"; errors are prefixed with the path.
nlohmann::json read_json_file(const std::string& path);
/// Writes atomically: a temporary file in the same directory, fsync, rename over `path`, then
/// fsync of the directory; gzip-compressed if the name ends in ".gz".
void write_json_file(const std::string& path, const nlohmann::json& doc, int indent = 1);
/// The same for any bytes (no compression).
void write_file_atomically(const std::string& path, const std::string& contents);

OpGraph load_graph_file(const std::string& path);

}  // namespace placement
