// A grouper (each op its own group) that throws from the entry point its `entry` names.
#include "placement/plugin_export.h"
#include "throw_at.h"

namespace {

class ThrowingGrouper : public placement::Grouper {
 public:
  explicit ThrowingGrouper(const placement::Params& params) : throw_at_(params) {}
  placement::Grouping group(const placement::OpGraph& graph, const placement::DeviceSet&, std::mt19937_64&) override {
    throw_at_("group");
    placement::Grouping g;
    g.num_groups = static_cast<int>(graph.ops.size());
    for (int i = 0; i < g.num_groups; ++i) g.group_of_op.push_back(i);
    return g;
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
