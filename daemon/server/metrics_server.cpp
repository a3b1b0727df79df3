#include "server/metrics_server.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include <spdlog/spdlog.h>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

namespace placementd {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using unix_stream = asio::local::stream_protocol;

namespace {

// A scraper that has not sent its request, or read the answer, by then is dropped.
constexpr auto kTimeout = std::chrono::seconds(10);
constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace

struct MetricsServer::State : std::enable_shared_from_this<State> {
  State(asio::io_context& io, asio::thread_pool& pool, Render render)
      : pool(pool), render(std::move(render)), tcp_acceptor(io), unix_acceptor(io), retry(io) {}

  template <class Socket>
  void serve(Socket socket);
  // Accepts one connection, serves it, and calls `again` to accept the next.
  template <class Acceptor>
  void accept(Acceptor& acceptor, void (State::*again)());
  void accept_tcp();
  void accept_unix();
  // After an accept error (EMFILE ...): try again shortly, not in a loop on the I/O thread.
  void retry_later(const boost::system::error_code& ec, void (State::*accept)());

  asio::thread_pool& pool;
  Render render;
  tcp::acceptor tcp_acceptor;
  unix_stream::acceptor unix_acceptor;
  asio::steady_timer retry;
  std::string unix_path;
  size_t open = 0;
  bool stopped = false;
};

namespace {

// One scrape: a request read, the text rendered on a policy thread, the answer written, closed.
template <class Socket>
class Scrape : public std::enable_shared_from_this<Scrape<Socket>> {
 public:
  Scrape(std::shared_ptr<MetricsServer::State> server, Socket socket)
      : server_(std::move(server)), socket_(std::move(socket)), timer_(socket_.get_executor()) {}

  void start() {
    auto self = this->shared_from_this();
    timer_.expires_after(kTimeout);
    timer_.async_wait([self](const boost::system::error_code& ec) {
      if (!ec) self->close();
    });
    parser_.header_limit(8192);
    parser_.body_limit(4096);
    http::async_read(socket_, buffer_, parser_,
                     [self](const boost::system::error_code& ec, size_t) {
                       if (ec) {
                         // A malformed request gets its answer; a vanished or slow scraper does
                         // not.
                         const boost::system::error_code http_error = http::error::bad_target;
                         if (ec.category() == http_error.category() &&
                             ec != http::error::end_of_stream && !self->closed_)
                           self->reply(http::status::bad_request,
                                       "malformed HTTP request: " + ec.message() + "\n");
                         else
                           self->close();
                         return;
                       }
                       self->on_request();
                     });
  }

 private:
  void on_request() {
    const auto& request = parser_.get();
    if (request.method() != http::verb::get) {
      reply(http::status::method_not_allowed, "placementd answers GET /metrics only\n");
      return;
    }
    std::string target(request.target());
    target = target.substr(0, target.find('?'));
    if (target != "/metrics") {
      reply(http::status::not_found, "placementd serves its metrics at /metrics\n");
      return;
    }
    auto self = this->shared_from_this();
    asio::post(server_->pool, [self] {
      std::string text;
      http::status status = http::status::ok;
      try {
        text = self->server_->render();
      } catch (const std::exception& e) {
        spdlog::error("metrics: rendering failed: {}", e.what());
        status = http::status::internal_server_error;
        text = std::string("rendering the metrics failed: ") + e.what() + "\n";
      }
      asio::post(self->socket_.get_executor(), [self, status, text = std::move(text)]() mutable {
        self->reply(status, std::move(text));
      });
    });
  }

  void reply(http::status status, std::string body) {
    if (closed_) return;
    response_.result(status);
    response_.version(11);
    response_.set(http::field::server, "placementd");
    response_.set(http::field::content_type,
                  status == http::status::ok ? kContentType : "text/plain; charset=utf-8");
    if (status == http::status::method_not_allowed) response_.set(http::field::allow, "GET");
    response_.keep_alive(false);
    response_.body() = std::move(body);
    response_.prepare_payload();
    auto self = this->shared_from_this();
    http::async_write(socket_, response_,
                      [self](const boost::system::error_code&, size_t) { self->close(); });
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    timer_.cancel();
    boost::system::error_code ignored;
    socket_.shutdown(Socket::shutdown_both, ignored);
    socket_.close(ignored);
    --server_->open;
  }

  std::shared_ptr<MetricsServer::State> server_;
  Socket socket_;
  asio::steady_timer timer_;
  boost::beast::flat_buffer buffer_;
  http::request_parser<http::string_body> parser_;
  http::response<http::string_body> response_;
  bool closed_ = false;
};

}  // namespace

template <class Socket>
void MetricsServer::State::serve(Socket socket) {
  if (open >= kMaxConnections) {
    spdlog::debug("metrics: {} scrapes in progress, a connection is closed", open);
    return;  // the socket closes as it goes out of scope
  }
  ++open;
  std::make_shared<Scrape<Socket>>(shared_from_this(), std::move(socket))->start();
}

void MetricsServer::State::retry_later(const boost::system::error_code& ec,
                                       void (State::*accept)()) {
  spdlog::warn("metrics: accept failed: {}; retrying in 100 ms", ec.message());
  retry.expires_after(std::chrono::milliseconds(100));
  retry.async_wait([self = shared_from_this(), accept](const boost::system::error_code& e) {
    if (!e && !self->stopped) (self.get()->*accept)();
  });
}

template <class Acceptor>
void MetricsServer::State::accept(Acceptor& acceptor, void (State::*again)()) {
  acceptor.async_accept(
      [self = shared_from_this(), again](const boost::system::error_code& ec, auto socket) {
        if (self->stopped || ec == asio::error::operation_aborted) return;
        if (ec) return self->retry_later(ec, again);
        self->serve(std::move(socket));
        (self.get()->*again)();
      });
}

void MetricsServer::State::accept_tcp() { accept(tcp_acceptor, &State::accept_tcp); }
void MetricsServer::State::accept_unix() { accept(unix_acceptor, &State::accept_unix); }

MetricsServer::MetricsServer(asio::io_context& io, asio::thread_pool& render_on, Render render)
    : state_(std::make_shared<State>(io, render_on, std::move(render))) {}

MetricsServer::~MetricsServer() { stop(); }

void MetricsServer::listen(const ListenAddress& address, uint32_t unix_mode) {
  try {
    if (address.kind == ListenAddress::Kind::kTcp) {
      const tcp::endpoint endpoint(asio::ip::make_address(address.host), address.port);
      state_->tcp_acceptor.open(endpoint.protocol());
      state_->tcp_acceptor.set_option(tcp::acceptor::reuse_address(true));
      state_->tcp_acceptor.bind(endpoint);
      state_->tcp_acceptor.listen();
      state_->accept_tcp();
      return;
    }
    // A socket file left by a daemon that died is replaced; one a live process answers on is not.
    std::error_code fs_error;
    if (std::filesystem::is_socket(address.path, fs_error)) {
      unix_stream::socket probe(state_->unix_acceptor.get_executor());
      boost::system::error_code connect_error;
      probe.connect(unix_stream::endpoint(address.path), connect_error);
      if (!connect_error) throw std::runtime_error("another process is listening there");
      ::unlink(address.path.c_str());
    }
    state_->unix_acceptor.open(unix_stream());
    state_->unix_acceptor.bind(unix_stream::endpoint(address.path));
    state_->unix_path = address.path;
    ::chmod(address.path.c_str(), static_cast<mode_t>(unix_mode));
    state_->unix_acceptor.listen();
    state_->accept_unix();
  } catch (const boost::system::system_error& e) {
    std::string why = e.code().message();
    if (e.code() == asio::error::address_family_not_supported)
      why +=
          " (the shipped placementd.service allows only AF_UNIX sockets: listen on a Unix socket "
          "path, or allow "
          "AF_INET and AF_INET6 in a drop-in; docs/operations.md, Metrics)";
    throw std::runtime_error("metrics.listen " + address.str() + ": cannot listen: " + why);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error("metrics.listen " + address.str() + ": cannot listen: " + e.what());
  }
}

void MetricsServer::stop() {
  if (state_->stopped) return;
  state_->stopped = true;
  boost::system::error_code ignored;
  state_->tcp_acceptor.close(ignored);
  state_->unix_acceptor.close(ignored);
  state_->retry.cancel();
  if (!state_->unix_path.empty()) ::unlink(state_->unix_path.c_str());
}

}  // namespace placementd
