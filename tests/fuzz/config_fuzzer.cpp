// libFuzzer target: placementd.toml, as `placementd` and `placementctl config check` read it: every
// fault is a ConfigInvalid that lists FILE:LINE:COL problems, nothing else.

#include <cstddef>
#include <cstdint>
#include <string>

#include "config/config.h"
#include "toml/source_pos.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    placementd::parse_config(std::string(reinterpret_cast<const char*>(data), size), "fuzz.toml",
                             "/nonexistent");
  } catch (const placementd::ConfigInvalid&) {
  }
  return 0;
}
