// A placer that takes `seconds` to answer, as a big learned policy can: the daemon must stay
// responsive to every other connection meanwhile.
#include <chrono>
#include <thread>

#include "placement/param_table.h"
#include "placement/plugin_export.h"

namespace {

struct SlowOptions {
  double seconds = 2.0;
};

class SlowPlacer : public placement::Placer {
 public:
  explicit SlowPlacer(const SlowOptions& options) : seconds_(options.seconds) {}
  void prepare(const placement::OpGraph&, const placement::Grouping& grouping,
               const placement::DeviceSet& devices, std::mt19937_64&) override {
    groups_ = grouping.num_groups;
    devices_ = static_cast<int>(devices.size());
  }
  // All on the last device: not the start placement, so it runs as a candidate.
  std::vector<int> place(std::mt19937_64&) override {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds_));
    return std::vector<int>(static_cast<size_t>(groups_), devices_ - 1);
  }

 private:
  double seconds_;
  int groups_ = 0, devices_ = 1;
};

const placement::ParamTable<SlowOptions>& params() {
  static const auto table = placement::ParamTable<SlowOptions>().add(
      "seconds", &SlowOptions::seconds, "how long place() takes", {0.0, 60.0});
  return table;
}

placement::PluginInfo info() {
  placement::PluginInfo i;
  i.name = "slow";
  i.kind = placement::PluginKind::kPlacer;
  i.version = "1.0.0";
  i.summary = "test: every group on the last device, after `seconds`";
  i.hyperparameters = params().declared();
  return i;
}

std::vector<placement::ParamError> validate(const placement::Params&) { return {}; }

std::unique_ptr<placement::Placer> create(const placement::Params& p) {
  return std::make_unique<SlowPlacer>(params().read(p));
}

}  // namespace

PLACEMENT_EXPORT_PLUGIN(placer, info, validate, create)
