#include "attach_flow.h"

#include <nlohmann/json.hpp>

namespace placement::testing {

messages::Directive attach_and_place(Client& client, const std::string& job, const OpGraph& graph,
                                     const DeviceSet& devices, uint64_t expected_steps) {
  messages::Attach attach;
  attach.job = job;
  attach.devices = devices;
  attach.expected_steps = expected_steps;
  client.request(attach.kType, attach.to_json(), messages::Attached::kType);
  client.request(messages::GraphUpload::kType,
                 messages::GraphUpload{graph, std::nullopt}.to_json(devices),
                 messages::GraphAccepted::kType);
  return messages::Directive::from_json(
      client.request(messages::PlacementRequest::kType, messages::PlacementRequest{}.to_json(),
                     messages::Directive::kType),
      graph, devices);
}

}  // namespace placement::testing
