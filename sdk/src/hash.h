#pragma once
// Stable, platform-independent hashing for fingerprints (not for security).

#include <cstdint>
#include <string>

namespace placement::detail {

/// FNV-1a, 64 bit, fed with a canonical text so results never depend on endianness or layout.
class Fnv1a {
 public:
  Fnv1a& add(const std::string& text) {
    for (unsigned char c : text) {
      state_ ^= c;
      state_ *= 0x100000001b3ULL;
    }
    // A separator so ("ab","c") and ("a","bc") differ.
    state_ ^= 0xff;
    state_ *= 0x100000001b3ULL;
    return *this;
  }
  Fnv1a& add(uint64_t value) { return add(std::to_string(value)); }
  Fnv1a& add(int64_t value) { return add(std::to_string(value)); }
  Fnv1a& add(int value) { return add(std::to_string(value)); }

  /// 16 lower-case hex digits.
  std::string hex() const {
    static const char* digits = "0123456789abcdef";
    std::string out(16, '0');
    for (int i = 0; i < 16; ++i) out[15 - i] = digits[(state_ >> (4 * i)) & 0xf];
    return out;
  }

 private:
  uint64_t state_ = 0xcbf29ce484222325ULL;
};

}  // namespace placement::detail
