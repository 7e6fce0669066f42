package interop.spring;

import interop.Interop;
import interop.Rabbit;
import java.util.Collection;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.springframework.amqp.core.AnonymousQueue;
import org.springframework.amqp.core.Base64UrlNamingStrategy;
import org.springframework.amqp.core.BindingBuilder;
import org.springframework.amqp.core.Declarables;
import org.springframework.amqp.core.DirectExchange;
import org.springframework.amqp.core.FanoutExchange;
import org.springframework.amqp.core.Queue;
import org.springframework.amqp.core.QueueBuilder;
import org.springframework.amqp.core.ReturnedMessage;
import org.springframework.amqp.core.TopicExchange;
import org.springframework.amqp.rabbit.connection.CachingConnectionFactory;
import org.springframework.amqp.rabbit.connection.CachingConnectionFactory.ConfirmType;
import org.springframework.amqp.rabbit.connection.CorrelationData;
import org.springframework.amqp.rabbit.core.RabbitAdmin;
import org.springframework.amqp.rabbit.core.RabbitTemplate;
import org.springframework.amqp.support.converter.JacksonJsonMessageConverter;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * The application's Spring configuration, plain Spring without Boot, as the Spring AMQP reference
 * writes it: a CachingConnectionFactory with correlated confirms and returns, a RabbitAdmin that
 * declares every Declarables bean when a connection opens (again after a reconnect), a
 * RabbitTemplate whose callbacks record what the server confirmed and returned.
 */
@Configuration(proxyBeanMethods = false)
public class RabbitConfig {
    /** The names of the topology below, each beginning with the client name. */
    public record Names(Rabbit rabbit) {
        String declareExchange() { return rabbit.name("declare-ex"); }
        String declareQueue() { return rabbit.name("declare-q"); }
        String workQueue(String scenario) { return rabbit.name(scenario + "-q"); }
        String unroutedExchange() { return rabbit.name("unrouted-ex"); }
        String deadLetterExchange() { return rabbit.name("dlx"); }
        String deadLetterQueue() { return rabbit.name("dlq"); }
        String rejectingQueue() { return rabbit.name("rejecting-q"); }
        String rpcQueue() { return rabbit.name("rpc-q"); }
        String reconnectExchange() { return rabbit.name("reconnect-ex"); }
        String reconnectQueue() { return rabbit.name("reconnect"); }
    }

    /** What the template's callbacks saw: the ids confirmed (ack or nack), the messages returned. */
    public static final class Callbacks implements RabbitTemplate.ConfirmCallback, RabbitTemplate.ReturnsCallback {
        private final Map<String, Boolean> confirmed = new HashMap<>();
        final BlockingQueue<ReturnedMessage> returned = new LinkedBlockingQueue<>();

        @Override
        public synchronized void confirm(CorrelationData correlation, boolean ack, String cause) {
            if (correlation != null) {
                confirmed.put(correlation.getId(), ack);
                notifyAll();
            }
        }

        @Override
        public void returnedMessage(ReturnedMessage message) {
            returned.add(message);
        }

        /** Waits until the ConfirmCallback has seen every one of {@code ids}; fails on a nack. */
        synchronized void awaitAcks(Collection<String> ids) throws InterruptedException {
            long deadline = System.nanoTime() + Interop.WAIT.toNanos();
            while (!confirmed.keySet().containsAll(ids)) {
                long left = deadline - System.nanoTime();
                Interop.check(left > 0, "the ConfirmCallback saw " + confirmed.keySet() + ", not all of " + ids);
                TimeUnit.NANOSECONDS.timedWait(this, left);
            }
            ids.forEach(id -> Interop.check(confirmed.get(id), "publish " + id + " was nacked"));
        }
    }

    @Bean
    Names names(Rabbit rabbit) {
        return new Names(rabbit);
    }

    @Bean
    CachingConnectionFactory connectionFactory(Rabbit rabbit) throws Exception {
        CachingConnectionFactory factory = plainConnectionFactory(rabbit);
        factory.setPublisherConfirmType(ConfirmType.CORRELATED);
        factory.setPublisherReturns(true);
        return factory;
    }

    /**
     * A CachingConnectionFactory over the client's factory for AMQP_URL (TLS included). Spring's
     * own recovery reconnects (the container, the next template call), so the client's is off,
     * as CachingConnectionFactory's other constructors set it.
     */
    static CachingConnectionFactory plainConnectionFactory(Rabbit rabbit) throws Exception {
        com.rabbitmq.client.ConnectionFactory amqp = rabbit.factory();
        amqp.setAutomaticRecoveryEnabled(false);
        CachingConnectionFactory factory = new CachingConnectionFactory(amqp);
        factory.setConnectionNameStrategy(f -> rabbit.interop.client);
        return factory;
    }

    @Bean
    RabbitAdmin rabbitAdmin(CachingConnectionFactory connectionFactory) {
        return new RabbitAdmin(connectionFactory);
    }

    @Bean
    Callbacks callbacks() {
        return new Callbacks();
    }

    @Bean
    RabbitTemplate rabbitTemplate(CachingConnectionFactory connectionFactory, Callbacks callbacks) {
        RabbitTemplate template = new RabbitTemplate(connectionFactory);
        template.setMandatory(true);
        template.setConfirmCallback(callbacks);
        template.setReturnsCallback(callbacks);
        template.setReplyTimeout(Interop.WAIT.toMillis());
        return template;
    }

    @Bean
    JacksonJsonMessageConverter jsonConverter() {
        return new JacksonJsonMessageConverter(Order.class.getPackageName());
    }

    @Bean
    Declarables declareTopology(Names names) {
        TopicExchange exchange = new TopicExchange(names.declareExchange(), true, false);
        Queue queue = QueueBuilder.durable(names.declareQueue()).build();
        return new Declarables(exchange, queue, BindingBuilder.bind(queue).to(exchange).with("orders.*"));
    }

    @Bean
    Declarables workQueues(Names names) {
        return new Declarables(
            QueueBuilder.durable(names.workQueue("confirm")).build(),
            QueueBuilder.nonDurable(names.workQueue("prefetch")).build(),
            QueueBuilder.nonDurable(names.workQueue("nack")).build(),
            QueueBuilder.nonDurable(names.workQueue("get")).build(),
            QueueBuilder.nonDurable(names.workQueue("concurrency")).build(),
            QueueBuilder.nonDurable(names.workQueue("json")).build(),
            QueueBuilder.nonDurable(names.workQueue("tx")).build(),
            QueueBuilder.nonDurable(names.rpcQueue()).build(),
            new DirectExchange(names.unroutedExchange(), false, false));
    }

    /** A work queue whose rejected messages the server routes to a DLQ. */
    @Bean
    Declarables deadLettering(Names names) {
        DirectExchange dlx = new DirectExchange(names.deadLetterExchange(), true, false);
        Queue dlq = QueueBuilder.durable(names.deadLetterQueue()).build();
        Queue rejecting = QueueBuilder.durable(names.rejectingQueue())
            .deadLetterExchange(names.deadLetterExchange()).deadLetterRoutingKey("rejected").build();
        return new Declarables(dlx, dlq, rejecting, BindingBuilder.bind(dlq).to(dlx).with("rejected"));
    }

    /**
     * The reconnect scenario's live queue: anonymous (auto-delete, exclusive), its listener must
     * keep receiving after a restart, for which the admin declares it again on the new connection.
     */
    @Bean
    AnonymousQueue reconnectLiveQueue(Names names) {
        return new AnonymousQueue(new Base64UrlNamingStrategy(names.rabbit().interop.client + "-live-"));
    }

    @Bean
    Declarables reconnectTopology(Names names, AnonymousQueue reconnectLiveQueue) {
        FanoutExchange exchange = new FanoutExchange(names.reconnectExchange(), true, false);
        Queue durable = QueueBuilder.durable(names.reconnectQueue()).build();
        return new Declarables(exchange, durable, BindingBuilder.bind(durable).to(exchange),
                               BindingBuilder.bind(reconnectLiveQueue).to(exchange));
    }
}
