#include "copy_lane.h"

#include <map>
#include <mutex>

#include <c10/core/Stream.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>

namespace placement::detail {

namespace {

// One copy stream per GPU for the process: copies queued on it run in the order they were queued,
// which the prefetch relies on (the next op's parameters land first).
c10::Stream copy_stream(c10::Device device) {
  static std::mutex mutex;
  static std::map<c10::DeviceIndex, c10::Stream> streams;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto found = streams.find(device.index());
  if (found != streams.end()) return found->second;
  const c10::impl::VirtualGuardImpl impl(device.type());
  const c10::Stream stream = impl.getStreamFromGlobalPool(device, /*isHighPriority=*/false);
  streams.emplace(device.index(), stream);
  return stream;
}

c10::Device with_index(c10::Device device) {
  if (device.has_index()) return device;
  const c10::impl::VirtualGuardImpl impl(device.type());
  return impl.getDevice();
}

}  // namespace

void Landing::wait_on_current_stream() {
  if (!done_) return;
  const c10::impl::VirtualGuardImpl impl(done_->device_type());
  done_->block(impl.getStream(done_->device()));
  done_.reset();
}

void Landing::synchronize() {
  if (!done_) return;
  done_->synchronize();
  done_.reset();
}

Landing copy_aside(c10::Device device, const std::function<void()>& copy,
                   const std::vector<at::Tensor>& read_on_device) {
  if (!device.is_cuda()) {
    copy();
    return {};
  }
  const c10::Device gpu = with_index(device);
  const c10::impl::VirtualGuardImpl impl(gpu.type());
  const c10::Stream computing = impl.getStream(gpu);
  const c10::Stream copying = copy_stream(gpu);
  // The copy starts after what is queued on the computing stream: the memory it writes was
  // allocated from that stream's pool and may have been freed by its work a moment ago.
  c10::Event queued(gpu.type());
  queued.record(computing);
  queued.block(copying);
  auto done = std::make_shared<c10::Event>(gpu.type());
  {
    const c10::StreamGuard on_copy_stream(copying);
    copy();
    done->record(copying);
  }
  for (const at::Tensor& t : read_on_device)
    if (t.defined() && t.has_storage() && t.device() == gpu)
      impl.recordDataPtrOnStream(t.storage().data_ptr(), copying);
  return Landing(std::move(done));
}

}  // namespace placement::detail
