package interop.spring;

import static interop.Interop.check;
import static interop.Interop.expect;
import static interop.spring.Listening.text;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.ShutdownSignalException;
import interop.Interop;
import interop.Interop.Verdict;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.springframework.amqp.AmqpException;
import org.springframework.amqp.AmqpRejectAndDontRequeueException;
import org.springframework.amqp.core.Message;
import org.springframework.amqp.core.MessageListener;
import org.springframework.amqp.rabbit.connection.CachingConnectionFactory;
import org.springframework.amqp.rabbit.connection.CorrelationData;
import org.springframework.amqp.rabbit.core.RabbitTemplate;
import org.springframework.amqp.rabbit.listener.adapter.MessageListenerAdapter;
import org.springframework.amqp.rabbit.listener.api.ChannelAwareMessageListener;
import org.springframework.amqp.support.converter.JacksonJsonMessageConverter;
import org.springframework.core.ParameterizedTypeReference;

/** Spring AMQP's own features beyond the standard scenarios, each as its reference shows it. */
final class ExtraScenarios {
    private final Spring spring;

    ExtraScenarios(Spring spring) {
        this.spring = spring;
    }

    /**
     * A container with 2 to 4 consumers, prefetch 1, MANUAL ack: two messages are held at once
     * (only two consumers can do that), and every message is handled exactly once.
     */
    Verdict listenerConcurrency() throws Exception {
        String queue = spring.names.workQueue("concurrency");
        int count = 20;
        CountDownLatch twoAtOnce = new CountDownLatch(2), handled = new CountDownLatch(count);
        Map<String, String> consumerOf = new ConcurrentHashMap<>();
        List<String> problems = Collections.synchronizedList(new ArrayList<>());
        ChannelAwareMessageListener listener = (message, channel) -> {
            twoAtOnce.countDown();
            if (!twoAtOnce.await(Interop.WAIT.toMillis(), TimeUnit.MILLISECONDS)) {
                problems.add("no second consumer held a message while " + text(message) + " was held");
            }
            if (consumerOf.putIfAbsent(text(message), message.getMessageProperties().getConsumerTag()) != null) {
                problems.add(text(message) + " handled twice");
            }
            channel.basicAck(message.getMessageProperties().getDeliveryTag(), false);
            handled.countDown();
        };
        try (Listening listening = Listening.start(spring.connectionFactory, queue, listener, Listening.manual(1, 2, 4))) {
            expect(2, listening.container.getActiveConsumerCount(), "consumers started");
            for (int i = 0; i < count; i++) {
                spring.template.convertAndSend("", queue, "work-" + i);
            }
            check(handled.await(Interop.WAIT.toMillis(), TimeUnit.MILLISECONDS),
                  handled.getCount() + " of " + count + " messages were not handled");
        }
        check(problems.isEmpty(), String.join("; ", problems));
        expect(count, consumerOf.size(), "distinct messages handled");
        Set<String> consumers = Set.copyOf(consumerOf.values());
        check(consumers.size() >= 2, "only consumer(s) " + consumers + " handled messages");
        return Verdict.pass();
    }

    /** The listener rejects (AmqpRejectAndDontRequeueException); the server dead-letters it with x-death. */
    Verdict rejectToDlq() throws Exception {
        String queue = spring.names.rejectingQueue();
        CountDownLatch rejected = new CountDownLatch(1);
        ChannelAwareMessageListener listener = (message, channel) -> {
            rejected.countDown();
            // rejectManual: under MANUAL ack the container rejects (requeue=false) for the listener.
            throw new AmqpRejectAndDontRequeueException("cannot handle " + text(message), true, null);
        };
        try (Listening listening = Listening.start(spring.connectionFactory, queue, listener, Listening.manual(1, 2, 3))) {
            spring.template.convertAndSend("", queue, "poison");
            check(rejected.await(Interop.WAIT.toMillis(), TimeUnit.MILLISECONDS), "the listener never got the message");
            Message dead = spring.template.receive(spring.names.deadLetterQueue(), Interop.WAIT.toMillis());
            check(dead != null, "nothing arrived in " + spring.names.deadLetterQueue());
            expect("poison", text(dead), "dead-lettered body");
            List<Map<String, ?>> deaths = dead.getMessageProperties().getXDeathHeader();
            check(deaths != null, "no x-death header: " + dead.getMessageProperties().getHeaders());
            expect(1, deaths.size(), "x-death entries");
            Map<String, ?> death = deaths.get(0);
            expect(1L, death.get("count"), "x-death count");
            expect("rejected", String.valueOf(death.get("reason")), "x-death reason");
            expect(queue, String.valueOf(death.get("queue")), "x-death queue");
            expect("rejected", dead.getMessageProperties().getReceivedRoutingKey(), "dead-letter routing key");
        }
        expect(0L, spring.admin.getQueueInfo(queue).getMessageCount(), "messages left in " + queue);
        return Verdict.pass();
    }

    /** A handler's return value is the reply; convertSendAndReceive waits for it on direct reply-to. */
    Verdict sendAndReceive() throws Exception {
        String queue = spring.names.rpcQueue();
        Listening.Inbox<String> replyTos = new Listening.Inbox<>();
        MessageListener service = new MessageListenerAdapter(new Object() {
            @SuppressWarnings("unused") // called by the adapter, by its default name
            public String handleMessage(String request) {
                return "reply to " + request;
            }
        });
        try (Listening listening = Listening.start(spring.connectionFactory, queue, service, c ->
                c.setAfterReceivePostProcessors(m -> {
                    replyTos.add(String.valueOf(m.getMessageProperties().getReplyTo()));
                    return m;
                }))) {
            Object reply = spring.template.convertSendAndReceive("", queue, "ping");
            expect("reply to ping", reply, "reply");
            String replyTo = replyTos.next("the request's reply-to");
            check(replyTo.startsWith("amq.rabbitmq.reply-to"), "the request's reply-to is " + replyTo + ", not direct reply-to");
        }
        return Verdict.pass();
    }

    /** A POJO through JacksonJsonMessageConverter: application/json on the wire, the same record back. */
    Verdict jsonConversion() throws Exception {
        String queue = spring.names.workQueue("json");
        JacksonJsonMessageConverter converter = spring.context.getBean(JacksonJsonMessageConverter.class);
        RabbitTemplate template = new RabbitTemplate(spring.connectionFactory);
        template.setMessageConverter(converter);
        Order order = new Order("order-42", 3, List.of("apple", "pear"));
        for (int i = 0; i < 2; i++) {
            CorrelationData correlation = new CorrelationData("json-" + i);
            template.convertAndSend("", queue, order, correlation);
            Spring.expectAck(correlation);
        }
        Message raw = template.receive(queue, Interop.WAIT.toMillis());
        check(raw != null, "the JSON message did not arrive");
        expect("application/json", raw.getMessageProperties().getContentType(), "content-type");
        expect(Order.class.getName(), raw.getMessageProperties().getHeader("__TypeId__"), "__TypeId__ header");
        check(text(raw).contains("\"items\":[\"apple\",\"pear\"]"), "body is not the JSON of the order: " + text(raw));
        expect(order, converter.fromMessage(raw), "the order converted back");
        Order again = template.receiveAndConvert(queue, Interop.WAIT.toMillis(), new ParameterizedTypeReference<Order>() { });
        expect(order, again, "receiveAndConvert's order");
        return Verdict.pass();
    }

    /**
     * A channel-transacted template sends tx.select, which HIP-1326 refuses by design (540 with a
     * remedy); the refusal reaches the caller as an AmqpException and the connection stays usable.
     */
    Verdict channelTransacted() throws Exception {
        String queue = spring.names.workQueue("tx");
        CachingConnectionFactory factory = RabbitConfig.plainConnectionFactory(spring.names.rabbit());
        try {
            RabbitTemplate transacted = new RabbitTemplate(factory);
            transacted.setChannelTransacted(true);
            AmqpException refusal = null;
            try {
                transacted.convertAndSend("", queue, "in a transaction");
            } catch (AmqpException e) {
                refusal = e;
            }
            check(refusal != null, "a transacted send succeeded: tx.select is expected to be refused (540)");
            AMQP.Channel.Close close = channelClose(refusal);
            expect(540, close.getReplyCode(), "reply-code of the refusal");
            check(close.getReplyText().startsWith("NOT_IMPLEMENTED") && close.getReplyText().contains("confirm.select"),
                  "reply-text does not name the remedy: " + close.getReplyText());
            expect(90, close.getClassId(), "class-id of the refused method (tx)");

            RabbitTemplate plain = new RabbitTemplate(factory);
            check(plain.receive(queue) == null, "the refused transaction's message was published");
            plain.convertAndSend("", queue, "after the refusal");
            Message m = plain.receive(queue, Interop.WAIT.toMillis());
            check(m != null, "the connection did not work after the refusal");
            expect("after the refusal", text(m), "body sent after the refusal");
            return Verdict.refused(close.getReplyCode() + " " + close.getReplyText()
                + " (class " + close.getClassId() + " method " + close.getMethodId() + "), as "
                + refusal.getClass().getSimpleName() + " from RabbitTemplate.convertAndSend; the connection keeps working");
        } finally {
            factory.destroy();
        }
    }

    private static AMQP.Channel.Close channelClose(Throwable refusal) {
        for (Throwable t = refusal; t != null; t = t.getCause()) {
            if (t instanceof ShutdownSignalException s && s.getReason() instanceof AMQP.Channel.Close close) {
                return close;
            }
        }
        throw new AssertionError("the refusal carries no channel.close: " + refusal);
    }
}
