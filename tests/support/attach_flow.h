#pragma once
// A job's first exchange with a real daemon over a raw Client, for the tools and tests that play
// many jobs without the SDK's JobChannel: attach, upload the graph, ask for the first placement.

#include <cstdint>
#include <string>

#include "placement/client.h"
#include "placement/devices.h"
#include "placement/graph.h"
#include "placement/messages.h"

namespace placement::testing {

/// Returns the first directive; throws what the daemon answered if it refused.
messages::Directive attach_and_place(Client& client, const std::string& job, const OpGraph& graph,
                                     const DeviceSet& devices, uint64_t expected_steps = 0);

}  // namespace placement::testing
