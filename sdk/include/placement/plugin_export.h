#pragma once
// For plugin authors: the one macro that exports a plugin's entry points, and their signatures
// (which the registry imports). A plugin source file ends with, e.g.:
//
//   PLACEMENT_EXPORT_PLUGIN(grouper, info, validate, create)
//
// where info() returns the PluginInfo, validate(params) returns plugin-specific problems with an
// already type- and range-checked parameter set, and create(params) builds the object.

#include <cstdint>
#include <memory>
#include <vector>

#include <boost/dll/alias.hpp>

#include "placement/algorithm.h"
#include "placement/grouper.h"
#include "placement/placer.h"
#include "placement/plugin.h"

namespace placement {

using PluginAbiFn = uint32_t();
using PluginInfoFn = PluginInfo();
using PluginValidateFn = std::vector<ParamError>(const Params&);
using GrouperFactoryFn = std::unique_ptr<Grouper>(const Params&);
using PlacerFactoryFn = std::unique_ptr<Placer>(const Params&);
using AlgorithmFactoryFn = std::unique_ptr<Algorithm>(const Params&);

namespace detail {
inline uint32_t exported_abi_tag() { return plugin_abi_tag(); }
}  // namespace detail

}  // namespace placement

/// KIND is grouper, placer or algorithm; the exported names are what the registry looks up.
#define PLACEMENT_EXPORT_PLUGIN(KIND, info_fn, validate_fn, create_fn)         \
  BOOST_DLL_ALIAS(::placement::detail::exported_abi_tag, placement_plugin_abi) \
  BOOST_DLL_ALIAS(info_fn, placement_plugin_info)                              \
  BOOST_DLL_ALIAS(validate_fn, placement_plugin_validate)                      \
  BOOST_DLL_ALIAS(create_fn, placement_create_##KIND)
