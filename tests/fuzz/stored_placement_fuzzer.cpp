// libFuzzer target: a stored placement file (state directory, placements/<uid>/), which whoever
// could write that directory may have written: FormatError naming the field, which the store
// reports and ignores (Store::read_best); nothing else.

#include <cstddef>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "fuzz_context.h"
#include "live/store.h"
#include "placement/serialization.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json doc = nlohmann::json::parse(data, data + size, nullptr, false);
  if (doc.is_discarded()) return 0;
  try {
    placementd::stored_placement_from_json(doc, placement::fuzz::graph(),
                                           placement::fuzz::devices());
  } catch (const placement::FormatError&) {
  }
  return 0;
}
