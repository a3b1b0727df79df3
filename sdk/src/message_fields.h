#pragma once
// Reading message bodies, shared by messages.cpp and inspection.cpp: every error names the message
// and the field ("attach.job: expected a string, found number"), since the daemon sends the text
// back to the peer that sent it.

#include <limits>
#include <string>

#include <nlohmann/json.hpp>

#include "json_reader.h"
#include "placement/messages.h"
#include "placement/serialization.h"

namespace placement::messages::fields {

using detail::JsonReader;

inline JsonReader body_of(const nlohmann::json& body, const char* message) {
  JsonReader r(body, message);
  if (!body.is_object()) r.fail(std::string("expected a map, found ") + body.type_name());
  return r;
}

inline std::string text(const JsonReader& r, const char* key, const std::string& fallback = "") {
  return r.has(key) ? r.field(key).string() : fallback;
}

inline bool flag(const JsonReader& r, const char* key) {
  return r.has(key) && r.field(key).boolean();
}

template <typename T>
T unsigned_field(const JsonReader& r, const char* key) {
  const JsonReader f = r.field(key);
  const uint64_t v = f.uint();
  if (v > std::numeric_limits<T>::max()) f.fail("integer out of range: " + std::to_string(v));
  return static_cast<T>(v);
}

// A nested document decoded by serialization.h (or checked against the graph): its errors get the
// field's path in front.
template <typename F>
auto nested(const JsonReader& field, F&& decode) -> decltype(decode(field.value())) {
  try {
    return decode(field.value());
  } catch (const std::exception& e) {  // FormatError, or a placement's own check
    throw FormatError(field.path() + ": " + e.what());
  }
}

/// The JobState a field names ("exploring").
JobState state_from_string(const JsonReader& r);

/// A replica field ({rank, world_size, group}), its ranges checked.
ReplicaInfo replica_from(const JsonReader& r);

}  // namespace placement::messages::fields
