#include "server/handlers.h"

#include <stdexcept>

namespace placementd {

using placement::protocol::MessageType;

Route Route::needs_version(uint16_t version) const {
  Route r = *this;
  r.min_version = version;
  return r;
}

Route Route::ending_attachment() const {
  Route r = *this;
  r.ends_attachment = true;
  return r;
}

namespace {

Route route(Access access, Runs runs, std::string doing) {
  Route r;
  r.access = access;
  r.runs = runs;
  r.doing = std::move(doing);
  return r;
}

}  // namespace

Route on_io_thread(Access access, std::string doing, IoHandler handler) {
  Route r = route(access, Runs::kIoThread, std::move(doing));
  r.on_io = std::move(handler);
  return r;
}

Route on_job_strand(std::string doing, WorkHandler handler) {
  Route r = route(Access::kAttached, Runs::kJobStrand, std::move(doing));
  r.work = std::move(handler);
  return r;
}

Route on_policy_thread(Access access, std::string doing, WorkHandler handler) {
  Route r = route(access, Runs::kPolicyThread, std::move(doing));
  r.work = std::move(handler);
  return r;
}

void HandlerTable::add(MessageType type, Route route) {
  const std::string name = placement::protocol::to_string(type);
  if (!placement::protocol::is_request(type))
    throw std::logic_error("a handler for " + name + ", which is a reply");
  if (routes_.count(type)) throw std::logic_error("a second handler for " + name);
  const bool inline_route = route.runs == Runs::kIoThread;
  if (inline_route != static_cast<bool>(route.on_io) ||
      inline_route == static_cast<bool>(route.work))
    throw std::logic_error("the handler of " + name + " does not fit the thread it runs on");
  if (route.runs == Runs::kJobStrand && route.access != Access::kAttached)
    throw std::logic_error(name + " runs on a job strand but does not need an attached job");
  routes_.emplace(type, std::move(route));
}

const Route* HandlerTable::find(MessageType type) const {
  auto it = routes_.find(type);
  return it == routes_.end() ? nullptr : &it->second;
}

std::vector<MessageType> HandlerTable::types() const {
  std::vector<MessageType> out;
  for (const auto& [type, route] : routes_) out.push_back(type);
  return out;
}

}  // namespace placementd
