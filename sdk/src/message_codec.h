#pragma once
// Each message's JSON codec, derived from one table of its fields (as plugins declare their
// parameters once in a ParamTable): the name on the wire, the member, whether the key must be
// there, whether it is left out when empty, the first protocol version that has it, and, where the
// type's own check is not enough, the reader that checks more. encode() and decode() walk the
// table; nothing else writes a message's keys.
//
// The wire's rules, kept here once: a decoder ignores keys it does not know (a newer peer may say
// more within a version); an absent key keeps the struct's default unless the field is required;
// null means "none" for an optional field and is an error anywhere else; every error names the
// message and the field ("attach.job: expected a string, found number"), since the daemon sends
// the text back to the peer that sent it. encode(message, version) leaves out fields newer than
// the peer's version.

#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "json_reader.h"
#include "placement/messages.h"
#include "placement/protocol.h"
#include "placement/serialization.h"

namespace placement::messages::codec {

using detail::JsonReader;

/// Fails unless `r` is a map ("expected a map, found array").
inline const JsonReader& require_map(const JsonReader& r) {
  if (!r.value().is_object()) r.fail(std::string("expected a map, found ") + r.value().type_name());
  return r;
}

/// A message's body must be a map; errors in it start with the message's name.
inline JsonReader body_of(const nlohmann::json& body, const char* message) {
  JsonReader r(body, message, UnknownKeys::kIgnore);
  require_map(r);
  return r;
}

/// A nested document decoded by serialization.h (or checked against the graph): its errors get
/// the field's path in front.
template <typename F>
auto nested(const JsonReader& field, F&& decode) -> decltype(decode(field.value())) {
  try {
    return decode(field.value());
  } catch (const std::exception& e) {  // FormatError, or a placement's own check
    throw FormatError(field.path() + ": " + e.what());
  }
}

/// How one type goes to JSON and back. Specialised below for the types messages hold; a struct
/// with a Table<T> is a nested map (TableValue).
template <typename T>
struct Value;

/// One field of message M: `field("step", &StepReport::step)`, then what differs from the
/// defaults (an optional key, sent always, since protocol 1, read by the type's own reader).
template <typename M, typename T>
struct Field {
  const char* name;
  T M::*member;
  bool required = false;
  bool omit_empty = false;
  uint16_t since = 1;
  T (*reader)(const JsonReader&) = nullptr;

  /// Decoding fails when the key is absent.
  constexpr Field need() const {
    Field f = *this;
    f.required = true;
    return f;
  }
  /// Not sent when the value is empty (0, false, "", none): what older peers never expected.
  constexpr Field omit_when_empty() const {
    Field f = *this;
    f.omit_empty = true;
    return f;
  }
  /// Not sent to peers below `version`, nor when empty (as omit_when_empty): a field a version
  /// added is one its older peers never expected.
  constexpr Field since_version(uint16_t version) const {
    Field f = *this;
    f.since = version;
    f.omit_empty = true;
    return f;
  }
  /// Read with `read` (which checks ranges, lengths, characters) instead of Value<T>::read.
  constexpr Field read_with(T (*read)(const JsonReader&)) const {
    Field f = *this;
    f.reader = read;
    return f;
  }
};

template <typename M, typename T>
constexpr Field<M, T> field(const char* name, T M::*member) {
  return Field<M, T>{name, member};
}

/// Specialised next to each message's codec: its name in errors and its fields, in wire order.
///   template <> struct Table<Hello> {
///     static constexpr const char* kName = "hello";
///     static constexpr auto kFields = std::make_tuple(field("client", &Hello::client), ...);
///   };
template <typename M>
struct Table;

template <typename T>
bool is_empty(const T& value) {
  if constexpr (std::is_arithmetic_v<T>)
    return value == T{};
  else if constexpr (std::is_same_v<T, std::string>)
    return value.empty();
  else
    return Value<T>::is_empty(value);
}

/// Writes `message`'s fields into `out` (a map), leaving out those newer than `version`.
template <typename M>
void encode_into(const M& message, nlohmann::json& out, uint16_t version = protocol::kMaxVersion) {
  std::apply(
      [&](const auto&... f) {
        (
            [&](const auto& fd) {
              const auto& value = message.*(fd.member);
              if (version < fd.since || (fd.omit_empty && is_empty(value))) return;
              out[fd.name] = Value<std::decay_t<decltype(value)>>::write(value);
            }(f),
            ...);
      },
      Table<M>::kFields);
}

template <typename M>
nlohmann::json encode(const M& message, uint16_t version = protocol::kMaxVersion) {
  nlohmann::json out = nlohmann::json::object();
  encode_into(message, out, version);
  return out;
}

/// Reads `message`'s fields from the map `r`; keys outside the table are ignored.
template <typename M>
void decode_into(const JsonReader& r, M& message) {
  std::apply(
      [&](const auto&... f) {
        (
            [&](const auto& fd) {
              using T = std::decay_t<decltype(message.*(fd.member))>;
              if (!r.has(fd.name)) {
                if (fd.required) (void)r.field(fd.name);  // fails: "missing required key"
                return;
              }
              const JsonReader v = r.field(fd.name);
              message.*(fd.member) = fd.reader ? fd.reader(v) : Value<T>::read(v);
            }(f),
            ...);
      },
      Table<M>::kFields);
}

template <typename M>
M decode(const JsonReader& r) {
  M message{};
  decode_into(require_map(r), message);
  return message;
}

template <typename M>
M decode(const nlohmann::json& body) {
  return decode<M>(JsonReader(body, Table<M>::kName, UnknownKeys::kIgnore));
}

// ---- Values ----

template <>
struct Value<bool> {
  static nlohmann::json write(bool v) { return v; }
  static bool read(const JsonReader& r) { return r.boolean(); }
};

template <>
struct Value<std::string> {
  static nlohmann::json write(const std::string& v) { return v; }
  static std::string read(const JsonReader& r) { return r.string(); }
};

/// Unsigned integers, checked against their width ("integer out of range: 70000").
template <typename T>
struct UnsignedValue {
  static nlohmann::json write(T v) { return v; }
  static T read(const JsonReader& r) {
    const uint64_t v = r.uint();
    if (v > std::numeric_limits<T>::max()) r.fail("integer out of range: " + std::to_string(v));
    return static_cast<T>(v);
  }
};
template <>
struct Value<uint16_t> : UnsignedValue<uint16_t> {};
template <>
struct Value<uint32_t> : UnsignedValue<uint32_t> {};
template <>
struct Value<uint64_t> : UnsignedValue<uint64_t> {};

template <>
struct Value<int64_t> {
  static nlohmann::json write(int64_t v) { return v; }
  static int64_t read(const JsonReader& r) { return r.integer(); }
};

template <>
struct Value<int> {
  static nlohmann::json write(int v) { return v; }
  static int read(const JsonReader& r) { return r.small_int(); }
};

template <>
struct Value<double> {
  static nlohmann::json write(double v) { return v; }
  static double read(const JsonReader& r) { return r.number(); }
};

/// A JSON document kept as it is (the warm start's report).
template <>
struct Value<nlohmann::json> {
  static nlohmann::json write(const nlohmann::json& v) { return v; }
  static nlohmann::json read(const JsonReader& r) { return r.value(); }
  static bool is_empty(const nlohmann::json& v) { return v.is_null(); }
};

/// The JobState a field names ("exploring").
template <>
struct Value<JobState> {
  static nlohmann::json write(JobState v) { return to_string(v); }
  static JobState read(const JsonReader& r);
  static bool is_empty(JobState) { return false; }
};

/// The Reason a field names ("single device").
template <>
struct Value<Reason> {
  static nlohmann::json write(Reason v) { return to_string(v); }
  static Reason read(const JsonReader& r) {
    const std::string name = r.string();
    return nested(r, [&](const nlohmann::json&) { return reason_from_string(name); });
  }
  static bool is_empty(Reason) { return false; }
};

/// {rank, world_size, group}, its ranges checked.
template <>
struct Value<ReplicaInfo> {
  static nlohmann::json write(const ReplicaInfo& v) { return v.to_json(); }
  static ReplicaInfo read(const JsonReader& r);
};

/// {parameters, buffers, gradients, optimizer_state, copies, activations}, each optional.
template <>
struct Value<HeldBytes> {
  static nlohmann::json write(const HeldBytes& v) { return v.to_json(); }
  static HeldBytes read(const JsonReader& r);
};

template <>
struct Value<DeviceSet> {
  static nlohmann::json write(const DeviceSet& v) { return placement::to_json(v); }
  static DeviceSet read(const JsonReader& r) {
    return nested(
        r, [](const nlohmann::json& j) { return devices_from_json(j, UnknownKeys::kIgnore); });
  }
  static bool is_empty(const DeviceSet& v) { return v.devices.empty(); }
};

/// [low, high].
template <>
struct Value<std::array<double, 2>> {
  static nlohmann::json write(const std::array<double, 2>& v) { return {v[0], v[1]}; }
  static std::array<double, 2> read(const JsonReader& r) {
    if (r.array_size() != 2) r.fail("must be [low, high]");
    return {r.element(0).number(), r.element(1).number()};
  }
};

/// null is none.
template <typename T>
struct Value<std::optional<T>> {
  static nlohmann::json write(const std::optional<T>& v) {
    return v ? Value<T>::write(*v) : nlohmann::json(nullptr);
  }
  static std::optional<T> read(const JsonReader& r) {
    if (r.value().is_null()) return std::nullopt;
    return Value<T>::read(r);
  }
  static bool is_empty(const std::optional<T>& v) { return !v; }
};

template <typename T>
struct Value<std::vector<T>> {
  static nlohmann::json write(const std::vector<T>& v) {
    nlohmann::json out = nlohmann::json::array();
    for (const T& e : v) out.push_back(Value<T>::write(e));
    return out;
  }
  static std::vector<T> read(const JsonReader& r) {
    std::vector<T> out;
    const size_t n = r.array_size();
    out.reserve(n);
    for (size_t i = 0; i < n; ++i) out.push_back(Value<T>::read(r.element(i)));
    return out;
  }
  static bool is_empty(const std::vector<T>& v) { return v.empty(); }
};

/// A map from names to values.
template <typename T>
struct Value<std::map<std::string, T>> {
  static nlohmann::json write(const std::map<std::string, T>& v) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [key, e] : v) out[key] = Value<T>::write(e);
    return out;
  }
  static std::map<std::string, T> read(const JsonReader& r) {
    require_map(r);
    std::map<std::string, T> out;
    for (const auto& item : r.value().items())
      out[item.key()] = Value<T>::read(r.field(item.key().c_str()));
    return out;
  }
  static bool is_empty(const std::map<std::string, T>& v) { return v.empty(); }
};

/// A struct with a Table: a nested map. `template <> struct Value<X> : TableValue<X> {};`
template <typename T>
struct TableValue {
  static nlohmann::json write(const T& v) { return encode(v); }
  static T read(const JsonReader& r) { return decode<T>(r); }
  static bool is_empty(const T&) { return false; }
};

// ---- Readers that check more than the type ----

/// A string shown to people (job names, versions): valid UTF-8 without control characters.
inline std::string display_text(const JsonReader& r) { return r.display_text(); }

}  // namespace placement::messages::codec
