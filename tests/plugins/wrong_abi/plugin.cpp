// A plugin built against a different plugin API: exports the ABI entry point with a tag the daemon
// does not accept. The registry must skip it without calling anything else.
#include <cstdint>

#include <boost/dll/alias.hpp>

namespace {
uint32_t wrong_abi() { return 0xdead; }
}  // namespace

BOOST_DLL_ALIAS(wrong_abi, placement_plugin_abi)
