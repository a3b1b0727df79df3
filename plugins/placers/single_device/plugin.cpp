#include "placement/param_table.h"
#include "placement/plugin_export.h"
#include "single_device.h"

namespace placement::plugins {
namespace {

const ParamTable<SingleDeviceOptions>& params() {
  using O = SingleDeviceOptions;
  static const auto table =
      ParamTable<O>().add("device", &O::device, "device name such as \"cuda:0\", or \"fastest\"");
  return table;
}

PluginInfo info() {
  PluginInfo i;
  i.name = "single_device";
  i.kind = PluginKind::kPlacer;
  i.version = "1.0.0";
  i.summary = "baseline: every group on one device (the fastest, or a named one)";
  i.hyperparameters = params().declared();
  return i;
}

std::vector<ParamError> validate(const Params& p) {
  const std::string device = params().read(p).device;
  if (device == "fastest") return {};
  try {
    parse_device_name(device);
  } catch (const std::invalid_argument& e) {
    return {{"device", e.what()}};
  }
  return {};
}

std::unique_ptr<Placer> create(const Params& p) {
  return std::make_unique<SingleDevicePlacer>(params().read(p));
}

}  // namespace
}  // namespace placement::plugins

PLACEMENT_EXPORT_PLUGIN(placer, placement::plugins::info, placement::plugins::validate,
                        placement::plugins::create)
