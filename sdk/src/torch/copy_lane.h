#pragma once
// Copies between the host and a GPU that run while the GPU computes: each on a stream of its own
// per GPU (the copy stream), which first waits for what the computing stream had queued (the
// memory a copy writes may have been freed by that work only just now), and each read of the copy
// waits for its event: queued on the reader's stream, never a device-wide synchronisation. Through
// c10's device-generic streams and events, so that nothing here needs the CUDA headers: a CUDA
// build of LibTorch provides them when the process runs, and on the host a copy is made at once.
// Private to libplacement_torch (the residence runtime streams parameters and gradients with it).

#include <functional>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/Event.h>

namespace placement::detail {

/// A copy that may still be in flight. Default: none (a copy made at once, or nothing copied).
class Landing {
 public:
  Landing() = default;
  explicit Landing(std::shared_ptr<c10::Event> done) : done_(std::move(done)) {}
  /// Whether a copy was queued and not yet waited for by wait_on_current_stream or synchronize.
  bool pending() const { return done_ != nullptr; }
  /// The calling thread's current stream on the copy's GPU waits for it (a wait queued there;
  /// the host goes on). What a reader on the GPU needs. Clears it.
  void wait_on_current_stream();
  /// The host waits for it: what a reader on the host needs (a gradient copied home). Clears it.
  void synchronize();

 private:
  std::shared_ptr<c10::Event> done_;
};

/// Runs `copy` on `device`'s copy stream, made current for the call, after that stream has waited
/// for the work queued so far on the calling thread's current stream of `device`, and returns
/// the copy's landing. `copy` must queue its work without waiting for it (copy_ with
/// non_blocking=true between the GPU and pinned host memory). `read_on_device`: tensors on
/// `device` the copy reads, whose memory the caching allocator then keeps until the copy stream
/// is done with it, whoever frees them meanwhile. Where `device` is not a GPU the copy runs at
/// once, as it is, and nothing is in flight.
Landing copy_aside(c10::Device device, const std::function<void()>& copy,
                   const std::vector<at::Tensor>& read_on_device = {});

}  // namespace placement::detail
