#include "placement/plugin_export.h"
#include "single_device.h"

namespace placement::plugins {
namespace {

PluginInfo info() {
  PluginInfo i;
  i.name = "single_device";
  i.kind = PluginKind::kPlacer;
  i.version = "1.0.0";
  i.summary = "baseline: every group on one device (the fastest, or a named one)";
  i.hyperparameters = {{"device", std::string("fastest"),
                        "device name such as \"cuda:0\", or \"fastest\"", std::nullopt, std::nullopt, {}}};
  return i;
}

std::vector<ParamError> validate(const Params& params) {
  const std::string device = param_string(params, "device");
  if (device == "fastest") return {};
  try {
    parse_device_name(device);
  } catch (const std::invalid_argument& e) {
    return {{"device", e.what()}};
  }
  return {};
}

std::unique_ptr<Placer> create(const Params& params) {
  return std::make_unique<SingleDevicePlacer>(param_string(params, "device"));
}

}  // namespace
}  // namespace placement::plugins

PLACEMENT_EXPORT_PLUGIN(placer, placement::plugins::info, placement::plugins::validate,
                        placement::plugins::create)
