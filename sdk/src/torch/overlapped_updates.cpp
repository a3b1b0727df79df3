#include "overlapped_updates.h"

#include <chrono>
#include <optional>
#include <stdexcept>
#include <utility>

namespace placement::detail {

OverlappedUpdates::OverlappedUpdates(StepOptimizer& optimizer, bool undoable)
    : optimizer_(optimizer), undoable_(undoable) {
  if (!optimizer.steps_parameters_apart())
    throw std::logic_error("OverlappedUpdates needs an optimizer that steps parameters apart");
}

OverlappedUpdates::~OverlappedUpdates() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    closing_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void OverlappedUpdates::ready(const at::Tensor& parameter, std::function<void()> landed) {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(parameter);
    landing_.push_back(std::move(landed));
    // Started with the first gradient: a step without any pays for no thread.
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  wake_.notify_one();
}

void OverlappedUpdates::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return !queue_.empty() || closing_; });
    if (queue_.empty()) return;
    std::vector<at::Tensor> batch;
    batch.swap(queue_);
    std::vector<std::function<void()>> landing;
    landing.swap(landing_);
    if (error_) {
      idle_.notify_all();
      continue;  // after a failure nothing more runs; the step is undone or fails
    }
    busy_ = true;
    lock.unlock();
    const auto started = std::chrono::steady_clock::now();
    std::exception_ptr error;
    std::optional<UpdateGuard> guard;
    try {
      // Their gradients are read from here on: each one's copy from a GPU has landed.
      for (const std::function<void()>& landed : landing)
        if (landed) landed();
      if (undoable_) {
        guard.emplace(batch, optimizer_);
        if (!guard->armed())
          throw std::logic_error(
              "the optimizer steps parameters apart but cannot save their state to undo an update");
      }
      optimizer_.step_parameters(batch);
    } catch (...) {
      error = std::current_exception();
      try {
        if (guard) guard->undo();
      } catch (...) {
        // Copies into tensors that exist fail only with the host itself; the step fails anyway.
      }
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    lock.lock();
    seconds_ += seconds;
    busy_ = false;
    if (error) {
      error_ = error;
      if (guard) failed_put_back_ = batch.size();
    } else {
      if (guard) {
        saved_bytes_ += guard->bytes();
        guards_.push_back(std::move(*guard));
      }
      updated_.insert(updated_.end(), batch.begin(), batch.end());
    }
    if (queue_.empty()) idle_.notify_all();
  }
}

void OverlappedUpdates::finish() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [this] { return queue_.empty() && !busy_; });
  if (error_) std::rethrow_exception(error_);
}

size_t OverlappedUpdates::undo() {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait(lock, [this] { return queue_.empty() && !busy_; });
  }
  if (!undoable_) return 0;
  for (auto it = guards_.rbegin(); it != guards_.rend(); ++it) it->undo();
  guards_.clear();
  const size_t put_back = updated_.size() + failed_put_back_;
  updated_.clear();
  failed_put_back_ = 0;
  return put_back;
}

}  // namespace placement::detail
