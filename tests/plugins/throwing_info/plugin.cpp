// A plugin whose info() throws: the registry must skip it with the exception's message.
#include <stdexcept>

#include "placement/plugin_export.h"

namespace {
placement::PluginInfo info() { throw std::runtime_error("info exploded"); }
std::vector<placement::ParamError> validate(const placement::Params&) { return {}; }
std::unique_ptr<placement::Grouper> create(const placement::Params&) { return nullptr; }
}  // namespace

PLACEMENT_EXPORT_PLUGIN(grouper, info, validate, create)
