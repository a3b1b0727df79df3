#include "server/server.h"

#include <grp.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <nlohmann/json.hpp>

#include "placement/serialization.h"
#include "server/graph_limits.h"
#include "server/heap_trim.h"

namespace placementd {

namespace asio = boost::asio;
using asio::local::stream_protocol;
using placement::protocol::MessageType;
namespace error = placement::protocol::error;
using nlohmann::json;

namespace {

// getgrnam_r / getpwuid_r with a buffer that grows until the entry fits: a large (LDAP) group
// overflows a fixed 4 KiB, and failing then would silently take its members' rights away.
template <typename Entry, typename Lookup>
bool look_up(Entry& entry, std::vector<char>& buffer, Lookup&& lookup) {
  for (size_t size = 16 << 10; size <= (64u << 20); size *= 4) {
    buffer.resize(size);
    Entry* result = nullptr;
    const int rc = lookup(&entry, buffer.data(), buffer.size(), &result);
    if (rc == ERANGE) continue;
    return rc == 0 && result;
  }
  return false;
}

// Whether uid/gid is a member (primary or supplementary) of `group`, through NSS (root and an empty
// group are answered without it: Server::known_admin).
bool is_admin(uid_t uid, gid_t gid, const std::string& group) {
  struct group gr {};
  std::vector<char> group_buffer;
  if (!look_up(gr, group_buffer, [&](struct group* e, char* b, size_t n, struct group** r) {
        return ::getgrnam_r(group.c_str(), e, b, n, r);
      }))
    return false;
  const gid_t admin_gid = gr.gr_gid;
  if (gid == admin_gid) return true;
  struct passwd pw {};
  std::vector<char> passwd_buffer;
  if (!look_up(pw, passwd_buffer, [&](struct passwd* e, char* b, size_t n, struct passwd** r) {
        return ::getpwuid_r(uid, e, b, n, r);
      }))
    return false;
  int count = 64;
  std::vector<gid_t> groups(count);
  if (::getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &count) < 0) {
    groups.resize(count);
    if (::getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &count) < 0) return false;
  }
  for (int i = 0; i < count; ++i)
    if (groups[i] == admin_gid) return true;
  return false;
}

// The most a frame of each type may hold. A graph upload and a profile report grow with the model
// (daemon.max_frame_bytes), and only an attached job sends them; an attach carries the job's
// devices; everything else a client sends is a few hundred bytes. A frame over its type's limit is
// refused at its header, before any of it is buffered or decoded: one large status frame would
// otherwise hold the I/O thread, and every other job, while it is parsed, and a connection that
// never attached would hold max_frame_bytes for a frame the daemon refuses anyway.
constexpr uint64_t kMaxSmallFrameBytes = 1 << 20;

bool grows_with_the_model(uint16_t type) {
  return type == static_cast<uint16_t>(MessageType::kGraphUpload) ||
         type == static_cast<uint16_t>(MessageType::kProfileReport);
}

uint64_t max_frame_bytes_of(uint16_t type, bool attached, uint64_t max_frame_bytes) {
  return attached && grows_with_the_model(type) ? max_frame_bytes
                                                : std::min(max_frame_bytes, kMaxSmallFrameBytes);
}

// What decoding a payload may take per byte of it (protocol::weigh_payload), and beside that. Real
// messages weigh under half of it; payloads made of empty maps, arrays or strings, or of nulls,
// which no message is, weigh twice as much and more, and would have the daemon build gigabytes
// from one frame (docs/benchmarks.md, "Every frame weighed before it is decoded").
constexpr uint64_t kMaxDecodedPerPayloadByte = 48;
constexpr uint64_t kDecodedAllowance = 1 << 20;

// The most a frame of this type and length may take decoded, and what to call that limit.
struct WeightLimit {
  uint64_t bytes;
  std::string name;
};
WeightLimit weight_limit(uint16_t type, uint64_t length, const ServerLimits& limits) {
  const uint64_t by_shape = kDecodedAllowance + kMaxDecodedPerPayloadByte * length;
  const auto session = static_cast<uint64_t>(limits.graph_limits.max_session_bytes);
  if (type == static_cast<uint16_t>(MessageType::kGraphUpload) && session < by_shape)
    return {session, "[limits] max_session_bytes = " + std::to_string(session)};
  return {by_shape, "placementd decodes at most " + std::to_string(kMaxDecodedPerPayloadByte) +
                        " bytes per byte of payload and 1 MiB beside, which no message needs"};
}

// An input buffer keeps at most this much capacity between frames: the memory a large frame took
// goes back once it is handled, not when the connection closes.
constexpr size_t kKeptInputCapacity = 256 << 10;

}  // namespace

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(Server& server, stream_protocol::socket socket, const ucred& cred,
             std::shared_ptr<UidBacklog> backlog)
      : server_(server),
        socket_(std::move(socket)),
        timer_(socket_.get_executor()),
        hello_timer_(socket_.get_executor()),
        idle_timer_(socket_.get_executor()),
        write_timer_(socket_.get_executor()) {
    state_.peer = {cred.uid, cred.gid, cred.pid, false};
    state_.in_flight->backlog = std::move(backlog);
  }

  uid_t uid() const { return state_.peer.uid; }
  /// Bytes of replies queued for this connection and not yet written.
  size_t queued() const { return closed_ ? 0 : queued_bytes_; }
  /// Closes a connection whose queued replies are the largest when all connections' together
  /// pass the cap (Server::shed_replies).
  void shed_replies() {
    server_.service().log_limit().log(
        spdlog::level::warn, state_.peer.uid,
        fmt::format("uid {} pid {}: replies queued over all connections passed "
                    "daemon.max_buffered_bytes and this client's were the most ({} bytes unread); "
                    "closing it",
                    state_.peer.uid, state_.peer.pid, queued_bytes_));
    close();
  }
  /// Bytes of partial frames this connection holds.
  size_t buffered() const { return closed_ || stop_reading_ ? 0 : input_.size(); }
  void shed() {
    fail(error::kBusy,
         "placementd's input buffers are full (daemon.max_buffered_bytes) and this connection held "
         "the "
         "most of them (" +
             std::to_string(input_.size()) + " bytes); retry later");
  }

  void start() {
    responder_ = make_responder();
    std::weak_ptr<Connection> weak = shared_from_this();
    state_.in_flight->resume = [weak, executor = socket_.get_executor()] {
      asio::dispatch(executor, [weak] {
        if (auto self = weak.lock()) self->resume_reading();
      });
    };
    // A connection that never says hello would hold its place (and its uid's) for ever.
    hello_timer_.expires_after(std::chrono::milliseconds(server_.limits().frame_timeout_ms));
    auto self = shared_from_this();
    hello_timer_.async_wait([this, self](const boost::system::error_code& ec) {
      if (ec || closed_ || stop_reading_ || state_.version != 0) return;
      fail(error::kTimeout, "no hello within " + std::to_string(server_.limits().frame_timeout_ms) +
                                " ms of connecting (daemon.frame_timeout_ms)");
    });
    if (const std::optional<bool> admin = server_.known_admin(state_.peer.uid, state_.peer.gid)) {
      state_.peer.admin = *admin;
      read();
      return;
    }
    // NSS may ask a directory server and wait seconds: on the I/O thread that would hold every
    // connection, so it runs on the lookup thread and this connection reads nothing until its
    // answer is in (if that takes longer than frame_timeout_ms, this connection times out, no
    // other).
    const Peer peer = state_.peer;
    const std::string group = server_.limits().admin_group;
    asio::post(server_.lookups_, [this, self, peer, group] {
      const bool admin = is_admin(peer.uid, peer.gid, group);
      asio::post(socket_.get_executor(), [this, self, peer, group, admin] {
        server_.remember_admin(peer.uid, peer.gid, group, admin);
        if (closed_ || stop_reading_) return;
        state_.peer.admin = admin;
        read();
      });
    });
  }

  // Queues one frame; runs on the I/O thread.
  void send(MessageType type, uint32_t rid, const json& body, bool close_after) {
    if (closed_) return;
    if (close_after) closing_ = true;
    auto frame = placement::protocol::encode_frame(
        type, rid, body, state_.version ? state_.version : placement::protocol::kMaxVersion);
    queued_bytes_ += frame.size();
    server_.queued_ += frame.size();
    queue_.push_back(std::move(frame));
    if (queued_bytes_ > server_.limits().max_queued_bytes) {
      server_.service().log_limit().log(
          spdlog::level::warn, state_.peer.uid,
          fmt::format("uid {} pid {}: client does not read its replies; closing", state_.peer.uid,
                      state_.peer.pid));
      close();
      return;
    }
    // All connections' unread replies together stay under the cap too: many clients that each
    // leave less than their own cap unread could otherwise hold the daemon's memory.
    if (server_.queued_ > server_.limits().max_buffered_bytes) {
      server_.shed_replies();
      if (closed_) return;
    }
    if (!writing_) write_next();
  }

  // The connection's requests in flight fell back to InFlight::kResumeAt: what it sent meanwhile
  // waits in the input buffer and the socket, and is read now.
  void resume_reading() {
    if (closed_ || stop_reading_ || !paused_) return;
    if (state_.in_flight->count.load() >= InFlight::kMaxInFlight) return;
    paused_ = false;
    restart_timer();  // the daemon was the one not reading
    parse();
    if (stop_reading_ || paused_) return;
    arm_timer();
    read();
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    stop_reading_ = true;  // a parse() under way (a reply that overflowed the queue) stops at once
    release_input(input_.size());
    boost::system::error_code ignored;
    timer_.cancel();
    hello_timer_.cancel();
    idle_timer_.cancel();
    write_timer_.cancel();
    server_.queued_ -= std::min(queued_bytes_, server_.queued_);
    queued_bytes_ = 0;
    socket_.shutdown(stream_protocol::socket::shutdown_both, ignored);
    socket_.close(ignored);
    server_.service().disconnected(state_);
    server_.remove(shared_from_this());
  }

 private:
  // Built once per connection: every frame (hundreds of thousands of step reports a second) reuses
  // it.
  Responder make_responder() {
    std::weak_ptr<Connection> weak = shared_from_this();
    auto executor = socket_.get_executor();
    return [weak, executor](MessageType type, uint32_t rid, json body, bool close_after) {
      asio::dispatch(executor, [weak, type, rid, body = std::move(body), close_after] {
        if (auto self = weak.lock()) self->send(type, rid, body, close_after);
      });
    };
  }

  void fail(const char* code, const std::string& message) {
    server_.service().counters().protocol_error();
    server_.service().log_limit().log(spdlog::level::info, state_.peer.uid,
                                      fmt::format("uid {} pid {}: {}: {}; closing", state_.peer.uid,
                                                  state_.peer.pid, code, message));
    send(MessageType::kError, 0, placement::messages::Error{code, message, true}.to_json(), true);
    // Nothing more is read from a stream that cannot be trusted.
    release_input(input_.size());
    input_.clear();
    give_back_input();
    stop_reading_ = true;
  }

  void read() {
    if (closed_ || stop_reading_) return;
    auto self = shared_from_this();
    socket_.async_read_some(
        asio::buffer(chunk_), [this, self](const boost::system::error_code& ec, size_t n) {
          if (closed_) return;
          if (ec) {
            if (!input_.empty() && ec == asio::error::eof)
              server_.service().log_limit().log(
                  spdlog::level::info, state_.peer.uid,
                  fmt::format("uid {} pid {}: connection closed in the middle of a frame",
                              state_.peer.uid, state_.peer.pid));
            close();
            return;
          }
          input_.insert(input_.end(), chunk_.begin(), chunk_.begin() + n);
          server_.buffered_ += n;
          parse();
          if (stop_reading_) return;
          // All connections' partial frames together stay under the cap: whoever holds the most is
          // told so and closed (the newcomer on a tie), not whoever happens to cross it, so a
          // client holding partial frames just under the cap cannot make every real upload fail.
          if (server_.buffered_ > server_.limits().max_buffered_bytes) server_.shed_buffers(*this);
          if (stop_reading_ || paused_) return;
          arm_timer();
          read();
        });
  }

  // Handles every complete frame in the input buffer.
  void parse() {
    size_t offset = drop(input_.size());
    const size_t header_size = placement::protocol::kHeaderSize;
    while (!stop_reading_ && input_.size() - offset >= header_size) {
      placement::protocol::Header header;
      if (!placement::protocol::decode_header(input_.data() + offset, &header)) {
        fail(error::kBadFrame, "bad magic: this is not a placementd protocol stream");
        return;
      }
      // A graph upload over the limit is refused before its bytes are buffered, let alone decoded
      // (decoding is where a graph's memory is first spent): its payload is dropped as it arrives,
      // which buffers nothing, so the connection goes on and the job hears why.
      if (header.type == static_cast<uint16_t>(MessageType::kGraphUpload)) {
        const auto graph_limit =
            static_cast<uint64_t>(server_.limits().graph_limits.max_graph_bytes);
        const bool frame_binds = server_.limits().max_frame_bytes < graph_limit;
        if (header.length > std::min<uint64_t>(graph_limit, server_.limits().max_frame_bytes)) {
          const std::string why =
              "graph upload of " + std::to_string(header.length) + " bytes; " +
              (frame_binds
                   ? "daemon.max_frame_bytes = " + std::to_string(server_.limits().max_frame_bytes)
                   : "[limits] max_graph_bytes = " + std::to_string(graph_limit));
          refuse_graph(header.request_id, why);
          offset += header_size;
          skip_ = header.length;
          offset += drop(input_.size() - offset);
          continue;
        }
      }
      const bool attached = state_.version != 0 && state_.job;
      const uint64_t type_limit =
          max_frame_bytes_of(header.type, attached, server_.limits().max_frame_bytes);
      if (header.length > type_limit) {
        std::string which = " (daemon.max_frame_bytes)";
        if (type_limit < server_.limits().max_frame_bytes)
          which =
              " for message type " + std::to_string(header.type) +
              (grows_with_the_model(header.type) ? " before the connection attaches a job" : "");
        fail(error::kFrameTooLarge, "frame of " + std::to_string(header.length) +
                                        " bytes exceeds the maximum of " +
                                        std::to_string(type_limit) + which);
        return;
      }
      if (input_.size() - offset - header_size < header.length) break;
      const uint8_t* payload = input_.data() + offset + header_size;
      // Weighed only as far as its limit: a refusal needs no more.
      const WeightLimit limit = weight_limit(header.type, header.length, server_.limits());
      const auto weight = placement::protocol::weigh_payload(payload, header.length, limit.bytes);
      std::optional<std::string> refusal;
      if (weight.decoded_bytes > limit.bytes)
        refusal = "payload of " + std::to_string(header.length) + " bytes would take more than " +
                  mib(limit.bytes) + " to decode; " + limit.name;
      // The frame stays in the buffer, not yet decoded, until its user's backlog has room.
      if (!refusal && !admitted(weight.decoded_bytes)) {
        paused_ = true;
        break;
      }
      offset += header_size + header.length;
      frame(header, payload, weight, refusal);
      // Backpressure: its requests in flight are at their cap (InFlight); resume_reading() goes on.
      if (state_.in_flight->count.load() >= InFlight::kMaxInFlight) {
        paused_ = true;
        break;
      }
    }
    if (stop_reading_) return;
    input_.erase(input_.begin(), input_.begin() + offset);
    release_input(offset);
    if (offset > 0) restart_timer();  // a frame completed (or a refused one's bytes went by)
    if (input_.capacity() > kKeptInputCapacity && input_.size() <= kKeptInputCapacity)
      give_back_input();
  }

  // Lets go of the input buffer's spare capacity (large blocks go back to the system at once: the
  // daemon maps them, Daemon's constructor).
  void give_back_input() { std::vector<uint8_t>(input_.begin(), input_.end()).swap(input_); }

  // Whether a request weighing `bytes` may be decoded beside what its user's requests hold while
  // they wait (UidBacklog); if not, the backlog resumes this connection once it may.
  bool admitted(uint64_t bytes) {
    const std::shared_ptr<UidBacklog>& backlog = state_.in_flight->backlog;
    const uint64_t cap = server_.limits().max_pending_bytes_per_uid;
    return backlog->admits(bytes, cap) || !backlog->wait(bytes, cap, state_.in_flight->resume);
  }

  // Answers a graph upload over [limits]; nothing else is wrong with the connection.
  void refuse_graph(uint32_t request_id, const std::string& why) {
    server_.service().log_limit().log(
        spdlog::level::warn, state_.peer.uid,
        fmt::format("uid {} pid {}: graph refused: {}", state_.peer.uid, state_.peer.pid, why));
    send(MessageType::kError, request_id,
         placement::messages::Error{error::kOverLimit, why, false}.to_json(), false);
  }

  // Counts up to `available` bytes of a refused payload as dropped; returns how many.
  size_t drop(size_t available) {
    const size_t n = std::min(skip_, available);
    skip_ -= n;
    return n;
  }

  void release_input(size_t bytes) { server_.buffered_ -= std::min(bytes, server_.buffered_); }

  void frame(const placement::protocol::Header& header, const uint8_t* payload,
             const placement::protocol::PayloadWeight& weight,
             const std::optional<std::string>& refusal) {
    if (closed_) return;
    const auto type = static_cast<MessageType>(header.type);
    if (state_.version != 0 && header.version != state_.version) {
      fail(error::kUnsupportedVersion,
           "frame has protocol version " + std::to_string(header.version) +
               ", the connection agreed on " + std::to_string(state_.version));
      return;
    }
    if (!placement::protocol::is_known_type(header.type)) {
      server_.service().counters().protocol_error();
      send(MessageType::kError, header.request_id,
           placement::messages::Error{error::kUnknownType,
                                      "unknown message type " + std::to_string(header.type), false}
               .to_json(),
           false);
      return;
    }
    if (refusal) {
      server_.service().counters().protocol_error();
      if (state_.version == 0) {
        fail(error::kOverLimit, *refusal);
      } else if (type == MessageType::kGraphUpload) {
        refuse_graph(header.request_id, *refusal);
      } else {
        send(MessageType::kError, header.request_id,
             placement::messages::Error{error::kOverLimit, *refusal, false}.to_json(), false);
      }
      return;
    }
    // Decoded where its handler runs, in its user's turn, not here where every connection waits:
    // a 50 000-op graph upload takes the decoder a few hundred milliseconds.
    if (server_.service().decodes_where_it_runs(state_, type)) {
      server_.service().handle_payload(state_, type, header.request_id,
                                       std::vector<uint8_t>(payload, payload + header.length),
                                       weight, responder_);
      arm_idle_timer();
      return;
    }
    json body;
    try {
      const auto keys = placement::messages::keys_read(static_cast<MessageType>(header.type));
      body = placement::protocol::decode_payload(payload, header.length, weight,
                                                 keys ? &*keys : nullptr);
    } catch (const placement::FormatError& e) {
      trim_after_decode(weight.decoded_bytes);
      server_.service().counters().protocol_error();
      if (state_.version == 0) {
        fail(error::kBadPayload, e.what());
        return;
      }
      send(MessageType::kError, header.request_id,
           placement::messages::Error{error::kBadPayload, e.what(), false}.to_json(), false);
      return;
    }
    server_.service().handle(state_, type, header.request_id, std::move(body), responder_,
                             weight.decoded_bytes);
    arm_idle_timer();
  }

  // A connection past its hello with no job attached is a tool's, which asks and goes: one that
  // sends nothing for daemon.idle_timeout_ms, and waits for no answer, is closed. A job's is never.
  void arm_idle_timer() {
    if (closed_ || stop_reading_ || state_.version == 0 || state_.job) {
      idle_timer_.cancel();
      return;
    }
    idle_timer_.expires_after(std::chrono::milliseconds(server_.limits().idle_timeout_ms));
    auto self = shared_from_this();
    idle_timer_.async_wait([this, self](const boost::system::error_code& ec) {
      if (ec || closed_ || stop_reading_ || state_.version == 0 || state_.job) return;
      if (state_.in_flight->count.load() > 0 || !input_.empty()) {
        arm_idle_timer();  // an answer is on its way, or a frame is arriving
        return;
      }
      fail(error::kTimeout,
           "no request for " + std::to_string(server_.limits().idle_timeout_ms) +
               " ms on a connection with no job attached (daemon.idle_timeout_ms)");
    });
  }

  // A frame that has begun must complete in time, so a stalled client cannot hold a half frame.
  // The period is the frame's, not the buffer's: a client streaming frames leaves part of the next
  // one in the buffer after most reads, and is making progress all the same.
  void arm_timer() {
    if (input_.empty() && skip_ == 0) {
      restart_timer();
      return;
    }
    if (timer_armed_) return;
    timer_armed_ = true;
    timer_.expires_after(std::chrono::milliseconds(server_.limits().frame_timeout_ms));
    auto self = shared_from_this();
    const uint64_t generation = timer_generation_;
    timer_.async_wait([this, self, generation](const boost::system::error_code& ec) {
      // A handler already due when the timer was restarted runs without an error: not its turn.
      if (ec || closed_ || stop_reading_ || generation != timer_generation_) return;
      timer_armed_ = false;
      // While paused the daemon is the one not reading: resume_reading() arms the timer again.
      if (paused_) return;
      if (!input_.empty() || skip_ > 0)
        fail(error::kTimeout,
             "incomplete frame for " + std::to_string(server_.limits().frame_timeout_ms) + " ms");
    });
  }

  // The frame at the buffer's head starts its period now (the next arm_timer() arms it): one
  // completed before it, or the daemon reads on after a pause of its own.
  void restart_timer() {
    timer_armed_ = false;
    ++timer_generation_;
    timer_.cancel();
  }

  // Writes the queue front to back. A client that leaves its replies unread while the socket's
  // buffer is full makes no progress: after frame_timeout_ms without a byte written it is closed,
  // so it cannot hold its queue's memory for as long as it stays connected.
  void write_next() {
    if (queue_.empty()) {
      writing_ = false;
      write_timer_.cancel();
      if (closing_) close();
      return;
    }
    writing_ = true;
    arm_write_deadline();
    auto self = shared_from_this();
    const std::vector<uint8_t>& front = queue_.front();
    socket_.async_write_some(asio::buffer(front.data() + written_, front.size() - written_),
                             [this, self](const boost::system::error_code& ec, size_t n) {
                               if (closed_) return;
                               if (ec) {
                                 close();
                                 return;
                               }
                               ++write_progress_;
                               written_ += n;
                               if (written_ == queue_.front().size()) {
                                 queued_bytes_ -= written_;
                                 server_.queued_ -= std::min(written_, server_.queued_);
                                 written_ = 0;
                                 queue_.pop_front();
                               }
                               write_next();
                             });
  }

  void arm_write_deadline() {
    write_timer_.expires_after(std::chrono::milliseconds(server_.limits().frame_timeout_ms));
    auto self = shared_from_this();
    write_timer_.async_wait(
        [this, self, progress = write_progress_](const boost::system::error_code& ec) {
          if (ec || closed_ || !writing_ || write_progress_ != progress) return;
          spdlog::warn(
              "uid {} pid {}: client read none of its replies for {} ms ({} bytes unread; "
              "daemon.frame_timeout_ms); closing",
              state_.peer.uid, state_.peer.pid, server_.limits().frame_timeout_ms, queued_bytes_);
          close();
        });
  }

  Server& server_;
  stream_protocol::socket socket_;
  asio::steady_timer timer_;
  asio::steady_timer hello_timer_;
  asio::steady_timer idle_timer_;
  ConnectionState state_;
  Responder responder_;
  std::array<uint8_t, 65536> chunk_{};
  std::vector<uint8_t> input_;
  /// Bytes of a refused graph upload's payload still to be dropped as they arrive.
  size_t skip_ = 0;
  asio::steady_timer write_timer_;
  std::deque<std::vector<uint8_t>> queue_;
  size_t queued_bytes_ = 0;
  /// Bytes of the queue's front frame already written, and writes that made progress.
  size_t written_ = 0;
  uint64_t write_progress_ = 0;
  bool writing_ = false;
  bool closing_ = false;
  bool closed_ = false;
  bool stop_reading_ = false;
  /// Reading waits for the connection's requests in flight (InFlight).
  bool paused_ = false;
  bool timer_armed_ = false;
  // Counts the frame timer's restarts: a handler armed before the last one is stale.
  uint64_t timer_generation_ = 0;
};

Server::Server(asio::io_context& io, Service& service)
    : io_(io), service_(service), acceptor_(io), log_summary_timer_(io) {}

Server::~Server() { close_all(); }

void Server::listen(const std::string& path, uint32_t mode) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  ::unlink(path.c_str());
  acceptor_.open(stream_protocol());
  acceptor_.bind(stream_protocol::endpoint(path));
  if (::chmod(path.c_str(), mode) != 0)
    spdlog::warn("cannot set mode {:o} on {}: {}", mode, path, std::strerror(errno));
  acceptor_.listen(asio::socket_base::max_listen_connections);
  accepting_ = true;
  accept();
  summarize_logs();
}

void Server::adopt(int fd) {
  acceptor_.assign(stream_protocol(), fd);
  accepting_ = true;
  accept();
  summarize_logs();
}

void Server::summarize_logs() {
  log_summary_timer_.expires_after(service_.log_limit().window());
  log_summary_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;  // cancelled: the server is stopping or gone
    for (const std::string& line : service_.log_limit().summaries()) spdlog::warn("{}", line);
    if (accepting_) summarize_logs();
  });
}

void Server::accept() {
  acceptor_.async_accept([this](const boost::system::error_code& ec,
                                stream_protocol::socket socket) {
    if (!accepting_) return;
    if (!ec) {
      ucred cred{};
      socklen_t len = sizeof(cred);
      // Best effort: tell the client why it is refused, without waiting for it.
      const auto refuse = [&socket](const std::string& why) {
        const auto frame = placement::protocol::encode_frame(
            MessageType::kError, 0, placement::messages::Error{error::kBusy, why, true}.to_json());
        ::send(socket.native_handle(), frame.data(), frame.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      };
      if (::getsockopt(socket.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
        spdlog::warn("cannot read peer credentials: {}; closing", std::strerror(errno));
      } else if (static_cast<int64_t>(connections_.size()) >= limits_.max_connections) {
        refuse("placementd has " + std::to_string(connections_.size()) +
               " connections, the configured maximum");
        service_.log_limit().log(
            spdlog::level::warn, cred.uid,
            fmt::format("refused a connection of uid {} (pid {}): {} connections open "
                        "(daemon.max_connections)",
                        cred.uid, cred.pid, connections_.size()));
      } else if (cred.uid != 0 &&
                 connections_of_uid_[cred.uid] >= limits_.max_connections_per_uid) {
        refuse("uid " + std::to_string(cred.uid) + " has " +
               std::to_string(connections_of_uid_[cred.uid]) +
               " connections, the configured maximum per user (daemon.max_connections_per_uid)");
        service_.log_limit().log(
            spdlog::level::warn, cred.uid,
            fmt::format("refused a connection of uid {} (pid {}): {} of its connections open "
                        "(daemon.max_connections_per_uid)",
                        cred.uid, cred.pid, connections_of_uid_[cred.uid]));
      } else {
        std::shared_ptr<UidBacklog>& backlog = backlogs_[cred.uid];
        if (!backlog) backlog = std::make_shared<UidBacklog>();
        auto connection = std::make_shared<Connection>(*this, std::move(socket), cred, backlog);
        connections_.insert(connection);
        ++connections_of_uid_[cred.uid];
        service_.counters().connection_opened(connections_.size());
        connection->start();
      }
    } else if (ec != asio::error::operation_aborted) {
      spdlog::warn("accept failed: {}", ec.message());
    }
    if (accepting_) accept();
  });
}

void Server::set_limits(const ServerLimits& limits) {
  if (limits.admin_group != limits_.admin_group) admin_answers_.clear();
  limits_ = limits;
}

// Membership changes (usermod) reach a running daemon within this long.
constexpr int kAdminAnswerSeconds = 60;

std::optional<bool> Server::known_admin(uid_t uid, gid_t gid) const {
  if (uid == 0) return true;
  if (limits_.admin_group.empty()) return false;
  const auto it = admin_answers_.find({uid, gid});
  if (it == admin_answers_.end() || std::chrono::steady_clock::now() - it->second.second >
                                        std::chrono::seconds(kAdminAnswerSeconds))
    return std::nullopt;
  return it->second.first;
}

void Server::remember_admin(uid_t uid, gid_t gid, const std::string& group, bool admin) {
  if (group != limits_.admin_group) return;  // a reload changed the group meanwhile
  // Bounded by the uids that connect, each with one gid; old answers go as they are replaced.
  admin_answers_[{uid, gid}] = {admin, std::chrono::steady_clock::now()};
}

void Server::remove(const std::shared_ptr<Connection>& connection) {
  if (connections_.erase(connection) > 0) {
    auto of_uid = connections_of_uid_.find(connection->uid());
    if (of_uid != connections_of_uid_.end() && --of_uid->second <= 0) {
      connections_of_uid_.erase(of_uid);
      // Requests still in flight keep theirs; a new connection of this uid starts a new one.
      backlogs_.erase(connection->uid());
    }
  }
  service_.counters().connection_closed(connections_.size());
}

void Server::shed_buffers(Connection& crossing) {
  while (buffered_ > limits_.max_buffered_bytes) {
    // The user whose connections hold the most loses its largest: one user's many half-sent frames
    // cannot make another user's single upload the largest holder (the crossing uid on a tie).
    std::map<uid_t, size_t> of_uid;
    for (const auto& c : connections_) of_uid[c->uid()] += c->buffered();
    uid_t heaviest = crossing.uid();
    for (const auto& [uid, bytes] : of_uid)
      if (bytes > of_uid[heaviest]) heaviest = uid;
    Connection* largest =
        crossing.uid() == heaviest && crossing.buffered() > 0 ? &crossing : nullptr;
    for (const auto& c : connections_)
      if (c->uid() == heaviest && c->buffered() > (largest ? largest->buffered() : 0))
        largest = c.get();
    if (!largest) return;
    service_.log_limit().log(
        spdlog::level::warn, largest->uid(),
        fmt::format("uid {}: input buffers over daemon.max_buffered_bytes; its connections hold "
                    "the most ({} bytes): shedding its largest partial frame ({} bytes)",
                    largest->uid(), of_uid[heaviest], largest->buffered()));
    largest->shed();
  }
}

void Server::shed_replies() {
  while (queued_ > limits_.max_buffered_bytes) {
    Connection* largest = nullptr;
    for (const auto& c : connections_)
      if (c->queued() > (largest ? largest->queued() : 0)) largest = c.get();
    if (!largest) return;
    largest->shed_replies();
  }
}

void Server::stop_accepting() {
  accepting_ = false;
  log_summary_timer_.cancel();
  boost::system::error_code ignored;
  acceptor_.close(ignored);
}

void Server::close_all() {
  auto copy = connections_;
  for (const auto& c : copy) c->close();
}

}  // namespace placementd
