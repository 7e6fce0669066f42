#pragma once
// Every nats.c object the bus uses, owned by a unique_ptr whose deleter is the matching
// *_Destroy. Private to bus/: no nats type leaves this folder.
#include <nats/nats.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <vector>

namespace amqp::bus::detail {

template <class T, void (*destroy)(T*)>
struct nats_deleter {
  void operator()(T* p) const noexcept {
    if (p != nullptr) destroy(p);
  }
};

using options_ptr = std::unique_ptr<natsOptions, nats_deleter<natsOptions, &natsOptions_Destroy>>;
using connection_ptr =
    std::unique_ptr<natsConnection, nats_deleter<natsConnection, &natsConnection_Destroy>>;
using subscription_ptr =
    std::unique_ptr<natsSubscription, nats_deleter<natsSubscription, &natsSubscription_Destroy>>;
using msg_ptr = std::unique_ptr<natsMsg, nats_deleter<natsMsg, &natsMsg_Destroy>>;
using js_ptr = std::unique_ptr<jsCtx, nats_deleter<jsCtx, &jsCtx_Destroy>>;
using kv_store_ptr = std::unique_ptr<kvStore, nats_deleter<kvStore, &kvStore_Destroy>>;
using kv_watcher_ptr = std::unique_ptr<kvWatcher, nats_deleter<kvWatcher, &kvWatcher_Destroy>>;
using kv_entry_ptr = std::unique_ptr<kvEntry, nats_deleter<kvEntry, &kvEntry_Destroy>>;
using inbox_ptr = std::unique_ptr<natsInbox, nats_deleter<natsInbox, &natsInbox_Destroy>>;

// Messages done with, destroyed in batches. nats.c hands every destroyed message to its
// garbage-collector thread, under a lock and with a wake-up of that thread: one per message
// was a tenth of the adaptor's CPU when publishing (a sent message and its pub ack each).
// A batch is at most 128 messages or 1 MiB of payload, so large messages are not held.
// Thread-safe; what is left is destroyed with it.
class msg_batch_release {
 public:
  void release(msg_ptr msg) {
    std::vector<msg_ptr> full;
    {
      std::lock_guard lock{mutex_};
      bytes_ += static_cast<std::size_t>(std::max(0, natsMsg_GetDataLength(msg.get())));
      done_.push_back(std::move(msg));
      if (done_.size() < max_messages && bytes_ < max_bytes) return;
      full.swap(done_);
      bytes_ = 0;
    }
    // `full` is destroyed here, outside the lock: a run of hand-offs, one wake-up.
  }

 private:
  static constexpr std::size_t max_messages = 128;
  static constexpr std::size_t max_bytes = 1 << 20;
  std::mutex mutex_;
  std::vector<msg_ptr> done_;
  std::size_t bytes_ = 0;
};

}  // namespace amqp::bus::detail
