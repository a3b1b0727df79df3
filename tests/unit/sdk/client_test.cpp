// The SDK's client against a stand-in daemon on a real Unix socket, which answers the handshake and
// then misbehaves in the ways a stalled or hostile daemon could.

#include <gtest/gtest.h>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "placement/client.h"
#include "placement/messages.h"
#include "placement/protocol.h"
#include "raw_connection.h"

namespace placement {
namespace {

using protocol::MessageType;

// Listens on a fresh socket path; `serve` runs on its own thread with the accepted connection.
class StandIn {
 public:
  template <class Serve>
  explicit StandIn(Serve serve) {
    path_ = (std::filesystem::temp_directory_path() /
             ("client_test_" + std::to_string(::getpid()) + ".sock"))
                .string();
    ::unlink(path_.c_str());
    listener_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::listen(listener_, 1) != 0)
      throw std::runtime_error("stand-in daemon: cannot listen on " + path_);
    thread_ = std::thread([this, serve] {
      const int fd = ::accept(listener_, nullptr, nullptr);
      if (fd < 0) return;
      testing::RawConnection connection(fd);
      serve(connection);
    });
  }
  ~StandIn() {
    ::shutdown(listener_, SHUT_RDWR);
    thread_.join();
    ::close(listener_);
    ::unlink(path_.c_str());
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int listener_ = -1;
  std::thread thread_;
};

void welcome(testing::RawConnection& daemon) {
  const auto hello = daemon.read_frame();
  messages::Welcome w;
  w.version = protocol::kMaxVersion;
  w.server = "stand-in";
  daemon.send_frame(MessageType::kWelcome, w.to_json(), hello ? hello->first.request_id : 0);
}

TEST(Client, ARequestEndsAtItsTimeoutThoughTheDaemonKeepsSendingOtherFrames) {
  // Each frame came within the timeout, but none answered the request: before the round trip had
  // one deadline, every frame started the wait anew and the job was held for as long as this went
  // on.
  std::atomic<bool> stop{false};
  StandIn daemon([&](testing::RawConnection& connection) {
    welcome(connection);
    connection.read_frame();
    for (int i = 0; i < 60 && !stop; ++i) {
      connection.send_frame(MessageType::kStatusReply, nlohmann::json::object(), 0);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  Client client(ClientOptions{daemon.path(), "client_test", 500});
  const auto started = std::chrono::steady_clock::now();
  try {
    client.request(MessageType::kStatus, nlohmann::json::object(), MessageType::kStatusReply);
    ADD_FAILURE() << "a request nobody answered returned";
  } catch (const ConnectionError& e) {
    EXPECT_NE(std::string(e.what()).find("timed out"), std::string::npos) << e.what();
  }
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now() - started)
                          .count();
  stop = true;
  EXPECT_LT(waited, 1500) << "ms";
  EXPECT_GE(waited, 450) << "ms";
}

TEST(Client, OneWayMessagesTheSocketCannotTakeWaitInTheClientUpToTheirCapAndGoOutInOrder) {
  // The daemon reads a connection no faster than its session takes its reports: meanwhile the job
  // must neither block nor grow without bound, and what it kept must reach the daemon whole.
  std::atomic<bool> read_now{false};
  std::vector<uint64_t> steps_read;  // the stand-in's until it is joined
  uint64_t accepted = 0;
  {
    StandIn daemon([&](testing::RawConnection& connection) {
      welcome(connection);
      for (int i = 0; i < 2000 && !read_now; ++i)  // 10 s at most, should an assertion end the test
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      while (auto frame = connection.read_frame(2000))
        steps_read.push_back(frame->second.at("step").get<uint64_t>());
    });
    Client client(ClientOptions{daemon.path(), "client_test", 5000});
    constexpr size_t kCap = 64 << 10;
    const auto started = std::chrono::steady_clock::now();
    while (client.send_oneway(MessageType::kStepReport,
                              messages::StepReport{1, accepted, 0.01, true, ""}.to_json(), kCap))
      ASSERT_LT(++accepted, 1000000u) << "the client never stopped taking reports";
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5))
        << "sending blocked";
    // Kept: more than the cap, by less than one report.
    EXPECT_GT(client.pending_bytes(), kCap);
    EXPECT_LT(client.pending_bytes(), kCap + 1024);
    read_now = true;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (client.pending_bytes() > 0 && std::chrono::steady_clock::now() < deadline)
      client.poll_readable(5);
    EXPECT_EQ(client.pending_bytes(), 0u);
  }  // the client closes, the stand-in reads to the end and is joined
  std::vector<uint64_t> expected(accepted);
  for (uint64_t i = 0; i < accepted; ++i) expected[i] = i;
  EXPECT_EQ(steps_read, expected);
}

}  // namespace
}  // namespace placement
