// The same two measurements as amqp_bench, straight on JetStream with nats.c:
//   --mode publish: a file-storage stream on --subject (--replicas, default 1), asynchronous publishes with at most
//                   --window awaiting their ack; timed to the last ack.
//   --mode consume: a durable pull consumer, fetches of --batch, each message acked; timed
//                   from the first fetch to the last ack; the stream is deleted afterwards.
// Prints bench::report's line; any failure is a message on stderr and exit status 1.
#include <nats/nats.h>

#include <atomic>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>

#include "bench/options.hpp"

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

connection connect(const std::string& url) {
  natsConnection* raw = nullptr;
  check(natsConnection_ConnectTo(&raw, url.c_str()), "connect to " + url);
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

void publish(jsCtx* js, const std::string& stream, const std::string& subject, std::uint64_t n, std::size_t size,
             int replicas) {
  add_stream(js, stream, subject, replicas);
  std::string body(size, 'x');
  auto start = bench::clock::now();
  for (std::uint64_t i = 0; i < n; ++i) {
    check(js_PublishAsync(js, subject.c_str(), body.data(), static_cast<int>(body.size()), nullptr), "publish");
  }
  jsPubOptions wait;
  jsPubOptions_Init(&wait);
  wait.MaxWait = 60000;
  check(js_PublishAsyncComplete(js, &wait), "waiting for publish acks");
  auto end = bench::clock::now();
  if (auto errors = publish_errors.load()) throw std::runtime_error(std::to_string(errors) + " publishes failed");
  bench::report(n, start, end);
}

void consume(jsCtx* js, const std::string& stream, const std::string& subject, std::uint64_t n, int batch) {
  jsSubOptions so;
  jsSubOptions_Init(&so);
  so.Stream = stream.c_str();
  natsSubscription* raw = nullptr;
  jsErrCode err = static_cast<jsErrCode>(0);
  check(js_PullSubscribe(&raw, js, subject.c_str(), "bench", nullptr, &so, &err), "pull subscribe");
  subscription sub(raw, natsSubscription_Destroy);
  std::uint64_t received = 0;
  auto start = bench::clock::now();
  while (received < n) {
    natsMsgList list{nullptr, 0};
    check(natsSubscription_Fetch(&list, sub.get(), batch, 30000, &err),
          "fetch after " + std::to_string(received) + " of " + std::to_string(n) + " messages");
    for (int i = 0; i < list.Count; ++i) check(natsMsg_Ack(list.Msgs[i], nullptr), "ack");
    received += static_cast<std::uint64_t>(list.Count);
    natsMsgList_Destroy(&list);
  }
  auto end = bench::clock::now();
  bench::report(received, start, end);
  sub.reset();
  check(js_DeleteStream(js, stream.c_str(), nullptr, &err), "delete stream " + stream);
}

}  // namespace

int main(int argc, char** argv) {
  int status = 1;
  try {
    bench::options o(argc, argv,
                     {{"url", "nats://127.0.0.1:4222"}, {"mode", "publish"}, {"messages", "50000"},
                      {"size", "100"}, {"window", "256"}, {"batch", "100"}, {"stream", "BENCH"},
                      {"subject", "bench.msgs"}, {"replicas", "1"}});
    if (o.number("replicas") < 1 || o.number("replicas") > 5) throw std::invalid_argument("--replicas is 1 to 5");
    if (o.number("batch") > 10000) throw std::invalid_argument("--batch is at most 10000");
    auto nc = connect(o.text("url"));
    auto js = jetstream(nc.get(), o.number("window"));
    if (o.text("mode") == "publish") {
      publish(js.get(), o.text("stream"), o.text("subject"), o.number("messages"), o.number("size"),
              static_cast<int>(o.number("replicas")));
    } else if (o.text("mode") == "consume") {
      consume(js.get(), o.text("stream"), o.text("subject"), o.number("messages"),
              static_cast<int>(o.number("batch")));
    } else {
      throw std::invalid_argument("--mode '" + o.text("mode") + "' is neither publish nor consume");
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
