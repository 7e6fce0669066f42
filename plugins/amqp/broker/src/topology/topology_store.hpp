#pragma once
// The bucket half of a topology write (HIP-1326, "Where it sits": write locally, then to the
// bucket).
// Every function here is BLOCKING: call it only from run_on_bus work or the bus pool.
//
// Concurrency between replicas: creates use kv_create (the bucket decides who declared
// first); changes to a queue's bindings are revision-checked read-modify-writes that re-read
// and re-apply on conflict, so two replicas binding one queue at once both survive (the
// reference's unconditional Put lost one of them).
//
// Each function takes the bus client the work goes through: a connection's, so that the bus's
// permissions for the connection's user decide (a refusal is a failure marked `denied`), or the
// broker's own for its housekeeping.
//
// Transient entries (non-durable, or exclusive) carry the declaring node's name in an extra
// JSON member "node" (routing's parser ignores unknown members, and so does the Go reference).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "amqp/bus/result.hpp"
#include "amqp/routing/topology.hpp"

namespace amqp::bus {
class client;
struct kv_entry;
struct queue_info;
}  // namespace amqp::bus

namespace amqp::broker {

class broker;

namespace store {

// The bucket value of a definition; `node` is recorded only on transient definitions.
std::string exchange_value(const routing::exchange_def& def, std::string_view node);
std::string queue_value(const routing::queue_def& def, std::string_view node);
bool is_transient(const routing::exchange_def& def);
bool is_transient(const routing::queue_def& def);
// The "node" member of a bucket value; "" when absent or the value is not JSON.
std::string node_of(std::string_view json);

// What a create found: `created` (this process wrote it), the definition already there
// (someone declared it first: the caller compares), or the bus error.
struct created {
  std::string value;  // as written, at `revision`
  std::uint64_t revision = 0;
};

template <class Def>
using create_outcome = std::variant<created, Def, bus::bus_error>;

create_outcome<routing::exchange_def> create_exchange(broker& b, bus::client& bus, const std::string& name,
                                                      const routing::exchange_def& def);
create_outcome<routing::queue_def> create_queue(broker& b, bus::client& bus, const std::string& name,
                                                const routing::queue_def& def);

// Revision-checked read-modify-write of a queue's value. `change` edits the definition and
// returns false when there is nothing to write. nullopt = done (or nothing to do); "absent"
// when the queue is not in the bucket; otherwise the bus error.
//
// `entry`, where a function takes one, carries the queue's value between the steps of one
// operation: a known revision (non-zero) is used instead of reading the key (a stale one only
// costs the revision check a retry), and on success it holds the value last written or read.
enum class update_status { done, absent };
std::variant<update_status, bus::bus_error> update_queue(broker& b, bus::client& bus, const std::string& name,
                                                  const std::function<bool(routing::queue_def&)>& change,
                                                  bus::kv_entry* entry = nullptr);

// Reads one key into the mirror (a miss in the mirror may be a declaration on another replica
// whose watch update has not arrived yet). True when the key exists.
std::variant<bool, bus::bus_error> refresh(broker& b, bus::client& bus, const std::string& key);

// Makes the queue's bus consumer read the queue's subject with the queue's sharing. Re-reads the
// bucket after ensuring and repeats when the value changed meanwhile.
std::optional<bus::bus_error> converge_consumer(broker& b, bus::client& bus, const std::string& queue,
                                         bus::kv_entry* entry = nullptr);

// True when some queue, declared through any replica, has a binding to `exchange`: the
// bucket's answer (bindings live in the `q.<name>` values), not the mirror's, whose watch may
// trail another replica's bind-ok. For exchange.delete if-unused.
std::variant<bool, bus::bus_error> exchange_in_use(bus::client& bus, const std::string& exchange);

// Removes an exchange's bindings from every queue that has one (a deleted exchange takes its
// bindings with it, as in RabbitMQ; otherwise re-declaring the name would revive them). What
// they routed stays in the queues: each message is a queue's own copy.
std::optional<bus::bus_error> drop_exchange_bindings(broker& b, bus::client& bus, const std::string& exchange);

// queue.bind and queue.unbind: routing entries in the queue's bucket value, nothing on the bus.
// A publish is routed when it is published, so a binding applies to what is published after it
// and an unbind leaves what it routed in the queue. Call them once the channel's own publishes
// are stored. An unbind takes an auto-delete exchange with its last binding.
std::variant<update_status, bus::bus_error> add_binding(broker& b, bus::client& bus, const std::string& queue, const std::string& exchange,
                                                 const std::string& key);
std::optional<bus::bus_error> remove_binding(broker& b, bus::client& bus, const std::string& queue, const std::string& exchange,
                                      const std::string& key);

// RabbitMQ's auto-delete exchange: it goes when its last binding goes (an unbind, or the
// deletion of the queue that held it), never merely for having had none. Call it after
// bindings to `exchanges` were removed: each that is auto-delete and now bound by no queue
// of the bucket is deleted.
std::optional<bus::bus_error> reap_auto_delete_exchanges(broker& b, bus::client& bus, const std::vector<std::string>& exchanges);

// Deletes a whole entry from the bus: for a queue its consumer and key (then the auto-delete
// exchanges it was the last binding of), for an exchange its key and its bindings. Absent
// is success.
std::optional<bus::bus_error> remove_entry(broker& b, bus::client& bus, const std::string& key);

// How many messages the queue holds ready for delivery (0 when its consumer is absent).
std::variant<std::uint64_t, bus::bus_error> pending_messages(bus::client& bus, const std::string& queue);
// queue.purge: the ready count, then the queue's subject is emptied.
std::variant<std::uint64_t, bus::bus_error> purge(broker& b, bus::client& bus, const std::string& queue);

}  // namespace store
}  // namespace amqp::broker
