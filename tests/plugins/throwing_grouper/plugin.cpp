// A grouper (each op its own group) that throws from the entry point its `entry` names.
#include "placement/plugin_export.h"
#include "plugin_doubles.h"
#include "throw_at.h"

namespace {

using placement::testing::ThrowAt;
using placement::testing::ThrowAtOptions;

class ThrowingGrouper : public placement::testing::OneGroupPerOp {
 public:
  explicit ThrowingGrouper(const ThrowAtOptions& options) : throw_at_(options) {}
  placement::Grouping group(const placement::OpGraph& graph, const placement::DeviceSet& devices,
                            std::mt19937_64& rng) override {
    throw_at_("group");
    return OneGroupPerOp::group(graph, devices, rng);
  }

 private:
  ThrowAt throw_at_;
};

const placement::ParamTable<ThrowAtOptions>& params() {
  static const auto table = ThrowAt::params({"group"});
  return table;
}

placement::PluginInfo info() {
  return ThrowAt::info(placement::PluginKind::kGrouper, "each op its own group", params());
}

std::vector<placement::ParamError> validate(const placement::Params&) { return {}; }
std::unique_ptr<placement::Grouper> create(const placement::Params& p) {
  return std::make_unique<ThrowingGrouper>(params().read(p));
}

}  // namespace

PLACEMENT_EXPORT_PLUGIN(grouper, info, validate, create)
