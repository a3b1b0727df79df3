#pragma once
// The server's traffic counters, as `placementctl status` shows them. Bumped from the I/O thread
// and the policy threads, read by the status handler.

#include <atomic>
#include <cstdint>

#include "placement/protocol.h"

namespace placementd {

class Counters {
 public:
  struct Snapshot {
    uint64_t connections_open, connections_total, frames_received, reports_received,
        protocol_errors;
  };

  void connection_opened(uint64_t now_open) {
    ++connections_total_;
    connections_open_ = now_open;
  }
  void connection_closed(uint64_t now_open) { connections_open_ = now_open; }
  /// A well-framed message came in (counted on receipt, before its handler runs).
  void frame(placement::protocol::MessageType type) {
    ++frames_received_;
    if (type == placement::protocol::MessageType::kStepReport) ++reports_received_;
  }
  void protocol_error() { ++protocol_errors_; }

  Snapshot snapshot() const {
    return {connections_open_.load(), connections_total_.load(), frames_received_.load(),
            reports_received_.load(), protocol_errors_.load()};
  }

 private:
  std::atomic<uint64_t> connections_open_{0};
  std::atomic<uint64_t> connections_total_{0};
  std::atomic<uint64_t> frames_received_{0};
  std::atomic<uint64_t> reports_received_{0};
  std::atomic<uint64_t> protocol_errors_{0};
};

}  // namespace placementd
