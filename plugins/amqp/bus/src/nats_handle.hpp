#pragma once
// Every nats.c object the bus uses, owned by a unique_ptr whose deleter is the matching
// *_Destroy. Private to bus/: no nats type leaves this folder.
#include <nats/nats.h>

#include <memory>

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

}  // namespace amqp::bus::detail
