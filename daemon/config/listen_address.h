#pragma once
// Where an optional endpoint listens (the Prometheus one, [metrics].listen): a TCP address or a
// Unix socket path, as one string in the config.

#include <cstdint>
#include <string>

namespace placementd {

struct ListenAddress {
  enum class Kind { kTcp, kUnix };
  Kind kind = Kind::kTcp;
  /// An IPv4 or IPv6 literal, without brackets (kTcp).
  std::string host;
  uint16_t port = 0;
  /// An absolute path (kUnix).
  std::string path;
  /// As the config writes it: "127.0.0.1:9464", "[::1]:9464", "/run/placementd/metrics.sock".
  std::string str() const;
};

/// Parses "HOST:PORT" (HOST an IPv4 literal, "[IPv6]" or "localhost", PORT 1..65535) or an
/// absolute Unix socket path of at most 107 bytes. Throws std::invalid_argument saying what is
/// wrong with `text`; names are not resolved (a daemon must not hang on DNS when it starts).
ListenAddress parse_listen_address(const std::string& text);

}  // namespace placementd
