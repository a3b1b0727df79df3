// Attaches to placementd as a job, uploads an OpGraph file and prints the placement it receives.
// This is the control-plane flow of a live job without the training itself (placement::Job in
// placement/job.h adds that): attach -> graph upload -> placement directive -> detach, each a
// message of placement/messages.h.
//
//   attach_graph --graph examples/graphs/two_tower_mlp.json [--devices cpu:0,cpu:1] [--socket PATH]
//                [--memory-gib 8] [--job example-two-tower]

#include <iostream>
#include <map>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "command_line.h"
#include "placement/client.h"
#include "placement/messages.h"
#include "placement/serialization.h"

namespace msg = placement::messages;

int main(int argc, char** argv) {
  CLI::App app{
      "Attaches to placementd as a job, uploads an OpGraph file and prints the placement it "
      "receives.",
      "attach_graph"};
  std::string socket, graph_file, job = "example-two-tower";
  std::vector<std::string> device_names = {"cpu:0", "cpu:1"};
  double memory_gib = 8.0;
  app.add_option("--socket", socket,
                 "placementd socket (default: $PLACEMENTD_SOCKET or the system default)");
  app.add_option("--graph", graph_file, "OpGraph JSON file")->required()->check(CLI::ExistingFile);
  app.add_option("--devices", device_names, "devices of this job, comma-separated")
      ->delimiter(',')
      ->capture_default_str()
      ->check(examples::command_line::device_name());
  app.add_option("--memory-gib", memory_gib, "memory per device, GiB")
      ->capture_default_str()
      ->check(examples::command_line::positive());
  app.add_option("--job", job, "job name")->capture_default_str();
  return examples::command_line::run(app, argc, argv, [&] {
    const placement::OpGraph graph = placement::load_graph_file(graph_file);
    std::vector<placement::Device> list;
    for (const std::string& name : device_names) {
      placement::Device d = placement::parse_device_name(name);
      d.memory_bytes = static_cast<uint64_t>(memory_gib * (1ull << 30));
      list.push_back(d);
    }
    // Link figures are placeholders until the SDK measures them (issue #5); nothing here uses them.
    const auto devices = placement::DeviceSet::uniform(list, 10e9, 10e-6);

    placement::Client client({socket, "attach_graph example", 10000});
    std::cout << "connected to " << client.welcome().server << " (protocol v" << client.version()
              << ")\n";
    msg::Attach attach;
    attach.job = job;
    attach.devices = devices;
    attach.sdk_version = "0.1.0";
    const auto attached = msg::Attached::from_json(
        client.request(attach.kType, attach.to_json(), msg::Attached::kType));
    std::cout << "attached as job " << attached.session << " with " << attached.grouper << " / "
              << attached.placer << " / " << attached.algorithm << "\n";
    const msg::GraphUpload upload{graph, std::nullopt};
    const auto accepted = msg::GraphAccepted::from_json(
        client.request(upload.kType, upload.to_json(devices), msg::GraphAccepted::kType));
    std::cout << "graph " << accepted.fingerprint << ": " << accepted.ops << " ops, "
              << accepted.edges << " edges, " << accepted.groups << " groups\n";
    const auto directive = msg::Directive::from_json(
        client.request(msg::PlacementRequest::kType, msg::PlacementRequest{}.to_json(),
                       msg::Directive::kType),
        graph, devices);
    const placement::Placement& p = directive.placement;
    std::cout << "placement " << directive.placement_id << " (" << msg::to_string(directive.reason)
              << "):\n";
    std::map<int, std::vector<std::string>> by_device;
    for (size_t i = 0; i < graph.ops.size(); ++i)
      by_device[p.device_of_op[i]].push_back(graph.ops[i].name);
    for (const auto& [d, names] : by_device) {
      std::cout << "  " << devices.devices[d].name() << ": " << names.size() << " ops ("
                << names.front();
      if (names.size() > 1) std::cout << " ... " << names.back();
      std::cout << ")\n";
    }
    client.request(msg::Detach::kType, msg::Detach{}.to_json(), msg::Detached::kType);
    std::cout << "detached\n";
    return 0;
  });
}
