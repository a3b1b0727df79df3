// Holds partial frames for integration tests: opens --connections connections, says hello on each,
// sends the first --bytes bytes of a status frame none of them completes, prints "ready", and holds
// them until SIGTERM or SIGINT. Run as another uid (setpriv), it is a user whose half-sent frames
// weigh on the daemon's input buffers.

#include <signal.h>
#include <sys/socket.h>

#include <iostream>
#include <memory>
#include <vector>

#include <CLI/CLI.hpp>

#include "placement/client.h"
#include "placement/protocol.h"
#include "stop_signals.h"

int main(int argc, char** argv) {
  CLI::App app{"holds partial frames"};
  std::string socket;
  int connections = 1;
  uint32_t bytes = 1000;
  app.add_option("--socket", socket)->required();
  app.add_option("--connections", connections);
  app.add_option("--bytes", bytes,
                 "bytes of each frame's payload sent (the header says twice as many)");
  CLI11_PARSE(app, argc, argv);

  sigset_t set = placement::testing::block_stop_signals();
  try {
    std::vector<std::unique_ptr<placement::Client>> held;
    for (int i = 0; i < connections; ++i) {
      held.push_back(std::make_unique<placement::Client>(
          placement::ClientOptions{socket, "hold_partial_frames", 5000}));
      const auto head = placement::protocol::encode_header(
          {held.back()->version(), static_cast<uint16_t>(placement::protocol::MessageType::kStatus),
           2 * bytes, 1});
      std::vector<uint8_t> partial(head.begin(), head.end());
      partial.resize(partial.size() + bytes, 0);
      for (size_t sent = 0; sent < partial.size();) {
        const ssize_t n = ::send(held.back()->native_handle(), partial.data() + sent,
                                 partial.size() - sent, MSG_NOSIGNAL);
        if (n <= 0) throw std::runtime_error("send failed");
        sent += static_cast<size_t>(n);
      }
    }
    std::cout << "ready" << std::endl;
    int signo = 0;
    sigwait(&set, &signo);
  } catch (const std::exception& e) {
    std::cerr << "hold_partial_frames: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
