// Attaches to placementd as a job, uploads an OpGraph file and prints the placement it receives.
// This is the control-plane flow of a live job without the training itself (which arrives with
// the placed-execution engine): attach -> graph upload -> placement directive -> detach.
//
//   attach_graph --graph examples/graphs/two_tower_mlp.json --devices cpu:0,cpu:1 [--socket PATH]

#include <iostream>
#include <map>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "placement/client.h"
#include "placement/serialization.h"

using nlohmann::json;
using placement::protocol::MessageType;

int main(int argc, char** argv) {
  CLI::App app{"attach to placementd, upload a graph, print the placement"};
  std::string socket, graph_file, job = "example-two-tower";
  std::vector<std::string> device_names = {"cpu:0", "cpu:1"};
  double memory_gib = 8.0;
  app.add_option("--socket", socket, "placementd socket (default: $PLACEMENTD_SOCKET or the system default)");
  app.add_option("--graph", graph_file, "OpGraph JSON file")->required()->check(CLI::ExistingFile);
  app.add_option("--devices", device_names, "devices of this job")->delimiter(',')->capture_default_str();
  app.add_option("--memory-gib", memory_gib, "memory per device")->capture_default_str();
  app.add_option("--job", job, "job name")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  try {
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
    std::cout << "connected to " << client.welcome()["server"].get<std::string>() << " (protocol v"
              << client.version() << ")\n";
    const json attached = client.request(MessageType::kAttach,
                                         {{"job", job}, {"devices", placement::to_json(devices)}, {"sdk_version", "0.1.0"}},
                                         MessageType::kAttached);
    std::cout << "attached as job " << attached["session"] << " with " << attached["grouper"].get<std::string>() << " / "
              << attached["placer"].get<std::string>() << " / " << attached["algorithm"].get<std::string>() << "\n";
    const json accepted = client.request(MessageType::kGraphUpload, {{"graph", placement::to_json(graph)}},
                                         MessageType::kGraphAccepted);
    std::cout << "graph " << accepted["fingerprint"].get<std::string>() << ": " << accepted["ops"] << " ops, "
              << accepted["edges"] << " edges, " << accepted["groups"] << " groups\n";
    const json directive = client.request(MessageType::kPlacementRequest, json::object(), MessageType::kPlacementDirective);
    const placement::Placement p = placement::placement_from_json(directive["placement"], graph, devices);
    std::cout << "placement " << directive["placement_id"] << " (" << directive["reason"].get<std::string>() << "):\n";
    std::map<int, std::vector<std::string>> by_device;
    for (size_t i = 0; i < graph.ops.size(); ++i) by_device[p.device_of_op[i]].push_back(graph.ops[i].name);
    for (const auto& [d, names] : by_device) {
      std::cout << "  " << devices.devices[d].name() << ": " << names.size() << " ops (" << names.front();
      if (names.size() > 1) std::cout << " ... " << names.back();
      std::cout << ")\n";
    }
    client.request(MessageType::kDetach, json::object(), MessageType::kDetached);
    std::cout << "detached\n";
  } catch (const std::exception& e) {
    std::cerr << "attach_graph: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
