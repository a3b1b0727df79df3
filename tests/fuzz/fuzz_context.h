#pragma once
// What the fuzz targets decode against: the devices and graph a job would have attached with (a
// directive or a stored placement names ops and devices of both).

#include "placement/devices.h"
#include "placement/graph.h"
#include "test_graphs.h"

namespace placement::fuzz {

inline const DeviceSet& devices() {
  static const DeviceSet d = testing::devices(2, DeviceKind::kCpu);
  return d;
}

inline const OpGraph& graph() {
  static const OpGraph g = testing::chain(4);
  return g;
}

}  // namespace placement::fuzz
