// How a job answers placementd's requests for profiles when they cross its own profiles on the
// socket. placementd decides on the next placement when the report of a candidate's last step
// arrives; the profiles measured in those same steps follow that report, so the next directive can
// ask for a device kind whose profiles are already on their way. A scripted daemon on a real Unix
// socket plays that order out exactly, which the real one does only now and then.

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <torch/csrc/jit/serialization/import.h>
#include <torch/optim/sgd.h>
#include <nlohmann/json.hpp>

#include "daemon_process.h"
#include "placement/capture.h"
#include "placement/job.h"
#include "placement/messages.h"
#include "placement/protocol.h"

namespace placement {
namespace {

using nlohmann::json;
using protocol::MessageType;

// One job at a time: the handshake, then placement 1 (all on cpu:0, profile) and, once placement
// 1's profiles arrive, placement 2 (all on cpu:1) still asking for cpu profiles, as if decided on
// the report before them. After `drop_after_placement_2` reports under placement 2 it closes the
// connection; the job's next attachment starts at placement 1 again, asking for profiles.
class ScriptedDaemon {
 public:
  ScriptedDaemon(std::string path, uint64_t drop_after_placement_2)
      : path_(std::move(path)), drop_after_(drop_after_placement_2) {
    listener_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::listen(listener_, 4) != 0)
      throw std::runtime_error("scripted daemon: cannot listen on " + path_ + ": " +
                               std::strerror(errno));
    thread_ = std::thread([this] { serve(); });
  }
  ~ScriptedDaemon() {
    stop_ = true;
    thread_.join();
    ::close(listener_);
    ::unlink(path_.c_str());
    ::rmdir(std::filesystem::path(path_).parent_path().c_str());
  }

  /// Profile reports received, by attachment (1-based) and placement id.
  std::vector<std::pair<int, uint64_t>> profiles() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return profiles_;
  }

 private:
  void serve() {
    int attachment = 0;
    while (!stop_) {
      pollfd p{listener_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      try {
        converse(fd, ++attachment);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "scripted daemon: " << e.what();
      }
      ::close(fd);
    }
  }

  void converse(int fd, int attachment) {
    uint16_t version = protocol::kMaxVersion;
    DeviceSet devices;
    OpGraph graph;
    uint64_t reports_under_2 = 0;
    bool sent_2 = false;
    auto reply = [&](MessageType type, uint32_t rid, const json& body) {
      const std::vector<uint8_t> bytes = protocol::encode_frame(type, rid, body, version);
      if (::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) !=
          static_cast<ssize_t>(bytes.size()))
        throw std::runtime_error("send failed");
    };
    auto directive = [&](uint64_t id, int device) {
      messages::Directive d;
      d.placement_id = id;
      d.profile = true;
      d.placement = Placement::single(graph, device);
      return d.to_json(devices);
    };
    while (!stop_) {
      protocol::Header h;
      json body;
      if (!read_frame(fd, &h, &body)) return;  // the job closed or went quiet
      const auto type = static_cast<MessageType>(h.type);
      if (type == MessageType::kHello) {
        version = std::min(protocol::kMaxVersion, messages::Hello::from_json(body).max_version);
        messages::Welcome w;
        w.version = version;
        w.server = "scripted";
        reply(MessageType::kWelcome, h.request_id, w.to_json());
      } else if (type == MessageType::kAttach) {
        devices = messages::Attach::from_json(body).devices;
        messages::Attached a;
        a.session = static_cast<uint64_t>(attachment);
        reply(MessageType::kAttached, h.request_id, a.to_json());
      } else if (type == MessageType::kGraphUpload) {
        graph = messages::GraphUpload::from_json(body, devices).graph;
        messages::GraphAccepted g;
        g.fingerprint = graph.fingerprint();
        g.ops = graph.ops.size();
        reply(MessageType::kGraphAccepted, h.request_id, g.to_json());
      } else if (type == MessageType::kPlacementRequest) {
        reply(MessageType::kPlacementDirective, h.request_id, directive(1, 0));
      } else if (type == MessageType::kProfileReport) {
        const uint64_t id = body.at("placement_id").get<uint64_t>();
        {
          std::lock_guard<std::mutex> lock(mutex_);
          profiles_.emplace_back(attachment, id);
        }
        if (id == 1 && !sent_2) {
          sent_2 = true;
          reply(MessageType::kPlacementDirective, 0, directive(2, 1));
        }
      } else if (type == MessageType::kStepReport) {
        if (body.at("placement_id").get<uint64_t>() == 2 && ++reports_under_2 >= drop_after_)
          return;
      } else if (type == MessageType::kDetach) {
        reply(MessageType::kDetached, h.request_id, messages::Detached{}.to_json());
        return;
      }
    }
  }

  bool read_frame(int fd, protocol::Header* h, json* body) {
    uint8_t head[protocol::kHeaderSize];
    if (!read_exact(fd, head, sizeof(head))) return false;
    if (!protocol::decode_header(head, h)) throw std::runtime_error("bad magic from the job");
    std::vector<uint8_t> payload(h->length);
    if (!read_exact(fd, payload.data(), payload.size())) return false;
    *body = protocol::decode_payload(payload.data(), payload.size());
    return true;
  }

  bool read_exact(int fd, uint8_t* data, size_t size) {
    while (size > 0) {
      pollfd p{fd, POLLIN, 0};
      const int r = ::poll(&p, 1, 50);
      if (stop_) return false;
      if (r <= 0) continue;
      const ssize_t n = ::recv(fd, data, size, 0);
      if (n <= 0) return false;
      data += n;
      size -= static_cast<size_t>(n);
    }
    return true;
  }

  std::string path_;
  uint64_t drop_after_;
  int listener_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  mutable std::mutex mutex_;
  std::vector<std::pair<int, uint64_t>> profiles_;
};

struct Trained {
  JobStats stats;
  JobChannel::Status daemon;
};

// Trains two_tower on cpu:0 and cpu:1 until `done` says so, for at most 30 s.
Trained train_until(const std::string& socket, const std::function<bool(const Job&)>& done) {
  std::ifstream in(std::string(MODEL_DIR) + "/two_tower.json");
  const json spec = json::parse(in);
  torch::jit::Module module = torch::jit::load(std::string(MODEL_DIR) + "/two_tower.pt");
  at::manual_seed(1);
  const std::vector<at::Tensor> inputs =
      example_inputs(spec["inputs"].get<std::vector<std::vector<int64_t>>>(), spec["dtype"]);
  JobOptions options;
  options.socket_path = socket;
  options.devices = {"cpu:0", "cpu:1"};
  options.reconnect_interval_ms = 20;
  Job job("crossing", module, inputs, options);
  torch::optim::SGD optimizer(job.parameters(), torch::optim::SGDOptions(0.01));
  const auto loss = [](const std::vector<c10::IValue>& out) {
    return out.at(0).toTensor().pow(2).mean();
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!done(job) && std::chrono::steady_clock::now() < deadline)
    job.step({at::randn(inputs[0].sizes())}, loss, optimizer);
  return {job.stats(), job.daemon()};
}

TEST(JobProfileRequests, ARequestForKindsWhoseProfilesAreOnTheirWayIsNotProfiledAgain) {
  const std::string dir = testing::make_temp_dir();
  ScriptedDaemon daemon(dir + "/pd.sock", 1000000);
  // Placement 2 runs, and goes on for 20 steps: time enough to profile had the job taken the ask.
  uint64_t steps_under_2 = 0;
  const Trained t = train_until(dir + "/pd.sock", [&](const Job& job) {
    if (job.stats().placement_id == 2) ++steps_under_2;
    return steps_under_2 > 20;
  });
  ASSERT_EQ(t.stats.placement_id, 2u) << t.daemon.last_error;
  EXPECT_EQ(t.stats.profiled_steps, 3u) << "only placement 1's steps were profiled";
  EXPECT_EQ(t.stats.profiles_sent, 1u);
  EXPECT_EQ(daemon.profiles(), (std::vector<std::pair<int, uint64_t>>{{1, 1}}));
}

TEST(JobProfileRequests, ANewAttachmentThatAsksAgainIsProfiledAgain) {
  const std::string dir = testing::make_temp_dir();
  // The daemon drops the job 5 steps into placement 2; the session it attaches to next knows
  // nothing of what the last one was sent, and gets what it asks for.
  ScriptedDaemon daemon(dir + "/pd.sock", 5);
  const Trained t =
      train_until(dir + "/pd.sock", [](const Job& job) { return job.stats().profiles_sent >= 2; });
  EXPECT_EQ(t.stats.profiles_sent, 2u);
  EXPECT_EQ(t.stats.profiled_steps, 6u);
  EXPECT_GE(t.daemon.attaches, 2u);
  // The second profiles may still be queued when the job ends; the first went to the first session.
  ASSERT_FALSE(daemon.profiles().empty());
  EXPECT_EQ(daemon.profiles().front(), (std::pair<int, uint64_t>{1, 1}));
}

}  // namespace
}  // namespace placement
