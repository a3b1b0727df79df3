#pragma once
// Path-tracking access to a JSON document: every failure names the field, e.g. "ops[3].kind".

#include <cstdint>
#include <initializer_list>
#include <string>

#include <nlohmann/json.hpp>

#include "placement/serialization.h"

namespace placement::detail {

/// The UTF-8 sequence at `text[at]`: its length and code point, or length 0 when it is not well
/// formed (truncated, a bad continuation, overlong, a surrogate, past U+10FFFF), with the byte at
/// fault in `bad_at`.
struct Utf8Sequence {
  size_t length = 0;
  uint32_t code = 0;
  size_t bad_at = 0;
};
Utf8Sequence utf8_sequence(const std::string& text, size_t at);

class JsonReader {
 public:
  /// `unknown`: what object() does with keys it was not given, here and in every field and
  /// element read through this reader.
  JsonReader(const nlohmann::json& value, std::string path,
             UnknownKeys unknown = UnknownKeys::kRefuse)
      : value_(value), path_(std::move(path)), unknown_(unknown) {}

  const nlohmann::json& value() const { return value_; }
  const std::string& path() const { return path_; }

  [[noreturn]] void fail(const std::string& problem) const {
    throw FormatError((path_.empty() ? std::string("document") : path_) + ": " + problem);
  }

  /// Requires an object; under UnknownKeys::kRefuse one holding only keys from `allowed` (typos
  /// fail instead of being ignored).
  const JsonReader& object(std::initializer_list<const char*> allowed) const;
  UnknownKeys unknown_keys() const { return unknown_; }
  bool has(const char* key) const { return value_.is_object() && value_.contains(key); }
  JsonReader field(const char* key) const;
  JsonReader element(size_t index) const;
  size_t array_size() const;

  std::string string() const;
  /// A string shown to people (job names in `placementctl jobs`, log lines): valid UTF-8 without
  /// control characters (C0, DEL, C1), which a terminal would run as escape sequences and a plain
  /// log would take for a line break, and at most kMaxDisplayText bytes.
  std::string display_text() const;
  static constexpr size_t kMaxDisplayText = 1024;
  uint64_t uint() const;
  int64_t integer() const;
  int small_int() const;
  double number() const;
  bool boolean() const;

 private:
  const nlohmann::json& value_;
  std::string path_;
  UnknownKeys unknown_;
};

}  // namespace placement::detail
