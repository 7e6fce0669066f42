package interop.amqpclient;

import static interop.Interop.check;
import static interop.Interop.expect;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.Delivery;
import com.rabbitmq.client.GetResponse;
import com.rabbitmq.client.MessageProperties;
import com.rabbitmq.client.Return;
import interop.Interop;
import interop.Interop.Verdict;
import interop.Rabbit;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/** The six standard scenarios before reconnect (tests/interop/README.md), in the API guide's idiom. */
final class StandardScenarios {
    private final Rabbit rabbit;

    StandardScenarios(Rabbit rabbit) {
        this.rabbit = rabbit;
    }

    Verdict declare() throws Exception {
        String exchange = rabbit.name("declare-ex"), queue = rabbit.name("declare-q");
        try (Connection connection = rabbit.connect("declare"); Channel channel = connection.createChannel()) {
            channel.exchangeDeclare(exchange, "topic", true);
            channel.queueDeclare(queue, true, false, false, null);
            channel.queueBind(queue, exchange, "orders.*");
            channel.exchangeDeclarePassive(exchange);
            expect(queue, channel.queueDeclarePassive(queue).getQueue(), "passive queue.declare-ok's queue");
            Deliveries deliveries = new Deliveries(channel);
            channel.basicConsume(queue, false, deliveries);
            channel.basicPublish(exchange, "orders.created", null, bytes("declared"));
            Delivery d = deliveries.next("the message published through the binding");
            expect("declared", Deliveries.text(d), "body");
            expect("orders.created", d.getEnvelope().getRoutingKey(), "routing key");
            deliveries.ack(d);
            channel.queueDelete(queue);
            channel.exchangeDelete(exchange);
        }
        return Verdict.pass();
    }

    Verdict publishConfirm() throws Exception {
        String queue = rabbit.name("confirm-q");
        int count = 12;
        try (Connection connection = rabbit.connect("publish_confirm"); Channel channel = connection.createChannel()) {
            channel.queueDeclare(queue, true, false, false, null);
            channel.confirmSelect();
            for (int i = 0; i < count; i++) {
                channel.basicPublish("", queue, properties(i), bytes("confirmed-" + i));
                // The guide's "publishing messages individually": each publish waits for its ack.
                channel.waitForConfirmsOrDie(Interop.WAIT.toMillis());
            }
            Deliveries deliveries = new Deliveries(channel);
            channel.basicConsume(queue, false, deliveries);
            for (int i = 0; i < count; i++) {
                Delivery d = deliveries.next("confirmed message " + i);
                expect("confirmed-" + i, Deliveries.text(d), "body");
                expect("text/plain", d.getProperties().getContentType(), "content-type of " + i);
                expect(2, d.getProperties().getDeliveryMode(), "delivery-mode of " + i);
                expect("seq-" + i, d.getProperties().getMessageId(), "message-id of " + i);
                Map<String, Object> headers = d.getProperties().getHeaders();
                check(headers != null, "message " + i + " lost its headers");
                expect(i, headers.get("seq"), "header seq of " + i);
                expect(rabbit.interop.client, String.valueOf(headers.get("sender")), "header sender of " + i);
                deliveries.ack(d);
            }
            channel.queueDelete(queue);
        }
        return Verdict.pass();
    }

    Verdict consumePrefetchAck() throws Exception {
        String queue = rabbit.name("prefetch-q");
        int prefetch = 3, count = 10;
        try (Connection connection = rabbit.connect("consume_prefetch_ack"); Channel channel = connection.createChannel()) {
            channel.queueDeclare(queue, false, false, false, null);
            channel.confirmSelect();
            for (int i = 0; i < count; i++) {
                channel.basicPublish("", queue, null, bytes("m" + i));
            }
            channel.waitForConfirmsOrDie(Interop.WAIT.toMillis());
            channel.basicQos(prefetch);
            Deliveries deliveries = new Deliveries(channel);
            channel.basicConsume(queue, false, deliveries);
            // Holds each batch of `prefetch` unacked before acking it: a server that ignored
            // the bound would have delivered more by then, and mostUnacked would show it.
            List<Delivery> held = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                Delivery d = deliveries.next("message m" + i);
                expect("m" + i, Deliveries.text(d), "message " + i + " (in order)");
                check(!d.getEnvelope().isRedeliver(), "m" + i + " arrived redelivered");
                held.add(d);
                if (held.size() == prefetch || i == count - 1) {
                    for (Delivery h : held) {
                        deliveries.ack(h);
                    }
                    held.clear();
                }
            }
            check(deliveries.mostUnacked() <= prefetch,
                  "held " + deliveries.mostUnacked() + " unacked at once with prefetch " + prefetch);
            check(deliveries.within(Duration.ofMillis(200)) == null, "a message arrived twice");
            expect(0, channel.queueDeclarePassive(queue).getMessageCount(), "messages left in the queue");
            channel.queueDelete(queue);
        }
        return Verdict.pass();
    }

    Verdict nackRequeue() throws Exception {
        String queue = rabbit.name("nack-q");
        try (Connection connection = rabbit.connect("nack_requeue"); Channel channel = connection.createChannel()) {
            channel.queueDeclare(queue, false, false, false, null);
            channel.basicPublish("", queue, null, bytes("again"));
            Deliveries deliveries = new Deliveries(channel);
            channel.basicConsume(queue, false, deliveries);
            Delivery first = deliveries.next("the message");
            check(!first.getEnvelope().isRedeliver(), "first delivery already marked redelivered");
            deliveries.nack(first, true);
            Delivery again = deliveries.next("the requeued message");
            expect("again", Deliveries.text(again), "body of the redelivery");
            check(again.getEnvelope().isRedeliver(), "the redelivery has redelivered=false");
            deliveries.ack(again);
            channel.queueDelete(queue);
        }
        return Verdict.pass();
    }

    Verdict mandatoryReturn() throws Exception {
        String exchange = rabbit.name("unrouted-ex");
        try (Connection connection = rabbit.connect("mandatory_return"); Channel channel = connection.createChannel()) {
            channel.exchangeDeclare(exchange, "direct", false);
            CompletableFuture<Return> returned = new CompletableFuture<>();
            channel.addReturnListener(returned::complete);
            channel.confirmSelect();
            channel.basicPublish(exchange, "nobody", true, null, bytes("bounce"));
            Return r = returned.get(Interop.WAIT.toMillis(), TimeUnit.MILLISECONDS);
            expect(312, r.getReplyCode(), "basic.return reply-code");
            expect("NO_ROUTE", r.getReplyText(), "basic.return reply-text");
            expect("bounce", new String(r.getBody(), StandardCharsets.UTF_8), "returned body");
            channel.waitForConfirmsOrDie(Interop.WAIT.toMillis()); // a returned message is still acked
            channel.exchangeDelete(exchange);
        }
        return Verdict.pass();
    }

    Verdict basicGet() throws Exception {
        String queue = rabbit.name("get-q");
        try (Connection connection = rabbit.connect("basic_get"); Channel channel = connection.createChannel()) {
            channel.queueDeclare(queue, false, false, false, null);
            check(channel.basicGet(queue, true) == null, "get on an empty queue returned a message");
            channel.confirmSelect();
            channel.basicPublish("", queue, null, bytes("first"));
            channel.basicPublish("", queue, null, bytes("second"));
            channel.waitForConfirmsOrDie(Interop.WAIT.toMillis());
            GetResponse first = channel.basicGet(queue, false);
            check(first != null, "get after publishing 2 was empty");
            expect("first", new String(first.getBody(), StandardCharsets.UTF_8), "first get's body");
            expect(1, first.getMessageCount(), "first get's message-count");
            channel.basicAck(first.getEnvelope().getDeliveryTag(), false);
            GetResponse second = channel.basicGet(queue, false);
            check(second != null, "second get was empty");
            expect("second", new String(second.getBody(), StandardCharsets.UTF_8), "second get's body");
            expect(0, second.getMessageCount(), "second get's message-count");
            channel.basicAck(second.getEnvelope().getDeliveryTag(), false);
            check(channel.basicGet(queue, true) == null, "the queue is not empty after both were acked");
            channel.queueDelete(queue);
        }
        return Verdict.pass();
    }

    private AMQP.BasicProperties properties(int seq) {
        return MessageProperties.PERSISTENT_TEXT_PLAIN.builder()
            .messageId("seq-" + seq)
            .headers(Map.of("seq", seq, "sender", rabbit.interop.client))
            .build();
    }

    static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }
}
