#include "json_reader.h"

#include <cstdio>
#include <limits>

namespace placement::detail {

namespace {

const char* type_name(const nlohmann::json& v) { return v.type_name(); }

}  // namespace

const JsonReader& JsonReader::object(std::initializer_list<const char*> allowed) const {
  if (!value_.is_object()) fail(std::string("expected an object, found ") + type_name(value_));
  if (unknown_ == UnknownKeys::kIgnore) return *this;
  for (const auto& item : value_.items()) {
    bool known = false;
    for (const char* key : allowed) known = known || item.key() == key;
    if (!known) {
      std::string list;
      for (const char* key : allowed) list += (list.empty() ? "" : ", ") + std::string(key);
      fail("unknown key '" + item.key() + "' (expected one of: " + list + ")");
    }
  }
  return *this;
}

JsonReader JsonReader::field(const char* key) const {
  if (!value_.is_object()) fail(std::string("expected an object, found ") + type_name(value_));
  auto it = value_.find(key);
  if (it == value_.end()) fail(std::string("missing required key '") + key + "'");
  return JsonReader(*it, path_.empty() ? key : path_ + "." + key, unknown_);
}

JsonReader JsonReader::element(size_t index) const {
  return JsonReader(value_.at(index), path_ + "[" + std::to_string(index) + "]", unknown_);
}

size_t JsonReader::array_size() const {
  if (!value_.is_array()) fail(std::string("expected an array, found ") + type_name(value_));
  return value_.size();
}

std::string JsonReader::string() const {
  if (!value_.is_string()) fail(std::string("expected a string, found ") + type_name(value_));
  return value_.get<std::string>();
}

Utf8Sequence utf8_sequence(const std::string& text, size_t at) {
  const auto byte = static_cast<unsigned char>(text[at]);
  // The sequence's length from its first byte, and the smallest code point it may encode.
  const size_t length = byte < 0x80           ? 1
                        : (byte >> 5) == 0x6  ? 2
                        : (byte >> 4) == 0xE  ? 3
                        : (byte >> 3) == 0x1E ? 4
                                              : 0;
  if (length == 0 || at + length > text.size()) return {0, 0, at};
  uint32_t code = length == 1 ? byte : byte & (0x7F >> length);
  for (size_t k = 1; k < length; ++k) {
    const auto next = static_cast<unsigned char>(text[at + k]);
    if ((next >> 6) != 0x2) return {0, 0, at + k};
    code = (code << 6) | (next & 0x3F);
  }
  static constexpr uint32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
  if (code < kSmallest[length] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF))
    return {0, 0, at};
  return {length, code, 0};
}

std::string JsonReader::display_text() const {
  std::string text = string();
  if (text.size() > kMaxDisplayText)
    fail("is " + std::to_string(text.size()) + " bytes long; names are at most " +
         std::to_string(kMaxDisplayText));
  for (size_t i = 0; i < text.size();) {
    const Utf8Sequence sequence = utf8_sequence(text, i);
    if (sequence.length == 0)
      fail("not valid UTF-8 (byte " + std::to_string(sequence.bad_at) + ")");
    if (sequence.code < 0x20 || (sequence.code >= 0x7F && sequence.code <= 0x9F)) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "%04X", sequence.code);
      fail("holds the control character U+" + std::string(hex) + " (byte " + std::to_string(i) +
           "): names are shown on terminals and in logs");
    }
    i += sequence.length;
  }
  return text;
}

uint64_t JsonReader::uint() const {
  if (!value_.is_number_integer() ||
      (value_.is_number_integer() && !value_.is_number_unsigned() && value_.get<int64_t>() < 0))
    fail(std::string("expected a non-negative integer, found ") +
         (value_.is_number() ? value_.dump() : type_name(value_)));
  return value_.get<uint64_t>();
}

int64_t JsonReader::integer() const {
  if (!value_.is_number_integer())
    fail(std::string("expected an integer, found ") +
         (value_.is_number() ? value_.dump() : type_name(value_)));
  if (value_.is_number_unsigned() &&
      value_.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    fail("integer out of range: " + value_.dump());
  return value_.get<int64_t>();
}

int JsonReader::small_int() const {
  const int64_t v = integer();
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max())
    fail("integer out of range: " + std::to_string(v));
  return static_cast<int>(v);
}

double JsonReader::number() const {
  if (!value_.is_number()) fail(std::string("expected a number, found ") + type_name(value_));
  return value_.get<double>();
}

bool JsonReader::boolean() const {
  if (!value_.is_boolean()) fail(std::string("expected true or false, found ") + type_name(value_));
  return value_.get<bool>();
}

}  // namespace placement::detail
