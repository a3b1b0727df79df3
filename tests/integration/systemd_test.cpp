// The systemd protocol for real: socket activation through systemd-socket-activate (LISTEN_FDS),
// and readiness on NOTIFY_SOCKET only once the daemon can serve.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "daemon_process.h"

namespace placement::testing {
namespace {

using nlohmann::json;
using protocol::MessageType;

TEST(Systemd, SocketActivationServesOnThePassedSocket) {
  const char* tool = "/usr/bin/systemd-socket-activate";
  if (::access(tool, X_OK) != 0) GTEST_SKIP() << "systemd-socket-activate is missing";
  DaemonOptions options;
  DaemonProcess probe;  // for a fresh socket path the launcher can own
  options.launcher = {tool, "-l", probe.dir + "/activated.sock"};
  options.daemon_keys = "";
  DaemonProcess daemon(options);
  // The config names a different socket: an activated daemon must use the one it was given.
  daemon.socket = probe.dir + "/activated.sock";
  daemon.start();
  const json status =
      daemon.client().request(MessageType::kStatus, json::object(), MessageType::kStatusReply);
  EXPECT_EQ(status["version"].get<std::string>(), "0.1.0");
  EXPECT_NE(daemon.log().find("using the socket systemd passed"), std::string::npos)
      << daemon.log();
  EXPECT_EQ(daemon.stop(), 0);
  EXPECT_TRUE(std::filesystem::exists(probe.dir + "/activated.sock"))
      << "the socket belongs to systemd, not to us";
}

TEST(Systemd, NotifiesReadyOnlyWhenServingAndStoppingOnSigterm) {
  DaemonProcess probe;
  const std::string notify_path = probe.dir + "/notify";
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, notify_path.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  DaemonOptions options;
  options.env = {"NOTIFY_SOCKET=" + notify_path};
  DaemonProcess daemon(options);
  daemon.start();
  auto receive = [&] {
    char buf[512] = {};
    timeval tv{5, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    const ssize_t n = ::recv(fd, buf, sizeof(buf) - 1, 0);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  };
  const std::string ready = receive();
  EXPECT_EQ(ready.rfind("READY=1\nSTATUS=serving on " + daemon.socket, 0), 0u) << ready;
  daemon.signal(SIGHUP);
  EXPECT_EQ(receive(), "RELOADING=1");
  EXPECT_EQ(receive(), "READY=1");
  EXPECT_EQ(daemon.stop(), 0);
  EXPECT_EQ(receive(), "STOPPING=1");
  ::close(fd);
}

}  // namespace
}  // namespace placement::testing
