#include "placement/job_channel.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "placement/client.h"
#include "placement/serialization.h"

namespace placement {

using nlohmann::json;
using protocol::MessageType;

namespace {

// Reports kept while the daemon does not take them; older ones are dropped beyond this.
constexpr size_t kMaxQueuedReports = 10000;
// Reports wait at most this long in the queue...
constexpr int kSendIntervalMs = 10;
// ...or until this many are queued.
constexpr size_t kWakeAtReports = 64;

ReceivedDirective directive_from(const json& body, const JobChannelOptions& o,
                                 uint64_t generation) {
  return {messages::Directive::from_json(body, o.graph, o.attach.devices), generation};
}

bool follower(const JobChannelOptions& o) {
  return o.attach.replica && o.attach.replica->follower();
}

}  // namespace

JobChannel::JobChannel(JobChannelOptions options) : options_(std::move(options)) {
  if (::pipe2(wake_pipe_, O_NONBLOCK | O_CLOEXEC) != 0)
    throw std::runtime_error("JobChannel: pipe2 failed");
  thread_ = std::thread([this] { run(); });
}

JobChannel::~JobChannel() {
  close();
  ::close(wake_pipe_[0]);
  ::close(wake_pipe_[1]);
}

JobChannel::Status JobChannel::close() {
  if (thread_.joinable()) {
    stop_ = true;
    cv_.notify_all();
    wake();
    thread_.join();
  }
  return status();
}

void JobChannel::wake() {
  const char byte = 1;
  // Full pipe: the thread is awake anyway.
  [[maybe_unused]] const ssize_t n = ::write(wake_pipe_[1], &byte, 1);
}

std::optional<ReceivedDirective> JobChannel::take_directive() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::optional<ReceivedDirective> out;
  out.swap(directive_);
  return out;
}

void JobChannel::report(uint64_t generation, const messages::StepReport& report) {
  size_t queued;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (reports_.size() >= kMaxQueuedReports) {
      reports_.pop_front();
      ++status_.reports_dropped;
    }
    reports_.emplace_back(generation, report);
    queued = reports_.size();
  }
  // The thread sends what is queued every kSendInterval anyway; waking it for each report would
  // cost the training loop a context switch per step. A failure is news the daemon acts on at once.
  if (!report.ok || queued >= kWakeAtReports) wake();
}

void JobChannel::send_profiles(uint64_t generation, messages::ProfileReport report) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    profiles_.emplace_back(generation, std::move(report));
  }
  wake();
}

bool JobChannel::wait_for_directive(int timeout_ms) {
  std::unique_lock<std::mutex> lock(mutex_);
  // A daemon that is not there fails the first attempt at once: no reason to wait then.
  cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [this] {
    return directive_.has_value() || stop_ || (status_.attempts > 0 && !status_.connected);
  });
  return directive_.has_value();
}

JobChannel::Status JobChannel::status() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return status_;
}

messages::JobInfo JobChannel::show() const {
  const uint64_t session = status().session;
  if (session == 0) throw std::runtime_error("the job never attached to placementd");
  Client client(ClientOptions{options_.socket_path, "placement job " + options_.attach.job,
                              options_.timeout_ms});
  const messages::JobShow ask{session};
  return messages::JobInfo::from_json(
      client.request(ask.kType, ask.to_json(), messages::JobInfo::kType));
}

void JobChannel::attached_locked(const messages::Attached& attached) {
  ++generation_;
  // Reports still queued belong to the previous attachment.
  status_.reports_dropped += reports_.size();
  reports_.clear();
  status_.connected = true;
  ++status_.attempts;
  status_.session = attached.session;
  status_.notices = attached.notices;
  host_pinned_bytes_.store(attached.host_pinned_bytes.value_or(0), std::memory_order_relaxed);
  ++status_.attaches;
  status_.last_error.clear();
  cv_.notify_all();
}

bool JobChannel::connect(bool* refused) {
  *refused = false;
  try {
    auto client = std::make_unique<Client>(ClientOptions{
        options_.socket_path, "placement job " + options_.attach.job, options_.timeout_ms});
    // An older daemon would take a follower for a job of its own and explore placements it never
    // runs.
    if (follower(options_) && client->version() < protocol::kReplicaVersion) {
      *refused = true;
      throw std::runtime_error("placementd speaks protocol " + std::to_string(client->version()) +
                               "; a follower rank attaches only to protocol " +
                               std::to_string(protocol::kReplicaVersion) + " or later");
    }
    // Fields the daemon's version lacks are left out (to_json's table knows which).
    const auto attached = messages::Attached::from_json(
        client->request(messages::Attach::kType, options_.attach.to_json(client->version()),
                        messages::Attached::kType));
    if (follower(options_)) {
      std::lock_guard<std::mutex> lock(mutex_);
      attached_locked(attached);
      client_ = std::move(client);
      return true;
    }
    // Grouping a large graph takes the daemon a while.
    client->set_timeout_ms(options_.timeout_ms * 10);
    const messages::GraphUpload upload{options_.graph, options_.start};
    client->request(upload.kType, upload.to_json(options_.attach.devices, client->version()),
                    messages::GraphAccepted::kType);
    client->set_timeout_ms(options_.timeout_ms);
    const json first =
        client->request(messages::PlacementRequest::kType, messages::PlacementRequest{}.to_json(),
                        messages::Directive::kType);
    std::lock_guard<std::mutex> lock(mutex_);
    attached_locked(attached);
    directive_ = directive_from(first, options_, generation_);
    client_ = std::move(client);
    return true;
  } catch (const std::exception& e) {
    const auto* server = dynamic_cast<const ServerError*>(&e);
    *refused = *refused || (server && server->code() == protocol::error::kOverLimit);
    std::lock_guard<std::mutex> lock(mutex_);
    status_.connected = false;
    ++status_.attempts;
    status_.last_error = e.what();
    cv_.notify_all();
    return false;
  }
}

void JobChannel::pump(int wait_ms) {
  std::deque<std::pair<uint64_t, messages::StepReport>> reports;
  std::deque<std::pair<uint64_t, messages::ProfileReport>> profiles;
  uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    reports.swap(reports_);
    profiles.swap(profiles_);
    generation = generation_;
  }
  uint64_t sent = 0, dropped = 0, profiles_sent = 0;
  for (const auto& [gen, m] : reports) {
    if ((gen == generation || follower(options_)) &&
        client_->send_oneway(MessageType::kStepReport, m.to_json(client_->version())))
      ++sent;
    else
      ++dropped;
  }
  for (const auto& [gen, p] : profiles) {
    p.apply(options_.graph);
    if (gen == generation && client_->version() >= protocol::kProfileReportVersion &&
        client_->send_oneway(MessageType::kProfileReport, p.to_json()))
      ++profiles_sent;
  }
  pollfd fds[2] = {{client_->native_handle(), POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
  const int r = ::poll(fds, 2, wait_ms);
  if (r > 0 && (fds[1].revents & POLLIN)) {
    char drain[256];
    while (::read(wake_pipe_[0], drain, sizeof(drain)) > 0) {
    }
  }
  std::optional<ReceivedDirective> directive;
  std::string error;
  if (r > 0 && fds[0].revents != 0) {
    protocol::Header header;
    const json body = client_->read_frame(&header);
    const auto type = static_cast<MessageType>(header.type);
    if (type == messages::Directive::kType) {
      directive = directive_from(body, options_, generation);
    } else if (type == messages::Error::kType) {
      const messages::Error e = messages::Error::from_json(body);
      error = e.code + ": " + e.message;
      if (e.fatal) throw ConnectionError("placementd closed the connection: " + error);
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  status_.reports_sent += sent;
  status_.reports_dropped += dropped;
  status_.profiles_sent += profiles_sent;
  if (directive) directive_ = std::move(directive);
  if (!error.empty()) status_.last_error = error;
}

void JobChannel::run() {
  while (!stop_) {
    bool refused = false;
    if (!client_ && !connect(&refused)) {
      std::unique_lock<std::mutex> lock(mutex_);
      const int pause =
          refused ? options_.refused_retry_interval_ms : options_.reconnect_interval_ms;
      cv_.wait_for(lock, std::chrono::milliseconds(pause), [this] { return stop_.load(); });
      continue;
    }
    try {
      pump(kSendIntervalMs);
    } catch (const std::exception& e) {
      // The daemon went away (or broke the protocol): keep training, come back when it is back.
      client_.reset();
      std::lock_guard<std::mutex> lock(mutex_);
      status_.connected = false;
      status_.last_error = e.what();
    }
  }
  if (!client_) return;
  try {
    pump(0);  // the last reports
    const json detached = client_->request(messages::Detach::kType, messages::Detach{}.to_json(),
                                           messages::Detached::kType);
    std::lock_guard<std::mutex> lock(mutex_);
    status_.detached = messages::Detached::from_json(detached);
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(mutex_);
    status_.last_error = e.what();
  }
}

}  // namespace placement
