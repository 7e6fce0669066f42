package interop.amqpclient;

import static interop.Interop.check;
import static interop.Interop.expect;
import static interop.amqpclient.StandardScenarios.bytes;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.ConfirmListener;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.DeliverCallback;
import com.rabbitmq.client.Delivery;
import com.rabbitmq.client.MessageProperties;
import com.rabbitmq.client.Return;
import interop.Interop;
import interop.Interop.Verdict;
import interop.Rabbit;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentNavigableMap;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/** This client's own features beyond the standard scenarios, each as its API guide shows it. */
final class ExtraScenarios {
    private final Rabbit rabbit;

    ExtraScenarios(Rabbit rabbit) {
        this.rabbit = rabbit;
    }

    /** Publisher confirms both ways of the guide: a batch with waitForConfirmsOrDie, then asynchronously. */
    Verdict confirmsListener() throws Exception {
        String queue = rabbit.name("confirms-q");
        int batch = 10, streamed = 50;
        try (Connection connection = rabbit.connect("confirms_listener"); Channel channel = connection.createChannel()) {
            channel.queueDeclare(queue, false, false, false, null);
            channel.confirmSelect();
            for (int i = 0; i < batch; i++) {
                channel.basicPublish("", queue, null, bytes("batch-" + i));
            }
            channel.waitForConfirmsOrDie(Interop.WAIT.toMillis());

            ConcurrentNavigableMap<Long, String> outstanding = new ConcurrentSkipListMap<>();
            CountDownLatch acked = new CountDownLatch(streamed);
            AtomicInteger nacked = new AtomicInteger();
            channel.addConfirmListener(new ConfirmListener() {
                @Override
                public void handleAck(long seqNo, boolean multiple) {
                    settle(seqNo, multiple).forEach(x -> acked.countDown());
                }

                @Override
                public void handleNack(long seqNo, boolean multiple) {
                    nacked.addAndGet(settle(seqNo, multiple).size());
                }

                private List<String> settle(long seqNo, boolean multiple) {
                    Map<Long, String> settled = multiple ? outstanding.headMap(seqNo, true) : outstanding.subMap(seqNo, true, seqNo, true);
                    List<String> bodies = List.copyOf(settled.values());
                    settled.clear();
                    return bodies;
                }
            });
            for (int i = 0; i < streamed; i++) {
                outstanding.put(channel.getNextPublishSeqNo(), "streamed-" + i);
                channel.basicPublish("", queue, null, bytes("streamed-" + i));
            }
            check(acked.await(Interop.WAIT.toMillis(), TimeUnit.MILLISECONDS),
                  acked.getCount() + " of " + streamed + " publishes were not acked; outstanding " + outstanding.keySet());
            expect(0, nacked.get(), "nacked publishes");
            check(outstanding.isEmpty(), "still outstanding: " + outstanding.keySet());
            expect(batch + streamed, channel.queueDeclarePassive(queue).getMessageCount(), "messages in the queue");
            channel.queueDelete(queue);
        }
        return Verdict.pass();
    }

    /** A ReturnListener gets an unroutable mandatory message back with its body and properties. */
    Verdict returns() throws Exception {
        String missing = rabbit.name("no-such-queue");
        AMQP.BasicProperties sent = new AMQP.BasicProperties.Builder()
            .contentType("application/json").correlationId("corr-7").messageId("msg-7")
            .headers(Map.of("attempt", 1)).build();
        try (Connection connection = rabbit.connect("returns"); Channel channel = connection.createChannel()) {
            CompletableFuture<Return> returned = new CompletableFuture<>();
            channel.addReturnListener(returned::complete);
            // The default exchange routes by queue name; no queue has this one.
            channel.basicPublish("", missing, true, sent, bytes("{\"n\":7}"));
            Return r = returned.get(Interop.WAIT.toMillis(), TimeUnit.MILLISECONDS);
            expect(312, r.getReplyCode(), "reply-code");
            expect("NO_ROUTE", r.getReplyText(), "reply-text");
            expect("", r.getExchange(), "returned exchange");
            expect(missing, r.getRoutingKey(), "returned routing key");
            expect("{\"n\":7}", new String(r.getBody(), StandardCharsets.UTF_8), "returned body");
            expect("application/json", r.getProperties().getContentType(), "returned content-type");
            expect("corr-7", r.getProperties().getCorrelationId(), "returned correlation-id");
            expect("msg-7", r.getProperties().getMessageId(), "returned message-id");
            expect(Map.of("attempt", 1), r.getProperties().getHeaders(), "returned headers");
        }
        return Verdict.pass();
    }

    /** basicQos(P): the server delivers P and no more until one is acked, then exactly one more. */
    Verdict qos() throws Exception {
        String queue = rabbit.name("qos-q");
        int prefetch = 2, count = 5;
        try (Connection connection = rabbit.connect("qos"); Channel channel = connection.createChannel()) {
            channel.queueDeclare(queue, false, false, false, null);
            channel.confirmSelect();
            for (int i = 0; i < count; i++) {
                channel.basicPublish("", queue, null, bytes("q" + i));
            }
            channel.waitForConfirmsOrDie(Interop.WAIT.toMillis());
            channel.basicQos(prefetch);
            Deliveries deliveries = new Deliveries(channel);
            channel.basicConsume(queue, false, deliveries);
            Delivery first = deliveries.next("q0");
            deliveries.next("q1");
            // A negative can only be observed over a window: with both held, nothing more may come.
            Delivery extra = deliveries.within(Duration.ofMillis(500));
            check(extra == null, "a third message (" + (extra == null ? "" : Deliveries.text(extra)) + ") arrived while " + prefetch + " were unacked");
            deliveries.ack(first);
            expect("q2", Deliveries.text(deliveries.next("q2 after acking q0")), "the message after the first ack");
            check(deliveries.within(Duration.ofMillis(500)) == null, "more than one message arrived after one ack");
            expect(prefetch, deliveries.mostUnacked(), "most held unacked");
            channel.queueDelete(queue);
        }
        return Verdict.pass();
    }

    /** A rejected message goes to the queue's dead-letter exchange with an x-death header. */
    Verdict deadLetter() throws Exception {
        String dlx = rabbit.name("dlx"), dlq = rabbit.name("dlq"), work = rabbit.name("dl-work");
        try (Connection connection = rabbit.connect("dead_letter"); Channel channel = connection.createChannel()) {
            channel.exchangeDeclare(dlx, "fanout", true);
            channel.queueDeclare(dlq, true, false, false, null);
            channel.queueBind(dlq, dlx, "");
            channel.queueDeclare(work, true, false, false, Map.of("x-dead-letter-exchange", dlx));
            channel.basicPublish("", work, MessageProperties.PERSISTENT_TEXT_PLAIN, bytes("poison"));
            Deliveries worker = new Deliveries(channel);
            channel.basicConsume(work, false, worker);
            worker.reject(worker.next("the message to reject"), false);

            Deliveries dead = new Deliveries(channel);
            channel.basicConsume(dlq, false, dead);
            Delivery d = dead.next("the dead-lettered copy in " + dlq);
            expect("poison", Deliveries.text(d), "dead-lettered body");
            Map<String, Object> headers = d.getProperties().getHeaders();
            check(headers != null && headers.get("x-death") instanceof List, "no x-death list in the headers: " + headers);
            List<?> deaths = (List<?>) headers.get("x-death");
            expect(1, deaths.size(), "x-death entries");
            Map<?, ?> death = (Map<?, ?>) deaths.get(0);
            expect(1L, death.get("count"), "x-death count");
            expect("rejected", String.valueOf(death.get("reason")), "x-death reason");
            expect(work, String.valueOf(death.get("queue")), "x-death queue");
            expect("", String.valueOf(death.get("exchange")), "x-death exchange");
            dead.ack(d);
            channel.queueDelete(work);
            channel.queueDelete(dlq);
            channel.exchangeDelete(dlx);
        }
        return Verdict.pass();
    }

    /** RPC over direct reply-to: the reply comes back on amq.rabbitmq.reply-to without a reply queue. */
    Verdict directReplyTo() throws Exception {
        String requests = rabbit.name("rpc-requests");
        try (Connection server = rabbit.connect("rpc-server"); Channel serving = server.createChannel();
             Connection client = rabbit.connect("rpc-client"); Channel calling = client.createChannel()) {
            serving.queueDeclare(requests, false, false, false, null);
            DeliverCallback answer = (tag, request) -> {
                AMQP.BasicProperties reply = new AMQP.BasicProperties.Builder()
                    .correlationId(request.getProperties().getCorrelationId()).build();
                String question = new String(request.getBody(), StandardCharsets.UTF_8);
                serving.basicPublish("", request.getProperties().getReplyTo(), reply, bytes("answer to " + question));
                serving.basicAck(request.getEnvelope().getDeliveryTag(), false);
            };
            serving.basicConsume(requests, false, answer, tag -> { });

            CompletableFuture<Delivery> response = new CompletableFuture<>();
            calling.basicConsume("amq.rabbitmq.reply-to", true, (tag, d) -> response.complete(d), tag -> { });
            String correlationId = UUID.randomUUID().toString();
            AMQP.BasicProperties call = new AMQP.BasicProperties.Builder()
                .correlationId(correlationId).replyTo("amq.rabbitmq.reply-to").build();
            calling.basicPublish("", requests, call, bytes("ping"));
            Delivery d = response.get(Interop.WAIT.toMillis(), TimeUnit.MILLISECONDS);
            expect("answer to ping", new String(d.getBody(), StandardCharsets.UTF_8), "reply body");
            expect(correlationId, d.getProperties().getCorrelationId(), "reply correlation-id");
            serving.queueDelete(requests);
        }
        return Verdict.pass();
    }
}
