#pragma once
// A raw Unix-socket connection for speaking deliberately bad protocol to the daemon.

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "placement/protocol.h"

namespace placement::testing {

class RawConnection {
 public:
  explicit RawConnection(const std::string& path) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0)
      throw std::runtime_error("connect failed: " + std::string(std::strerror(errno)));
  }
  /// Takes a connected socket (a stand-in daemon's accepted one), closing it at the end.
  explicit RawConnection(int connected_fd) : fd_(connected_fd) {}
  ~RawConnection() { ::close(fd_); }

  void send(const std::vector<uint8_t>& bytes) {
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return;  // the daemon may have closed on us; reading tells the tests
      done += static_cast<size_t>(n);
    }
  }
  void send_frame(protocol::MessageType type, const nlohmann::json& body, uint32_t rid = 1) {
    send(protocol::encode_frame(type, rid, body, version_));
  }
  /// Handshakes for protocol versions 1..max_version; later frames carry the agreed one.
  void hello(uint16_t max_version = protocol::kMaxVersion) {
    send_frame(protocol::MessageType::kHello,
               {{"client", "raw"}, {"min_version", 1}, {"max_version", max_version}});
    auto reply = read_frame();
    if (!reply || reply->first.type != static_cast<uint16_t>(protocol::MessageType::kWelcome))
      throw std::runtime_error("no welcome");
    version_ = reply->second.at("version").get<uint16_t>();
  }
  uint16_t version() const { return version_; }

  /// The next frame, or nullopt if the daemon closed the connection (or nothing came in time).
  std::optional<std::pair<protocol::Header, nlohmann::json>> read_frame(int timeout_ms = 3000) {
    uint8_t head[protocol::kHeaderSize];
    if (!read_exact(head, sizeof(head), timeout_ms)) return std::nullopt;
    protocol::Header h;
    if (!protocol::decode_header(head, &h)) throw std::runtime_error("bad magic from daemon");
    std::vector<uint8_t> payload(h.length);
    if (!read_exact(payload.data(), payload.size(), timeout_ms)) return std::nullopt;
    return std::make_pair(h, protocol::decode_payload(payload.data(), payload.size()));
  }

  /// Shuts the socket down both ways: a send() blocked on a full socket in another thread returns.
  void shutdown() { ::shutdown(fd_, SHUT_RDWR); }

  /// True if the daemon closed the connection (EOF) within the timeout.
  bool closed_by_peer(int timeout_ms = 3000) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) return false;
    char c;
    return ::recv(fd_, &c, 1, MSG_DONTWAIT) == 0;
  }

 private:
  bool read_exact(uint8_t* data, size_t size, int timeout_ms) {
    while (size > 0) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, timeout_ms) <= 0) return false;
      const ssize_t n = ::recv(fd_, data, size, 0);
      if (n <= 0) return false;
      data += n;
      size -= static_cast<size_t>(n);
    }
    return true;
  }
  int fd_ = -1;
  uint16_t version_ = protocol::kMaxVersion;
};

}  // namespace placement::testing
