// The symbols the route table (routes.cpp) names but management_fuzz never calls: its handlers,
// and what the inline PUT handlers (handlers.hpp) reach. Defined here so the target links the real
// table without the broker, the bus or Beast; each aborts, as calling one would be a harness bug.
#include <cstdlib>

#include "handlers.hpp"

namespace amqp::management {

#define MANAGEMENT_FUZZ_STUB(name) \
  handled name(api&, const call&) { std::abort(); }

MANAGEMENT_FUZZ_STUB(overview)
MANAGEMENT_FUZZ_STUB(whoami)
MANAGEMENT_FUZZ_STUB(cluster_name)
MANAGEMENT_FUZZ_STUB(extensions)
MANAGEMENT_FUZZ_STUB(feature_flags)
MANAGEMENT_FUZZ_STUB(nodes)
MANAGEMENT_FUZZ_STUB(node)
MANAGEMENT_FUZZ_STUB(health)
MANAGEMENT_FUZZ_STUB(aliveness)
MANAGEMENT_FUZZ_STUB(vhosts)
MANAGEMENT_FUZZ_STUB(one_vhost)
MANAGEMENT_FUZZ_STUB(queues)
MANAGEMENT_FUZZ_STUB(one_queue)
MANAGEMENT_FUZZ_STUB(delete_queue)
MANAGEMENT_FUZZ_STUB(purge_queue)
MANAGEMENT_FUZZ_STUB(get_messages)
MANAGEMENT_FUZZ_STUB(exchanges)
MANAGEMENT_FUZZ_STUB(one_exchange)
MANAGEMENT_FUZZ_STUB(delete_exchange)
MANAGEMENT_FUZZ_STUB(publish)
MANAGEMENT_FUZZ_STUB(bindings)
MANAGEMENT_FUZZ_STUB(queue_bindings)
MANAGEMENT_FUZZ_STUB(exchange_bindings_source)
MANAGEMENT_FUZZ_STUB(exchange_bindings_destination)
MANAGEMENT_FUZZ_STUB(bindings_between)
MANAGEMENT_FUZZ_STUB(one_binding)
MANAGEMENT_FUZZ_STUB(bind_queue)
MANAGEMENT_FUZZ_STUB(unbind_queue)
MANAGEMENT_FUZZ_STUB(connections)
MANAGEMENT_FUZZ_STUB(one_connection)
MANAGEMENT_FUZZ_STUB(channels)
MANAGEMENT_FUZZ_STUB(consumers)
MANAGEMENT_FUZZ_STUB(policies)
MANAGEMENT_FUZZ_STUB(one_policy)
MANAGEMENT_FUZZ_STUB(change_policy)
MANAGEMENT_FUZZ_STUB(none_set)
MANAGEMENT_FUZZ_STUB(not_set)
MANAGEMENT_FUZZ_STUB(put_parameter)
MANAGEMENT_FUZZ_STUB(put_operator_policy)
MANAGEMENT_FUZZ_STUB(export_file)
MANAGEMENT_FUZZ_STUB(import_file)

#undef MANAGEMENT_FUZZ_STUB

boost::asio::awaitable<reply> api::one_method(const vhost&, const principal&, wire::method, operator_channel::done_fn,
                                              reply) {
  std::abort();
}

}  // namespace amqp::management

namespace amqp::broker {

routing::topology topology_of(const broker&) { std::abort(); }

}  // namespace amqp::broker
