// A minimal job process for integration tests: attaches, uploads a graph, takes a placement,
// optionally sends step reports, prints "ready <job id>", then holds the connection until SIGTERM
// or SIGINT and detaches (or, with --no-detach, just exits as a crashed job would).

#include <signal.h>

#include <iostream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "placement/client.h"
#include "placement/serialization.h"
#include "stop_signals.h"

using nlohmann::json;
using placement::protocol::MessageType;
namespace msg = placement::messages;

int main(int argc, char** argv) {
  CLI::App app{"test job"};
  std::string socket, graph_file, job = "test-job";
  int devices = 2, reports = 0;
  double step_time = 0.01;
  bool no_detach = false;
  app.add_option("--socket", socket)->required();
  app.add_option("--graph", graph_file)->required();
  app.add_option("--job", job);
  app.add_option("--devices", devices);
  app.add_option("--reports", reports, "step reports to send under the first placement");
  app.add_option("--step-time", step_time);
  app.add_flag("--no-detach", no_detach);
  CLI11_PARSE(app, argc, argv);

  sigset_t set = placement::testing::block_stop_signals();
  try {
    const placement::OpGraph graph = placement::load_graph_file(graph_file);
    std::vector<placement::Device> list;
    for (int i = 0; i < devices; ++i)
      list.push_back({placement::DeviceKind::kCpu, i, 1ull << 32, 1.0});
    const auto device_set = placement::DeviceSet::uniform(list, 10e9, 1e-5);
    placement::Client client({socket, "hold_job", 10000});
    msg::Attach attach;
    attach.job = job;
    attach.devices = device_set;
    const auto attached = msg::Attached::from_json(
        client.request(attach.kType, attach.to_json(), msg::Attached::kType));
    const msg::GraphUpload upload{graph, std::nullopt};
    client.request(upload.kType, upload.to_json(device_set), msg::GraphAccepted::kType);
    const uint64_t placement_id =
        msg::Directive::from_json(
            client.request(msg::PlacementRequest::kType, msg::PlacementRequest{}.to_json(),
                           msg::Directive::kType),
            graph, device_set)
            .placement_id;
    for (int i = 0; i < reports; ++i)
      client.send_oneway(MessageType::kStepReport,
                         placement::messages::StepReport{placement_id, static_cast<uint64_t>(i),
                                                         step_time, true, ""}
                             .to_json());
    // A request after the reports makes sure the daemon has read them before we say ready.
    client.request(MessageType::kStatus, json::object(), MessageType::kStatusReply);
    std::cout << "ready " << attached.session << std::endl;
    int signo = 0;
    sigwait(&set, &signo);
    if (no_detach) return 0;
    const json detached =
        client.request(msg::Detach::kType, msg::Detach{}.to_json(), msg::Detached::kType);
    std::cout << "detached " << detached.dump() << std::endl;
  } catch (const std::exception& e) {
    std::cerr << "hold_job: " << e.what() << std::endl;
    return 1;
  }
  return 0;
}
