// A grouper (each op its own group) that throws from the entry point its `entry` names.
#include "placement/plugin_export.h"
#include "plugin_doubles.h"
#include "throw_at.h"

namespace {

class ThrowingGrouper : public placement::testing::OneGroupPerOp {
 public:
  explicit ThrowingGrouper(const placement::Params& params) : throw_at_(params) {}
  placement::Grouping group(const placement::OpGraph& graph, const placement::DeviceSet& devices,
                            std::mt19937_64& rng) override {
    throw_at_("group");
    return OneGroupPerOp::group(graph, devices, rng);
  }

 private:
  placement::testing::ThrowAt throw_at_;
};

placement::PluginInfo info() {
  return placement::testing::ThrowAt::info(placement::PluginKind::kGrouper, "each op its own group",
                                           {"group"});
}

std::vector<placement::ParamError> validate(const placement::Params&) { return {}; }
std::unique_ptr<placement::Grouper> create(const placement::Params& params) {
  return std::make_unique<ThrowingGrouper>(params);
}

}  // namespace

PLACEMENT_EXPORT_PLUGIN(grouper, info, validate, create)
