package interop.spring;

import static interop.Interop.check;
import static interop.Interop.expect;
import static interop.spring.Listening.text;

import com.rabbitmq.client.Channel;
import com.rabbitmq.client.GetResponse;
import interop.Interop;
import interop.Interop.Verdict;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.springframework.amqp.core.Message;
import org.springframework.amqp.core.MessageBuilder;
import org.springframework.amqp.core.MessageDeliveryMode;
import org.springframework.amqp.core.MessageProperties;
import org.springframework.amqp.core.ReturnedMessage;
import org.springframework.amqp.rabbit.connection.CorrelationData;
import org.springframework.amqp.rabbit.core.RabbitAdmin;
import org.springframework.amqp.rabbit.listener.api.ChannelAwareMessageListener;

/**
 * The six standard scenarios before reconnect (tests/interop/README.md) as a Spring application
 * does them: the topology comes from RabbitConfig's Declarables, publishing from the
 * RabbitTemplate, consuming from listener containers or the template's receive.
 */
final class StandardScenarios {
    private final Spring spring;

    StandardScenarios(Spring spring) {
        this.spring = spring;
    }

    Verdict declare() throws Exception {
        String exchange = spring.names.declareExchange(), queue = spring.names.declareQueue();
        // RabbitAdmin declared them with the first connection; these are passive declares.
        Properties declared = spring.admin.getQueueProperties(queue);
        check(declared != null, "passive queue.declare of " + queue + " found nothing");
        expect(queue, declared.get(RabbitAdmin.QUEUE_NAME), "passive queue.declare-ok's queue");
        spring.template.execute(channel -> channel.exchangeDeclarePassive(exchange));
        spring.template.convertAndSend(exchange, "orders.created", "declared");
        Message m = spring.template.receive(queue, Interop.WAIT.toMillis());
        check(m != null, "the message published through the binding did not arrive");
        expect("declared", text(m), "body");
        expect("orders.created", m.getMessageProperties().getReceivedRoutingKey(), "routing key");
        return Verdict.pass();
    }

    Verdict publishConfirm() throws Exception {
        String queue = spring.names.workQueue("confirm");
        int count = 12;
        List<CorrelationData> sent = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            Message message = MessageBuilder.withBody(("confirmed-" + i).getBytes(StandardCharsets.UTF_8))
                .setContentType(MessageProperties.CONTENT_TYPE_TEXT_PLAIN)
                .setDeliveryMode(MessageDeliveryMode.PERSISTENT)
                .setMessageId("seq-" + i)
                .setHeader("seq", i)
                .setHeader("sender", spring.names.rabbit().interop.client)
                .build();
            CorrelationData correlation = new CorrelationData("confirm-" + i);
            spring.template.send("", queue, message, correlation);
            sent.add(correlation);
        }
        for (CorrelationData correlation : sent) {
            Spring.expectAck(correlation);
        }
        spring.callbacks.awaitAcks(sent.stream().map(CorrelationData::getId).toList());
        for (int i = 0; i < count; i++) {
            Message m = spring.template.receive(queue, Interop.WAIT.toMillis());
            check(m != null, "confirmed message " + i + " did not arrive");
            MessageProperties p = m.getMessageProperties();
            expect("confirmed-" + i, text(m), "body");
            expect("text/plain", p.getContentType(), "content-type of " + i);
            expect(MessageDeliveryMode.PERSISTENT, p.getReceivedDeliveryMode(), "delivery mode of " + i);
            expect("seq-" + i, p.getMessageId(), "message-id of " + i);
            expect(i, p.getHeader("seq"), "header seq of " + i);
            expect(spring.names.rabbit().interop.client, p.<Object>getHeader("sender").toString(), "header sender of " + i);
        }
        return Verdict.pass();
    }

    /** A record of one delivery a MANUAL-ack listener holds: the message and the channel to ack it on. */
    record Held(Message message, Channel channel) {
        void ack() throws IOException {
            channel.basicAck(message.getMessageProperties().getDeliveryTag(), false);
        }
    }

    Verdict consumePrefetchAck() throws Exception {
        String queue = spring.names.workQueue("prefetch");
        int prefetch = 3, count = 10;
        for (int i = 0; i < count; i++) {
            CorrelationData correlation = new CorrelationData("prefetch-" + i);
            spring.template.convertAndSend("", queue, "m" + i, correlation);
            Spring.expectAck(correlation);
        }
        AtomicInteger unacked = new AtomicInteger(), mostUnacked = new AtomicInteger();
        Listening.Inbox<Held> inbox = new Listening.Inbox<>();
        ChannelAwareMessageListener listener = (message, channel) -> {
            mostUnacked.accumulateAndGet(unacked.incrementAndGet(), Math::max);
            inbox.add(new Held(message, channel));
        };
        try (Listening listening = Listening.start(spring.connectionFactory, queue, listener, Listening.manual(prefetch, 1, 1))) {
            // Holds each batch of `prefetch` unacked before acking it: a server that ignored the
            // bound would have delivered more by then, and mostUnacked would show it.
            List<Held> held = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                Held h = inbox.next("message m" + i);
                expect("m" + i, text(h.message()), "message " + i + " (in order)");
                check(!h.message().getMessageProperties().isRedelivered(), "m" + i + " arrived redelivered");
                held.add(h);
                if (held.size() == prefetch || i == count - 1) {
                    for (Held x : held) {
                        unacked.decrementAndGet();
                        x.ack();
                    }
                    held.clear();
                }
            }
            check(mostUnacked.get() <= prefetch, "held " + mostUnacked.get() + " unacked at once with prefetch " + prefetch);
            check(inbox.within(200) == null, "a message arrived twice");
        }
        expect(0L, spring.admin.getQueueInfo(queue).getMessageCount(), "messages left in the queue");
        return Verdict.pass();
    }

    Verdict nackRequeue() throws Exception {
        String queue = spring.names.workQueue("nack");
        Listening.Inbox<Message> inbox = new Listening.Inbox<>();
        ChannelAwareMessageListener listener = (message, channel) -> {
            inbox.add(message);
            long tag = message.getMessageProperties().getDeliveryTag();
            if (message.getMessageProperties().isRedelivered()) {
                channel.basicAck(tag, false);
            } else {
                channel.basicNack(tag, false, true);
            }
        };
        try (Listening listening = Listening.start(spring.connectionFactory, queue, listener, Listening.manual(1, 1, 1))) {
            spring.template.convertAndSend("", queue, "again");
            Message first = inbox.next("the message");
            expect("again", text(first), "body");
            check(!first.getMessageProperties().isRedelivered(), "first delivery already marked redelivered");
            Message again = inbox.next("the requeued message");
            expect("again", text(again), "body of the redelivery");
            check(again.getMessageProperties().isRedelivered(), "the redelivery has redelivered=false");
        }
        expect(0L, spring.admin.getQueueInfo(queue).getMessageCount(), "messages left after the ack");
        return Verdict.pass();
    }

    Verdict mandatoryReturn() throws Exception {
        CorrelationData correlation = new CorrelationData("bounce");
        spring.template.convertAndSend(spring.names.unroutedExchange(), "nobody", "bounce", correlation);
        ReturnedMessage r = spring.callbacks.returned.poll(Interop.WAIT.toMillis(), TimeUnit.MILLISECONDS);
        check(r != null, "the ReturnsCallback got nothing");
        expect(312, r.getReplyCode(), "basic.return reply-code");
        expect("NO_ROUTE", r.getReplyText(), "basic.return reply-text");
        expect("bounce", text(r.getMessage()), "returned body");
        Spring.expectAck(correlation); // a returned message is still acked, after its return
        check(correlation.getReturned() != null, "the CorrelationData does not carry the return");
        return Verdict.pass();
    }

    Verdict basicGet() throws Exception {
        String queue = spring.names.workQueue("get");
        check(spring.template.receive(queue) == null, "get on an empty queue returned a message");
        for (String body : List.of("first", "second")) {
            CorrelationData correlation = new CorrelationData("get-" + body);
            spring.template.convertAndSend("", queue, body, correlation);
            Spring.expectAck(correlation);
        }
        Message first = spring.template.receive(queue); // basic.get, acked by the template
        check(first != null, "get after publishing 2 was empty");
        expect("first", text(first), "first get's body");
        expect(1, first.getMessageProperties().getMessageCount(), "first get's message-count");
        // A get with manual ack, on the template's channel.
        GetResponse second = spring.template.execute(channel -> {
            GetResponse got = channel.basicGet(queue, false);
            if (got != null) {
                channel.basicAck(got.getEnvelope().getDeliveryTag(), false);
            }
            return got;
        });
        check(second != null, "second get was empty");
        expect("second", new String(second.getBody(), StandardCharsets.UTF_8), "second get's body");
        expect(0, second.getMessageCount(), "second get's message-count");
        check(spring.template.receive(queue) == null, "the queue is not empty after both were acked");
        return Verdict.pass();
    }
}
