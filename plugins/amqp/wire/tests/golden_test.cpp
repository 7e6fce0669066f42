// Golden bytes from a real client: rabbitmq-c (librabbitmq, Debian) encodes methods and
// properties, we decode them to the expected values and our encoding of the same values is
// byte-identical; and what rabbitmq-c writes to a socket for a publish is what we write.
#include <amqp.h>
#include <amqp_framing.h>
#include <amqp_tcp_socket.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "support.hpp"

namespace amqp::wire {
namespace {

using test::octets;

method_key key_of(amqp_method_number_t n) {
  return {static_cast<std::uint16_t>(n >> 16), static_cast<std::uint16_t>(n & 0xFFFF)};
}

amqp_bytes_t bytes_of(const std::string& s) { return {s.size(), const_cast<char*>(s.data())}; }

// rabbitmq-c's encoding of a method's arguments (no ids), as a string.
std::string rc_encode(amqp_method_number_t n, void* decoded) {
  std::vector<char> buf(1 << 20);
  const int len = amqp_encode_method(n, decoded, amqp_bytes_t{buf.size(), buf.data()});
  REQUIRE(len >= 0);
  return {buf.data(), static_cast<std::size_t>(len)};
}

// Decodes rabbitmq-c's arguments as the method `n`, checks the ids match our table, and checks
// our re-encoding is the same octets. Returns what we decoded.
template <class M>
M ours_from_theirs(amqp_method_number_t n, void* decoded) {
  CHECK(key_of(n) == M::key);
  const std::string args = rc_encode(n, decoded);
  const std::string payload = [&] {
    std::string p;
    detail::put_u16(p, M::key.class_id);
    detail::put_u16(p, M::key.method_id);
    return p + args;
  }();
  auto got = decode_method(octets(payload));
  REQUIRE_MESSAGE(got.ok(), got.error().text);
  REQUIRE(std::holds_alternative<M>(*got));
  std::string mine;
  encode_method(mine, 1, std::get<M>(*got));
  CHECK(test::str(test::only_frame(mine).payload) == payload);
  return std::get<M>(*got);
}

// A rabbitmq-c table with one entry of each of its kinds that 0-9-1 and RabbitMQ share (its 'L'
// u64, which RabbitMQ reads as a signed long, is in field_table_test), and the table we expect it
// to decode to.
struct rc_table {
  std::vector<amqp_table_entry_t> entries;
  std::vector<amqp_table_entry_t> inner_entries;
  std::vector<amqp_field_value_t> items;
  amqp_table_t table{};
  field_table expected;
};

amqp_field_value_t rc_value(std::uint8_t kind) {
  amqp_field_value_t v;
  std::memset(&v, 0, sizeof v);
  v.kind = kind;
  return v;
}

void build(rc_table& t) {
  auto add = [&](const char* name, amqp_field_value_t v, field_value mine) {
    t.entries.push_back({amqp_cstring_bytes(name), v});
    t.expected.entries.push_back({name, std::move(mine)});
  };
  amqp_field_value_t v = rc_value(AMQP_FIELD_KIND_BOOLEAN);
  v.value.boolean = 1;
  add("t", v, true);
  v = rc_value(AMQP_FIELD_KIND_I8), v.value.i8 = -7, add("b", v, std::int8_t{-7});
  v = rc_value(AMQP_FIELD_KIND_U8), v.value.u8 = 200, add("B", v, std::uint8_t{200});
  v = rc_value(AMQP_FIELD_KIND_I16), v.value.i16 = -300, add("s", v, std::int16_t{-300});
  v = rc_value(AMQP_FIELD_KIND_U16), v.value.u16 = 60000, add("u", v, std::uint16_t{60000});
  v = rc_value(AMQP_FIELD_KIND_I32), v.value.i32 = -70000, add("I", v, std::int32_t{-70000});
  v = rc_value(AMQP_FIELD_KIND_U32), v.value.u32 = 3000000000u, add("i", v, std::uint32_t{3000000000u});
  v = rc_value(AMQP_FIELD_KIND_I64), v.value.i64 = -5000000000ll, add("l", v, std::int64_t{-5000000000ll});
  v = rc_value(AMQP_FIELD_KIND_F32), v.value.f32 = 0.25f, add("f", v, 0.25f);
  v = rc_value(AMQP_FIELD_KIND_F64), v.value.f64 = -1e100, add("d", v, -1e100);
  v = rc_value(AMQP_FIELD_KIND_DECIMAL), v.value.decimal = {3, 123456}, add("D", v, decimal_value{3, 123456});
  v = rc_value(AMQP_FIELD_KIND_UTF8), v.value.bytes = amqp_cstring_bytes("quorum"), add("S", v, std::string("quorum"));
  v = rc_value(AMQP_FIELD_KIND_BYTES), v.value.bytes = amqp_cstring_bytes("\x01\x02"), add("x", v, byte_array{"\x01\x02"});
  v = rc_value(AMQP_FIELD_KIND_TIMESTAMP), v.value.u64 = 1700000000, add("T", v, timestamp_value{1700000000});
  v = rc_value(AMQP_FIELD_KIND_VOID), add("V", v, field_value{});

  amqp_field_value_t inner_flag = rc_value(AMQP_FIELD_KIND_BOOLEAN);
  t.inner_entries.push_back({amqp_cstring_bytes("nested"), inner_flag});
  v = rc_value(AMQP_FIELD_KIND_TABLE);
  v.value.table = {static_cast<int>(t.inner_entries.size()), t.inner_entries.data()};
  field_table inner;
  inner.entries.push_back({"nested", false});
  add("F", v, inner);

  amqp_field_value_t a = rc_value(AMQP_FIELD_KIND_I32);
  a.value.i32 = 1;
  t.items.push_back(a);
  a = rc_value(AMQP_FIELD_KIND_UTF8);
  a.value.bytes = amqp_cstring_bytes("two");
  t.items.push_back(a);
  v = rc_value(AMQP_FIELD_KIND_ARRAY);
  v.value.array = {static_cast<int>(t.items.size()), t.items.data()};
  field_array arr;
  arr.items = {field_value{std::int32_t{1}}, field_value{std::string("two")}};
  add("A", v, arr);

  t.table = {static_cast<int>(t.entries.size()), t.entries.data()};
}

TEST_CASE("golden: methods rabbitmq-c encodes decode to their values and re-encode identically") {
  rc_table args;
  build(args);

  amqp_connection_start_t start{};
  start.version_major = 0;
  start.version_minor = 9;
  start.server_properties = args.table;
  start.mechanisms = amqp_cstring_bytes("PLAIN AMQPLAIN");
  start.locales = amqp_cstring_bytes("en_US");
  const auto s = ours_from_theirs<connection_start>(AMQP_CONNECTION_START_METHOD, &start);
  CHECK(s.version_minor == 9);
  CHECK(s.server_properties == args.expected);
  CHECK(s.mechanisms == "PLAIN AMQPLAIN");

  amqp_connection_tune_ok_t tune{2047, 131072, 60};
  const auto t = ours_from_theirs<connection_tune_ok>(AMQP_CONNECTION_TUNE_OK_METHOD, &tune);
  CHECK(t == connection_tune_ok{2047, 131072, 60});

  amqp_connection_open_t open{amqp_cstring_bytes("/"), amqp_cstring_bytes(""), 1};
  const auto o = ours_from_theirs<connection_open>(AMQP_CONNECTION_OPEN_METHOD, &open);
  CHECK(o.virtual_host == "/");
  CHECK(o.reserved_2);

  amqp_connection_close_t close{320, amqp_cstring_bytes("CONNECTION_FORCED - bye"), 60, 40};
  const auto c = ours_from_theirs<connection_close>(AMQP_CONNECTION_CLOSE_METHOD, &close);
  CHECK(c.reply_code == 320);
  CHECK(c.reply_text == "CONNECTION_FORCED - bye");
  CHECK(c.class_id == basic_publish::key.class_id);
  CHECK(c.method_id == basic_publish::key.method_id);

  amqp_exchange_declare_t ed{};
  ed.exchange = amqp_cstring_bytes("orders");
  ed.type = amqp_cstring_bytes("topic");
  ed.passive = 0;
  ed.durable = 1;
  ed.auto_delete = 0;
  ed.internal = 1;
  ed.nowait = 1;
  ed.arguments = args.table;
  const auto e = ours_from_theirs<exchange_declare>(AMQP_EXCHANGE_DECLARE_METHOD, &ed);
  CHECK(e.exchange == "orders");
  CHECK(e.type == "topic");
  CHECK_FALSE(e.passive);
  CHECK(e.durable);
  CHECK_FALSE(e.auto_delete);
  CHECK(e.internal);
  CHECK(e.no_wait);
  CHECK(e.arguments == args.expected);

  amqp_queue_declare_t qd{};
  qd.queue = amqp_cstring_bytes("q1");
  qd.exclusive = 1;
  qd.auto_delete = 1;
  const auto q = ours_from_theirs<queue_declare>(AMQP_QUEUE_DECLARE_METHOD, &qd);
  CHECK(q.queue == "q1");
  CHECK(q.exclusive);
  CHECK(q.auto_delete);
  CHECK_FALSE(q.durable);
  CHECK(q.arguments.entries.empty());

  amqp_queue_declare_ok_t qok{amqp_cstring_bytes("amq.gen-1"), 12, 3};
  CHECK(ours_from_theirs<queue_declare_ok>(AMQP_QUEUE_DECLARE_OK_METHOD, &qok) ==
        queue_declare_ok{"amq.gen-1", 12, 3});

  amqp_basic_qos_t qos{0, 100, 1};
  CHECK(ours_from_theirs<basic_qos>(AMQP_BASIC_QOS_METHOD, &qos) == basic_qos{0, 100, true});

  amqp_basic_consume_t bc{};
  bc.queue = amqp_cstring_bytes("q1");
  bc.consumer_tag = amqp_cstring_bytes("ctag");
  bc.no_ack = 1;
  bc.exclusive = 1;
  const auto cons = ours_from_theirs<basic_consume>(AMQP_BASIC_CONSUME_METHOD, &bc);
  CHECK(cons.consumer_tag == "ctag");
  CHECK_FALSE(cons.no_local);
  CHECK(cons.no_ack);
  CHECK(cons.exclusive);
  CHECK_FALSE(cons.no_wait);

  amqp_basic_publish_t pub{0, amqp_cstring_bytes("ex"), amqp_cstring_bytes("a.b"), 1, 0};
  CHECK(ours_from_theirs<basic_publish>(AMQP_BASIC_PUBLISH_METHOD, &pub) == basic_publish{0, "ex", "a.b", true, false});

  amqp_basic_deliver_t del{amqp_cstring_bytes("ctag"), 1ull << 40, 1, amqp_cstring_bytes("ex"), amqp_cstring_bytes("k")};
  CHECK(ours_from_theirs<basic_deliver>(AMQP_BASIC_DELIVER_METHOD, &del) ==
        basic_deliver{"ctag", 1ull << 40, true, "ex", "k"});

  amqp_basic_get_ok_t gok{77, 0, amqp_cstring_bytes(""), amqp_cstring_bytes("q1"), 5};
  CHECK(ours_from_theirs<basic_get_ok>(AMQP_BASIC_GET_OK_METHOD, &gok) == basic_get_ok{77, false, "", "q1", 5});

  amqp_basic_nack_t nack{9, 0, 1};
  CHECK(ours_from_theirs<basic_nack>(AMQP_BASIC_NACK_METHOD, &nack) == basic_nack{9, false, true});

  amqp_basic_reject_t rej{10, 1};
  CHECK(ours_from_theirs<basic_reject>(AMQP_BASIC_REJECT_METHOD, &rej) == basic_reject{10, true});

  amqp_confirm_select_t sel{1};
  CHECK(ours_from_theirs<confirm_select>(AMQP_CONFIRM_SELECT_METHOD, &sel) == confirm_select{true});

  amqp_exchange_unbind_ok_t uok{};
  CHECK(ours_from_theirs<exchange_unbind_ok>(AMQP_EXCHANGE_UNBIND_OK_METHOD, &uok) == exchange_unbind_ok{});
}

TEST_CASE("golden: rabbitmq-c decodes and re-encodes every row we encode, octet for octet") {
  amqp_pool_t pool;
  init_amqp_pool(&pool, 65536);
  test::for_each_method_type([&]<class M>() {
    const std::string_view name = info_of(method{M{}}).name;
    CAPTURE(name);
    const auto n = static_cast<amqp_method_number_t>((std::uint32_t{M::key.class_id} << 16) | M::key.method_id);
    if (amqp_method_name(n) == nullptr) {
      // rabbitmq-c 0.11 predates RabbitMQ's connection.update-secret; every other row is its.
      CHECK((M::key == connection_update_secret::key || M::key == connection_update_secret_ok::key));
      return;
    }
    CHECK(static_cast<bool>(amqp_method_has_content(n)) == M::carries_content);
    std::string mine;
    encode_method(mine, 1, test::filled<M>(true));
    std::string args = test::str(test::only_frame(mine).payload).substr(4);
    void* decoded = nullptr;
    REQUIRE(amqp_decode_method(n, &pool, bytes_of(args), &decoded) == AMQP_STATUS_OK);
    CHECK(rc_encode(n, decoded) == args);
    recycle_amqp_pool(&pool);
  });
  empty_amqp_pool(&pool);
}

TEST_CASE("golden: properties rabbitmq-c encodes decode to their values and re-encode identically") {
  rc_table headers;
  build(headers);
  amqp_basic_properties_t p{};
  p._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_CONTENT_ENCODING_FLAG | AMQP_BASIC_HEADERS_FLAG |
             AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_PRIORITY_FLAG | AMQP_BASIC_CORRELATION_ID_FLAG |
             AMQP_BASIC_REPLY_TO_FLAG | AMQP_BASIC_EXPIRATION_FLAG | AMQP_BASIC_MESSAGE_ID_FLAG |
             AMQP_BASIC_TIMESTAMP_FLAG | AMQP_BASIC_TYPE_FLAG | AMQP_BASIC_USER_ID_FLAG | AMQP_BASIC_APP_ID_FLAG |
             AMQP_BASIC_CLUSTER_ID_FLAG;
  p.content_type = amqp_cstring_bytes("application/json");
  p.content_encoding = amqp_cstring_bytes("utf-8");
  p.headers = headers.table;
  p.delivery_mode = 0;  // present with a zero value: must stay present
  p.priority = 0;
  p.correlation_id = amqp_cstring_bytes("c-1");
  p.reply_to = amqp_cstring_bytes("replies");
  p.expiration = amqp_cstring_bytes("1000");
  p.message_id = amqp_cstring_bytes("m-1");
  p.timestamp = 1700000001;
  p.type = amqp_cstring_bytes("kind");
  p.user_id = amqp_cstring_bytes("guest");
  p.app_id = amqp_cstring_bytes("app");
  p.cluster_id = amqp_cstring_bytes("cluster");

  std::vector<char> buf(65536);
  const int len = amqp_encode_properties(AMQP_BASIC_CLASS, &p, amqp_bytes_t{buf.size(), buf.data()});
  REQUIRE(len > 0);
  const std::string theirs(buf.data(), static_cast<std::size_t>(len));

  auto got = decode_properties(octets(theirs));
  REQUIRE_MESSAGE(got.ok(), got.error().text);
  basic_properties expected;
  expected.content_type = "application/json";
  expected.content_encoding = "utf-8";
  expected.headers = headers.expected;
  expected.delivery_mode = 0;
  expected.priority = 0;
  expected.correlation_id = "c-1";
  expected.reply_to = "replies";
  expected.expiration = "1000";
  expected.message_id = "m-1";
  expected.timestamp = 1700000001;
  expected.type = "kind";
  expected.user_id = "guest";
  expected.app_id = "app";
  expected.cluster_id = "cluster";
  CHECK(*got == expected);
  CHECK(encode_properties(expected) == theirs);

  // And a sparse set: only delivery-mode 2 and a message id.
  amqp_basic_properties_t sparse{};
  sparse._flags = AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_MESSAGE_ID_FLAG;
  sparse.delivery_mode = 2;
  sparse.message_id = amqp_cstring_bytes("only");
  const int slen = amqp_encode_properties(AMQP_BASIC_CLASS, &sparse, amqp_bytes_t{buf.size(), buf.data()});
  REQUIRE(slen > 0);
  basic_properties mine;
  mine.delivery_mode = 2;
  mine.message_id = "only";
  CHECK(encode_properties(mine) == std::string(buf.data(), static_cast<std::size_t>(slen)));
}

// A listening socket on an ephemeral loopback port.
struct listener {
  int fd = -1;
  std::uint16_t port = 0;
  listener() {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd, 1) == 0);
    socklen_t l = sizeof a;
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &l) == 0);
    port = ntohs(a.sin_port);
  }
  ~listener() { ::close(fd); }
  listener(const listener&) = delete;
  listener& operator=(const listener&) = delete;
};

std::string read_until_eof(int fd) {
  std::string got;
  char buf[4096];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 5000) != 1) return got;  // bounded: the test then fails on the bytes
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) return got;
    got.append(buf, static_cast<std::size_t>(n));
  }
}

TEST_CASE("golden: what rabbitmq-c writes to a socket for a publish is what we write") {
  listener server;
  amqp_connection_state_t conn = amqp_new_connection();
  // rabbitmq-c accepts amqp_tune_connection only after a handshake; before it, it frames with
  // its initial 64 KiB (INITIAL_FRAME_POOL_PAGE_SIZE), and the body spans three body frames.
  constexpr std::uint32_t frame_max = 65536;
  // The server side reads on its own thread: the body is larger than loopback socket buffers.
  std::string captured;
  std::thread capture([&] {
    const int accepted = ::accept(server.fd, nullptr, nullptr);
    if (accepted < 0) return;
    captured = read_until_eof(accepted);
    ::close(accepted);
  });
  amqp_socket_t* sock = amqp_tcp_socket_new(conn);
  REQUIRE(sock != nullptr);
  REQUIRE(amqp_socket_open(sock, "127.0.0.1", server.port) == AMQP_STATUS_OK);
  REQUIRE(amqp_send_header(conn) == AMQP_STATUS_OK);

  amqp_basic_properties_t props{};
  props._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_PRIORITY_FLAG;
  props.content_type = amqp_cstring_bytes("text/plain");
  props.delivery_mode = 2;
  props.priority = 0;
  std::string body(2 * (frame_max - frame_overhead) + 1000, '\0');
  for (std::size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>(i % 251);
  REQUIRE(amqp_basic_publish(conn, 3, amqp_cstring_bytes("ex"), amqp_cstring_bytes("a.b"), 1, 0, &props,
                             bytes_of(body)) == AMQP_STATUS_OK);

  amqp_destroy_connection(conn);  // closes the client socket: the server side then reads EOF
  capture.join();
  const std::string wire_bytes = captured;

  REQUIRE(wire_bytes.size() > protocol_header.size());
  CHECK(is_protocol_header(octets(wire_bytes).first(8)));

  std::string mine;
  encode_method(mine, 3, basic_publish{0, "ex", "a.b", true, false});
  basic_properties p;
  p.content_type = "text/plain";
  p.delivery_mode = 2;
  p.priority = 0;
  encode_content_header(mine, 3, basic_publish::key.class_id, body.size(), encode_properties(p));
  encode_body(mine, 3, body, frame_max);
  CHECK(wire_bytes.substr(8) == mine);

  // And we read theirs back frame by frame.
  std::size_t at = 8, bodies = 0;
  std::string joined;
  while (at < wire_bytes.size()) {
    const auto f = parse_frame(octets(wire_bytes).subspan(at), frame_max);
    REQUIRE(f.state == parse_result::status::complete);
    if (f.frame.type == frame_type::method) {
      auto m = decode_method(f.frame.payload);
      REQUIRE(m.ok());
      CHECK(std::get<basic_publish>(*m).routing_key == "a.b");
    } else if (f.frame.type == frame_type::header) {
      auto h = decode_content_header(f.frame.payload);
      REQUIRE(h.ok());
      CHECK(h->body_size == body.size());
      auto props_back = decode_properties(h->property_octets);
      REQUIRE(props_back.ok());
      CHECK(*props_back == p);
    } else {
      CHECK(f.frame.type == frame_type::body);
      joined += test::str(f.frame.payload);
      ++bodies;
    }
    at += f.consumed;
  }
  CHECK(bodies == 3);
  CHECK(joined == body);
}

}  // namespace
}  // namespace amqp::wire
