#pragma once
// The optional Prometheus endpoint: HTTP/1.1 GET /metrics on a TCP address or a Unix socket
// ([metrics].listen), on the daemon's I/O thread. The text is rendered off that thread (a job's
// lock may be held by its policy work for seconds), so a scrape never stalls the jobs' traffic.

#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>

#include "config/listen_address.h"

namespace placementd {

class MetricsServer {
 public:
  /// What a scrape answers; runs on `render_on`.
  using Render = std::function<std::string()>;
  /// Scrapes served at once; more connections are closed until one ends.
  static constexpr size_t kMaxConnections = 16;

  MetricsServer(boost::asio::io_context& io, boost::asio::thread_pool& render_on, Render render);
  ~MetricsServer();

  /// Binds and listens. Throws std::runtime_error naming the address and why (in use, not
  /// permitted, an address family the service's sandbox does not allow).
  void listen(const ListenAddress& address, uint32_t unix_mode);
  /// Stops accepting and closes the connections (shutdown).
  void stop();

  /// The acceptors and what scrapes share (metrics_server.cpp).
  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace placementd
