#pragma once
// A blocking client for the placementd socket, used by jobs (through the job API) and placementctl.

#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "placement/messages.h"
#include "placement/protocol.h"

namespace placement {

/// The connection failed or broke (daemon gone, timeout, protocol violation by the server).
class ConnectionError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The daemon answered a request with an error frame.
class ServerError : public std::runtime_error {
 public:
  ServerError(std::string code, const std::string& message, bool fatal)
      : std::runtime_error(code + ": " + message), code_(std::move(code)), fatal_(fatal) {}
  const std::string& code() const { return code_; }
  /// True when the daemon closed the connection after the error.
  bool fatal() const { return fatal_; }

 private:
  std::string code_;
  bool fatal_;
};

/// The socket a client uses when none is given: $PLACEMENTD_SOCKET, else
/// /run/placementd/placementd.sock for root, else $XDG_RUNTIME_DIR/placementd.sock, else
/// /run/user/<uid>/placementd.sock.
std::string default_socket_path();

struct ClientOptions {
  std::string socket_path;
  /// Sent in Hello; shows up in the daemon's log.
  std::string client_name = "placement-client";
  /// Limit for connecting and for each request's round trip.
  int timeout_ms = 5000;
};

/// One connection, with the version handshake done. Not thread-safe: one thread uses it.
class Client {
 public:
  /// Connects and says Hello; throws ConnectionError (or ServerError if the daemon refuses).
  explicit Client(const ClientOptions& options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  /// Sends a request and waits for its reply; throws ServerError if the daemon answers with an
  /// error frame, ConnectionError if the reply is of another type than `expected_reply` or the
  /// connection breaks, or when the whole round trip (what send_oneway() kept, the request, every
  /// frame read until its reply) takes longer than the timeout: a daemon that trickles bytes or
  /// sends other frames cannot hold the caller longer.
  nlohmann::json request(protocol::MessageType type, const nlohmann::json& body,
                         protocol::MessageType expected_reply);

  /// Sends a one-way message without ever blocking: what the socket does not take now is kept and
  /// sent first by the next call. Returns false (and drops the message) when more than
  /// `max_pending_bytes` are already waiting, so a stalled daemon cannot grow the job's memory.
  bool send_oneway(protocol::MessageType type, const nlohmann::json& body,
                   size_t max_pending_bytes = 1 << 20);
  /// Bytes send_oneway() kept because the socket was full (the daemon reads a connection's
  /// frames only as fast as its session takes them); the next call sends them first.
  size_t pending_bytes() const { return pending_.size(); }

  /// Reads one frame; throws ConnectionError on EOF or timeout. Returns the header and body.
  nlohmann::json read_frame(protocol::Header* header);

  /// The protocol version agreed in the handshake.
  uint16_t version() const { return version_; }
  /// The daemon's Welcome (server version, max frame size, the peer uid the daemon sees).
  const messages::Welcome& welcome() const { return welcome_; }

  /// Sends what send_oneway() kept, then waits up to `timeout_ms` for a frame to read. Returns true
  /// when read_frame() will not wait for the frame to start.
  bool poll_readable(int timeout_ms);
  /// The socket, for poll() next to other descriptors.
  int native_handle() const { return fd_; }
  /// The limit for connecting, for each request's round trip and for a frame once it started.
  void set_timeout_ms(int timeout_ms) { timeout_ms_ = timeout_ms; }

 private:
  using Deadline = std::chrono::steady_clock::time_point;
  Deadline deadline() const;
  void write_all(const uint8_t* data, size_t size, Deadline deadline);
  bool flush_pending(Deadline* block_until);
  void read_exact(uint8_t* data, size_t size, Deadline deadline);
  nlohmann::json read_frame(protocol::Header* header, Deadline deadline);

  int fd_ = -1;
  int timeout_ms_;
  uint16_t version_ = 0;
  uint32_t next_request_id_ = 1;
  std::vector<uint8_t> pending_;
  messages::Welcome welcome_;
};

}  // namespace placement
