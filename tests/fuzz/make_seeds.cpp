// Writes the seeds of the targets whose inputs the project's own encoders make: DIR/frame/, one
// frame of each message type as the SDK and the daemon encode it (so the fuzzer starts from frames
// that pass the header and reach every decoder), DIR/graph_limits/, a graph upload's payload as the
// server weighs it, and DIR/stored_placement/, a file as the store writes it. Made by the encoders
// rather than kept as files, they follow the formats as they change. The text formats' seeds are
// the repository's own files (scripts/sanitize.sh names them).
//
//   fuzz_make_seeds DIR

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz_context.h"
#include "live/store.h"
#include "placement/inspection.h"
#include "placement/messages.h"
#include "placement/protocol.h"
#include "placement/serialization.h"

int main(int argc, char** argv) {
  const char* usage =
      "usage: fuzz_make_seeds DIR  (writes DIR/frame/, DIR/graph_limits/ and "
      "DIR/stored_placement/)\n";
  if (argc == 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    std::fputs(usage, stdout);
    return 0;
  }
  if (argc != 2 || argv[1][0] == '-') {
    std::fputs(usage, stderr);
    return 2;
  }
  using namespace placement;
  using protocol::MessageType;
  const OpGraph& graph = fuzz::graph();
  const DeviceSet& devices = fuzz::devices();

  messages::Hello hello;
  hello.client = "placement job seed";
  messages::Welcome welcome;
  welcome.version = protocol::kMaxVersion;
  welcome.server = "placementd seed";
  messages::Error error{protocol::error::kBadPayload, "seed", false};
  messages::Attach attach;
  attach.job = "seed";
  attach.devices = devices;
  attach.expected_steps = 1000;
  attach.profile_steps = 3;
  attach.replica = messages::ReplicaInfo{};
  messages::Attached attached;
  attached.grouper = "none";
  messages::GraphUpload upload;
  upload.graph = graph;
  upload.start = Placement::single(graph, 1);
  messages::Directive directive;
  directive.placement_id = 2;
  directive.after_step = 10;
  directive.placement = Placement::single(graph, 0);
  messages::StepReport report;
  report.placement_id = 2;
  report.step = 11;
  report.step_time_s = 0.01;
  messages::ProfileReport profiles;
  profiles.placement_id = 2;
  profiles.steps = 3;
  profiles.ops.push_back({0, "cpu", OpProfile{}});
  messages::JobShow show;
  show.id = 1;

  const std::vector<std::pair<MessageType, nlohmann::json>> frames = {
      {MessageType::kHello, hello.to_json()},
      {MessageType::kWelcome, welcome.to_json()},
      {MessageType::kError, error.to_json()},
      {MessageType::kAttach, attach.to_json()},
      {MessageType::kAttached, attached.to_json()},
      {MessageType::kGraphUpload, upload.to_json(devices)},
      {MessageType::kGraphAccepted, messages::GraphAccepted{}.to_json()},
      {MessageType::kPlacementDirective, directive.to_json(devices)},
      {MessageType::kStepReport, report.to_json()},
      {MessageType::kProfileReport, profiles.to_json()},
      {MessageType::kDetached, messages::Detached{}.to_json()},
      {MessageType::kStatusReply, messages::StatusReply{}.to_json()},
      {MessageType::kListJobs, messages::ListJobs{}.to_json()},
      {MessageType::kJobList, messages::JobList{}.to_json()},
      {MessageType::kPluginList, messages::PluginList{}.to_json()},
      {MessageType::kJobShow, show.to_json()},
      {MessageType::kJobInfo, messages::JobInfo{}.to_json()},
      {MessageType::kReloaded, messages::Reloaded{}.to_json()},
  };
  const std::string dir = argv[1];
  auto write = [](const std::string& path, const char* bytes, size_t size) {
    std::ofstream out(path, std::ios::binary);
    out.write(bytes, static_cast<std::streamsize>(size));
    if (!out) std::fprintf(stderr, "fuzz_make_seeds: cannot write %s\n", path.c_str());
    return static_cast<bool>(out);
  };
  std::error_code ec;
  for (const char* sub : {"/frame", "/graph_limits", "/stored_placement"})
    std::filesystem::create_directories(dir + sub, ec);
  for (const auto& [type, body] : frames) {
    const std::vector<uint8_t> frame = protocol::encode_frame(type, 1, body);
    if (!write(dir + "/frame/" + protocol::to_string(type),
               reinterpret_cast<const char*>(frame.data()), frame.size()))
      return 1;
  }
  const std::vector<uint8_t> upload_payload = nlohmann::json::to_cbor(upload.to_json(devices));
  if (!write(dir + "/graph_limits/upload.cbor",
             reinterpret_cast<const char*>(upload_payload.data()), upload_payload.size()))
    return 1;
  placementd::StoredPlacement stored;
  stored.placement = Placement::single(graph, 1);
  stored.step_time_s = 0.02;
  stored.job = "seed";
  const std::string file = placementd::stored_placement_file(graph, devices, stored);
  return write(dir + "/stored_placement/best.json", file.data(), file.size()) ? 0 : 1;
}
