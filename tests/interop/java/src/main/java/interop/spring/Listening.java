package interop.spring;

import interop.Interop;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import org.springframework.amqp.core.AcknowledgeMode;
import org.springframework.amqp.core.Message;
import org.springframework.amqp.core.MessageListener;
import org.springframework.amqp.rabbit.connection.ConnectionFactory;
import org.springframework.amqp.rabbit.listener.SimpleMessageListenerContainer;

/**
 * A started SimpleMessageListenerContainer for one scenario, stopped when the scenario ends, and
 * what its listener hands to the scenario's thread.
 */
final class Listening implements AutoCloseable {
    final SimpleMessageListenerContainer container;

    private Listening(SimpleMessageListenerContainer container) {
        this.container = container;
    }

    /**
     * Starts a container on {@code queue} with {@code listener} (a MessageListener or a
     * ChannelAwareMessageListener), after {@code configure} has set its acknowledge mode,
     * prefetch, concurrency. start() returns once every consumer is registered.
     */
    static Listening start(ConnectionFactory factory, String queue, MessageListener listener,
                           Consumer<SimpleMessageListenerContainer> configure) {
        SimpleMessageListenerContainer container = new SimpleMessageListenerContainer(factory);
        container.setBeanName(queue + "-listener"); // names its threads in the log
        container.setQueueNames(queue);
        container.setMessageListener(listener);
        configure.accept(container);
        container.afterPropertiesSet();
        container.start();
        return new Listening(container);
    }

    static Consumer<SimpleMessageListenerContainer> manual(int prefetch, int consumers, int maxConsumers) {
        return c -> {
            c.setAcknowledgeMode(AcknowledgeMode.MANUAL);
            c.setPrefetchCount(prefetch);
            c.setConcurrentConsumers(consumers);
            c.setMaxConcurrentConsumers(maxConsumers);
        };
    }

    @Override
    public void close() {
        container.stop();
        container.destroy();
    }

    /** Messages a listener handed over, for the scenario to take with a deadline. */
    static final class Inbox<T> {
        private final BlockingQueue<T> items = new LinkedBlockingQueue<>();

        void add(T item) {
            items.add(item);
        }

        T next(String what) throws InterruptedException {
            T item = items.poll(Interop.WAIT.toMillis(), TimeUnit.MILLISECONDS);
            Interop.check(item != null, "nothing within " + Interop.WAIT.toSeconds() + "s: expected " + what);
            return item;
        }

        T within(long millis) throws InterruptedException {
            return items.poll(millis, TimeUnit.MILLISECONDS);
        }
    }

    static String text(Message message) {
        return new String(message.getBody(), StandardCharsets.UTF_8);
    }
}
