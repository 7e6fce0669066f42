#include "definitions.hpp"

#include "amqp/routing/names.hpp"
#include "amqp/routing/policy.hpp"
#include "amqp/routing/subject.hpp"

namespace amqp::management {
namespace {

using json = nlohmann::json;

constexpr const char* rabbitmq_version = "3.10.8";  // the shapes followed, as api.cpp says

// A boolean field, true/false or "true"/"false" as RabbitMQ reads it.
std::optional<bool> flag_of(const json& object, const char* key, bool otherwise) {
  if (!object.contains(key)) return otherwise;
  const auto& v = object[key];
  if (v.is_boolean()) return v.get<bool>();
  if (v == "true") return true;
  if (v == "false") return false;
  return std::nullopt;
}

std::optional<std::string> text_of(const json& object, const char* key, const char* otherwise) {
  if (!object.contains(key)) return otherwise ? std::optional<std::string>(otherwise) : std::nullopt;
  return object[key].is_string() ? std::optional(object[key].get<std::string>()) : std::nullopt;
}

// The sections an import cannot apply, and why: each must be absent or empty.
bool refuses_sections(const json& file, std::string& why) {
  static const std::pair<const char*, const char*> refused[] = {
      {"users", "users are the bus's: add them to the NATS account of their vhost"},
      {"permissions", "permissions are the bus's: NATS subject permissions decide what a user may do"},
      {"topic_permissions", "permissions are the bus's: NATS subject permissions decide what a user may do"},
      {"parameters", "parameters (shovels, federation) are not implemented"},
      {"global_parameters", "global parameters are not implemented"},
  };
  for (const auto& [key, reason] : refused) {
    if (!file.contains(key)) continue;
    const auto& section = file[key];
    if (section.is_array() && section.empty()) continue;
    if (std::string(key) == "global_parameters" && section.is_array()) {
      // RabbitMQ exports its own cluster name and internal id here; they describe, not configure.
      bool only_identity = true;
      for (const auto& p : section)
        only_identity = only_identity && p.is_object() &&
                        (p.value("name", "") == "cluster_name" || p.value("name", "") == "internal_cluster_id");
      if (only_identity) continue;
    }
    why = std::string(key) + " cannot be imported: " + reason;
    return true;
  }
  return false;
}

// Each entry's vhost: the per-vhost import's, or its own field.
std::optional<std::string> vhost_of(const json& entry, const std::optional<std::string>& vhost, std::string& why) {
  if (vhost) return vhost;
  auto v = text_of(entry, "vhost", nullptr);
  if (!v) why = "an entry has no vhost: " + entry.dump();
  return v;
}

bool read_exchanges(const json& file, const std::optional<std::string>& vhost, definitions& out, std::string& why) {
  for (const auto& e : file.value("exchanges", json::array())) {
    auto v = vhost_of(e, vhost, why);
    auto name = text_of(e, "name", nullptr);
    auto type = text_of(e, "type", nullptr);
    auto durable = flag_of(e, "durable", true), auto_delete = flag_of(e, "auto_delete", false),
         internal = flag_of(e, "internal", false);
    if (!v) return false;
    if (!name || !type || !durable || !auto_delete || !internal) {
      why = "an exchange needs a name, a type and boolean flags: " + e.dump();
      return false;
    }
    out.exchanges.push_back({*v, *name, *type, *durable, *auto_delete, *internal, e.value("arguments", json::object())});
  }
  return true;
}

bool read_queues(const json& file, const std::optional<std::string>& vhost, definitions& out, std::string& why) {
  for (const auto& q : file.value("queues", json::array())) {
    auto v = vhost_of(q, vhost, why);
    auto name = text_of(q, "name", nullptr);
    auto durable = flag_of(q, "durable", true), auto_delete = flag_of(q, "auto_delete", false);
    if (!v) return false;
    if (!name || !durable || !auto_delete) {
      why = "a queue needs a name and boolean flags: " + q.dump();
      return false;
    }
    out.queues.push_back({*v, *name, *durable, *auto_delete, q.value("arguments", json::object())});
  }
  return true;
}

bool read_bindings(const json& file, const std::optional<std::string>& vhost, definitions& out, std::string& why) {
  for (const auto& b : file.value("bindings", json::array())) {
    auto v = vhost_of(b, vhost, why);
    auto source = text_of(b, "source", nullptr), destination = text_of(b, "destination", nullptr);
    auto type = text_of(b, "destination_type", "queue");
    auto key = text_of(b, "routing_key", "");
    if (!v) return false;
    if (!source || !destination || !type || !key) {
      why = "a binding needs a source, a destination and a routing key: " + b.dump();
      return false;
    }
    if (*type != "queue") {
      why = "the binding of exchange '" + *destination + "' to '" + *source +
            "' cannot be imported: exchange-to-exchange bindings are not implemented";
      return false;
    }
    if (b.contains("arguments") && !b["arguments"].empty()) {
      why = "the binding of queue '" + *destination + "' to '" + *source +
            "' cannot be imported: binding arguments are not implemented";
      return false;
    }
    out.bindings.push_back({*v, *source, *destination, *key});
  }
  return true;
}

bool read_policies(const json& file, const std::optional<std::string>& vhost, definitions& out, std::string& why) {
  for (const auto& p : file.value("policies", json::array())) {
    auto v = vhost_of(p, vhost, why);
    auto name = text_of(p, "name", nullptr);
    if (!v) return false;
    if (!name) {
      why = "a policy needs a name: " + p.dump();
      return false;
    }
    out.policies.push_back({*v, *name, p.dump()});
  }
  return true;
}

}  // namespace

json exchange_arguments(const routing::exchange_def& d) {
  json a = json::object();
  if (d.delayed) a["x-delayed-type"] = std::string(routing::to_string(d.kind));
  return a;
}

json queue_arguments(const routing::queue_def& d) {
  json a = json::object();
  if (d.message_ttl) a["x-message-ttl"] = *d.message_ttl;
  if (d.dead_letter) {
    a["x-dead-letter-exchange"] = d.dead_letter->exchange;
    if (d.dead_letter->routing_key) a["x-dead-letter-routing-key"] = *d.dead_letter->routing_key;
  }
  if (d.delivery_limit) a["x-delivery-limit"] = *d.delivery_limit;
  if (d.unlimited_deliveries) a["x-delivery-limit"] = -1;
  if (d.expires) a["x-expires"] = *d.expires;
  if (d.single_active_consumer) a["x-single-active-consumer"] = true;
  if (d.max_length) a["x-max-length"] = *d.max_length;
  if (d.overflow) a["x-overflow"] = std::string(routing::to_string(*d.overflow));
  if (d.max_age) a["x-max-age"] = *d.max_age;
  if (d.max_length_bytes) a["x-max-length-bytes"] = *d.max_length_bytes;
  // As declared: RabbitMQ exports x-queue-type only for a queue whose declaration named it.
  if (d.declared_type) a["x-queue-type"] = std::string(routing::to_string(*d.declared_type));
  return a;
}

json export_definitions(const std::vector<std::pair<std::string, routing::topology>>& vhosts,
                        const std::string& product_version, bool one_vhost) {
  json queues = json::array(), exchanges = json::array(), bindings = json::array(), names = json::array(),
       policies = json::array();
  auto in = [one_vhost](json entry, const std::string& vhost) {
    if (!one_vhost) entry["vhost"] = vhost;
    return entry;
  };
  for (const auto& [vhost, t] : vhosts) {
    names.push_back({{"name", vhost}});
    for (const auto& [name, d] : t.exchanges()) {
      if (routing::is_standard_exchange(name)) continue;
      exchanges.push_back(in({{"name", name}, {"type", std::string(routing::type_name(d))}, {"durable", d.durable},
                              {"auto_delete", d.auto_delete}, {"internal", d.internal}, {"arguments", exchange_arguments(d)}},
                             vhost));
    }
    for (const auto& [name, policy] : t.policies()) {
      auto entry = json::parse(routing::encode_policy(policy->rules));
      entry["name"] = name;
      policies.push_back(in(std::move(entry), vhost));
    }
    for (const auto& entry : t.queues()) {
      const auto& name = entry.first;
      const auto& d = *t.find_declared(name);  // its arguments, not its policy's
      if (d.exclusive) continue;  // a connection's, gone with it
      queues.push_back(in({{"name", name}, {"durable", d.durable}, {"auto_delete", d.auto_delete},
                           {"arguments", queue_arguments(d)}},
                          vhost));
      for (const auto& b : d.bindings)
        bindings.push_back(in({{"source", b.exchange}, {"destination", name}, {"destination_type", "queue"},
                               {"routing_key", b.key}, {"arguments", json::object()}},
                              vhost));
    }
  }
  json file = {{"rabbit_version", rabbitmq_version}, {"rabbitmq_version", rabbitmq_version},
               {"product_name", "cloud"},            {"product_version", product_version},
               {"policies", policies},               {"parameters", json::array()},
               {"queues", queues},                   {"exchanges", exchanges},
               {"bindings", bindings}};
  if (!one_vhost) {
    file["users"] = json::array();
    file["vhosts"] = names;
    file["permissions"] = json::array();
    file["topic_permissions"] = json::array();
    file["global_parameters"] = json::array();
  }
  return file;
}

std::optional<definitions> import_definitions(const json& file, const std::optional<std::string>& vhost,
                                              std::string& why) {
  if (!file.is_object()) {
    why = "a definitions file is a JSON object";
    return std::nullopt;
  }
  for (const char* key : {"queues", "exchanges", "bindings", "vhosts", "policies"}) {
    if (file.contains(key) && !file[key].is_array()) {
      why = std::string(key) + " must be a list";
      return std::nullopt;
    }
  }
  if (refuses_sections(file, why)) return std::nullopt;
  definitions out;
  for (const auto& v : file.value("vhosts", json::array())) {
    auto name = text_of(v, "name", nullptr);
    if (!v.is_object() || !name) {
      why = "a vhost needs a name: " + v.dump();
      return std::nullopt;
    }
    out.vhosts.push_back(*name);
  }
  if (!read_policies(file, vhost, out, why) || !read_exchanges(file, vhost, out, why) ||
      !read_queues(file, vhost, out, why) || !read_bindings(file, vhost, out, why))
    return std::nullopt;
  return out;
}

}  // namespace amqp::management
