#include "placement/client.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>

#include <nlohmann/json.hpp>

#include "placement/serialization.h"

namespace placement {

using nlohmann::json;
using protocol::MessageType;

std::string default_socket_path() {
  if (const char* env = std::getenv("PLACEMENTD_SOCKET"); env && *env) return env;
  if (::geteuid() == 0) return "/run/placementd/placementd.sock";
  if (const char* xdg = std::getenv("XDG_RUNTIME_DIR"); xdg && *xdg)
    return std::string(xdg) + "/placementd.sock";
  return "/run/user/" + std::to_string(::geteuid()) + "/placementd.sock";
}

namespace {

std::string sys_error(const std::string& what) { return what + ": " + std::strerror(errno); }

// Waits until `fd` is ready for `events` or the deadline passes.
bool wait_ready(int fd, short events, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, static_cast<int>(left));
    if (r > 0) return true;
    if (r < 0 && errno != EINTR) return false;
  }
}

}  // namespace

Client::Client(const ClientOptions& options) : timeout_ms_(options.timeout_ms) {
  const std::string path =
      options.socket_path.empty() ? default_socket_path() : options.socket_path;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path))
    throw ConnectionError("socket path is longer than " +
                          std::to_string(sizeof(addr.sun_path) - 1) + " bytes: " + path);
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd_ < 0) throw ConnectionError(sys_error("socket"));
  // A Unix socket answers EAGAIN while the daemon's accept backlog is full: retry until the
  // timeout.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options.timeout_ms);
  while (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    if ((errno == EAGAIN || errno == EINTR) && std::chrono::steady_clock::now() < deadline) {
      ::usleep(1000);
      continue;
    }
    const std::string message = sys_error("cannot connect to placementd at " + path);
    ::close(fd_);
    fd_ = -1;
    throw ConnectionError(message);
  }
  try {
    messages::Hello hello;
    hello.client = options.client_name;
    welcome_ = messages::Welcome::from_json(
        request(hello.kType, hello.to_json(), messages::Welcome::kType));
    version_ = welcome_.version;
  } catch (const ConnectionError&) {
    // A daemon that refuses the connection (busy: too many connections, or too many of this
    // user's) says why and closes, often before the hello is sent: its answer is in the socket.
    std::optional<messages::Error> refusal;
    try {
      timeout_ms_ = 100;
      protocol::Header header;
      const json frame = read_frame(&header);
      if (static_cast<MessageType>(header.type) == MessageType::kError)
        refusal = messages::Error::from_json(frame);
    } catch (const std::exception&) {
      // Nothing (readable) came: the send's own error is the answer.
    }
    ::close(fd_);
    fd_ = -1;
    if (refusal) throw ServerError(refusal->code, refusal->message, refusal->fatal);
    throw;
  } catch (...) {
    ::close(fd_);
    fd_ = -1;
    throw;
  }
}

Client::~Client() {
  if (fd_ >= 0) {
    flush_pending(nullptr);
    ::close(fd_);
  }
}

Client::Deadline Client::deadline() const {
  return std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms_);
}

void Client::write_all(const uint8_t* data, size_t size, Deadline deadline) {
  while (size > 0) {
    const ssize_t n = ::send(fd_, data, size, MSG_NOSIGNAL);
    if (n > 0) {
      data += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_ready(fd_, POLLOUT, deadline))
        throw ConnectionError("timed out sending to placementd");
      continue;
    }
    throw ConnectionError(sys_error("sending to placementd failed"));
  }
}

bool Client::flush_pending(Deadline* block_until) {
  if (pending_.empty()) return true;
  if (block_until) {
    write_all(pending_.data(), pending_.size(), *block_until);
    pending_.clear();
    return true;
  }
  const ssize_t n = ::send(fd_, pending_.data(), pending_.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n > 0) pending_.erase(pending_.begin(), pending_.begin() + n);
  return pending_.empty();
}

void Client::read_exact(uint8_t* data, size_t size, Deadline deadline) {
  while (size > 0) {
    const ssize_t n = ::recv(fd_, data, size, 0);
    if (n > 0) {
      data += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) throw ConnectionError("placementd closed the connection");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_ready(fd_, POLLIN, deadline))
        throw ConnectionError("timed out waiting for placementd");
      continue;
    }
    throw ConnectionError(sys_error("receiving from placementd failed"));
  }
}

json Client::read_frame(protocol::Header* header) { return read_frame(header, deadline()); }

json Client::read_frame(protocol::Header* header, Deadline deadline) {
  uint8_t head[protocol::kHeaderSize];
  read_exact(head, sizeof(head), deadline);
  if (!protocol::decode_header(head, header))
    throw ConnectionError("placementd sent a frame with a bad magic");
  if (header->length > protocol::kDefaultMaxFrameBytes * 4u)
    throw ConnectionError("placementd sent an oversized frame");
  std::vector<uint8_t> payload(header->length);
  read_exact(payload.data(), payload.size(), deadline);
  try {
    return protocol::decode_payload(payload.data(), payload.size());
  } catch (const FormatError& e) {
    throw ConnectionError(std::string("placementd sent a bad payload: ") + e.what());
  }
}

json Client::request(MessageType type, const json& body, MessageType expected_reply) {
  Deadline until = deadline();
  flush_pending(&until);
  if (next_request_id_ == 0) ++next_request_id_;  // 0 marks what the daemon pushes unasked
  const uint32_t id = next_request_id_++;
  const auto frame =
      protocol::encode_frame(type, id, body, version_ ? version_ : protocol::kMaxVersion);
  write_all(frame.data(), frame.size(), until);
  for (;;) {
    protocol::Header header;
    json reply = read_frame(&header, until);
    const auto reply_type = static_cast<MessageType>(header.type);
    if (reply_type == MessageType::kError) {
      const messages::Error error = messages::Error::from_json(reply);
      // Errors about earlier one-way messages carry their (non-matching) request id: not this
      // request's answer. (JobChannel reads those between its requests.)
      if (header.request_id != id && !error.fatal) continue;
      throw ServerError(error.code, error.message, error.fatal);
    }
    // Request id 0 is a directive the daemon pushed unasked, a non-matching one the late reply to
    // a request that timed out: neither answers this request. A job's requests (attach, detach)
    // come before its first step report and after its last, when nothing is pushed.
    if (header.request_id != id) continue;
    if (reply_type != expected_reply)
      throw ConnectionError("expected " + protocol::to_string(expected_reply) +
                            " from placementd, got " + protocol::to_string(reply_type));
    return reply;
  }
}

bool Client::poll_readable(int timeout_ms) {
  flush_pending(nullptr);
  pollfd p{fd_, POLLIN, 0};
  int r;
  do r = ::poll(&p, 1, std::max(timeout_ms, 0));
  while (r < 0 && errno == EINTR);
  // A hang-up or error is "readable": read_frame() then reports what happened.
  return r > 0;
}

bool Client::send_oneway(MessageType type, const json& body, size_t max_pending_bytes) {
  if (!flush_pending(nullptr) && pending_.size() > max_pending_bytes) return false;
  if (next_request_id_ == 0) ++next_request_id_;
  const auto frame = protocol::encode_frame(type, next_request_id_++, body, version_);
  pending_.insert(pending_.end(), frame.begin(), frame.end());
  flush_pending(nullptr);
  return true;
}

}  // namespace placement
