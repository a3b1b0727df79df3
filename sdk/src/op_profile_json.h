#pragma once
// One OpProfile's JSON fields, shared by graph files (serialization.cpp) and the profile_report
// message (messages.cpp).

#include <nlohmann/json.hpp>

#include "json_reader.h"
#include "placement/graph.h"

namespace placement::detail {

/// The fields of one OpProfile; the caller checks which other keys the object may hold.
OpProfile op_profile_from_json(const JsonReader& p);
nlohmann::json op_profile_to_json(const OpProfile& p);

}  // namespace placement::detail
