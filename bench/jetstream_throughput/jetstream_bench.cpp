// The same two measurements as amqp_bench, straight on JetStream with nats.c:
//   --mode publish: a file-storage stream on --subject (--replicas, default 1), asynchronous publishes with at most
//                   --window awaiting their ack; timed to the last ack. --connections N: N
//                   publishers, a connection and thread each, share the messages.
//   --mode consume: a durable pull consumer, fetches of --batch, each message acked; timed
//                   from the first fetch to the last ack; the stream is deleted afterwards.
//                   --queues Q: Q such consumers (a connection and thread each), every one
//                   reading all the messages (the work an AMQP fanout to Q queues asks for).
//                   --spread Q (both modes): messages to `<subject>.0` … `<subject>.<Q-1>` in
//                   turn, and Q consumers filtered on one each (Q AMQP queues with a consumer each).
//   --mode latency: --rate messages a second for --seconds, each carrying its send time,
//                   published asynchronously on one connection and read on another by a plain
//                   pull consumer (requests of --batch kept outstanding, each message acked):
//                   publish→deliver and publish→ack per message. Both connections send at once
//                   (nats.c's SendAsap): JetStream's best at these rates, the floor.
// Prints bench::report's line (latency: bench::report_latency's); any failure is a message on
// stderr and exit status 1.
#include <algorithm>
#include <nats/nats.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <exception>
#include <thread>
#include <vector>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>

#include "bench/options.hpp"
#include "bench/parallel.hpp"

namespace {

using connection = std::unique_ptr<natsConnection, void (*)(natsConnection*)>;
using context = std::unique_ptr<jsCtx, void (*)(jsCtx*)>;
using subscription = std::unique_ptr<natsSubscription, void (*)(natsSubscription*)>;

void check(natsStatus s, const std::string& what) {
  if (s != NATS_OK) throw std::runtime_error(what + ": " + natsStatus_GetText(s) + " " + nats_GetLastError(nullptr));
}

std::atomic<std::uint64_t> publish_errors{0};

// Runs on a nats.c thread: only counts, the main thread reports.
void on_publish_error(jsCtx*, jsPubAckErr*, void*) { publish_errors.fetch_add(1); }

// Drain before destroying: nats.c 3.4.1 frees the last publish ack after it has already
// woken js_PublishAsyncComplete, so a plain close can race that free and leak it.
void close_drained(natsConnection* nc) {
  if (natsConnection_DrainTimeout(nc, 5000) == NATS_OK) {
    for (int i = 0; i < 500 && !natsConnection_IsClosed(nc); ++i) nats_Sleep(10);
  }
  natsConnection_Destroy(nc);
}

connection connect(const std::string& url, bool send_asap = false) {
  natsOptions* opts = nullptr;
  check(natsOptions_Create(&opts), "options");
  std::unique_ptr<natsOptions, void (*)(natsOptions*)> owned(opts, natsOptions_Destroy);
  check(natsOptions_SetURL(opts, url.c_str()), "url " + url);
  check(natsOptions_SetSendAsap(opts, send_asap), "send asap");
  natsConnection* raw = nullptr;
  check(natsConnection_Connect(&raw, opts), "connect to " + url);
  return connection(raw, close_drained);
}

context jetstream(natsConnection* nc, std::uint64_t window) {
  jsOptions o;
  jsOptions_Init(&o);
  o.PublishAsync.MaxPending = static_cast<int64_t>(window);
  o.PublishAsync.ErrHandler = on_publish_error;
  jsCtx* raw = nullptr;
  check(natsConnection_JetStream(&raw, nc, &o), "JetStream context");
  return context(raw, jsCtx_Destroy);
}

void add_stream(jsCtx* js, const std::string& stream, const std::string& subject, int replicas) {
  jsStreamConfig cfg;
  jsStreamConfig_Init(&cfg);
  const char* subjects[] = {subject.c_str()};
  cfg.Name = stream.c_str();
  cfg.Subjects = subjects;
  cfg.SubjectsLen = 1;
  cfg.Storage = js_FileStorage;
  cfg.Replicas = replicas;
  jsErrCode err = static_cast<jsErrCode>(0);
  check(js_AddStream(nullptr, js, &cfg, nullptr, &err), "add stream " + stream + " (" + std::to_string(err) + ")");
}

// The subject of the i-th message: `subject`, or with --spread Q, `subject.<i mod Q>`.
std::string subject_of(const std::string& subject, std::uint64_t spread, std::uint64_t i) {
  return spread > 1 ? subject + "." + std::to_string(i % spread) : subject;
}

void publish(const std::string& url, const std::string& stream, const std::string& subject, std::uint64_t n,
             std::size_t size, std::uint64_t window, int replicas, std::uint64_t connections, std::uint64_t spread) {
  std::vector<connection> ncs;
  std::vector<context> jss;
  for (std::uint64_t i = 0; i < connections; ++i) {
    ncs.push_back(connect(url));
    jss.push_back(jetstream(ncs.back().get(), window));
  }
  add_stream(jss.front().get(), stream, spread > 1 ? subject + ".>" : subject, replicas);
  std::string body(size, 'x');
  auto start = bench::clock::now();
  bench::in_parallel(connections, [&](std::size_t c) {
    const std::uint64_t share = n / connections + (c == 0 ? n % connections : 0);
    for (std::uint64_t i = 0; i < share; ++i) {
      check(js_PublishAsync(jss[c].get(), subject_of(subject, spread, i).c_str(), body.data(),
                            static_cast<int>(body.size()), nullptr),
            "publish");
    }
    jsPubOptions wait;
    jsPubOptions_Init(&wait);
    wait.MaxWait = 60000;
    check(js_PublishAsyncComplete(jss[c].get(), &wait), "waiting for publish acks");
  });
  auto end = bench::clock::now();
  if (auto errors = publish_errors.load()) throw std::runtime_error(std::to_string(errors) + " publishes failed");
  bench::report(n, start, end);
}

void consume_some(jsCtx* js, const std::string& stream, const std::string& subject, const std::string& durable,
                  std::uint64_t n, int batch) {
  jsSubOptions so;
  jsSubOptions_Init(&so);
  so.Stream = stream.c_str();
  natsSubscription* raw = nullptr;
  jsErrCode err = static_cast<jsErrCode>(0);
  check(js_PullSubscribe(&raw, js, subject.c_str(), durable.c_str(), nullptr, &so, &err), "pull subscribe");
  subscription sub(raw, natsSubscription_Destroy);
  // The first fetch is of one message, whose size bounds the later fetches as the adaptor's
  // window is bounded (16 MiB): the server closes a connection with more than its max_pending
  // (64 MiB) unsent, as 100 messages of 1 MiB would be. (nats.c 3.4's MaxBytes fetch fails on
  // the server's "409 Batch Completed".)
  int fetch = 1;
  std::uint64_t received = 0;
  while (received < n) {
    natsMsgList list{nullptr, 0};
    check(natsSubscription_Fetch(&list, sub.get(), fetch, 30000, &err),
          "fetch after " + std::to_string(received) + " of " + std::to_string(n) + " messages");
    int largest = 1;
    for (int i = 0; i < list.Count; ++i) {
      largest = std::max(largest, natsMsg_GetDataLength(list.Msgs[i]));
      check(natsMsg_Ack(list.Msgs[i], nullptr), "ack");
    }
    fetch = std::clamp((16 << 20) / largest, 1, batch);
    received += static_cast<std::uint64_t>(list.Count);
    natsMsgList_Destroy(&list);
  }
}

// --queues durable pull consumers (a connection and thread each) read every message of the
// stream; timed from the first fetch to the last ack of all; the stream goes afterwards.
// With --spread Q instead, Q consumers each filtered on one of the Q subjects, reading its share.
void consume(const std::string& url, const std::string& stream, const std::string& subject, std::uint64_t n, int batch,
             std::uint64_t queues, std::uint64_t spread) {
  const std::uint64_t readers = spread > 1 ? spread : queues;
  std::vector<connection> ncs;
  std::vector<context> jss;
  for (std::uint64_t i = 0; i < readers; ++i) {
    ncs.push_back(connect(url));
    jss.push_back(jetstream(ncs.back().get(), 256));
  }
  auto start = bench::clock::now();
  bench::in_parallel(readers, [&](std::size_t q) {
    if (spread > 1) {
      consume_some(jss[q].get(), stream, subject_of(subject, spread, q), "bench" + std::to_string(q),
                   n / spread + (q < n % spread ? 1 : 0), batch);
    } else {
      consume_some(jss[q].get(), stream, subject, "bench" + std::to_string(q), n, batch);
    }
  });
  auto end = bench::clock::now();
  bench::report(spread > 1 ? n : n * queues, start, end);
  jsErrCode err = static_cast<jsErrCode>(0);
  check(js_DeleteStream(jss.front().get(), stream.c_str(), nullptr, &err), "delete stream " + stream);
}

// ---- latency mode ------------------------------------------------------------------------

std::int64_t now_ns() { return bench::clock::now().time_since_epoch().count(); }

std::int64_t stamp_of(natsMsg* m) {
  std::int64_t ns = 0;
  if (natsMsg_GetDataLength(m) >= static_cast<int>(sizeof ns)) std::memcpy(&ns, natsMsg_GetData(m), sizeof ns);
  return ns;
}

// Filled on nats.c's threads, read by main once every message is in.
struct timings {
  std::mutex mutex;
  std::vector<double> delivered, confirmed;
  std::atomic<std::uint64_t> received{0}, acked{0};
  std::atomic<std::uint32_t> asked{0};
};

void on_ack(jsCtx*, natsMsg* m, jsPubAck*, jsPubAckErr* err, void* closure) {
  auto* t = static_cast<timings*>(closure);
  const double us = static_cast<double>(now_ns() - stamp_of(m)) / 1000.0;
  if (err == nullptr) {
    std::lock_guard lock(t->mutex);
    t->confirmed.push_back(us);
  } else {
    publish_errors.fetch_add(1);
  }
  t->acked.fetch_add(1);
  natsMsg_Destroy(m);
}

struct puller {
  natsConnection* nc;
  std::string next_subject, inbox;
  std::uint32_t batch;
  timings* t;
  void ask() {
    const std::string body = "{\"batch\":" + std::to_string(batch) + ",\"expires\":5000000000}";
    t->asked.fetch_add(batch);
    natsConnection_PublishRequest(nc, next_subject.c_str(), inbox.c_str(), body.data(), static_cast<int>(body.size()));
  }
};

// A plain pull consumer: messages and the end of each request arrive on one inbox; a new
// request goes out whenever half of what was asked for has come (or a request ended).
void on_pulled(natsConnection*, natsSubscription*, natsMsg* m, void* closure) {
  auto* p = static_cast<puller*>(closure);
  const char* reply = natsMsg_GetReply(m);
  if (reply != nullptr && std::strncmp(reply, "$JS.ACK.", 8) == 0) {
    const double us = static_cast<double>(now_ns() - stamp_of(m)) / 1000.0;
    {
      std::lock_guard lock(p->t->mutex);
      p->t->delivered.push_back(us);
    }
    natsConnection_PublishString(p->nc, reply, "+ACK");
    p->t->received.fetch_add(1);
    if (p->t->asked.fetch_sub(1) - 1 <= p->batch / 2) p->ask();
  } else {
    // A status: the request ended (408 expired, …); what it did not bring is asked again.
    const char* pending = nullptr;
    std::uint32_t unfilled = 0;
    if (natsMsgHeader_Get(m, "Nats-Pending-Messages", &pending) == NATS_OK && pending != nullptr)
      unfilled = static_cast<std::uint32_t>(std::strtoul(pending, nullptr, 10));
    p->t->asked.fetch_sub(std::min(unfilled, p->t->asked.load()));
    if (p->t->asked.load() <= p->batch / 2) p->ask();
  }
  natsMsg_Destroy(m);
}

void latency(const std::string& url, const std::string& stream, const std::string& subject, std::uint64_t rate,
             std::uint64_t seconds, std::size_t size, std::uint32_t batch) {
  timings t;
  auto pub = connect(url, true);
  auto sub = connect(url, true);
  jsOptions jo;
  jsOptions_Init(&jo);
  jo.PublishAsync.MaxPending = 100000;
  jo.PublishAsync.AckHandler = on_ack;
  jo.PublishAsync.AckHandlerClosure = &t;
  jsCtx* raw_js = nullptr;
  check(natsConnection_JetStream(&raw_js, pub.get(), &jo), "JetStream context");
  context js(raw_js, jsCtx_Destroy);
  add_stream(js.get(), stream, subject, 1);
  jsErrCode err = static_cast<jsErrCode>(0);
  jsConsumerConfig cc;
  jsConsumerConfig_Init(&cc);
  cc.Durable = "latency";
  cc.AckPolicy = js_AckExplicit;
  cc.FilterSubject = subject.c_str();
  jsConsumerInfo* ci = nullptr;
  check(js_AddConsumer(&ci, js.get(), stream.c_str(), &cc, nullptr, &err), "add consumer");
  jsConsumerInfo_Destroy(ci);
  puller p{sub.get(), "$JS.API.CONSUMER.MSG.NEXT." + stream + ".latency", "_INBOX.latency", batch, &t};
  natsSubscription* raw_sub = nullptr;
  check(natsConnection_Subscribe(&raw_sub, sub.get(), p.inbox.c_str(), on_pulled, &p), "subscribe");
  subscription inbox(raw_sub, natsSubscription_Destroy);
  natsSubscription_SetPendingLimits(raw_sub, -1, -1);
  p.ask();
  const std::uint64_t n = rate * seconds;
  const auto start = bench::clock::now();
  const auto interval = std::chrono::nanoseconds(1'000'000'000 / rate);
  std::string body(std::max<std::size_t>(size, 8), 'x');
  for (std::uint64_t i = 0; i < n; ++i) {
    std::this_thread::sleep_until(start + interval * i);
    const std::int64_t ns = now_ns();
    std::memcpy(body.data(), &ns, sizeof ns);
    check(js_PublishAsync(js.get(), subject.c_str(), body.data(), static_cast<int>(body.size()), nullptr), "publish");
  }
  const auto deadline = bench::clock::now() + std::chrono::seconds(30);
  while ((t.received.load() < n || t.acked.load() < n) && bench::clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (t.received.load() < n || t.acked.load() < n)
    throw std::runtime_error("after 30 s: " + std::to_string(t.received.load()) + " delivered and " +
                             std::to_string(t.acked.load()) + " acked of " + std::to_string(n));
  if (auto errors = publish_errors.load()) throw std::runtime_error(std::to_string(errors) + " publishes failed");
  inbox.reset();
  std::lock_guard lock(t.mutex);
  bench::report_latency(n, t.delivered, t.confirmed);
  check(js_DeleteStream(js.get(), stream.c_str(), nullptr, &err), "delete stream " + stream);
}

}  // namespace

int main(int argc, char** argv) {
  int status = 1;
  try {
    bench::options o(argc, argv,
                     {{"url", "nats://127.0.0.1:4222"}, {"mode", "publish"}, {"messages", "50000"},
                      {"size", "100"}, {"window", "256"}, {"batch", "100"}, {"stream", "BENCH"},
                      {"subject", "bench.msgs"}, {"replicas", "1"}, {"rate", "1000"}, {"seconds", "8"},
                      {"connections", "1"}, {"queues", "1"}, {"spread", "1"}});
    if (o.number("connections") > 256) throw std::invalid_argument("--connections is at most 256");
    if (o.number("queues") > 256 || o.number("spread") > 256)
      throw std::invalid_argument("--queues and --spread are at most 256");
    if (o.number("spread") > 1 && (o.number("queues") > 1 || o.number("connections") > 1))
      throw std::invalid_argument("--spread (subjects in turn, from one publisher) takes neither --queues nor --connections");
    if (o.number("replicas") < 1 || o.number("replicas") > 5) throw std::invalid_argument("--replicas is 1 to 5");
    if (o.number("batch") > 10000) throw std::invalid_argument("--batch is at most 10000");
    if (o.number("rate") > 1'000'000) throw std::invalid_argument("--rate is at most 1000000");
    if (o.text("mode") == "latency") {
      latency(o.text("url"), o.text("stream"), o.text("subject"), o.number("rate"), o.number("seconds"),
              o.number("size"), static_cast<std::uint32_t>(o.number("batch")));
    } else if (o.text("mode") == "publish") {
      publish(o.text("url"), o.text("stream"), o.text("subject"), o.number("messages"), o.number("size"),
              o.number("window"), static_cast<int>(o.number("replicas")), o.number("connections"),
              o.number("spread"));
    } else if (o.text("mode") == "consume") {
      consume(o.text("url"), o.text("stream"), o.text("subject"), o.number("messages"),
              static_cast<int>(o.number("batch")), o.number("queues"), o.number("spread"));
    } else {
      throw std::invalid_argument("--mode '" + o.text("mode") + "' is none of publish, consume, latency");
    }
    status = 0;
  } catch (const std::exception& e) {
    std::cerr << "jetstream_bench: " << e.what() << '\n';
  }
  // Waits for nats.c's own threads: a plain nats_Close can leave a publish ack that is
  // still being handled unreleased.
  if (nats_CloseAndWait(5000) != NATS_OK) std::cerr << "jetstream_bench: nats.c did not shut down within 5 s\n";
  return status;
}
