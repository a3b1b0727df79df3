#include "config/listen_address.h"

#include <arpa/inet.h>

#include <stdexcept>

namespace placementd {

namespace {

// sockaddr_un's sun_path holds 108 bytes with the terminating NUL.
constexpr size_t kMaxUnixPath = 107;

bool is_ip(const std::string& host, int family) {
  unsigned char buffer[sizeof(in6_addr)];
  return ::inet_pton(family, host.c_str(), buffer) == 1;
}

}  // namespace

std::string ListenAddress::str() const {
  if (kind == Kind::kUnix) return path;
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
         std::to_string(port);
}

ListenAddress parse_listen_address(const std::string& text) {
  ListenAddress a;
  if (!text.empty() && text[0] == '/') {
    if (text.size() > kMaxUnixPath)
      throw std::invalid_argument("a Unix socket path has at most " + std::to_string(kMaxUnixPath) +
                                  " bytes; '" + text + "' has " + std::to_string(text.size()));
    a.kind = ListenAddress::Kind::kUnix;
    a.path = text;
    return a;
  }
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon + 1 == text.size())
    throw std::invalid_argument(
        "'" + text + "' is neither HOST:PORT (\"127.0.0.1:9464\") nor an absolute socket path");
  std::string host = text.substr(0, colon);
  const std::string port = text.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
    if (!is_ip(host, AF_INET6))
      throw std::invalid_argument("'" + host + "' in '" + text + "' is not an IPv6 address");
  } else if (host == "localhost") {
    host = "127.0.0.1";
  } else if (!is_ip(host, AF_INET)) {
    throw std::invalid_argument(
        "'" + host + "' in '" + text +
        "' is not an IPv4 address, [IPv6] address or localhost (names are not resolved)");
  }
  unsigned long value = 0;
  size_t used = 0;
  try {
    value = std::stoul(port, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != port.size() || port.find_first_not_of("0123456789") != std::string::npos ||
      value < 1 || value > 65535)
    throw std::invalid_argument("port '" + port + "' in '" + text +
                                "' must be a number from 1 to 65535");
  a.host = host;
  a.port = static_cast<uint16_t>(value);
  return a;
}

}  // namespace placementd
